// Per-element and per-row math of the losses (kernels/cuda/device_ops.cu) with kernels/loss.cc's
// semantics: softmax cross-entropy with integer labels (max-subtracted, float accumulation) and
// squared error. The gradient is the derivative of the loss times `scale`.
//
// Below them, per target position, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph
// ops: scores seen as [N, C, D] (D: the product of the trailing dims), targets as [N, D], position
// i = (n, d) with n = i / D. Each position weighs weight[target] (1 without weights, 0 where the
// target is the ignore_index); "mean" divides the weighted sum by the sum of those weights. The CPU
// backend (exec/cpu/loss.cc) runs these per position, the CUDA kernels (kernels/cuda/loss.cu) one
// thread per position; SCE's log-softmax is hd::log_softmax_line (kernels/hd/reduce.h).
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

// ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (graph ops) ----

struct LossParams {
  int64_t n = 0, c = 0, d = 1;
  bool has_ignore = false;
  int64_t ignore = -100;
};

// The class and weight of target t: class -1 and weight 0 where ignored; false when t is outside
// [0, c) and not the ignore_index (the position then counts as ignored).
GP_HD bool loss_pick(LossParams const& p, int64_t t, float const* weight, int64_t& cls, float& w) {
  cls = -1;
  w = 0.f;
  if (p.has_ignore && t == p.ignore) return true;
  if (t < 0 || t >= p.c) return false;
  cls = t;
  w = weight ? weight[t] : 1.f;
  return true;
}

// The index in scores of position i's class c.
GP_HD int64_t loss_at(LossParams const& p, int64_t i, int64_t c) {
  int64_t const n = i / p.d, d = i - n * p.d;
  return (n * p.c + c) * p.d + d;
}

// -w · src[class] at position i (0 where ignored); src: the scores (NLL) or their log-softmax (SCE).
GP_HD float loss_value(LossParams const& p, float const* src, int64_t i, int64_t cls, float w) {
  return cls < 0 ? 0.f : -w * src[loss_at(p, i, cls)];
}

// SCE's gradient at position i over its C classes (dx [N, C, D]): coef = w · (the loss output's
// gradient at i, times the reduction's factor); logp_grad (may be null) is the gradient of the
// log-probability output. loss = -w log p[t]: d/dx_c = w (p_c - [c = t]); log p_c: d/dx_k = [k = c] - p_k.
GP_HD void sce_position_backward(LossParams const& p, float const* logp, float const* logp_grad, int64_t i, int64_t cls,
                                 float coef, float* dx) {
  int64_t const base = loss_at(p, i, 0);
  double gsum = 0;
  if (logp_grad)
    for (int64_t c = 0; c < p.c; ++c) gsum += logp_grad[base + c * p.d];
  for (int64_t c = 0; c < p.c; ++c) {
    int64_t const k = base + c * p.d;
    float const prob = expf(logp[k]);
    float v = coef * (prob - (c == cls ? 1.f : 0.f));
    if (logp_grad) v += logp_grad[k] - prob * static_cast<float>(gsum);
    dx[k] = v;
  }
}

}  // namespace gp::kernels::hd
