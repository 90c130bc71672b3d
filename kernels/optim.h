// Fused optimizer updates over one parameter buffer, with PyTorch's semantics (torch.optim 1.13):
// SGD (momentum, dampening 0, L2 weight decay added to the gradient), Adam (L2 decay added to the
// gradient), AdamW (decoupled decay: w *= 1 - lr*wd before the Adam step).
#pragma once

#include <cstdint>

namespace gp::kernels {

// Buffers at least this long are updated by all OpenMP threads (memory-bound loops; below it the
// fork costs more than it saves). Results do not depend on the thread count.
inline constexpr int64_t kParallelMin = int64_t{1} << 15;

// buf = momentum * buf + (g + wd * w); w -= lr * buf. With momentum == 0, buf may be null.
void sgd_update(float* w, float const* g, float* buf, int64_t n, float lr, float momentum, float weight_decay);

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  bool decoupled = false;  // AdamW
  int64_t step = 1;        // 1-based step count, for bias correction
};
void adam_update(float* w, float const* g, float* m, float* v, int64_t n, AdamParams const& p);

}  // namespace gp::kernels
