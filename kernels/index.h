// CPU kernels of the index family that oneDNN lacks: GridSample (4-D and 5-D) and Col2Im, kernels/hd/index.h's
// functions (which the CUDA kernels run per thread) over every output element, (n, c) plane and
// grid point in parallel.
#pragma once

#include <cstdint>

#include "kernels/hd/index.h"

namespace gp::kernels {

// y [N, C, Ho, Wo] from x [N, C, H, W] and grid [N, Ho, Wo, 2] (5-D: y [N, C, Do, Ho, Wo] from x
// [N, C, D, H, W] and grid [N, Do, Ho, Wo, 3]).
void grid_sample_forward(float const* x, float const* grid, hd::GridSampleParams const& p, float* y);
// dx (x's shape) and dgrid (the grid's), both written whole, from dy; either may be null when not
// wanted.
void grid_sample_backward(float const* x, float const* grid, float const* dy, hd::GridSampleParams const& p, float* dx,
                          float* dgrid);

// Col2Im: y [N, C, image...] from x [N, C·K, L]; its backward dx (x's shape; added to when
// accumulating) from dy.
void col2im(float const* x, hd::Col2ImParams const& p, float* y);
void im2col(float const* dy, hd::Col2ImParams const& p, float* dx, bool accumulate);

}  // namespace gp::kernels
