// Checks a schedule against its plan: every rule a runnable schedule must satisfy. Each violation
// names the device, the line and the rule, and where it can, the fix.
//
// Rules: header (the schedule was built for this plan), reference (ids in range), placement (a stage
// runs only on its plan devices), once (every stage replica runs F and B of every micro-batch
// exactly once, and W for all or none), order (F before B before W), route (transfers only where the
// replica routing of schedule/plan_view.h puts them), match (every SEND has its RECV and the other
// way round, and every needed transfer exists), send-after-produce, recv-before-use, allreduce
// (exactly once per replica of a replicated stage, after its last backward), step (one STEP, last),
// deadlock (a dependency-respecting dry run gets through), memory (every device within its limit
// at every point).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "partition/plan.h"
#include "schedule/instruction.h"

namespace gp::schedule {

struct Violation {
  int device = -1;  // -1: the whole schedule
  int line = 0;     // 0: no single line
  std::string rule;
  std::string message;
  std::string fix;                // may be empty
  std::string to_string() const;  // "device 2, line 17: [order] ...; fix: ..."
};

struct CheckOptions {
  int64_t memory_limit_bytes = -1;  // -1: the plan's device_memory_bytes; 0: no limit
};

std::vector<Violation> validate_schedule(partition::Plan const& plan, Schedule const& schedule,
                                         CheckOptions const& options = {});
// ok, or kInvalidArgument listing the violations (up to 20), one a line.
Status check_schedule(partition::Plan const& plan, Schedule const& schedule, CheckOptions const& options = {});

}  // namespace gp::schedule
