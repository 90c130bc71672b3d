// Dropout's mask, and the draws of RandomUniformLike, RandomNormalLike and Bernoulli, as pure
// functions of (seed, element index), shared by the CPU kernel
// (kernels/view.cc) and the CUDA one (kernels/cuda/activation.cu, binary.cu and view.cu), so both devices drop the
// same elements. 24 random bits give a uniform float in [0, 1) exactly (no rounding).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

// core/hash.h's mix64 and splitmix64, for device code.
GP_HD uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
GP_HD uint64_t splitmix64(uint64_t x) { return mix64(x + 0x9e3779b97f4a7c15ULL); }

// exec/seeds.h's salted_seed: an op's seed from a micro-batch seed and the op's salt
// (op_seed_salt), what a captured Dropout computes from the seed it reads when it runs.
GP_HD uint64_t salted_seed(uint64_t micro_batch_seed, uint64_t salt) { return mix64(micro_batch_seed + salt); }

GP_HD uint64_t dropout_base(uint64_t seed) { return splitmix64(seed); }

// Where a kernel's seed comes from: `seed`, fixed when the kernel is launched, or, with `slot` (a
// captured step's: the trainer rewrites the slot every step), salted_seed(*slot, salt) ^ mix, read
// when the kernel runs; `mix` is what a random op's own seed attribute adds (exec/op_kernels.h's
// random_seed_mix), 0 for Dropout. Launched with the host's values both give the same seed.
struct SeedSource {
  uint64_t seed = 0;
  uint64_t const* slot = nullptr;
  uint64_t salt = 0;
  uint64_t mix = 0;
};
GP_HD uint64_t seed_of(SeedSource const& s) {
  return s.slot != nullptr ? salted_seed(*s.slot, s.salt) ^ s.mix : s.seed;
}

// Element i's uniform draw in [0, 1): 24 bits of its hash; `base` is dropout_base(seed).
GP_HD float random_unit(uint64_t base, int64_t i) {
  return static_cast<float>(splitmix64(base + static_cast<uint64_t>(i)) >> 40) * (1.f / 16777216.f);
}

// Element i is kept (probability 1 − ratio).
GP_HD bool dropout_keep(uint64_t base, int64_t i, float ratio) { return random_unit(base, i) >= ratio; }

// The random ops draw from the same hash. Uniform in [low, high).
GP_HD float random_uniform_at(uint64_t base, int64_t i, float low, float high) {
  return low + random_unit(base, i) * (high - low);
}

// Normal(mean, scale) by Box-Muller over the two draws 2i and 2i + 1 (u1 in (0, 1], so the log is
// finite).
GP_HD float random_normal_at(uint64_t base, int64_t i, float mean, float scale) {
  float const u1 = 1.f - random_unit(base, 2 * i);
  float const u2 = random_unit(base, 2 * i + 1);
  return mean + scale * sqrtf(-2.f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

// 1 with probability p (p outside [0, 1] saturates).
GP_HD bool bernoulli_at(uint64_t base, int64_t i, float p) { return random_unit(base, i) < p; }

GP_HD float dropout_scale(float ratio) { return ratio < 1.f ? 1.f / (1.f - ratio) : 0.f; }

template <typename T>
GP_HD T dropout_apply(T x, bool keep, float scale) {
  return keep ? static_cast<T>(static_cast<float>(x) * scale) : T(0);
}

}  // namespace gp::kernels::hd
