// Schedule builders: from a Plan and a number of micro-batches to a Schedule.
//
//   gpipe        fill-drain: every stage runs all forwards, then all backwards.
//   1f1b         PipeDream-Flush on a chain of stages: depth(s) forwards to warm up, then one
//                backward and one forward alternately, then the remaining backwards.
//   interleaved  Megatron's interleaved 1F1B, when the plan puts stage k of a chain on device
//                group k mod p (v >= 2 chunks per device); needs micro-batches divisible by p.
//   graph-1f1b   GraphPipe's stage-graph 1F1B: like 1f1b on every stage of the DAG, with warm-up
//                depth(s) (its longest path to a sink), so concurrent branches do not add up.
//   zb           zero-bubble (ZB-H1-like): graph-1f1b with the backward split into B (input
//                gradient, on the critical path) and W (weight gradient), W filling idle time;
//                at most depth(s) - 1 W's of a stage wait.
//   auto         the fastest of the above by simulation whose peak memory fits the limit.
// Where a device runs several stages, their sequences are merged by the greedy list scheduling
// of schedule/compute_order.h. Every built schedule passes validate_schedule (memory aside).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "partition/plan.h"
#include "schedule/instruction.h"

namespace gp::schedule {

enum class Policy { kGpipe, k1F1B, kInterleaved, kGraph1F1B, kZeroBubble, kAuto };

char const* policy_name(Policy policy);
Result<Policy> parse_policy(std::string const& name);  // error lists the names
std::vector<Policy> concrete_policies();               // all but kAuto

struct BuildOptions {
  int micro_batches = 0;            // 0: the plan's num_micro_batches
  int64_t memory_limit_bytes = -1;  // for auto; -1: the plan's device_memory_bytes, 0: no limit
  // For auto: only schedules an ordered transport (NCCL) can run, i.e. that pass
  // check_ordered_transport (schedule/p2p_order.h).
  bool ordered_transport = false;
};

// kUnsupported naming why, and what to use instead, when the policy does not apply to the plan.
Status policy_applies(partition::Plan const& plan, Policy policy, int micro_batches);
// For kAuto, Schedule::policy names the policy chosen; kInfeasible if none fits in memory.
Result<Schedule> build_schedule(partition::Plan const& plan, Policy policy, BuildOptions const& options = {});

}  // namespace gp::schedule
