// Objective and search: see partition/gpp_dp.h (least step time, not GRAPHPIPE.md's tau first).
#include "partition/gpp_dp.h"
#include "partition/chain_dp.h"
#include "partition/downsets.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace gp::partition {

namespace {
// plan_gpp also runs the sequential planners' DP over every chain between downsets when the graph
// has at most this many downsets (it then takes milliseconds; gnmt's 7,874 take seconds).
constexpr int64_t kChainDownsets = 1000;
// Graphs up to this many nodes get chains of four topological orders, larger ones of the node order.
constexpr int kAllChainOrdersUpTo = 300;
}  // namespace

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
  int64_t const avail = memory_ - sums.weight_bytes - optimizer;
  if (avail < 0) return 0;
  int64_t const per = sums.activation_bytes_per_sample * samples;
  if (per <= 0) return std::numeric_limits<int32_t>::max();
  return static_cast<int>(std::min<int64_t>(avail / per, std::numeric_limits<int32_t>::max()));
}

namespace {

using Clock = std::chrono::steady_clock;

struct Point {
  int depth = 0;    // stages on the longest path of the piece's own stage graph
  int devices = 0;  // fewest devices for that depth
};
using Frontier = std::vector<Point>;  // depth ascending, devices strictly descending

// DP state: tree node, what part of it (Part), an index into its children (-1 for the whole node)
// and q, the depth downstream of the piece.
struct StateKey {
  int tree = 0;
  int part = 0;
  int index = -1;
  int q = 0;
  bool operator==(StateKey const&) const = default;
};
struct StateKeyHash {
  std::size_t operator()(StateKey const& k) const {
    uint64_t h = static_cast<uint32_t>(k.tree);
    h = h * 0x9E3779B97F4A7C15ULL ^ static_cast<uint32_t>(k.part);
    h = h * 0x9E3779B97F4A7C15ULL ^ static_cast<uint32_t>(k.index + 1);
    h = h * 0x9E3779B97F4A7C15ULL ^ static_cast<uint32_t>(k.q);
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

// One or two leaf ranges [lo1, hi1) and [lo2, hi2) (lo2 == hi2 when there is one): a candidate
// stage. Two ranges make a Parallel node's group of children [lo1, hi1) merged with the Series run
// [lo2, hi2) after it (lo2 >= hi1) or before it (hi2 <= lo1).
struct Ranges {
  int lo1 = 0, hi1 = 0, lo2 = 0, hi2 = 0;
};

// Cost of one candidate stage at each replica level.
struct Level {
  double t = 0;            // T_s / b
  int max_in_flight = -1;  // -1: not priced yet
  // With recomputation (Problem::allow_recompute; else 0): the in-flight count that fits when the
  // stash is bounded by all the stage's boundary bytes (its inputs are among them), so a stage the
  // DP fits with recompute also fits in assemble_plan. Its T_s / b is t + the forward time / b
  // (recompute_t). 16 bytes in all: the price rows are the search's most read memory.
  int max_in_flight_rc = 0;
};

// A candidate stage: its ranges, boundary and cached prices (lv[l] at replica level l, priced on
// first use).
struct StageRef {
  Level* lv = nullptr;
  Ranges rg;
  int64_t boundary_bytes = 0;
  int boundary_tensors = 0;
};

// Boundaries of candidate stages, shared by the engines of all micro-batch sizes (they do not
// depend on b). Rows as in Engine::priced.
struct BoundaryRows {
  struct Cell {
    int64_t bytes = -1;  // -1: not known yet
    int tensors = 0;
  };
  std::vector<std::vector<Cell>> single;
  std::unordered_map<uint64_t, std::vector<Cell>> merged;
};

struct ChosenStage {
  Ranges ranges;
  int replicas = 1;
  double t = 0;
  bool recompute = false;
};

// Memo kinds: a tree node's whole frontier, a Series node's suffix of children starting at index,
// a Parallel node's prefix of children [0, index) or suffix of children [index, end).
enum class Part : int { kNode, kSeriesSuffix, kParallelPrefix, kParallelSuffix };

class Engine {
 public:
  Engine(Problem const& p, SpTree const& tree, LeafOrder const& leaves, int64_t micro_batch, BoundaryRows& boundaries)
      : p_(p),
        tree_(tree),
        leaves_(leaves),
        b_(micro_batch),
        m_(p.batch / micro_batch),
        devices_(p.cluster.size()),
        cost_(p, leaves.order, micro_batch),
        tracker_(p),
        boundaries_(boundaries) {
    boundaries_.single.resize(leaves.order.size());
    single_.resize(leaves.order.size());
    // Longest path of per-node least per-replica times: a stage meeting tau holds at most tau * b of
    // it (each of its replicas runs all its nodes), so a plan at tau is at least path / (tau * b)
    // stages deep.
    parallel_children_.resize(tree.nodes.size());
    for (int t = 0; t < static_cast<int>(tree.nodes.size()); ++t) {
      if (tree.nodes[t].kind != SpKind::kSeries) continue;
      for (int c = 0; c < static_cast<int>(tree.nodes[t].children.size()); ++c)
        if (tree.nodes[tree.nodes[t].children[c]].kind == SpKind::kParallel) parallel_children_[t].push_back(c);
    }
    {
      std::vector<double> least(p.nodes.size(), std::numeric_limits<double>::infinity());
      for (int l = 0; l < cost_.levels(); ++l) {
        std::vector<NodeTime> const& t = p.node_times(micro_batch / cost_.replicas(l));
        for (std::size_t v = 0; v < least.size(); ++v) least[v] = std::min(least[v], t[v].total_s());
      }
      std::vector<double> longest(p.nodes.size(), 0.0);
      for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) {  // ids are a topological order
        longest[v] += least[v];
        path_work_ = std::max(path_work_, longest[v]);
        for (int e : p.out_edges[v]) longest[p.edges[e].dst] = std::max(longest[p.edges[e].dst], longest[v]);
      }
    }
    // Device-seconds per node: a stage of r replicas meeting tau gives each of its nodes at most
    // r * compute(v, b / r) of its r * tau * b, so a node set needs >= sum / (tau * b) devices.
    int const n = static_cast<int>(leaves.order.size());
    work_.assign(n + 1, 0.0);
    for (int i = 0; i < n; ++i) {
      double w = std::numeric_limits<double>::infinity();
      for (int l = 0; l < cost_.levels(); ++l) w = std::min(w, cost_.replicas(l) * cost_.compute_s(i, i + 1, l));
      work_[i + 1] = work_[i] + w;
      for (int l = 0; l + 1 < cost_.levels(); ++l)
        monotone_ = monotone_ && cost_.compute_s(i, i + 1, l + 1) <= cost_.compute_s(i, i + 1, l);
    }
  }

  struct Eval {
    bool feasible = false;
    double tau_next = std::numeric_limits<double>::infinity();  // result is the same on [tau, tau_next)
    double tau_used = 0;                                        // max T_s/b of the plan
    int depth = 0, devices = 0;
    std::vector<ChosenStage> stages;
  };

  Eval evaluate(double tau) {
    tau_ = tau;
    tau_next_ = std::numeric_limits<double>::infinity();
    memo_.clear();
    frontiers_.clear();
    Eval ev;
    Frontier const root = node_frontier(tree_.root, 0);
    ev.tau_next = tau_next_;
    if (root.empty() || expired_) return ev;
    ev.feasible = true;
    ev.depth = root.front().depth;
    ev.devices = root.front().devices;
    chosen_.clear();
    rebuild_node(tree_.root, 0, root.front());
    ev.stages = chosen_;
    for (ChosenStage const& s : chosen_) ev.tau_used = std::max(ev.tau_used, s.t);
    return ev;
  }

  int64_t states() const { return states_; }
  // Frees the memo and the price cache once the search is done with this micro-batch size.
  void release() {
    memo_ = {};
    frontiers_ = {};
    single_ = {};
    merged_rows_ = {};
    merged_row_ = nullptr;
  }
  double lower_bound() const {
    // Every node sits in some stage, whose time is at least the node's own compute time.
    double lb = 0;
    for (int i = 0; i < static_cast<int>(leaves_.order.size()); ++i) {
      double best = std::numeric_limits<double>::infinity();
      for (int l = 0; l < cost_.levels(); ++l) best = std::min(best, cost_.compute_s(i, i + 1, l) / b_);
      lb = std::max(lb, best);
    }
    return lb;
  }
  // The least tau at which a plan can be `depth` stages deep or less (see path_work_).
  double tau_for_depth(int depth) const { return path_work_ / (static_cast<double>(depth) * b_) * (1 - 1e-9); }
  // Any plan needs at least this many devices, whatever tau: no tau below it is feasible.
  double tau_floor() const { return work_.back() / (static_cast<double>(devices_) * b_) * (1 - 1e-9); }

 private:
  // The stage of `rg`. Prices depend on the ranges and b only, not on tau or the in-flight count,
  // so they are kept for the engine's life: a long Series is priced once, not once per downstream
  // depth and bound probe. On a miss, `fill` must bring the tracker to hold exactly the nodes of
  // `rg`; the boundary is read then, and each replica level is priced when first asked for.
  template <typename Fill>
  StageRef priced(Ranges const& rg, Fill&& fill) {
    int const levels = cost_.levels();
    // Dense rows, as runs grow one child at a time: one range by its start, then its length; two
    // ranges (a group and the run after it) by the group, then the run's length.
    std::vector<Level>* row;
    std::vector<BoundaryRows::Cell>* brow;
    int length;
    if (rg.lo2 == rg.hi2) {
      row = &single_[rg.lo1];
      brow = &boundaries_.single[rg.lo1];
      length = rg.hi1 - rg.lo1;
    } else {
      // A group's rows: one for the runs after it, one (the top bit) for the runs before it.
      uint64_t const key = static_cast<uint64_t>(static_cast<uint32_t>(rg.lo1)) << 32 | static_cast<uint32_t>(rg.hi1) |
                           (rg.lo2 < rg.lo1 ? uint64_t{1} << 63 : 0);
      if (!merged_row_ || merged_key_ != key) {
        merged_row_ = &merged_rows_[key];
        merged_brow_ = &boundaries_.merged[key];
        merged_key_ = key;
      }
      row = merged_row_;
      brow = merged_brow_;
      length = rg.hi2 - rg.lo2;
    }
    std::size_t const at = static_cast<std::size_t>(length - 1) * levels;
    if (row->size() < at + levels) row->resize(std::max(at + levels, row->size() * 3 / 2), Level{});
    std::size_t const bat = static_cast<std::size_t>(length - 1);
    if (brow->size() <= bat) brow->resize(std::max(bat + 1, brow->size() * 3 / 2));
    BoundaryRows::Cell& cell = (*brow)[bat];
    if (cell.bytes < 0) {
      // After the deadline the evaluation is dropped: skip the boundary work (a fresh one costs
      // the range's length, which on 10,000-node graphs is where the time goes).
      if (expired_) return {row->data() + at, rg, 0, 0};
      fill();
      cell = {tracker_.bytes_per_sample(), tracker_.tensors()};
      tick((rg.hi1 - rg.lo1) + (rg.hi2 - rg.lo2));
    }
    return {row->data() + at, rg, cell.bytes, cell.tensors};
  }
  StageRef priced_afresh(Ranges const& rg) {
    return priced(rg, [&] {
      tracker_.clear();
      for (int v = rg.lo1; v < rg.hi1; ++v) tracker_.add(leaves_.order[v]);
      for (int v = rg.lo2; v < rg.hi2; ++v) tracker_.add(leaves_.order[v]);
    });
  }

  Level const& level(StageRef const& s, int l) const {
    Level& lv = s.lv[l];
    if (lv.max_in_flight < 0) {
      Ranges const& rg = s.rg;
      int64_t const bytes = s.boundary_bytes;
      int const tensors = s.boundary_tensors;
      StageSums sum = cost_.sums(rg.lo1, rg.hi1, l, bytes, tensors);
      if (rg.lo2 < rg.hi2) {
        StageSums const s2 = cost_.sums(rg.lo2, rg.hi2, l, bytes, tensors);
        sum.time.fwd_s += s2.time.fwd_s;
        sum.time.bwd_input_s += s2.time.bwd_input_s;
        sum.time.bwd_weight_s += s2.time.bwd_weight_s;
        sum.weight_bytes += s2.weight_bytes;
        sum.activation_bytes_per_sample += s2.activation_bytes_per_sample;
      }
      StageCost const c = stage_cost_from_sums(p_, sum, cost_.replicas(l), b_, 1, m_);
      lv = {c.time_s / static_cast<double>(b_), cost_.max_in_flight(sum, l)};
      if (p_.allow_recompute) {
        int64_t const samples = samples_per_replica(b_, cost_.replicas(l));
        int64_t const fixed = c.weight_bytes + c.optimizer_bytes;
        int64_t const avail = p_.device_memory() - fixed - sum.activation_bytes_per_sample * samples;
        int64_t const per = bytes * samples;
        lv.max_in_flight_rc = avail < 0  ? 0
                              : per <= 0 ? std::numeric_limits<int32_t>::max()
                                         : static_cast<int>(std::min<int64_t>(avail / per, INT32_MAX));
      }
    }
    return lv;
  }

  // T_s / b of the stage with recomputation: one more forward.
  double recompute_t(StageRef const& s, int l) const {
    Ranges const& rg = s.rg;
    double fwd = cost_.fwd_s(rg.lo1, rg.hi1, l) + (rg.lo2 < rg.hi2 ? cost_.fwd_s(rg.lo2, rg.hi2, l) : 0.0);
    return s.lv[l].t + fwd / static_cast<double>(b_);
  }

  double compute(Ranges const& rg, int l) const {
    return cost_.compute_s(rg.lo1, rg.hi1, l) + (rg.lo2 < rg.hi2 ? cost_.compute_s(rg.lo2, rg.hi2, l) : 0.0);
  }

  // Fewest replicas meeting tau with `in_flight` micro-batches held; 0 if none. Levels below
  // `first` are known too slow by their compute alone (fewest_replicas noted them in tau_next).
  // Recomputation is chosen only where the stage does not fit without it (it only adds time).
  int min_replicas(StageRef const& s, int in_flight, int first = 0, double* t_out = nullptr,
                   bool* recompute_out = nullptr) {
    for (int l = first; l < cost_.levels(); ++l) {
      Level const& lv = level(s, l);
      if (lv.t > tau_) {
        tau_next_ = std::min(tau_next_, lv.t);
        continue;
      }
      bool recompute = false;
      double t = lv.t;
      if (lv.max_in_flight < in_flight) {
        if (lv.max_in_flight_rc < in_flight) continue;
        t = recompute_t(s, l);
        if (t > tau_) {
          tau_next_ = std::min(tau_next_, t);
          continue;
        }
        recompute = true;
      }
      if (t_out) *t_out = t;
      if (recompute_out) *recompute_out = recompute;
      return cost_.replicas(l);
    }
    return 0;
  }
  static int level_of(int replicas) { return std::countr_zero(static_cast<unsigned>(replicas)); }

  // The fewest replicas whose compute alone fits the ranges within tau; 0 when none does, and then
  // no larger stage does either (compute only grows with the stage).
  int fewest_replicas(Ranges const& rg) {
    int const levels = cost_.levels();
    if (monotone_ && levels > 4) {
      // Compute falls as replicas grow (every node's does): bisect for the first level that fits;
      // the largest level that does not fit has the least time of those that do not.
      double const bound = tau_ * (1 + 1e-12), b = static_cast<double>(b_);
      int lo = 0, hi = levels;
      while (lo < hi) {
        int const mid = (lo + hi) / 2;
        if (compute(rg, mid) / b <= bound)
          hi = mid;
        else
          lo = mid + 1;
      }
      if (lo > 0) tau_next_ = std::min(tau_next_, compute(rg, lo - 1) / b);
      return lo < levels ? cost_.replicas(lo) : 0;
    }
    for (int l = 0; l < levels; ++l) {
      double const t = compute(rg, l) / static_cast<double>(b_);
      // The tolerance covers summation order: stage times add the same terms in another order.
      if (t <= tau_ * (1 + 1e-12)) return cost_.replicas(l);
      tau_next_ = std::min(tau_next_, t);  // a larger tau may admit this level
    }
    return 0;
  }

  Frontier const* find(Part part, int t, int index, int q) const {
    auto it = memo_.find({t, static_cast<int>(part), index, q});
    return it == memo_.end() ? nullptr : &frontiers_[it->second];
  }
  Frontier const& stored(Part part, int t, int index, int q) const { return *find(part, t, index, q); }
  void store(Part part, int t, int index, int q, Frontier f) {
    memo_.emplace(StateKey{t, static_cast<int>(part), index, q}, static_cast<int>(frontiers_.size()));
    frontiers_.push_back(std::move(f));
    ++states_;
    tick(1);
  }
  // Work done since the last look at the clock (states, nodes added to boundaries): the deadline is
  // checked every 2^16 units, so an evaluation overshoots it by milliseconds, not seconds.
  void tick(int64_t units) {
    work_units_ += units;
    if (work_units_ < next_check_) return;
    next_check_ = work_units_ + (int64_t{1} << 16);
    if (deadline_ && Clock::now() > *deadline_) expired_ = true;
  }

 public:
  // After the deadline an evaluation unwinds with empty frontiers and expired() says so: its result
  // must then be dropped (the search reports the time limit).
  void set_deadline(std::optional<Clock::time_point> deadline) { deadline_ = deadline; }
  bool expired() const { return expired_; }

 private:
  Frontier pareto(std::vector<int> const& best) const {
    Frontier f;
    int least = std::numeric_limits<int>::max();
    for (int d = 1; d < static_cast<int>(best.size()); ++d) {
      if (best[d] < least) {
        least = best[d];
        f.push_back({d, best[d]});
      }
    }
    return f;
  }

  // best[depth] = fewest devices; `best` starts with depth_table()'s size and grows if needed.
  void consider(std::vector<int>& best, int depth, int devices, int budget) const {
    if (depth > devices_ || devices > budget) return;
    if (depth >= static_cast<int>(best.size())) best.resize(depth + 1, std::numeric_limits<int>::max());
    if (devices < best[depth]) best[depth] = devices;
  }
  // A piece's own depth is at most its stage count, so at most its leaves: sizing `best` by that
  // instead of by the cluster keeps a state O(piece), not O(devices), at 1,024 devices.
  std::vector<int> depth_table(int t) const {
    return std::vector<int>(std::min(devices_, hi_of(t) - lo_of(t)) + 1, std::numeric_limits<int>::max());
  }

  // Lower bound on the devices any plan gives to the nodes at positions [lo, hi).
  int need(int lo, int hi) { return lo >= hi ? 0 : need_for(work_[hi] - work_[lo]); }
  // Lower bound on the devices of stages holding `work` device-seconds. Pruning with it keeps the
  // evaluation constant only up to the tau where it drops: that tau joins tau_next.
  int need_for(double work) {
    if (std::isinf(tau_)) return 1;
    work = std::max(0.0, work) * (1 - 1e-9);
    double const w = work / (tau_ * static_cast<double>(b_));
    int const c = w >= devices_ + 1 ? devices_ + 1 : std::max(1, static_cast<int>(std::ceil(w)));
    if (c > 1) tau_next_ = std::min(tau_next_, std::nextafter(work / ((c - 1) * static_cast<double>(b_)), HUGE_VAL));
    return c;
  }
  // Devices a piece at [lo, hi) may use: the rest of the graph needs its share. The rest is priced
  // as one set, since a merged stage can hold nodes on both sides of the piece.
  int budget(int lo, int hi) {
    int const n = static_cast<int>(leaves_.order.size());
    if (lo <= 0 && hi >= n) return devices_;
    return devices_ - std::min(devices_, need_for((work_[lo] - work_[0]) + (work_[n] - work_[hi])));
  }

  int lo_of(int t) const { return leaves_.range[t].first; }
  int hi_of(int t) const { return leaves_.range[t].second; }

  Frontier node_frontier(int t, int q) {
    if (expired_) return {};
    if (Frontier const* f = find(Part::kNode, t, -1, q)) return *f;
    SpNode const& n = tree_.nodes[t];
    if (n.kind == SpKind::kSeries) {
      series(t, q);
    } else if (n.kind == SpKind::kParallel) {
      parallel_prefix(t, q);
    } else {
      std::vector<int> best = depth_table(t);
      if (int r = min_replicas(priced_afresh({lo_of(t), hi_of(t), hi_of(t), hi_of(t)}), q + 1))
        consider(best, 1, r, budget(lo_of(t), hi_of(t)));
      store(Part::kNode, t, -1, q, pareto(best));
    }
    return stored(Part::kNode, t, -1, q);
  }

  // A Parallel node's children side by side at downstream depth q, as consecutive groups: a group
  // of one child is that child's own frontier, a group of several is one stage. Stores the prefix
  // frontiers [0, c) for c = 1..k and the node's frontier (c = k, which includes all children as one
  // stage).
  void parallel_prefix(int t, int q) {
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    std::vector<Frontier> child(k);
    for (int c = 0; c < k; ++c) child[c] = node_frontier(n.children[c], q);
    std::vector<Frontier> prefix(k + 1);
    prefix[0] = {{0, 0}};
    for (int c = 1; c <= k; ++c) {
      std::vector<int> best = depth_table(t);
      int const hi = hi_of(n.children[c - 1]);
      int const cap = budget(lo_of(t), hi);
      for (Point a : prefix[c - 1]) {
        for (Point x : child[c - 1]) consider(best, std::max(a.depth, x.depth), a.devices + x.devices, cap);
      }
      tracker_.clear();
      int tracked = hi;  // the tracker holds [tracked, hi); it catches up only on a price miss
      for (int a = c - 2; a >= 0; --a) {
        int const lo = lo_of(n.children[a]);
        Ranges const rg{lo, hi, hi, hi};
        int const fewest = fewest_replicas(rg);
        if (fewest == 0 || fewest > cap) break;  // larger groups only need more
        if (prefix[a].empty() || fewest + prefix[a].back().devices > cap) continue;
        StageRef const lv = priced(rg, [&] {
          for (int v = lo; v < tracked; ++v) tracker_.add(leaves_.order[v]);
          tracked = lo;
        });
        if (int r = min_replicas(lv, q + 1, level_of(fewest))) {
          for (Point pa : prefix[a]) consider(best, std::max(pa.depth, 1), pa.devices + r, cap);
        }
      }
      prefix[c] = pareto(best);
      if (c < k) store(Part::kParallelPrefix, t, c, q, prefix[c]);
    }
    store(Part::kParallelPrefix, t, k, q, prefix[k]);
    store(Part::kNode, t, -1, q, prefix[k]);
  }

  // The suffix frontiers [c, k) of a Parallel node's children (c = k - 1..1), as parallel_prefix.
  void parallel_suffix(int t, int q) {
    if (find(Part::kParallelSuffix, t, 1, q)) return;
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    std::vector<Frontier> child(k);
    for (int c = 1; c < k; ++c) child[c] = node_frontier(n.children[c], q);
    std::vector<Frontier> suffix(k + 1);
    suffix[k] = {{0, 0}};
    for (int c = k - 1; c >= 1; --c) {
      std::vector<int> best = depth_table(t);
      int const lo = lo_of(n.children[c]);
      int const cap = budget(lo, hi_of(t));
      for (Point a : suffix[c + 1]) {
        for (Point x : child[c]) consider(best, std::max(a.depth, x.depth), a.devices + x.devices, cap);
      }
      tracker_.clear();
      int tracked = lo;  // the tracker holds [lo, tracked)
      for (int e = c + 2; e <= k; ++e) {
        int const hi = hi_of(n.children[e - 1]);
        Ranges const rg{lo, hi, hi, hi};
        int const fewest = fewest_replicas(rg);
        if (fewest == 0 || fewest > cap) break;
        if (suffix[e].empty() || fewest + suffix[e].back().devices > cap) continue;
        StageRef const lv = priced(rg, [&] {
          for (; tracked < hi; ++tracked) tracker_.add(leaves_.order[tracked]);
        });
        if (int r = min_replicas(lv, q + 1, level_of(fewest))) {
          for (Point pe : suffix[e]) consider(best, std::max(pe.depth, 1), pe.devices + r, cap);
        }
      }
      suffix[c] = pareto(best);
      store(Part::kParallelSuffix, t, c, q, suffix[c]);
    }
  }

  // Suffix frontiers of a Series node's children for downstream depth q; stores (t, i, q) for every
  // suffix start i and the node's frontier (i = 0).
  void series(int t, int q) {
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    std::vector<Frontier> suffix(k + 1);
    suffix[k] = {{0, 0}};
    for (int i = k - 1; i >= 0; --i) {
      std::vector<int> best = depth_table(t);
      int const lo = lo_of(n.children[i]);
      int const cap = budget(lo, hi_of(t));
      int const child = n.children[i];
      if (tree_.nodes[child].kind == SpKind::kParallel && i + 1 < k) merged(t, i, q, suffix, cap, best, nullptr);
      forked(t, i, q, suffix, cap, best, nullptr);
      tracker_.clear();
      int tracked = lo;  // the tracker holds [lo, tracked); it catches up only when a run is priced
      for (int j = i; j < k; ++j) {
        int const chi = hi_of(n.children[j]);
        Ranges const rg{lo, chi, chi, chi};
        int const fewest = fewest_replicas(rg);
        if (fewest == 0 || fewest > cap) break;  // fewest only grows with the run
        if (suffix[j + 1].empty() || fewest + suffix[j + 1].back().devices > cap) continue;
        StageRef const lv = priced(rg, [&] {
          for (; tracked < chi; ++tracked) tracker_.add(leaves_.order[tracked]);
        });
        for (Point rest : suffix[j + 1]) {
          int const r = min_replicas(lv, q + rest.depth + 1, level_of(fewest));
          if (r == 0) break;  // later points hold more in flight: they fail too
          consider(best, rest.depth + 1, rest.devices + r, cap);
        }
      }
      if (tree_.nodes[child].kind != SpKind::kLeaf) {
        int const child_need = need(lo_of(child), hi_of(child));
        for (Point rest : suffix[i + 1]) {
          if (q + rest.depth >= devices_) break;
          if (rest.devices + child_need > cap) continue;
          Frontier const inner = node_frontier(child, q + rest.depth);
          for (Point c : inner) consider(best, rest.depth + c.depth, rest.devices + c.devices, cap);
        }
      }
      suffix[i] = pareto(best);
      store(Part::kSeriesSuffix, t, i, q, suffix[i]);
    }
    store(Part::kNode, t, -1, q, suffix[0]);
  }

  // Around a merged group [a, c) of Parallel node par's children, the others are partitioned as the
  // prefix [0, a) and the suffix [c, k) of its children at downstream depth qq: search_outside
  // computes them (before the tracker is used for the group), outside reads them (the empty frontier
  // at the ends; null where the search has none).
  void search_outside(int par, int qq) {
    node_frontier(par, qq);
    parallel_suffix(par, qq);
  }
  std::pair<Frontier const*, Frontier const*> outside(int par, int a, int c, int qq) const {
    int const k = static_cast<int>(tree_.nodes[par].children.size());
    return {a == 0 ? &kEmpty : find(Part::kParallelPrefix, par, a, qq),
            c == k ? &kEmpty : find(Part::kParallelSuffix, par, c, qq)};
  }

  // A stage made of a group [a, c) of the children of the Parallel child i of Series t, together
  // with the Series run i+1..j right after it (where the branches join), other than the whole
  // Parallel node (a plain run). The Parallel node's other children are partitioned beside it,
  // feeding it. In search mode (`target` null) every candidate goes into `best`; in rebuild mode the
  // first candidate equal to `target` is emitted with its parts and true is returned.
  bool merged(int t, int i, int q, std::vector<Frontier> const& suffix, int cap, std::vector<int>& best,
              Point const* target) {
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    int const par = n.children[i];
    SpNode const& pn = tree_.nodes[par];
    int const groups = static_cast<int>(pn.children.size());
    int const run_lo = hi_of(par);
    // The other children sit at downstream depth q' = q + rest.depth + 1: their frontiers first, as
    // computing them reuses the tracker.
    std::vector<int> qs;
    for (int j = i + 1; j < k; ++j) {
      for (Point rest : suffix[j + 1]) {
        if (q + rest.depth + 1 < devices_) qs.push_back(q + rest.depth + 1);
      }
    }
    std::sort(qs.begin(), qs.end());
    qs.erase(std::unique(qs.begin(), qs.end()), qs.end());
    for (int qq : qs) {
      search_outside(par, qq);
    }
    for (int a = 0; a < groups; ++a) {
      for (int c = a + 1; c <= groups; ++c) {
        if (a == 0 && c == groups) break;  // the whole node: a plain run
        int const glo = lo_of(pn.children[a]), ghi = hi_of(pn.children[c - 1]);
        if (fewest_replicas({glo, ghi, ghi, ghi}) == 0) break;  // larger groups only need more
        tracker_.clear();
        int tracked = -1;  // the tracker holds the group and the run [run_lo, tracked); -1: nothing
        for (int j = i + 1; j < k; ++j) {
          int const run_hi = hi_of(n.children[j]);
          Ranges const rg{glo, ghi, run_lo, run_hi};
          int const fewest = fewest_replicas(rg);
          if (fewest == 0 || fewest > cap) break;
          if (suffix[j + 1].empty()) continue;
          StageRef const lv = priced(rg, [&] {
            if (tracked < 0) {
              for (int v = glo; v < ghi; ++v) tracker_.add(leaves_.order[v]);
              tracked = run_lo;
            }
            for (; tracked < run_hi; ++tracked) tracker_.add(leaves_.order[tracked]);
          });
          for (Point rest : suffix[j + 1]) {
            int const r = min_replicas(lv, q + rest.depth + 1, level_of(fewest));
            if (r == 0) break;
            int const qq = q + rest.depth + 1;
            if (qq >= devices_) break;
            auto const [pre, suf] = outside(par, a, c, qq);
            if (!pre || !suf) continue;
            for (Point x : *pre) {
              for (Point y : *suf) {
                int const depth = rest.depth + 1 + std::max(x.depth, y.depth);
                int const used = rest.devices + r + x.devices + y.devices;
                if (!target) {
                  consider(best, depth, used, cap);
                } else if (depth == target->depth && used == target->devices) {
                  emit(lv, q + rest.depth + 1);
                  if (a > 0) rebuild_parallel(Part::kParallelPrefix, par, a, qq, x);
                  if (c < groups) rebuild_parallel(Part::kParallelSuffix, par, c, qq, y);
                  if (j + 1 < k) rebuild_series(t, j + 1, q, rest);
                  return true;
                }
              }
            }
          }
        }
      }
    }
    return false;
  }

  // A stage made of the Series run i..j of t together with a group [a, c) of the children of the
  // Parallel child j + 1 right after the run (where the branches fork), other than the whole
  // Parallel node (a plain run). The Parallel node's other children are partitioned beside the
  // group, fed by the stage, and feed what follows the Parallel node, as the group does. Modes as
  // in merged.
  bool forked(int t, int i, int q, std::vector<Frontier> const& suffix, int cap, std::vector<int>& best,
              Point const* target) {
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    int const run_lo = lo_of(n.children[i]);
    auto const& pars = parallel_children_[t];
    for (auto it = std::upper_bound(pars.begin(), pars.end(), i); it != pars.end(); ++it) {
      int const j = *it - 1;  // the run i..j, then the Parallel child j + 1
      int const par = n.children[j + 1];
      SpNode const& pn = tree_.nodes[par];
      int const groups = static_cast<int>(pn.children.size());
      int const run_hi = lo_of(par);
      int const run_fewest = fewest_replicas({run_lo, run_hi, run_hi, run_hi});
      if (run_fewest == 0 || run_fewest > cap) break;  // the run alone is too big: so are longer ones
      Frontier const& after = suffix[j + 2];
      // The other children sit at downstream depth q + rest.depth: their frontiers first.
      for (Point rest : after) {
        int const qq = q + rest.depth;
        if (qq >= devices_) break;
        search_outside(par, qq);
      }
      for (int a = 0; a < groups; ++a) {
        for (int c = a + 1; c <= groups; ++c) {
          if (a == 0 && c == groups) break;  // the whole node: a plain run
          int const glo = lo_of(pn.children[a]), ghi = hi_of(pn.children[c - 1]);
          Ranges const rg{glo, ghi, run_lo, run_hi};
          int const fewest = fewest_replicas(rg);
          if (fewest == 0 || fewest > cap) break;  // larger groups only need more
          StageRef const lv = priced_afresh(rg);
          for (Point rest : after) {
            int const qq = q + rest.depth;
            if (qq >= devices_) break;
            auto const [pre, suf] = outside(par, a, c, qq);
            if (!pre || !suf) continue;
            for (Point x : *pre) {
              for (Point y : *suf) {
                int const inner = std::max(x.depth, y.depth);
                int const r = min_replicas(lv, qq + inner + 1, level_of(fewest));
                if (r == 0) continue;
                int const depth = rest.depth + inner + 1;
                int const used = rest.devices + r + x.devices + y.devices;
                if (!target) {
                  consider(best, depth, used, cap);
                } else if (depth == target->depth && used == target->devices) {
                  emit(lv, qq + inner + 1);
                  if (a > 0) rebuild_parallel(Part::kParallelPrefix, par, a, qq, x);
                  if (c < groups) rebuild_parallel(Part::kParallelSuffix, par, c, qq, y);
                  if (j + 2 < k) rebuild_series(t, j + 2, q, rest);
                  return true;
                }
              }
            }
          }
        }
      }
    }
    return false;
  }

  void emit(StageRef const& s, int in_flight) {
    double t = 0;
    bool recompute = false;
    int const r = min_replicas(s, in_flight, 0, &t, &recompute);
    chosen_.push_back({s.rg, r, t, recompute});
  }

  void rebuild_node(int t, int q, Point target) {
    SpNode const& n = tree_.nodes[t];
    if (n.kind == SpKind::kSeries) return rebuild_series(t, 0, q, target);
    if (n.kind == SpKind::kParallel)
      return rebuild_parallel(Part::kParallelPrefix, t, static_cast<int>(n.children.size()), q, target);
    emit(priced_afresh({lo_of(t), hi_of(t), hi_of(t), hi_of(t)}), q + 1);
  }

  // The children [0, index) (prefix) or [index, k) (suffix) of Parallel node t as stored.
  void rebuild_parallel(Part part, int t, int index, int q, Point target) {
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    bool const prefix = part == Part::kParallelPrefix;
    if (prefix ? index == 0 : index == k) return;
    // The group next to the boundary: children [a, index) (prefix) or [index, e) (suffix).
    int const edge_child = prefix ? index - 1 : index;
    auto rest_of = [&](int boundary) -> Frontier {
      if (prefix ? boundary == 0 : boundary == k) return kEmpty;
      Frontier const* f = find(part, t, boundary, q);
      return f ? *f : Frontier{};
    };
    // One child, partitioned on its own.
    {
      Frontier const rest = rest_of(prefix ? index - 1 : index + 1);
      Frontier const* own = find(Part::kNode, n.children[edge_child], -1, q);
      if (own) {
        for (Point x : rest) {
          for (Point y : *own) {
            if (std::max(x.depth, y.depth) == target.depth && x.devices + y.devices == target.devices) {
              rebuild_parallel(part, t, prefix ? index - 1 : index + 1, q, x);
              rebuild_node(n.children[edge_child], q, y);
              return;
            }
          }
        }
      }
    }
    // Several children as one stage.
    for (int other = prefix ? index - 2 : index + 2; prefix ? other >= 0 : other <= k; other += prefix ? -1 : 1) {
      int const lo = lo_of(n.children[prefix ? other : index]);
      int const hi = hi_of(n.children[prefix ? index - 1 : other - 1]);
      Ranges const rg{lo, hi, hi, hi};
      if (fewest_replicas(rg) == 0) break;
      StageRef const lv = priced_afresh(rg);
      int const r = min_replicas(lv, q + 1);
      if (r == 0) continue;
      for (Point x : rest_of(other)) {
        if (std::max(x.depth, 1) == target.depth && x.devices + r == target.devices) {
          emit(lv, q + 1);
          rebuild_parallel(part, t, other, q, x);
          return;
        }
      }
    }
  }

  void rebuild_series(int t, int i, int q, Point target) {
    SpNode const& n = tree_.nodes[t];
    int const k = static_cast<int>(n.children.size());
    std::vector<Frontier> suffix(k + 1);
    suffix[k] = kEmpty;
    for (int j = i + 1; j < k; ++j) {
      Frontier const* f = find(Part::kSeriesSuffix, t, j, q);
      if (f) suffix[j] = *f;
    }
    int const lo = lo_of(n.children[i]);
    tracker_.clear();
    int tracked = lo;  // the tracker holds [lo, tracked)
    for (int j = i; j < k; ++j) {
      int const chi = hi_of(n.children[j]);
      Ranges const rg{lo, chi, chi, chi};
      if (fewest_replicas(rg) == 0) break;
      StageRef const lv = priced(rg, [&] {
        for (; tracked < chi; ++tracked) tracker_.add(leaves_.order[tracked]);
      });
      for (Point rest : suffix[j + 1]) {
        int const r = min_replicas(lv, q + rest.depth + 1);
        if (r == 0) break;
        if (rest.depth + 1 == target.depth && rest.devices + r == target.devices) {
          emit(lv, q + rest.depth + 1);
          if (j + 1 < k) rebuild_series(t, j + 1, q, rest);
          return;
        }
      }
    }
    int const child = n.children[i];
    for (Point rest : suffix[i + 1]) {
      if (q + rest.depth >= devices_) break;
      Frontier const* inner = find(Part::kNode, child, -1, q + rest.depth);
      if (!inner) continue;  // the search never needed this state
      for (Point c : Frontier(*inner)) {
        if (rest.depth + c.depth == target.depth && rest.devices + c.devices == target.devices) {
          rebuild_node(child, q + rest.depth, c);
          if (i + 1 < k) rebuild_series(t, i + 1, q, rest);
          return;
        }
      }
    }
    std::vector<int> unused;
    if (tree_.nodes[child].kind == SpKind::kParallel && i + 1 < k && merged(t, i, q, suffix, devices_, unused, &target))
      return;
    forked(t, i, q, suffix, devices_, unused, &target);
  }

  static inline Frontier const kEmpty{{0, 0}};

  Problem const& p_;
  SpTree const& tree_;
  LeafOrder const& leaves_;
  int64_t b_, m_;
  int devices_;
  RangeCost cost_;
  BoundaryTracker tracker_;
  // Stage prices for the engine's life (see priced): single ranges by start, then length.
  std::vector<std::vector<Level>> single_;
  std::unordered_map<uint64_t, std::vector<Level>> merged_rows_;  // node-based: rows stay put
  std::vector<Level>* merged_row_ = nullptr;                      // the last row looked up
  std::vector<BoundaryRows::Cell>* merged_brow_ = nullptr;
  BoundaryRows& boundaries_;
  uint64_t merged_key_ = 0;
  std::vector<double> work_;                         // prefix over positions of per-node device-seconds
  double path_work_ = 0;                             // longest path of per-node least per-replica times
  std::vector<std::vector<int>> parallel_children_;  // per Series node: its Parallel children's indices
  double tau_ = 0, tau_next_ = 0;
  std::unordered_map<StateKey, int, StateKeyHash> memo_;
  std::deque<Frontier> frontiers_;  // a deque: references stay valid as states are added
  std::vector<ChosenStage> chosen_;
  int64_t states_ = 0;
  std::optional<Clock::time_point> deadline_;
  bool monotone_ = true;                     // every node's compute falls (or stays) as replicas grow
  int64_t work_units_ = 0, next_check_ = 0;  // tick(): work done, and when to look at the clock next
  bool expired_ = false;
};

std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g%s", s >= 1 ? s : s * 1e3, s >= 1 ? "s" : "ms");
  return buf;
}

std::string bytes_text(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g GiB", static_cast<double>(bytes) / static_cast<double>(1LL << 30));
  return buf;
}

// The best plan over all the trees searched so far, shared by the searches so that each prunes
// against the plans the others found.
struct Incumbent {
  std::optional<Plan> best;
  double best_tau = 0;
  int64_t states = 0;
  double slack = 1;              // prune against best * slack (> 1 when candidates are judged later)
  std::vector<Plan> candidates;  // every plan assembled within the slack (when judged later)
  double bound() const { return best ? best->step_time_s * slack : std::numeric_limits<double>::infinity(); }
  void offer(Plan plan, double tau) {
    if (slack > 1 && plan.step_time_s <= bound()) candidates.push_back(plan);
    if (!best || plan.step_time_s < best->step_time_s ||
        (plan.step_time_s == best->step_time_s && plan.micro_batch < best->micro_batch)) {
      best = std::move(plan);
      best_tau = tau;
    }
  }
};

// Searches one tree. `chain` non-empty (the order's name): the tree is a Series of single nodes in
// a topological order that is not a chain of the graph's own edges (chain_tree); its stages are priced as the
// sequential planners price a chain (stage i of k holds k - i micro-batches), which is exactly the depth the DP counts
// on a Series node, and the plan found is then re-priced as the graph of the same stages (never deeper, so never slower
// and never more memory).
Status search_tree(Problem const& p, SpTree const& tree, std::string const& chain, PlannerOptions const& options,
                   Clock::time_point start, Incumbent& inc) {
  int const n = static_cast<int>(p.nodes.size());
  LeafOrder const leaves = leaf_order(tree);
  if (static_cast<int>(leaves.order.size()) != n)
    return internal_error("plan_gpp: the SP tree has " + std::to_string(leaves.order.size()) + " leaves for " +
                          std::to_string(n) + " nodes");
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::optional<Plan>& best = inc.best;
  int64_t& states = inc.states;
  // Every plan at micro-batch b takes at least (m + d_min - 1) * b * tau_floor per step: search the
  // most promising b first and skip those whose floor cannot beat the best plan found. A model whose
  // weights and optimizer state do not fit one device needs two stages, and on a connected graph
  // two stages are at least two deep (an SP tree with one root child would be a single node).
  std::vector<int64_t> const sizes = p.micro_batch_sizes();
  std::vector<std::unique_ptr<Engine>> engines;
  BoundaryRows boundaries;
  std::vector<double> floors;
  std::vector<std::size_t> order;
  auto check_time = [&]() -> Status {
    if (options.time_limit_s > 0 && elapsed() > options.time_limit_s) {
      return timeout_error("gpp: search exceeded the time limit of " + std::to_string(options.time_limit_s) +
                           " s; raise --time-limit or use fewer micro-batch candidates");
    }
    return Status::ok();
  };
  std::optional<Clock::time_point> deadline;
  if (options.time_limit_s > 0)
    deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.time_limit_s));
  for (int64_t b : sizes) {
    RETURN_IF_ERROR(check_time());
    engines.push_back(std::make_unique<Engine>(p, tree, leaves, b, boundaries));
    engines.back()->set_deadline(deadline);
    floors.push_back(std::max(engines.back()->lower_bound(), engines.back()->tau_floor()));
    order.push_back(order.size());
  }
  // A plan of DP depth d at bound tau takes at least (m + d - 1) * tau * b per step. Ordering edges
  // can make the true depth smaller than the DP's, so there only depth 1 is assumed.
  bool const exact_depth = !chain.empty() || tree.added_edges.empty();
  int64_t model_bytes = 0;
  for (Node const& node : p.nodes) model_bytes += node.weight_bytes;
  model_bytes +=
      static_cast<int64_t>(std::llround(p.optimizer_bytes_per_weight_byte * static_cast<double>(model_bytes)));
  bool const connected = tree.nodes[tree.root].kind != SpKind::kParallel;
  int const d_min = exact_depth && connected && model_bytes > p.device_memory() ? 2 : 1;
  // A plan of true depth d at micro-batch b has tau >= the floor and tau >= path / (d * b) (the
  // longest path's work is split among at most d stages on it), so its step is at least
  // (m + d - 1) * b * max(floor, path / (d * b)); the least of that over d bounds every plan.
  std::vector<double> step_floors(sizes.size());
  for (std::size_t bi = 0; bi < sizes.size(); ++bi) {
    double const m = static_cast<double>(p.batch / sizes[bi]), b = static_cast<double>(sizes[bi]);
    double least = std::numeric_limits<double>::infinity();
    for (int d = d_min; d <= std::max(d_min, p.cluster.size()); ++d) {
      double const tau = std::max(floors[bi], engines[bi]->tau_for_depth(d));
      least = std::min(least, (m + d - 1) * b * tau);
      if ((m + d - 1) * b * floors[bi] >= least) break;  // larger d only grow the first term
    }
    step_floors[bi] = least;
  }
  auto step_floor = [&](std::size_t bi) { return step_floors[bi]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t c) { return step_floor(a) < step_floor(c); });
  auto beats_best = [&](double tau, int64_t b, int depth) {
    double const d = exact_depth ? depth : 1;
    return !best ||
           (static_cast<double>(p.batch / b) + d - 1) * tau * static_cast<double>(b) <= inc.bound() * (1 + 1e-9);
  };
  for (std::size_t bi : order) {
    int64_t const b = sizes[bi];
    Engine& engine = *engines[bi];
    if (best && step_floor(bi) > inc.bound() * (1 + 1e-9)) continue;  // no plan at this b can win
    // D(tau), the least DP depth of a plan meeting tau, only falls as tau grows; the best step at
    // this b is min over depths d of (m + d - 1) * b * tau_d with tau_d the least tau reaching
    // depth <= d. So search tau_d for target = every depth (tau_min), then for one less than the
    // depth found each time, while some depth can still beat the best plan from tau_d's lower end.
    int target = p.cluster.size();
    double lo = floors[bi];
    double hi = std::numeric_limits<double>::infinity();
    std::optional<Engine::Eval> found;  // depth <= target, tau_used == hi
    int grow = 0;
    bool below_hi = false;  // probe just below hi next: the plan found there is often the least
    // Every evaluation so far: its depth holds on [tau_used, tau_next) (a smaller tau only removes
    // options, and the plan found still meets it), and an infeasible or deeper result holds below
    // tau_next. A new target starts from the bounds they already give, not from scratch.
    std::vector<Engine::Eval> history;
    auto restart = [&] {
      found.reset();
      hi = std::numeric_limits<double>::infinity();
      grow = 1;
      for (Engine::Eval const& e : history) {
        if (e.feasible && e.depth <= target && e.tau_used < hi) {
          hi = e.tau_used;
          found = e;
        }
      }
      for (Engine::Eval const& e : history) {
        if (!(e.feasible && e.depth <= target)) lo = std::max(lo, std::min(e.tau_next, hi));
      }
      below_hi = found.has_value();
    };
    int evaluations = 0;
    auto const b_start = Clock::now();
    for (int iter = 0; iter < 2000; ++iter) {
      RETURN_IF_ERROR(check_time());
      while (target >= d_min && !beats_best(std::max(lo, engine.tau_for_depth(target)), b, target)) --target;
      if (target < d_min || (!exact_depth && !beats_best(lo, b, 1))) break;
      if (found && found->depth > target) restart();
      if (!found || lo < hi) {
        double tau;
        if (std::isinf(hi) && best) {
          // The largest tau at which a plan of depth `target` still beats the best plan: one probe
          // there either starts the bisection or shows the target hopeless (lo moves past the cap).
          double const d = exact_depth ? target : 1;
          tau = inc.bound() * (1 + 1e-9) / ((static_cast<double>(p.batch / b) + d - 1) * static_cast<double>(b));
          tau = std::max(tau, lo);
        } else if (std::isinf(hi)) {
          // Grow from the lower end until feasible (cheap while tau is small): small steps first, as
          // evaluations far above the optimum prune little and cost the most.
          double const factor = grow == 0 ? 1.0 : grow < 4 ? 1.1 : 4.0;
          tau = grow < 16 ? std::max(lo, 1e-300) * factor : std::numeric_limits<double>::infinity();
          ++grow;
        } else if (below_hi) {
          // One probe below the plan just found either ends the search (lo jumps to hi) or finds a
          // plan at a smaller tau; bisection takes many probes to close the last gap.
          tau = std::max(lo, std::nextafter(hi, 0.0));
        } else {
          tau = lo + (hi - lo) / 2;
          if (!(tau < hi)) tau = lo;
        }
        bool const probed_below = below_hi;
        below_hi = false;
        Engine::Eval ev = engine.evaluate(tau);
        ++evaluations;
        if (engine.expired()) RETURN_IF_ERROR(check_time());
        if (!std::isinf(tau)) history.push_back(ev);
        if (ev.feasible && ev.depth <= target) {
          hi = ev.tau_used;
          found = std::move(ev);
          below_hi = !probed_below;
        } else if (std::isinf(tau)) {
          break;
        } else {
          lo = std::min(ev.tau_next, hi);
        }
        if (!found || lo < hi) continue;
      }
      // found is the shallowest plan at the least tau reaching its depth: price it, then look for
      // a shallower plan at a larger tau.
      std::vector<ChosenStage> chosen = found->stages;
      std::sort(chosen.begin(), chosen.end(),
                [](ChosenStage const& x, ChosenStage const& y) { return x.ranges.lo1 < y.ranges.lo1; });
      std::vector<StageAssignment> stages;
      for (ChosenStage const& s : chosen) {
        StageAssignment a;
        a.replicas = s.replicas;
        a.recompute = s.recompute;
        for (int i = s.ranges.lo1; i < s.ranges.hi1; ++i) a.nodes.push_back(leaves.order[i]);
        for (int i = s.ranges.lo2; i < s.ranges.hi2; ++i) a.nodes.push_back(leaves.order[i]);
        stages.push_back(std::move(a));
      }
      Plan plan;
      if (!chain.empty()) {
        ASSIGN_OR_RETURN(plan, assemble_plan(p, stages, b, "gpp", StageGraphShape::kChain));
        ASSIGN_OR_RETURN(Plan graph, assemble_plan(p, std::move(stages), b, "gpp"));
        if (graph.step_time_s <= plan.step_time_s) plan = std::move(graph);
        plan.notes = "a chain of contiguous ranges of the " + chain;
      } else {
        ASSIGN_OR_RETURN(plan, assemble_plan(p, std::move(stages), b, "gpp"));
      }
      if (options.progress) {
        options.progress("gpp: b=" + std::to_string(b) + " tau=" + seconds_text(hi) +
                         "/sample depth=" + std::to_string(plan.depth) + " step=" + seconds_text(plan.step_time_s) +
                         " states=" + std::to_string(states + engine.states()));
      }
      inc.offer(std::move(plan), hi);
      target = found->depth - 1;  // the loop's head lowers it further while it cannot win
      restart();
    }
    states += engine.states();
    double const b_seconds = std::chrono::duration<double>(Clock::now() - b_start).count();
    if (options.progress && b_seconds > 0.1)
      options.progress("gpp: b=" + std::to_string(b) + ": " + std::to_string(evaluations) + " evaluations, " +
                       std::to_string(engine.states()) + " states, " + seconds_text(b_seconds));
    engine.release();
  }
  if (options.progress && elapsed() > 0.2)  // long searches only: a failing short one prints one error line
    options.progress("gpp: searched the " + (chain.empty() ? std::string("SP tree") : "chain of the " + chain) + " (" +
                     std::to_string(n) + " nodes) by " + seconds_text(elapsed()));
  return Status::ok();
}

