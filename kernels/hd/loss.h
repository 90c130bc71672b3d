// Per-element and per-row math of the losses (kernels/cuda/device_ops.cu) with kernels/loss.cc's
// semantics: softmax cross-entropy with integer labels (max-subtracted, float accumulation) and
// squared error. The gradient is the derivative of the loss times `scale`.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

GP_HD bool valid_label(int64_t label, int64_t classes) { return label >= 0 && label < classes; }

// −log softmax(x)[label] from the row maximum and Σ exp(x − max).
template <typename T>
GP_HD float cross_entropy_loss(T x_label, float row_max, float sum_exp) {
  return logf(sum_exp) - (static_cast<float>(x_label) - row_max);
}
// scale · (softmax(x) − onehot(label)), in kernels/loss.cc's order (the label's scale taken last).
template <typename T>
GP_HD T cross_entropy_grad(T x, float row_max, float inv_sum, bool is_label, float scale) {
  float const g = scale * expf(static_cast<float>(x) - row_max) * inv_sum;
  return static_cast<T>(is_label ? g - scale : g);
}

// One row: its loss (0 for a label outside [0, classes)) and its gradient.
template <typename T>
GP_HD float cross_entropy_row(T const* x, int64_t classes, int64_t label, float scale, T* grad) {
  float mx = -INFINITY;
  for (int64_t c = 0; c < classes; ++c) mx = fmaxf(mx, static_cast<float>(x[c]));
  float sum = 0.f;
  for (int64_t c = 0; c < classes; ++c) sum += expf(static_cast<float>(x[c]) - mx);
  float const inv = 1.f / sum;
  for (int64_t c = 0; c < classes; ++c) grad[c] = cross_entropy_grad(x[c], mx, inv, c == label, scale);
  return valid_label(label, classes) ? cross_entropy_loss(x[label], mx, sum) : 0.f;
}

template <typename T>
GP_HD float squared_error(T pred, T target) {
  float const d = static_cast<float>(pred) - static_cast<float>(target);
  return d * d;
}
template <typename T>
GP_HD T squared_error_grad(T pred, T target, float scale) {
  return static_cast<T>(scale * 2.f * (static_cast<float>(pred) - static_cast<float>(target)));
}

}  // namespace gp::kernels::hd
