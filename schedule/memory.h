// Memory accounting of a schedule, device by device in list order: weights and optimizer state of
// the device's stages, plus the saved activations of every micro-batch whose F has run and whose
// backward has not finished (its W when the backward is split, else its B).
//
// A stage that recomputes (PlanStage::recompute) holds only its inputs (stash bytes) from F to B;
// B needs the micro-batch's full activations on top for its duration (the rerun forward), then
// drops the stash; under a B/W split what W needs (counted as the full activations) stays until W.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/instruction.h"
#include "schedule/plan_view.h"

namespace gp::schedule {

struct DeviceMemory {
  int64_t static_bytes = 0;         // weights + optimizer state
  int64_t peak_bytes = 0;           // static + the most activations held at once
  int peak_index = -1;              // instruction at which the peak is first reached
  std::vector<int> peak_in_flight;  // per stage (plan ids): the most micro-batches held at once
};

std::vector<DeviceMemory> account_memory(PlanView const& view, Schedule const& schedule);

// The first instruction on a device that takes memory over `limit`, or -1.
int first_over_limit(PlanView const& view, Schedule const& schedule, int device, int64_t limit);

}  // namespace gp::schedule
