// What the GPP DP prices a candidate stage from: the SP tree's leaves in left-to-right order, so
// that every piece is one or two ranges of positions, prefix sums over that order (RangeCost) and
// the boundary of a node set grown one node at a time (BoundaryTracker).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "partition/problem.h"
#include "partition/sp_decompose.h"

namespace gp::partition {

// Leaves of an SP tree left to right; range[t] = [lo, hi) of tree node t in that order.
struct LeafOrder {
  std::vector<int> order;                  // position -> DAG node
  std::vector<int> pos;                    // DAG node -> position
  std::vector<std::pair<int, int>> range;  // per tree node
};
LeafOrder leaf_order(SpTree const& tree);

// Boundary tensor groups of a node set grown one node at a time: the distinct (producer, tensors)
// groups with one end inside, as stage_sums counts them. Assumes the edges of a group carry equal
// bytes (they are one tensor); stage_sums counts the first it meets.
class BoundaryTracker {
 public:
  explicit BoundaryTracker(Problem const& p);
  void clear();
  void add(int node);
  int64_t bytes_per_sample() const { return bytes_; }
  int tensors() const { return tensors_; }

 private:
  bool crosses(int g) const;
  void account(int g, int sign);

  Problem const* p_;
  std::vector<int> group_of_edge_;
  std::vector<int64_t> group_bytes_;
  std::vector<int> group_edges_;  // edges per group
  std::vector<int> epoch_, src_in_, dst_in_;
  std::vector<int> out_groups_flat_, out_groups_begin_;
  std::vector<int> touched_;
  int cur_ = 1;
  int64_t bytes_ = 0;
  int tensors_ = 0;
};

// Prefix sums over a leaf order for one micro-batch size, one level per replica count r
// (powers of two dividing b, at most the cluster size; r = 1 only without replication).
class RangeCost {
 public:
  RangeCost(Problem const& p, std::vector<int> const& order, int64_t micro_batch);
  int levels() const { return static_cast<int>(replicas_.size()); }
  int replicas(int level) const { return replicas_[level]; }
  // Sums of [lo, hi) at `level`, with boundary sums from a tracker holding exactly that range.
  StageSums sums(int lo, int hi, int level, BoundaryTracker const& boundary) const;
  StageSums sums(int lo, int hi, int level, int64_t boundary_bytes, int boundary_tensors) const;
  // Compute time of [lo, hi) at `level` (no communication): a lower bound of the stage time.
  double compute_s(int lo, int hi, int level) const;
  double fwd_s(int lo, int hi, int level) const;  // forward time of [lo, hi) at `level`
  // The largest in-flight count whose memory fits (INT32_MAX when activations are 0; 0 if none).
  int max_in_flight(StageSums const& sums, int level) const;
  // Bytes of the shared weights (Problem::shared_weights) a stage of [lo1, hi1) and [lo2, hi2)
  // reads without their first reader: the copies it trains, which stage_sums counts too.
  int64_t copy_bytes(int lo1, int hi1, int lo2, int hi2) const;

 private:
  Problem const* p_;
  int64_t micro_batch_;
  int64_t memory_;  // the smallest device memory
  std::vector<int> replicas_;
  std::vector<std::vector<double>> fwd_, bwd_i_, bwd_w_;  // per level, prefix over positions
  std::vector<double> compute_;                           // prefix of fwd + bwd per position, levels interleaved
  std::vector<int64_t> weight_, act_;
  struct Shared {
    int first = 0;               // the position of the first reader (whose weight_bytes count it)
    std::vector<int> positions;  // every reader's, increasing
    int64_t bytes = 0;
  };
  std::vector<Shared> shared_;
};

}  // namespace gp::partition
