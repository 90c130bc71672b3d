// Series-parallel (SP) decomposition of an operator DAG (../shared/GRAPHPIPE.md, "The partitioner",
// step 1). Leaves are the DAG's nodes; Series children run one after another (every node of a child
// precedes every node of the next child), Parallel children are mutually independent.
//
// Method: recursively, a node set splits into Parallel over its weakly connected components; a
// connected set splits into Series at every position p of the topological (id) order where each
// maximal node of the prefix has a direct edge to each minimal node of the suffix (for a poset this
// is exactly "every prefix node precedes every suffix node"; transitive edges such as residual
// skips are allowed). A connected set with no such position is not series-parallel: we pick the
// position that needs the fewest missing maximal→minimal ordering edges (ties: the earliest) and
// add those edges. This minimality is greedy per stuck set, not a global minimum over all edge
// sets; `added_edges` reports what was added. Multiple sources and sinks need no virtual nodes:
// they end up under a Parallel node or inside a Series child.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "partition/problem.h"

namespace gp::partition {

enum class SpKind { kLeaf, kSeries, kParallel };

struct SpNode {
  SpKind kind = SpKind::kLeaf;
  int node = -1;              // the DAG node of a leaf
  std::vector<int> children;  // tree indices; Series: in execution order
};

struct SpTree {
  std::vector<SpNode> nodes;  // children come before parents; root is the last one
  int root = -1;
  // Ordering edges (u, v) added to make the graph series-parallel; empty when it already was.
  std::vector<std::pair<int, int>> added_edges;

  // "S(0,P(1,2),3)" with node ids, for tests and debugging.
  std::string to_string() const;
  // The leaves of subtree `t` in left-to-right order.
  std::vector<int> leaves(int t) const;
};

// `edges` are (src, dst) over node ids 0..num_nodes-1, which must be a topological order.
Result<SpTree> sp_decompose(int num_nodes, std::vector<std::pair<int, int>> const& edges);
Result<SpTree> sp_decompose(Problem const& problem);

}  // namespace gp::partition
