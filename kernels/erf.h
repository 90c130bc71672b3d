// Elementwise erf, which oneDNN's eltwise does not offer, forward and backward.
#pragma once

#include <cstdint>

namespace gp::kernels {

void erf_forward(float const* x, int64_t n, float* y);
// grad_x = grad_y · 2/√π · exp(−x²)
void erf_backward(float const* x, float const* grad_y, int64_t n, float* grad_x);

}  // namespace gp::kernels
