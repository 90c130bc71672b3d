// Synthetic planner problems of any size, to time the planners on graphs of 1,000 to 10,000+
// operators: a chain, and a series of fork/join blocks (k parallel branches of L nodes each, as
// in Inception blocks or MMT's encoder branches). Node costs are affine in the sample count and
// drawn from a seeded generator, so a spec always gives the same Problem.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "partition/problem.h"

namespace gp::partition {

enum class SyntheticShape : uint8_t {
  kChain,    // nodes 0 -> 1 -> ... -> chain_nodes - 1
  kBranchy,  // `blocks` blocks in series, each a fork node, `branches` chains of `length` nodes
             // and a join node (join of one block -> fork of the next), then a chain of `tail` nodes
};

struct SyntheticSpec {
  SyntheticShape shape = SyntheticShape::kChain;
  int chain_nodes = 0;  // kChain
  int blocks = 1;       // kBranchy
  int branches = 4;
  int length = 6;
  int tail = 0;
  uint64_t seed = 12345;
  // Node cost: fwd = 20 us + c_v * samples with c_v uniform in [0.5, 1.5] ms (drawn per node from
  // an LCG seeded with `seed`), backward input and weight parts each equal to fwd.
  int64_t weight_bytes = int64_t{4} << 20;                 // per node
  int64_t activation_bytes_per_sample = int64_t{2} << 20;  // per node
  int64_t edge_bytes_per_sample = int64_t{4} << 20;        // per edge
  Cluster cluster = Cluster::uniform(8, int64_t{16} << 30);
  int64_t batch = 256;

  int node_count() const;  // what the spec builds (kChain: chain_nodes; kBranchy: see above)
};

// A finalized Problem named after the spec ("chain2000", "branchy4x6x38+12"); node ids are a
// topological order (fork, branch 0's nodes, ..., join, per block). Errors name the field to fix.
Result<Problem> synthetic_problem(SyntheticSpec const& spec);

// The spec of a named graph:
//   "chainN"   a chain of N nodes;
//   "branchyN" N nodes: blocks of 4 branches x 6 nodes (26 nodes each, N >= 26), then a chain
//              tail of the N mod 26 nodes left over;
//   "branch16" a fork, 16 branches of 96 nodes, a join and a chain of 8 (1,546 nodes).
// The cluster and batch are the spec's defaults; set them and call synthetic_problem.
Result<SyntheticSpec> synthetic_spec(std::string_view name);
Result<Problem> synthetic_problem(std::string_view name);

}  // namespace gp::partition
