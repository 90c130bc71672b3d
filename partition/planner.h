// The planners. Each takes the same Problem (costed DAG + cluster + batch) and returns a Plan.
#pragma once

#include <functional>
#include <string>

#include "partition/plan.h"
#include "partition/problem.h"

namespace gp::partition {

// What the sequential planners minimise. kStepTime: the predicted step time (m + D - 1) max T_s,
// the objective GPP minimises, so that the planners differ only in the plans they can build.
// kBottleneck: PipeDream's and Piper's own, the least max T_s at each micro-batch size (then the
// least step time across sizes); the optima in the PipeDream profiles' README are of this kind.
enum class ChainObjective { kStepTime, kBottleneck };

struct PlannerOptions {
  // Progress callback for long searches (a line such as "gpp: b=8 tau=1.2ms states=10234"); may be empty.
  std::function<void(std::string const&)> progress;
  double time_limit_s = 0;  // 0 = none; a planner that hits it returns kTimeout naming the limit
  // Downset-based planners (pipedream, piper) give up beyond this many downsets: kInfeasible
  // naming the limit (piper), or a linearised graph (pipedream, as PipeDream on branchy models).
  int64_t max_downsets = 50000;
  ChainObjective chain_objective = ChainObjective::kStepTime;  // pipedream and piper
  // GPP only: a finer judge of a plan than its formula (m + D - 1) max T_s, such as the simulated
  // samples/s of the plan's best schedule (schedule/rank.h, simulation_evaluator). When set, GPP
  // keeps every plan its searches assemble whose formula step time is within `evaluate_slack` of
  // the best, judges up to `evaluate_candidates` of them (best formula first) and returns the one
  // judged fastest, its samples_per_s and step_time_s replaced by the judged ones (the formula's
  // value is kept in the plan's notes).
  std::function<Result<double>(Plan const&)> evaluate;
  double evaluate_slack = 1.2;
  int evaluate_candidates = 12;
  // GPP only: a graph of more nodes is planned on at most half as many groups of its nodes (whole
  // SP subtrees and runs of them, cut where the fewest bytes cross: partition/coarsen.h) and the
  // plan expanded; 0: every node (the exact DP, whose time and memory grow with the square of a
  // long Series: a 10,000-node chain at 64 devices took 3.4 s and 7.8 GB an evaluation).
  int gpp_max_nodes = 2000;
};

// What would fit, for the message of an infeasible request: total weight+optimizer bytes against
// the cluster's memory, the fewest devices that could hold them, the largest single node.
std::string infeasibility_hint(Problem const& p);

// Perfect scaling, an upper bound on any plan's samples/s: every device computing all the time and
// nothing else (no memory limit, communication, all-reduce or pipeline fill); each node's work per
// sample is at least min over per-replica sample counts s (powers of two up to a micro-batch size)
// of t(s)/s on the reference device.
double ideal_samples_per_s(Problem const& p);

// GraphPipe: SP decomposition + DP with a bound, binary search on tau (partition/gpp_dp.cc).
Result<Plan> plan_gpp(Problem const& p, PlannerOptions const& options = {});
// PipeDream-style: DP over antichain cuts, chain of stages, replication (partition/pipedream_dp.cc).
Result<Plan> plan_pipedream(Problem const& p, PlannerOptions const& options = {});
// Piper-style: DP over downsets with a data-parallel degree per stage, memory-aware (partition/piper_dp.cc).
Result<Plan> plan_piper(Problem const& p, PlannerOptions const& options = {});
// Balanced split of one topological order (DeepSpeed/torchgpipe), no replication (partition/balanced.cc).
Result<Plan> plan_balanced(Problem const& p, PlannerOptions const& options = {});

// By name: "gpp", "pipedream", "piper", "balanced".
Result<Plan> plan_with(std::string const& planner, Problem const& p, PlannerOptions const& options = {});

}  // namespace gp::partition