Result<Plan> finish(Problem const& p, Incumbent& inc, Clock::time_point start) {
  int const n = static_cast<int>(p.nodes.size());
  std::optional<Plan>& best = inc.best;
  if (!best) {
    int64_t need = 0;
    std::string node;
    for (int v = 0; v < n; ++v) {
      Node const& nd = p.nodes[v];
      int64_t const bytes = nd.weight_bytes +
                            static_cast<int64_t>(std::llround(p.optimizer_bytes_per_weight_byte * nd.weight_bytes)) +
                            nd.activation_bytes_per_sample;
      if (bytes > need) {
        need = bytes;
        node = nd.name;
      }
    }
    std::string msg = "gpp: no plan fits " + std::to_string(p.cluster.size()) + " devices of " +
                      bytes_text(p.device_memory()) + " at any micro-batch size";
    if (need > p.device_memory()) {
      msg += "; node '" + node + "' alone needs " + bytes_text(need) + " per device (weights, optimizer state and " +
             "one sample's activations): use devices with more memory";
    } else {
      msg += "; use more devices, devices with more memory, or smaller micro-batches";
    }
    return infeasible(msg);
  }
  best->tau_s = inc.best_tau;
  best->states_explored = inc.states;
  best->search_time_s = std::chrono::duration<double>(Clock::now() - start).count();
  return std::move(*best);
}

