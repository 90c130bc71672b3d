// From per-device compute orders to a full schedule: each RECV goes right before the compute that
// needs it, each SEND right after the compute that produced it, a replicated stage's ALLREDUCE
// after its last backward on the device, and STEP last.
#pragma once

#include <string>
#include <vector>

#include "schedule/compute_order.h"
#include "schedule/instruction.h"
#include "schedule/plan_view.h"

namespace gp::schedule {

Schedule emit_schedule(PlanView const& view, int micro_batches, std::string const& policy,
                       std::vector<std::vector<ComputeOp>> const& orders);

}  // namespace gp::schedule
