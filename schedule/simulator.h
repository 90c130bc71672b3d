// Discrete-event simulation of a schedule under the plan's costs (semantics in
// schedule/instruction.h): compute, sends and receives of a device overlap on separate streams.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "partition/plan.h"
#include "schedule/instruction.h"
#include "schedule/timeline.h"

namespace gp::schedule {

struct DeviceReport {
  double compute_busy_s = 0;
  double bubble_fraction = 0;     // 1 - compute busy / step time
  int64_t static_bytes = 0;       // weights + optimizer state
  int64_t peak_memory_bytes = 0;  // static + the most activations held at once
};

struct Simulation {
  Timeline timeline;
  double step_time_s = 0;
  int64_t samples_per_step = 0;  // micro-batches * the plan's micro-batch size
  double samples_per_s = 0;
  double mean_bubble_fraction = 0;
  int64_t peak_memory_bytes = 0;  // the largest over devices
  std::vector<DeviceReport> devices;
  std::vector<int> peak_in_flight;  // per stage: the most micro-batches one replica holds at once
};

// Fails (kInvalidArgument) with the validator's message if the schedule breaks a rule other than
// memory; memory is reported, not enforced, so that over-limit schedules can still be looked at.
Result<Simulation> simulate(partition::Plan const& plan, Schedule const& schedule);

}  // namespace gp::schedule