Status check_problem(Problem const& p) {
  if (static_cast<int>(p.out_edges.size()) != static_cast<int>(p.nodes.size()))
    return internal_error("plan_gpp: Problem::finalize() was not called");
  if (p.cluster.size() <= 0) return invalid_argument("plan_gpp: the cluster has no devices");
  // Every weight and its optimizer state live on some device: a bound that needs no search (a
  // 10,000-node graph far too large for the cluster took a minute of search to be refused).
  double static_bytes = 0, memory = 0;
  for (Node const& node : p.nodes) static_bytes += (1.0 + p.optimizer_bytes_per_weight_byte) * node.weight_bytes;
  for (Device const& d : p.cluster.devices) memory += static_cast<double>(d.memory_bytes);
  if (static_bytes > memory)
    return infeasible("gpp: no plan fits in memory: " + infeasibility_hint(p) +
                      "; use more devices, or devices with more memory");
  return Status::ok();
}

// True when the tree is one Series of leaves over the graph's own edges: its pieces are then
// already every chain of contiguous ranges, and no chain tree adds anything.
bool is_plain_chain(SpTree const& tree) {
  if (!tree.added_edges.empty()) return false;
  SpNode const& root = tree.nodes[tree.root];
  if (root.kind == SpKind::kLeaf) return true;
  if (root.kind != SpKind::kSeries) return false;
  for (int c : root.children)
    if (tree.nodes[c].kind != SpKind::kLeaf) return false;
  return true;
}

