// Piper-style planner: the chain DP over every downset of the DAG, a data-parallel degree per
// stage, memory-aware (partition/chain_dp.h). Like Piper, it enumerates downsets, whose number
// grows like n^k on k parallel branches; past PlannerOptions::max_downsets it gives up.
#include "partition/chain_dp.h"
#include "partition/planner.h"

#include <chrono>

namespace gp::partition {

Result<Plan> plan_piper(Problem const& p, PlannerOptions const& options) {
  auto const start = std::chrono::steady_clock::now();
  auto downsets = enumerate_downsets(p, options.max_downsets);
  if (!downsets)
    return Status(downsets.status().code(), "piper: " + downsets.status().message() +
                                                "; Piper's search is quadratic in the downsets (raise the limit with "
                                                "--max-downsets, or use --planner gpp)");
  ASSIGN_OR_RETURN(Plan plan, plan_chain(p, *downsets, "piper", options));
  plan.search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  plan.states_explored += downsets->count();
  return plan;
}

}  // namespace gp::partition
