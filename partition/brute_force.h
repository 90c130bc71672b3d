// Exhaustive enumeration of stage graphs for small DAGs (at most 12 nodes and 8 devices), under
// the shared cost model (stage_cost, true stage-graph depths). The reference the GPP DP is tested
// against, usable by bench for small cases.
//
// Every partition of the nodes into stages of the chosen space, with an acyclic stage graph, every
// replica count per stage (powers of two dividing b, at most the cluster), every micro-batch size.
// A plan is valid when it fits the devices and every stage's memory with in-flight = its depth.
// `plan` follows the GPP rule (../shared/GRAPHPIPE.md, "Search"): per b the least bottleneck
// max T_s/b, then the least depth; across b the least step time. `min_step_time_s` is the least
// step time of any valid plan, the true optimum of (m + D - 1) * max T_s.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "partition/plan.h"
#include "partition/problem.h"
#include "partition/sp_decompose.h"

namespace gp::partition {

enum class BruteForceSpace {
  kSpPieces,   // stages are the GPP planner's pieces of the SP tree (partition/gpp_dp.h)
  kAllConvex,  // stages are any convex node sets
  kChains,     // sequential pipelines: convex stages run in one linear order, depth = stage count
};

struct BruteForceResult {
  Plan plan;                   // by the GPP rule above
  double min_step_time_s = 0;  // least step time over all valid plans
  int64_t partitions = 0;      // node partitions with an acyclic stage graph
  int64_t plans = 0;           // valid (partition, replicas, b) combinations
};

// `tree` is needed for kSpPieces (it may come from sp_decompose(p)); it is ignored otherwise.
Result<BruteForceResult> brute_force(Problem const& p, BruteForceSpace space, SpTree const* tree = nullptr);

}  // namespace gp::partition
