// What `graphpipe simulate` and `graphpipe schedule` print: a summary table a person reads, and
// the same numbers as JSON for machines.
#pragma once

#include <string>

#include "partition/plan.h"
#include "schedule/instruction.h"
#include "schedule/simulator.h"

namespace gp::schedule {

std::string simulation_table(partition::Plan const& plan, Schedule const& schedule, Simulation const& sim);
std::string simulation_json(partition::Plan const& plan, Schedule const& schedule, Simulation const& sim);

}  // namespace gp::schedule
