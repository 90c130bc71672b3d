#include "kernels/erf.h"

#include <cmath>

namespace gp::kernels {

void erf_forward(float const* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}

void erf_backward(float const* x, float const* grad_y, int64_t n, float* grad_x) {
  float const k = 1.1283791670955126f;  // 2/sqrt(pi)
  for (int64_t i = 0; i < n; ++i) grad_x[i] = grad_y[i] * k * std::exp(-x[i] * x[i]);
}

}  // namespace gp::kernels