// Judges up to options.evaluate_candidates of the plans found (best formula first, duplicates
// dropped) with options.evaluate and makes the one judged fastest the best.
Status judge(Problem const& p, PlannerOptions const& options, Incumbent& inc) {
  std::vector<Plan>& cands = inc.candidates;
  std::stable_sort(cands.begin(), cands.end(),
                   [](Plan const& a, Plan const& b) { return a.step_time_s < b.step_time_s; });
  std::set<std::string> seen;
  std::optional<Plan> best;
  double best_rate = -1;
  int judged = 0;
  std::string why;
  for (Plan& plan : cands) {
    if (judged >= options.evaluate_candidates) break;
    std::string key = std::to_string(plan.micro_batch);
    for (PlanStage const& st : plan.stages) {
      key += "|" + std::to_string(st.replicas);
      for (std::string const& v : st.nodes) key += "," + v;
    }
    if (!seen.insert(key).second) continue;
    ++judged;
    Result<double> rate = options.evaluate(plan);
    if (!rate.is_ok()) {
      if (why.empty()) why = rate.status().message();
      continue;
    }
    if (*rate > best_rate) {
      best_rate = *rate;
      best = std::move(plan);
    }
  }
  if (options.progress && judged > 0)
    options.progress("gpp: judged " + std::to_string(judged) + " candidate plans" +
                     (best ? "" : " and none could be scheduled: " + why));
  if (!best) return Status::ok();  // keep the formula's best; its own scheduling reports the problem
  char buf[160];
  std::snprintf(buf, sizeof buf, "judged fastest of %d candidates: %.1f samples/s (formula %.1f)", judged, best_rate,
                best->samples_per_s);
  best->notes = best->notes.empty() ? buf : best->notes + "; " + buf;
  best->samples_per_s = best_rate;
  best->step_time_s = best_rate > 0 ? static_cast<double>(p.batch) / best_rate : best->step_time_s;
  inc.best_tau = best->time_per_sample_s;
  inc.best = std::move(best);
  return Status::ok();
}

