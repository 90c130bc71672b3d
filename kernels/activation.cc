//
#include "kernels/activation.h"

#include <algorithm>
#include <cmath>

namespace gp::kernels {
namespace {

template <typename F>
void map(float const* x, int64_t n, float* y, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <typename F>
void map_grad(float const* x, float const* gy, int64_t n, float* gx, F df) {
  for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * df(x[i]);
}

}  // namespace

void pointwise_forward(Pointwise f, PointwiseParams const& p, float const* x, int64_t n, float* y) {
  float const a = p.alpha, b = p.beta, g = p.gamma;
  switch (f) {
    case Pointwise::kErf:
      return erf_forward(x, n, y);
    case Pointwise::kSelu:
      return map(x, n, y, [=](float v) { return g * (v > 0.f ? v : a * std::expm1(v)); });
    case Pointwise::kCelu:
      return map(x, n, y, [=](float v) { return std::max(0.f, v) + std::min(0.f, a * std::expm1(v / a)); });
    case Pointwise::kSoftsign:
      return map(x, n, y, [](float v) { return v / (1.f + std::fabs(v)); });
    case Pointwise::kHardSigmoid:
      return map(x, n, y, [=](float v) { return std::max(0.f, std::min(1.f, a * v + b)); });
    case Pointwise::kThresholdedRelu:
      return map(x, n, y, [=](float v) { return v > a ? v : 0.f; });
    case Pointwise::kSin:
      return map(x, n, y, [](float v) { return std::sin(v); });
    case Pointwise::kCos:
      return map(x, n, y, [](float v) { return std::cos(v); });
    case Pointwise::kTan:
      return map(x, n, y, [](float v) { return std::tan(v); });
    case Pointwise::kAsin:
      return map(x, n, y, [](float v) { return std::asin(v); });
    case Pointwise::kAcos:
      return map(x, n, y, [](float v) { return std::acos(v); });
    case Pointwise::kAtan:
      return map(x, n, y, [](float v) { return std::atan(v); });
    case Pointwise::kSinh:
      return map(x, n, y, [](float v) { return std::sinh(v); });
    case Pointwise::kCosh:
      return map(x, n, y, [](float v) { return std::cosh(v); });
    case Pointwise::kAsinh:
      return map(x, n, y, [](float v) { return std::asinh(v); });
    case Pointwise::kAcosh:
      return map(x, n, y, [](float v) { return std::acosh(v); });
    case Pointwise::kAtanh:
      return map(x, n, y, [](float v) { return std::atanh(v); });
    case Pointwise::kSign:
      return map(x, n, y, [](float v) { return v > 0.f ? 1.f : v < 0.f ? -1.f : v; });  // keeps ±0 and NaN
    case Pointwise::kFloor:
      return map(x, n, y, [](float v) { return std::floor(v); });
    case Pointwise::kCeil:
      return map(x, n, y, [](float v) { return std::ceil(v); });
    case Pointwise::kRound:
      return map(x, n, y, [](float v) { return std::nearbyint(v); });
  }
}

void pointwise_backward(Pointwise f, PointwiseParams const& p, float const* x, float const* gy, int64_t n, float* gx) {
  float const a = p.alpha, b = p.beta, g = p.gamma;
  switch (f) {
    case Pointwise::kErf:
      return erf_backward(x, gy, n, gx);
    case Pointwise::kSelu:
      return map_grad(x, gy, n, gx, [=](float v) { return v > 0.f ? g : g * a * std::exp(v); });
    case Pointwise::kCelu:
      return map_grad(x, gy, n, gx, [=](float v) {
        return (v > 0.f ? 1.f : 0.f) + (a * std::expm1(v / a) < 0.f ? std::exp(v / a) : 0.f);
      });
    case Pointwise::kSoftsign:
      return map_grad(x, gy, n, gx, [](float v) {
        float const d = 1.f + std::fabs(v);
        return 1.f / (d * d);
      });
    case Pointwise::kHardSigmoid:
      return map_grad(x, gy, n, gx, [=](float v) {
        float const z = a * v + b;
        return z > 0.f && z < 1.f ? a : 0.f;
      });
    case Pointwise::kThresholdedRelu:
      return map_grad(x, gy, n, gx, [=](float v) { return v > a ? 1.f : 0.f; });
    case Pointwise::kSin:
      return map_grad(x, gy, n, gx, [](float v) { return std::cos(v); });
    case Pointwise::kCos:
      return map_grad(x, gy, n, gx, [](float v) { return -std::sin(v); });
    case Pointwise::kTan:
      return map_grad(x, gy, n, gx, [](float v) {
        float const t = std::tan(v);
        return 1.f + t * t;
      });
    case Pointwise::kAsin:
      return map_grad(x, gy, n, gx, [](float v) { return 1.f / std::sqrt(1.f - v * v); });
    case Pointwise::kAcos:
      return map_grad(x, gy, n, gx, [](float v) { return -1.f / std::sqrt(1.f - v * v); });
    case Pointwise::kAtan:
      return map_grad(x, gy, n, gx, [](float v) { return 1.f / (1.f + v * v); });
    case Pointwise::kSinh:
      return map_grad(x, gy, n, gx, [](float v) { return std::cosh(v); });
    case Pointwise::kCosh:
      return map_grad(x, gy, n, gx, [](float v) { return std::sinh(v); });
    case Pointwise::kAsinh:
      return map_grad(x, gy, n, gx, [](float v) { return 1.f / std::sqrt(v * v + 1.f); });
    case Pointwise::kAcosh:
      return map_grad(x, gy, n, gx, [](float v) { return 1.f / std::sqrt(v * v - 1.f); });
    case Pointwise::kAtanh:
      return map_grad(x, gy, n, gx, [](float v) { return 1.f / (1.f - v * v); });
    case Pointwise::kSign:
    case Pointwise::kFloor:
    case Pointwise::kCeil:
    case Pointwise::kRound:
      for (int64_t i = 0; i < n; ++i) gx[i] = 0.f;
      return;
  }
}

void prelu_forward(float const* x, float const* slope, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? slope[i] * x[i] : x[i];
}

void prelu_backward(float const* x, float const* slope, float const* gy, int64_t n, float* gx, float* grad_slope_full) {
  if (gx)
    for (int64_t i = 0; i < n; ++i) gx[i] = x[i] < 0.f ? gy[i] * slope[i] : gy[i];
  if (grad_slope_full)
    for (int64_t i = 0; i < n; ++i) grad_slope_full[i] = x[i] < 0.f ? gy[i] * x[i] : 0.f;
}

void clip_forward(float const* x, int64_t n, float lo, float hi, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], lo), hi);
}

void clip_backward(float const* x, float const* gy, int64_t n, float lo, float hi, float* gx, double* grad_lo,
                   double* grad_hi) {
  double sum_lo = 0, sum_hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool const below = x[i] <= lo, above = !below && x[i] > hi;
    if (gx) gx[i] = below || above ? 0.f : gy[i];
    if (below) sum_lo += gy[i];
    if (above) sum_hi += gy[i];
  }
  if (grad_lo) *grad_lo = sum_lo;
  if (grad_hi) *grad_hi = sum_hi;
}

void select_step(float const* x, int64_t n, bool take_max, int32_t k, float* acc, int32_t* which) {
  for (int64_t i = 0; i < n; ++i) {
    bool const wins = std::isnan(x[i]) || (take_max ? x[i] > acc[i] : x[i] < acc[i]);
    if (wins && !std::isnan(acc[i])) {
      acc[i] = x[i];
      which[i] = k;
    }
  }
}

void selected_grad(float const* gy, int32_t const* which, int32_t k, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = which[i] == k ? gy[i] : 0.f;
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
