#include "partition/gpp_ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace gp::partition {

LeafOrder leaf_order(SpTree const& tree) {
  LeafOrder lo;
  lo.range.assign(tree.nodes.size(), {0, 0});
  int max_node = -1;
  for (SpNode const& n : tree.nodes) max_node = std::max(max_node, n.node);
  lo.pos.assign(max_node + 1, -1);
  // Children precede parents in tree.nodes, but leaf positions need a left-to-right walk.
  std::vector<std::pair<int, bool>> stack{{tree.root, false}};
  while (!stack.empty()) {
    auto [t, done] = stack.back();
    stack.pop_back();
    SpNode const& n = tree.nodes[t];
    if (n.kind == SpKind::kLeaf) {
      int const p = static_cast<int>(lo.order.size());
      lo.range[t] = {p, p + 1};
      lo.pos[n.node] = p;
      lo.order.push_back(n.node);
      continue;
    }
    if (done) {
      lo.range[t] = {lo.range[n.children.front()].first, lo.range[n.children.back()].second};
      continue;
    }
    stack.emplace_back(t, true);
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.emplace_back(*it, false);
  }
  return lo;
}

BoundaryTracker::BoundaryTracker(Problem const& p) : p_(&p) {
  std::map<std::pair<int, std::vector<std::string>>, int> ids;
  group_of_edge_.resize(p.edges.size());
  for (int e = 0; e < static_cast<int>(p.edges.size()); ++e) {
    Edge const& edge = p.edges[e];
    auto [it, inserted] = ids.emplace(std::make_pair(edge.src, edge.tensors), static_cast<int>(group_bytes_.size()));
    if (inserted) {
      group_bytes_.push_back(edge.bytes_per_sample);
      group_edges_.push_back(0);
    }
    group_of_edge_[e] = it->second;
    ++group_edges_[it->second];
  }
  int const groups = static_cast<int>(group_bytes_.size());
  epoch_.assign(groups, 0);
  src_in_.assign(groups, 0);
  dst_in_.assign(groups, 0);
  out_groups_begin_.push_back(0);
  for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) {
    std::vector<int> gs;
    if (v < static_cast<int>(p.out_edges.size())) {
      for (int e : p.out_edges[v]) gs.push_back(group_of_edge_[e]);
    }
    std::sort(gs.begin(), gs.end());
    gs.erase(std::unique(gs.begin(), gs.end()), gs.end());
    out_groups_flat_.insert(out_groups_flat_.end(), gs.begin(), gs.end());
    out_groups_begin_.push_back(static_cast<int>(out_groups_flat_.size()));
  }
}

void BoundaryTracker::clear() {
  ++cur_;
  bytes_ = 0;
  tensors_ = 0;
}

bool BoundaryTracker::crosses(int g) const {
  if (epoch_[g] != cur_) return false;
  return src_in_[g] ? dst_in_[g] < group_edges_[g] : dst_in_[g] > 0;
}

void BoundaryTracker::account(int g, int sign) {
  if (group_bytes_[g] <= 0 || !crosses(g)) return;
  bytes_ += sign * group_bytes_[g];
  tensors_ += sign;
}

void BoundaryTracker::add(int v) {
  touched_.clear();
  for (int i = out_groups_begin_[v]; i < out_groups_begin_[v + 1]; ++i) touched_.push_back(out_groups_flat_[i]);
  for (int e : p_->in_edges[v]) touched_.push_back(group_of_edge_[e]);
  if (touched_.size() > 1) {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  }
  for (int g : touched_) {
    account(g, -1);
    if (epoch_[g] != cur_) {
      epoch_[g] = cur_;
      src_in_[g] = 0;
      dst_in_[g] = 0;
    }
  }
  for (int i = out_groups_begin_[v]; i < out_groups_begin_[v + 1]; ++i) src_in_[out_groups_flat_[i]] = 1;
  for (int e : p_->in_edges[v]) ++dst_in_[group_of_edge_[e]];
  for (int g : touched_) account(g, +1);
}

