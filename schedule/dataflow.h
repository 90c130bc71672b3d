// The dependency-respecting dry run of a schedule under the plan's costs (semantics in
// schedule/instruction.h). It is both the simulator's engine and the validator's deadlock proof:
// whatever it cannot run is blocked, and it says on what.
#pragma once

#include <string>
#include <vector>

#include "schedule/instruction.h"
#include "schedule/plan_view.h"
#include "schedule/timeline.h"

namespace gp::schedule {

struct Blocked {
  int device = 0;
  int index = 0;  // into schedule.devices[device]
  std::string waits_for;
};

struct DataflowResult {
  Timeline timeline;
  std::vector<Blocked> blocked;  // empty when every instruction ran
};

// Expects a schedule that passed the static checks of validate_schedule (references in range).
DataflowResult run_dataflow(PlanView const& view, Schedule const& schedule);

// Whether stage s splits its backward into B and W on device d (it has any W there).
std::vector<std::vector<bool>> split_backward(PlanView const& view, Schedule const& schedule);

}  // namespace gp::schedule
