// CPU kernels of the index family that oneDNN lacks: GridSample (4-D), kernels/hd/index.h's
// functions (which the CUDA kernels run per thread) over every output element, (n, c) plane and
// grid point in parallel.
#pragma once

#include <cstdint>

#include "kernels/hd/index.h"

namespace gp::kernels {

// y [N, C, Ho, Wo] from x [N, C, H, W] and grid [N, Ho, Wo, 2].
void grid_sample_forward(float const* x, float const* grid, hd::GridSampleParams const& p, float* y);
// dx [N, C, H, W] (written whole) and dgrid [N, Ho, Wo, 2] (written whole) from dy; either may be
// null when not wanted.
void grid_sample_backward(float const* x, float const* grid, float const* dy, hd::GridSampleParams const& p, float* dx,
                          float* dgrid);

}  // namespace gp::kernels
