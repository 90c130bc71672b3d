// Turns per-stage (or per-device) sequences of F/B work into one compute order per device, by a
// greedy list scheduling under the plan's costs: whenever a device is free it runs the
// highest-priority sequence head whose inputs are ready (B before F, then the older micro-batch).
// With `defer_weight`, B is the input-gradient part and each W is queued after its B: W runs when
// the device would otherwise idle (filling bubbles), or at once when a stage has more than
// weight_cap[stage] of them queued.
#pragma once

#include <vector>

#include "core/status.h"
#include "schedule/instruction.h"
#include "schedule/plan_view.h"

namespace gp::schedule {

struct ComputeOp {
  Op op = Op::kForward;  // kForward, kBackward or kWeight
  int stage = 0;
  int micro_batch = 0;
};

struct OrderRequest {
  int micro_batches = 0;
  // sequences[d]: the sequences device d interleaves; each runs in its own order.
  std::vector<std::vector<std::vector<ComputeOp>>> sequences;
  bool defer_weight = false;
  std::vector<int> weight_cap;  // per stage, with defer_weight
  bool fill_early = false;
};

// orders[d] = device d's compute order. Fails if the sequences cannot all run (a policy bug).
Result<std::vector<std::vector<ComputeOp>>> order_compute(PlanView const& view, OrderRequest const& request);

}  // namespace gp::schedule
