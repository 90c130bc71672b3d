// Judging plans by simulation: the planner's formula (m + D - 1) max T_s ignores what the
// simulator prices (unequal stages filling and draining, the zero-bubble split, all-reduce overlap,
// several stages sharing a device), so GPP can hand its best candidates to this judge
// (partition::PlannerOptions::evaluate) and return the plan whose best schedule simulates fastest.
#pragma once

#include <functional>

#include "core/status.h"
#include "partition/plan.h"
#include "schedule/build.h"

namespace gp::schedule {

// The simulated samples/s of `plan` under its best schedule (Policy::kAuto: the fastest that fits
// the memory limit); kInfeasible when no schedule fits.
Result<double> simulated_samples_per_s(partition::Plan const& plan, BuildOptions const& options = {});

// simulated_samples_per_s as a PlannerOptions::evaluate.
std::function<Result<double>(partition::Plan const&)> simulation_evaluator(BuildOptions const& options = {});

}  // namespace gp::schedule
