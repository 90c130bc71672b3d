// The random streams of training: the seed of each micro-batch of each step (Dropout masks), the
// same in the single-device Trainer and in every pipeline worker, so both draw the same masks.
#pragma once

#include <cstdint>

#include "core/hash.h"

namespace gp::exec {

inline uint64_t micro_batch_seed(uint64_t seed, int64_t step, int64_t mb) {
  return mix64(seed ^ (static_cast<uint64_t>(step) * kGoldenGamma + static_cast<uint64_t>(mb) + 1));
}

// Op `id`'s seed within a micro-batch: the micro-batch seed salted with the op's salt. A device
// computes the same from a micro-batch seed it reads from its memory (kernels/hd/view.h's
// salted_seed, what a captured step's Dropout does: OpCall::rng_seed_slot).
inline uint64_t op_seed_salt(uint64_t id) { return kGoldenGamma * (id + 1); }
inline uint64_t salted_seed(uint64_t micro_batch_seed, uint64_t salt) { return mix64(micro_batch_seed + salt); }
inline uint64_t op_seed(uint64_t micro_batch_seed, uint64_t id) {
  return salted_seed(micro_batch_seed, op_seed_salt(id));
}

}  // namespace gp::exec
