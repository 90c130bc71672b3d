#include "kernels/optim.h"

#include <cmath>

namespace gp::kernels {

void sgd_update(float* w, float const* g, float* buf, int64_t n, float lr, float momentum, float weight_decay) {
  if (momentum == 0.f || buf == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + weight_decay * w[i]);
    return;
  }
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float const d = g[i] + weight_decay * w[i];
    buf[i] = momentum * buf[i] + d;
    w[i] -= lr * buf[i];
  }
}

void adam_update(float* w, float const* g, float* m, float* v, int64_t n, AdamParams const& p) {
  double const bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
  double const bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
  // torch: denom = sqrt(v) / sqrt(bc2) + eps; w -= (lr / bc1) * m / denom.
  float const step_size = static_cast<float>(p.lr / bc1);
  float const sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  float const decay = p.decoupled ? 1.f - p.lr * p.weight_decay : 1.f;
  float const l2 = p.decoupled ? 0.f : p.weight_decay;
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    if (p.decoupled) w[i] *= decay;
    float const d = g[i] + l2 * w[i];
    m[i] = p.beta1 * m[i] + (1.f - p.beta1) * d;
    v[i] = p.beta2 * v[i] + (1.f - p.beta2) * d * d;
    float const denom = std::sqrt(v[i]) / sqrt_bc2 + p.eps;
    w[i] -= step_size * m[i] / denom;
  }
}

}  // namespace gp::kernels
