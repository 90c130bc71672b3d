// The search of plan_gpp over one SP tree: for each micro-batch size, most promising first, the
// bound tau reaching each target depth, probing the engine (partition/gpp_engine.h); every plan
// found is offered to an Incumbent shared by the searches of all the trees plan_gpp searches.
// Internal to partition/.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "partition/plan.h"
#include "partition/planner.h"
#include "partition/problem.h"
#include "partition/sp_decompose.h"

namespace gp::partition::gpp {

using Clock = std::chrono::steady_clock;

// The best plan over all the trees searched so far, shared by the searches so that each prunes
// against the plans the others found.
struct Incumbent {
  std::optional<Plan> best;
  double best_tau = 0;
  int64_t states = 0;
  double slack = 1;              // prune against best * slack (> 1 when candidates are judged later)
  std::vector<Plan> candidates;  // every plan assembled within the slack (when judged later)
  double bound() const { return best ? best->step_time_s * slack : std::numeric_limits<double>::infinity(); }
  void offer(Plan plan, double tau) {
    // Assembled, a stage is priced exactly (stage_cost, a shared weight's copies included; the
    // chain DP counts them too, this keeps any other route honest): one that would not fit is no plan.
    for (PlanStage const& s : plan.stages)
      if (s.peak_memory_bytes > stage_memory_limit(plan, s)) return;
    if (slack > 1 && plan.step_time_s <= bound()) candidates.push_back(plan);
    if (!best || plan.step_time_s < best->step_time_s ||
        (plan.step_time_s == best->step_time_s && plan.micro_batch < best->micro_batch)) {
      best = std::move(plan);
      best_tau = tau;
    }
  }
};

// Searches one tree. `chain` non-empty (the order's name): the tree is a Series of single nodes in
// a topological order that is not a chain of the graph's own edges (chain_tree); its stages are priced as the
// sequential planners price a chain (stage i of k holds k - i micro-batches), which is exactly the depth the DP counts
// on a Series node, and the plan found is then re-priced as the graph of the same stages (never deeper, so never slower
// and never more memory).
Status search_tree(Problem const& p, SpTree const& tree, std::string const& chain, PlannerOptions const& options,
                   Clock::time_point start, Incumbent& inc);

}  // namespace gp::partition::gpp
