#include "kernels/dropout.h"

namespace gp::kernels {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

void dropout_forward(float const* x, int64_t n, float ratio, uint64_t seed, float* out, uint8_t* mask) {
  float const scale = ratio < 1.f ? 1.f / (1.f - ratio) : 0.f;
  uint64_t const base = splitmix64(seed);
  for (int64_t i = 0; i < n; ++i) {
    // 24 random bits → uniform in [0, 1).
    float const u = static_cast<float>(splitmix64(base + static_cast<uint64_t>(i)) >> 40) * (1.f / 16777216.f);
    uint8_t const keep = u >= ratio ? 1 : 0;
    mask[i] = keep;
    out[i] = keep ? x[i] * scale : 0.f;
  }
}

void dropout_backward(float const* grad_out, uint8_t const* mask, int64_t n, float ratio, float* grad_x) {
  float const scale = ratio < 1.f ? 1.f / (1.f - ratio) : 0.f;
  for (int64_t i = 0; i < n; ++i) grad_x[i] = mask[i] ? grad_out[i] * scale : 0.f;
}

}  // namespace gp::kernels