RangeCost::RangeCost(Problem const& p, std::vector<int> const& order, int64_t micro_batch)
    : p_(&p), micro_batch_(micro_batch), memory_(p.device_memory()) {
  int const devices = p.cluster.size();
  for (int r = 1; r <= devices && r <= micro_batch; r *= 2) {
    if (micro_batch % r != 0 || (r > 1 && !p.allow_replication)) break;
    replicas_.push_back(r);
  }
  int const n = static_cast<int>(order.size());
  fwd_.assign(replicas_.size(), std::vector<double>(n + 1, 0.0));
  bwd_i_ = fwd_;
  bwd_w_ = fwd_;
  for (int l = 0; l < levels(); ++l) {
    std::vector<NodeTime> const& t = p.node_times(micro_batch / replicas_[l]);
    for (int i = 0; i < n; ++i) {
      fwd_[l][i + 1] = fwd_[l][i] + t[order[i]].fwd_s;
      bwd_i_[l][i + 1] = bwd_i_[l][i] + t[order[i]].bwd_input_s;
      bwd_w_[l][i + 1] = bwd_w_[l][i] + t[order[i]].bwd_weight_s;
    }
  }
  // Compute time prefix sums interleaved by level: a run's fewest-replicas check reads two cache lines.
  compute_.assign(static_cast<std::size_t>(n + 1) * levels(), 0.0);
  for (int i = 0; i <= n; ++i) {
    for (int l = 0; l < levels(); ++l)
      compute_[static_cast<std::size_t>(i) * levels() + l] = fwd_[l][i] + bwd_i_[l][i] + bwd_w_[l][i];
  }
  weight_.assign(n + 1, 0);
  act_.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    weight_[i + 1] = weight_[i] + p.nodes[order[i]].weight_bytes;
    act_[i + 1] = act_[i] + p.nodes[order[i]].activation_bytes_per_sample;
  }
  if (!p.shared_weights.empty()) {
    std::vector<int> pos(p.nodes.size(), -1);
    for (int i = 0; i < n; ++i) pos[order[i]] = i;
    for (SharedWeight const& w : p.shared_weights) {
      Shared sh;
      sh.first = pos[w.readers.front()];
      for (int v : w.readers) sh.positions.push_back(pos[v]);
      std::sort(sh.positions.begin(), sh.positions.end());
      sh.bytes = w.bytes;
      shared_.push_back(std::move(sh));
    }
  }
}

int64_t RangeCost::copy_bytes(int lo1, int hi1, int lo2, int hi2) const {
  int64_t bytes = 0;
  auto reads_in = [](std::vector<int> const& positions, int lo, int hi) {
    auto it = std::lower_bound(positions.begin(), positions.end(), lo);
    return it != positions.end() && *it < hi;
  };
  for (Shared const& sh : shared_) {
    bool const holds_first = (sh.first >= lo1 && sh.first < hi1) || (sh.first >= lo2 && sh.first < hi2);
    if (!holds_first && (reads_in(sh.positions, lo1, hi1) || reads_in(sh.positions, lo2, hi2))) bytes += sh.bytes;
  }
  return bytes;
}

StageSums RangeCost::sums(int lo, int hi, int level, BoundaryTracker const& boundary) const {
  return sums(lo, hi, level, boundary.bytes_per_sample(), boundary.tensors());
}

StageSums RangeCost::sums(int lo, int hi, int level, int64_t boundary_bytes, int boundary_tensors) const {
  StageSums s;
  s.time.fwd_s = fwd_[level][hi] - fwd_[level][lo];
  s.time.bwd_input_s = bwd_i_[level][hi] - bwd_i_[level][lo];
  s.time.bwd_weight_s = bwd_w_[level][hi] - bwd_w_[level][lo];
  s.weight_bytes = weight_[hi] - weight_[lo];
  s.activation_bytes_per_sample = act_[hi] - act_[lo];
  if (p_->count_communication) {
    s.boundary_bytes_per_sample = boundary_bytes;
    s.boundary_tensors = boundary_tensors;
  }
  return s;
}

double RangeCost::fwd_s(int lo, int hi, int level) const { return fwd_[level][hi] - fwd_[level][lo]; }

double RangeCost::compute_s(int lo, int hi, int level) const {
  std::size_t const L = replicas_.size();
  return compute_[static_cast<std::size_t>(hi) * L + level] - compute_[static_cast<std::size_t>(lo) * L + level];
}

int RangeCost::max_in_flight(StageSums const& sums, int level) const {
  int64_t const samples = samples_per_replica(micro_batch_, replicas_[level]);
  int64_t const optimizer = static_cast<int64_t>(std::llround(p_->optimizer_bytes_per_weight_byte * sums.weight_bytes));
  return micro_batches_that_fit(memory_, sums.weight_bytes + optimizer, sums.activation_bytes_per_sample * samples);
}

}  // namespace gp::partition
