// The GraphPipe partitioner (plan_gpp in partition/planner.h): SP decomposition, then for each
// micro-batch size a search on the bound tau over a memoised DP on the SP tree
// (../shared/GRAPHPIPE.md, "The partitioner", steps 2-5).
//
// Pieces (candidate stages), wider than GRAPHPIPE.md step 2, which allows only whole subtrees and
// runs of a Series node's children:
//   - a contiguous run of a Series node's children (a whole subtree is the run of all of them);
//   - a contiguous group of a Parallel node's children (the paper's "a stage holds whole branches"),
//     so k branches can share fewer than k devices in any grouping of neighbours;
//   - such a group together with the run of Series children right after the Parallel node (the
//     join and what follows it), so the small head after a set of branches shares a device with
//     one branch group instead of idling on its own (MMT on 4 devices: the only fitting plans);
//   - such a group together with the run of Series children right before the Parallel node (the
//     fork and what precedes it), so a lone fork node or a light branch shares a device (GNMT at
//     16 devices: 5,778 -> 6,301 samples/s).
// At most one of a Parallel node's groups is merged, on one side: the other children are then
// partitioned beside it as plain groups or each on its own (with merges deeper inside them).
// Every piece is convex. Brute force over exactly this space (partition/brute_force.h kSpPieces)
// equals the DP on random DAGs (tests/partition/test_gpp.cc). Not in the space: parts of several
// branches in one stage, and a group merged with runs on both sides.
//
// A piece is one or two ranges of the tree's left-to-right leaf order, so the DP prices a stage from
// prefix sums over that order plus a boundary tracker that grows a range one node at a time; prices
// are cached per micro-batch size (they depend on the ranges and b only) and boundaries once for all
// b. StageSums then go through the shared stage_cost_from_sums, so the DP and stage_cost agree up to
// floating-point summation order. The DP's in-flight count of a stage is q + its depth inside its
// piece, where q is the depth of everything downstream in the SP order; on series-parallel graphs
// that is exactly the stage's depth in the stage graph, on graphs that needed ordering edges it is
// an upper bound.
//
// Objective: the least predicted step time (m + D - 1) max T_s over all b, the smaller b on ties.
// This improves on ../shared/GRAPHPIPE.md step 4 (per b the least bound tau first, then the least
// depth among plans meeting it): the least-tau plan can be deep or need small stages, and a slightly
// larger bottleneck with a much shallower graph often wins by far (paper DLRM at 8 devices: 1.5x).
// Per b, D(tau), the least DP depth at bound tau, only falls as tau grows, so the best step is
// min over depths d of (m + d - 1) * b * tau_d, tau_d the least tau reaching depth <= d: the search
// finds tau_min, then tau_d for one less than the depth found each time, skipping depths whose
// (m + d - 1) * b * (lower end) cannot beat the best plan. Equal to the brute-force least step over
// the pieces above on series-parallel graphs (tests/partition/test_gpp.cc).
// Each search is exact: an evaluation at tau also returns tau_next, below which nothing in it can
// change, so infeasible probes move the lower end past every value that cannot be the optimum; after
// a plan is found, one probe just below its tau either ends the search or finds a smaller one.
// Speed comes from pruning that cannot change the root's answer: a device lower bound (per node
// device-seconds, min over r of r * compute(v, b/r), divided by tau * b) caps the devices a piece
// may use given the rest of the graph, and micro-batch sizes whose floor (m + d_min - 1) * b *
// tau_min cannot beat the best plan so far are skipped (d_min = 2 when the model's weights and
// optimizer state do not fit one device). The sizes are searched in two passes: in the order of
// that floor to each one's first plan, then to the end in the order of their best plans so far, so
// that a good plan prunes every size from its start; and an evaluation for a target depth prunes
// every partial plan deeper than the target (Engine::evaluate's depth cap).
// Graphs of more than PlannerOptions::gpp_max_nodes nodes are planned on groups of nodes
// (partition/coarsen.h): the DP is then exact over the plans whose cuts fall between groups.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "partition/planner.h"
#include "partition/gpp_ranges.h"
#include "partition/problem.h"
#include "partition/sp_decompose.h"

namespace gp::partition {

// plan_gpp on a given SP tree only (plan_gpp decomposes the problem's graph itself and also
// searches the chain trees of chain_orders).
Result<Plan> plan_gpp_on_tree(Problem const& p, SpTree const& tree, PlannerOptions const& options = {});

// One Series of single nodes in `order` (a topological order): its pieces are the contiguous ranges
// of the order, so its plans are chains. added_edges lists the consecutive pairs that are not edges.
SpTree chain_tree(Problem const& p, std::vector<int> const& order);
struct ChainOrder {
  std::string name;
  std::vector<int> order;
};
// The topological orders plan_gpp also searches as chains: node order (the sequential planners'
// linearisation) and, on graphs of at most 300 nodes, the SP tree's leaf order (branch after
// branch), as soon as possible and as late as possible (branches interleaved level by level);
// duplicates removed.
std::vector<ChainOrder> chain_orders(Problem const& p, SpTree const& tree);

}  // namespace gp::partition
