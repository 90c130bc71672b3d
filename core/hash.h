// FNV-1a over bytes: a cheap, stable fingerprint (cache keys, the MPI ranks' start-up check).
#pragma once

#include <cstdint>
#include <string_view>

namespace gp {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ull;

inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace gp
