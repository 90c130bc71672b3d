#include "schedule/rank.h"

#include "schedule/simulator.h"

namespace gp::schedule {

Result<double> simulated_samples_per_s(partition::Plan const& plan, BuildOptions const& options) {
  ASSIGN_OR_RETURN(Schedule schedule, build_schedule(plan, Policy::kAuto, options));
  ASSIGN_OR_RETURN(Simulation sim, simulate(plan, schedule));
  return sim.samples_per_s;
}

std::function<Result<double>(partition::Plan const&)> simulation_evaluator(BuildOptions const& options) {
  return [options](partition::Plan const& plan) { return simulated_samples_per_s(plan, options); };
}

}  // namespace gp::schedule
