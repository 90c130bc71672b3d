// Planning a large graph on groups of its nodes. GPP's DP prices every contiguous run of a Series
// node's children, so its work and memory grow with the square of a long run (a 10,000-operator
// chain at 64 devices: 3.4 s and 7.8 GB an evaluation, no plan within a minute). Above
// PlannerOptions::gpp_max_nodes nodes, plan_gpp plans on groups instead and expands the plan:
//
// A group is a whole subtree of the graph's SP tree, or a run of consecutive children of one SP
// node that are each whole subtrees (a Series' consecutive children, a Parallel's neighbouring
// branches). Groups are convex (no path leaves a group and comes back), so the group graph is a DAG,
// and it is series-parallel wherever the graph was: the SP tree of the groups is the graph's with
// those subtrees and runs as leaves. Subtrees and runs are taken whole while their size (their share
// of the model's compute plus their share of its memory: weights, optimizer state and activations)
// is at most a bound, the least bound (bisected) that leaves at most max_groups groups; a heavier
// node is a group of its own. A group's times, weights and activations are its nodes' sums; an edge
// between groups carries what the edges between their nodes carry; nothing inside a group is ever
// cut, so every plan of the groups is a plan of the graph with the same stage prices (up to the
// order of float sums), and the DP is exact over the plans whose cuts fall between groups.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "partition/plan.h"
#include "partition/problem.h"
#include "partition/sp_decompose.h"

namespace gp::partition {

struct Coarsening {
  Problem problem;                       // one node per group, finalized; ids a topological order
  std::vector<std::vector<int>> groups;  // group -> its nodes in `p`, increasing
  double largest_size = 0;               // the bound: the largest multi-node group's size (0..2)
};

// Groups of `p`'s nodes along `tree` (sp_decompose(p)), at most max_groups of them where the nodes
// allow (each node heavier than the bound is a group of its own). The result's node timer reads
// `p`'s, which must outlive it.
Result<Coarsening> coarsen(Problem const& p, SpTree const& tree, int max_groups);

// The plan of `p` whose stages hold the nodes of `coarse`'s stages (replicas and recomputation
// kept), assembled and priced on `p` (devices given in stage order, as plan_gpp's own plans).
Result<Plan> expand_plan(Problem const& p, Coarsening const& c, Plan const& coarse);

}  // namespace gp::partition
