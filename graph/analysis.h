// Structure of an operator DAG: where it forks and joins, how many branches it has, and its
// widest antichain (the most operators that could run at the same time: no path between any
// two of them). These bound how much a graph-pipeline partition can run side by side.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/op_graph.h"

namespace gp::graph {

// Strict reachability between ops (u reaches v: a path u -> ... -> v with at least one edge),
// as one bitset row per op: n^2/8 bytes (125 KB for 1,000 ops, 12.5 MB for 10,000).
class Reachability {
 public:
  explicit Reachability(OpGraph const& graph);
  bool reaches(OpId u, OpId v) const {
    return (rows_[static_cast<std::size_t>(u)][static_cast<std::size_t>(v) / 64] >> (v % 64)) & 1u;
  }
  std::vector<uint64_t> const& row(OpId u) const { return rows_[static_cast<std::size_t>(u)]; }
  std::size_t size() const { return rows_.size(); }

 private:
  std::vector<std::vector<uint64_t>> rows_;
};

std::vector<OpId> fork_points(OpGraph const& graph);  // ops with more than one successor op
std::vector<OpId> join_points(OpGraph const& graph);  // ops with more than one predecessor op

// Number of branches: every edge that leaves a fork point starts a branch, and so does every
// entry op when several ops read the model's inputs directly (the inputs act as one fork: a
// multi-input model's towers are branches too). A chain has 0, a diamond 2, a fork into 3 paths
// 3, ResNet-18's 8 residual blocks 16, 7 input towers 7.
int64_t branch_count(OpGraph const& graph);

// A maximum antichain, exact (Dilworth/Konig: n minus a maximum matching of the bipartite
// reachability graph, by Hopcroft-Karp over bitset rows), sorted by op id.
// O(sqrt(n) * n^2 / 64) word operations: well under a second for a few thousand ops.
std::vector<OpId> widest_antichain(OpGraph const& graph);

}  // namespace gp::graph
