// The dynamic program shared by the sequential planners: the best chain of stages whose
// boundaries are downsets of a given family (all downsets for Piper; all of them or the prefixes
// of the node order for PipeDream), each stage with a data-parallel degree dividing b, memory
// checked with in-flight = the stage's depth in the chain (its position from the end).
//
// State (downset D still to partition, q stages already placed after D, d devices left) ->
// the least possible max T_s. The last stage of D is D \ D' for a downset D' ⊂ D, run on r
// replicas with in-flight q + 1. Pairs whose compute alone exceeds a bound are skipped; the bound
// grows until the optimum lies under it, so the result is exact.
#pragma once

#include <string>

#include "partition/downsets.h"
#include "partition/planner.h"

namespace gp::partition {

// Runs the DP for every candidate micro-batch size and returns the plan with the least step time
// (m + D - 1) max T_s among those whose stages all fit: over all chains (options.chain_objective
// kStepTime, the DP rerun with at most K stages for each K that can win), or over the
// least-max-T_s chain of each size (kBottleneck); states_explored counts (stage, replicas)
// transitions evaluated. kInfeasible with infeasibility_hint when nothing fits.
Result<Plan> plan_chain(Problem const& p, Downsets const& downsets, std::string const& planner,
                        PlannerOptions const& options);

}  // namespace gp::partition