// The stages of `chain` (a plan with chain depths) priced as the graph of the same stages: never
// deeper, so never slower and never more memory.
Result<Plan> regraph(Problem const& p, Plan const& chain) {
  std::unordered_map<std::string, int> id;
  for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) id.emplace(p.nodes[v].name, v);
  std::vector<StageAssignment> stages;
  for (PlanStage const& s : chain.stages) {
    StageAssignment a;
    a.replicas = s.replicas;
    for (std::string const& name : s.nodes) {
      auto it = id.find(name);
      if (it == id.end()) return internal_error("plan_gpp: the chain names an unknown node " + name);
      a.nodes.push_back(it->second);
    }
    stages.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(Plan graph, assemble_plan(p, std::move(stages), chain.micro_batch, "gpp"));
  return graph.step_time_s <= chain.step_time_s ? graph : chain;
}

}  // namespace

SpTree chain_tree(Problem const& p, std::vector<int> const& order) {
  SpTree tree;
  SpNode root;
  root.kind = SpKind::kSeries;
  std::set<std::pair<int, int>> edges;
  for (Edge const& e : p.edges) edges.emplace(e.src, e.dst);
  for (std::size_t i = 0; i < order.size(); ++i) {
    tree.nodes.push_back({SpKind::kLeaf, order[i], {}});
    root.children.push_back(static_cast<int>(i));
    if (i > 0 && !edges.count({order[i - 1], order[i]})) tree.added_edges.emplace_back(order[i - 1], order[i]);
  }
  tree.nodes.push_back(std::move(root));
  tree.root = static_cast<int>(tree.nodes.size()) - 1;
  return tree;
}

