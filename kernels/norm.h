// CPU kernels of LRN (local response normalisation across channels): kernels/hd/norm.h's
// per-element math, which the CUDA kernels run per thread, over every element in parallel.
#pragma once

#include <cstdint>

#include "kernels/hd/norm.h"

namespace gp::kernels {

// y = x·d^−β and d (the window's bias + α/size·Σx², kept for the backward pass), n elements.
void lrn_forward(float const* x, hd::LrnParams const& p, int64_t n, float* y, float* d);
// dx from x, d and dy.
void lrn_backward(float const* x, float const* d, float const* dy, hd::LrnParams const& p, int64_t n, float* dx);

}  // namespace gp::kernels
