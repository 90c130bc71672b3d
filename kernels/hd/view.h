// Dropout's mask, and the draws of RandomUniformLike, RandomNormalLike and Bernoulli, as pure
// functions of (seed, element index), shared by the CPU kernel
// (kernels/view.cc) and the CUDA one (kernels/cuda/activation.cu, binary.cu and view.cu), so both devices drop the
// same elements. 24 random bits give a uniform float in [0, 1) exactly (no rounding).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

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

// One element of Cast, what the CPU (exec/cpu/view.cc) and the CUDA kernel (kernels/cuda/view.cu)
// compute: to bool (`to_bool`, or To = bool), whether it is nonzero; from a float to an integer,
// truncation toward zero, saturating at the integer's range, NaN to 0 (where a plain conversion is
// undefined); otherwise the C++ conversion.
template <typename T>
GP_HD T int_max_value() {
  if constexpr (std::is_signed_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(~std::make_unsigned_t<T>(0)) >> 1);
  else
    return static_cast<T>(~T(0));
}
template <typename T>
GP_HD T int_lowest_value() {
  if constexpr (std::is_signed_v<T>)
    return static_cast<T>(-int_max_value<T>() - 1);
  else
    return T(0);
}
template <typename From, typename To>
GP_HD To cast_value(From v, bool to_bool) {
  if (to_bool || std::is_same_v<To, bool>) return static_cast<To>(v != From(0));
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    double const d = static_cast<double>(v);
    if (d != d) return To(0);
    if (d <= static_cast<double>(int_lowest_value<To>())) return int_lowest_value<To>();
    if (d >= static_cast<double>(int_max_value<To>())) return int_max_value<To>();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace gp::kernels::hd