std::vector<ChainOrder> chain_orders(Problem const& p, SpTree const& tree) {
  int const n = static_cast<int>(p.nodes.size());
  std::vector<ChainOrder> out;
  auto add = [&](std::string name, std::vector<int> order) {
    for (ChainOrder const& o : out)
      if (o.order == order) return;
    out.push_back({std::move(name), std::move(order)});
  };
  std::vector<int> ids(n);
  for (int v = 0; v < n; ++v) ids[v] = v;
  add("node order", ids);
  // The other orders cost one search each (about 0.5 s at 1,000 nodes and 1,024 devices) and never
  // beat the node order on a bench row above this size (bench/partition/README.md).
  if (n > kAllChainOrdersUpTo) return out;
  add("SP leaf order", leaf_order(tree).order);
  // Levels: longest path (in nodes) from a source, and to a sink; ids are a topological order.
  std::vector<int> from_source(n, 0), to_sink(n, 0);
  for (int v = 0; v < n; ++v)
    for (int e : p.out_edges[v])
      from_source[p.edges[e].dst] = std::max(from_source[p.edges[e].dst], from_source[v] + 1);
  for (int v = n - 1; v >= 0; --v)
    for (int e : p.out_edges[v]) to_sink[v] = std::max(to_sink[v], to_sink[p.edges[e].dst] + 1);
  // Sorting by either level keeps every edge forward (its head's level is strictly larger).
  std::vector<int> asap = ids, alap = ids;
  std::stable_sort(asap.begin(), asap.end(), [&](int a, int b) { return from_source[a] < from_source[b]; });
  std::stable_sort(alap.begin(), alap.end(), [&](int a, int b) { return to_sink[a] > to_sink[b]; });
  add("as soon as possible", std::move(asap));
  add("as late as possible", std::move(alap));
  return out;
}

