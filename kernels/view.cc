#include "kernels/view.h"

#include "kernels/hd/view.h"

namespace gp::kernels {

void dropout_forward(float const* x, int64_t n, float ratio, uint64_t seed, float* out, uint8_t* mask) {
  float const scale = hd::dropout_scale(ratio);
  uint64_t const base = hd::dropout_base(seed);
  for (int64_t i = 0; i < n; ++i) {
    bool const keep = hd::dropout_keep(base, i, ratio);
    mask[i] = keep ? 1 : 0;
    out[i] = hd::dropout_apply(x[i], keep, scale);
  }
}

void dropout_backward(float const* grad_out, uint8_t const* mask, int64_t n, float ratio, float* grad_x) {
  float const scale = hd::dropout_scale(ratio);
  for (int64_t i = 0; i < n; ++i) grad_x[i] = hd::dropout_apply(grad_out[i], mask[i] != 0, scale);
}

void random_uniform(uint64_t seed, int64_t n, float low, float high, float* out) {
  uint64_t const base = hd::dropout_base(seed);
  for (int64_t i = 0; i < n; ++i) out[i] = hd::random_uniform_at(base, i, low, high);
}

void random_normal(uint64_t seed, int64_t n, float mean, float scale, float* out) {
  uint64_t const base = hd::dropout_base(seed);
  for (int64_t i = 0; i < n; ++i) out[i] = hd::random_normal_at(base, i, mean, scale);
}

void bernoulli(uint64_t seed, float const* p, int64_t n, float* float_out, uint8_t* byte_out) {
  uint64_t const base = hd::dropout_base(seed);
  for (int64_t i = 0; i < n; ++i) {
    bool const one = hd::bernoulli_at(base, i, p[i]);
    if (float_out)
      float_out[i] = one ? 1.f : 0.f;
    else
      byte_out[i] = one ? 1 : 0;
  }
}

}  // namespace gp::kernels
