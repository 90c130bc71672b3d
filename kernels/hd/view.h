// Dropout's mask as a pure function of (seed, element index), shared by the CPU kernel
// (kernels/view.cc) and the CUDA one (kernels/cuda/activation.cu, binary.cu and view.cu), so both devices drop the
// same elements. 24 random bits give a uniform float in [0, 1) exactly (no rounding).
#pragma once

#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

GP_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

GP_HD uint64_t dropout_base(uint64_t seed) { return splitmix64(seed); }

// Element i is kept (probability 1 − ratio); `base` is dropout_base(seed).
GP_HD bool dropout_keep(uint64_t base, int64_t i, float ratio) {
  float const u = static_cast<float>(splitmix64(base + static_cast<uint64_t>(i)) >> 40) * (1.f / 16777216.f);
  return u >= ratio;
}

GP_HD float dropout_scale(float ratio) { return ratio < 1.f ? 1.f / (1.f - ratio) : 0.f; }

template <typename T>
GP_HD T dropout_apply(T x, bool keep, float scale) {
  return keep ? static_cast<T>(static_cast<float>(x) * scale) : T(0);
}

}  // namespace gp::kernels::hd
