// PipeDream-style planner: stages between antichain cuts (downsets), a chain of stages with
// replication, the same DP and cost model as the others (partition/chain_dp.h). When the DAG has
// more downsets than PlannerOptions::max_downsets, it linearises the graph (the prefixes of one
// topological order), as PipeDream effectively does on branchy models: it then solves one chain
// of all the operators. The plan's notes say so.
#include "partition/chain_dp.h"
#include "partition/planner.h"

#include <chrono>

namespace gp::partition {

Result<Plan> plan_pipedream(Problem const& p, PlannerOptions const& options) {
  auto const start = std::chrono::steady_clock::now();
  auto downsets = enumerate_downsets(p, options.max_downsets);
  std::string notes;
  if (!downsets) {
    if (downsets.status().code() != StatusCode::kInfeasible) return downsets.status();
    notes = "linearised: more than " + std::to_string(options.max_downsets) +
            " antichain cuts, so stages are cut along one topological order";
    if (options.progress) options.progress("pipedream: " + notes);
    downsets = prefix_downsets(p);
  }
  ASSIGN_OR_RETURN(Plan plan, plan_chain(p, *downsets, "pipedream", options));
  plan.notes = notes;
  plan.search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  plan.states_explored += downsets->count();
  return plan;
}

}  // namespace gp::partition
