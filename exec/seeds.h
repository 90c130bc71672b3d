// The random streams of training: the seed of each micro-batch of each step (Dropout masks), the
// same in the single-device Trainer and in every pipeline worker, so both draw the same masks.
#pragma once

#include <cstdint>

#include "core/hash.h"

namespace gp::exec {

inline uint64_t micro_batch_seed(uint64_t seed, int64_t step, int64_t mb) {
  return mix64(seed ^ (static_cast<uint64_t>(step) * kGoldenGamma + static_cast<uint64_t>(mb) + 1));
}

}  // namespace gp::exec
