// FNV-1a over bytes: a cheap, stable fingerprint (cache keys, the MPI ranks' start-up check); and
// splitmix64, the one integer mixer for seeds and reproducible random streams on the host (the
// dropout kernels keep a __host__ __device__ twin in kernels/hd/view.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace gp {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ull;

inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// splitmix64's increment (the golden ratio as a 64-bit fraction).
inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// splitmix64's output function: a bijective mix of all 64 bits.
inline constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The splitmix64 value of state `x` (the state advanced by the gamma, then mixed).
inline constexpr uint64_t splitmix64(uint64_t x) { return mix64(x + kGoldenGamma); }

}  // namespace gp