Result<Plan> plan_gpp_on_tree(Problem const& p, SpTree const& tree, PlannerOptions const& options) {
  auto const start = Clock::now();
  RETURN_IF_ERROR(check_problem(p));
  Incumbent inc;
  RETURN_IF_ERROR(search_tree(p, tree, "", options, start, inc));
  return finish(p, inc, start);
}

Result<Plan> plan_gpp(Problem const& p, PlannerOptions const& options) {
  auto const start = Clock::now();
  RETURN_IF_ERROR(check_problem(p));
  ASSIGN_OR_RETURN(SpTree tree, sp_decompose(p));
  Incumbent inc;
  if (options.evaluate) inc.slack = std::max(1.0, options.evaluate_slack);
  RETURN_IF_ERROR(search_tree(p, tree, "", options, start, inc));
  if (is_plain_chain(tree)) {
    if (options.evaluate) RETURN_IF_ERROR(judge(p, options, inc));
    return finish(p, inc, start);
  }
  // A chain of stages is a graph of stages: search the chains of contiguous ranges of a few
  // topological orders too, so that GPP never returns less than those chains (the node order is
  // the one the sequential planners linearise a branchy graph along).
  for (ChainOrder const& o : chain_orders(p, tree))
    RETURN_IF_ERROR(search_tree(p, chain_tree(p, o.order), o.name, options, start, inc));
  // Small graphs: every chain the sequential planners can build (stages between downsets), when
  // there are few enough downsets for their DP to take milliseconds.
  if (auto downsets = enumerate_downsets(p, kChainDownsets); downsets.is_ok()) {
    PlannerOptions chain_options = options;
    chain_options.chain_objective = ChainObjective::kStepTime;
    if (options.time_limit_s > 0)
      chain_options.time_limit_s =
          std::max(1e-3, options.time_limit_s - std::chrono::duration<double>(Clock::now() - start).count());
    auto chain = plan_chain(p, *downsets, "gpp", chain_options);
    if (!chain.is_ok() && chain.status().code() != StatusCode::kInfeasible) return chain.status();
    if (chain.is_ok()) {
      inc.states += chain->states_explored;
      ASSIGN_OR_RETURN(Plan graph, regraph(p, *chain));
      graph.notes = "a chain between downsets";
      double const tau = graph.time_per_sample_s;
      inc.offer(std::move(graph), tau);
    }
  } else if (downsets.status().code() != StatusCode::kInfeasible) {
    return downsets.status();
  }
  if (options.evaluate) RETURN_IF_ERROR(judge(p, options, inc));
  return finish(p, inc, start);
}

}  // namespace gp::partition
