// The plain loops of kernels/activation.h; the per-element formulas of the Pointwise ops are
// kernels/hd/activation.h's, which the CUDA kernels run too.
#include "kernels/activation.h"

#include <algorithm>
#include <cmath>

namespace gp::kernels {

void pointwise_forward(Pointwise f, PointwiseParams const& p, float const* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = hd::pointwise_forward_f(f, p, x[i]);
}

void pointwise_backward(Pointwise f, PointwiseParams const& p, float const* x, float const* gy, int64_t n, float* gx) {
  for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * hd::pointwise_derivative(f, p, x[i]);
}

void prelu_forward(float const* x, float const* slope, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = hd::prelu_at(x[i], slope[i]);
}

void prelu_backward(float const* x, float const* slope, float const* gy, int64_t n, float* gx, float* grad_slope_full) {
  if (gx)
    for (int64_t i = 0; i < n; ++i) gx[i] = hd::prelu_dx_at(x[i], slope[i], gy[i]);
  if (grad_slope_full)
    for (int64_t i = 0; i < n; ++i) grad_slope_full[i] = hd::prelu_dslope_at(x[i], gy[i]);
}

void clip_forward(float const* x, int64_t n, float lo, float hi, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = hd::clip_at(x[i], lo, hi);
}

void clip_backward(float const* x, float const* gy, int64_t n, float lo, float hi, float* gx, double* grad_lo,
                   double* grad_hi) {
  double sum_lo = 0, sum_hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    hd::ClipSide const side = hd::clip_side(x[i], lo, hi);
    if (gx) gx[i] = side == hd::ClipSide::kInside ? gy[i] : 0.f;
    if (side == hd::ClipSide::kLow) sum_lo += gy[i];
    if (side == hd::ClipSide::kHigh) sum_hi += gy[i];
  }
  if (grad_lo) *grad_lo = sum_lo;
  if (grad_hi) *grad_hi = sum_hi;
}

void select_step(float const* x, int64_t n, bool take_max, int32_t k, float* acc, int32_t* which) {
  for (int64_t i = 0; i < n; ++i) hd::select_step_at(x[i], take_max, k, acc[i], which[i]);
}

void selected_grad(float const* gy, int32_t const* which, int32_t k, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = hd::selected_grad_at(gy[i], which[i], k);
}

}  // namespace gp::kernels

namespace gp::kernels {

void erf_forward(float const* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}

void erf_backward(float const* x, float const* grad_y, int64_t n, float* grad_x) {
  float const k = 1.1283791670955126f;  // 2/sqrt(pi)
  for (int64_t i = 0; i < n; ++i) grad_x[i] = grad_y[i] * k * std::exp(-x[i] * x[i]);
}

}  // namespace gp::kernels
