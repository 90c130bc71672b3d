// The DP of plan_gpp on one SP tree at one micro-batch size (partition/gpp_dp.h describes the
// pieces and the objective): per tree node and downstream depth q, the Pareto frontier of (depth,
// devices) of the plans of that node meeting a bound tau, memoised; then the rebuild that walks the
// memo the same way to emit the stages of the root's best point. Internal to partition/.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "partition/gpp_ranges.h"
#include "partition/problem.h"
#include "partition/sp_decompose.h"

namespace gp::partition::gpp {

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
  Engine(Problem const& p, SpTree const& tree, LeafOrder const& leaves, int64_t micro_batch, BoundaryRows& boundaries);

  struct Eval {
    bool feasible = false;
    double tau_next = std::numeric_limits<double>::infinity();  // result is the same on [tau, tau_next)
    double tau_used = 0;                                        // max T_s/b of the plan
    int depth = 0, devices = 0;
    std::vector<ChosenStage> stages;
  };

  // The shallowest plan meeting tau among those at most `depth_cap` stages deep (the DP prunes
  // every partial plan deeper than that: a search for a target depth needs no deeper one, and the
  // state count shrinks with the cap); infeasible when there is none.
  Eval evaluate(double tau, int depth_cap = std::numeric_limits<int>::max());

  int64_t states() const { return states_; }
  // Frees the memo and the price cache once the search is done with this micro-batch size.
  void release();
  double lower_bound() const;
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
  StageRef priced_afresh(Ranges const& rg);

  Level const& level(StageRef const& s, int l) const;

  // T_s / b of the stage with recomputation: one more forward.
  double recompute_t(StageRef const& s, int l) const;

  double compute(Ranges const& rg, int l) const;

  // Fewest replicas meeting tau with `in_flight` micro-batches held; 0 if none. Levels below
  // `first` are known too slow by their compute alone (fewest_replicas noted them in tau_next).
  // Recomputation is chosen only where the stage does not fit without it (it only adds time).
  int min_replicas(StageRef const& s, int in_flight, int first = 0, double* t_out = nullptr,
                   bool* recompute_out = nullptr);
  static int level_of(int replicas) { return std::countr_zero(static_cast<unsigned>(replicas)); }

  // The fewest replicas whose compute alone fits the ranges within tau; 0 when none does, and then
  // no larger stage does either (compute only grows with the stage).
  int fewest_replicas(Ranges const& rg);

  Frontier const* find(Part part, int t, int index, int q) const;
  Frontier const& stored(Part part, int t, int index, int q) const { return *find(part, t, index, q); }
  void store(Part part, int t, int index, int q, Frontier f);
  // Work done since the last look at the clock (states, nodes added to boundaries): the deadline is
  // checked every 2^16 units, so an evaluation overshoots it by milliseconds, not seconds.
  void tick(int64_t units);

 public:
  // After the deadline an evaluation unwinds with empty frontiers and expired() says so: its result
  // must then be dropped (the search reports the time limit).
  void set_deadline(std::optional<Clock::time_point> deadline) { deadline_ = deadline; }
  bool expired() const { return expired_; }

 private:
  Frontier pareto(std::vector<int> const& best) const;

  // best[depth] = fewest devices; `best` starts with depth_table()'s size and grows if needed.
  void consider(std::vector<int>& best, int depth, int devices, int budget) const;
  // A piece's own depth is at most its stage count, so at most its leaves: sizing `best` by that
  // instead of by the cluster keeps a state O(piece), not O(devices), at 1,024 devices.
  std::vector<int> depth_table(int t) const;

  // Lower bound on the devices any plan gives to the nodes at positions [lo, hi).
  int need(int lo, int hi) { return lo >= hi ? 0 : need_for(work_[hi] - work_[lo]); }
  // Lower bound on the devices of stages holding `work` device-seconds. Pruning with it keeps the
  // evaluation constant only up to the tau where it drops: that tau joins tau_next.
  int need_for(double work);
  // Devices a piece at [lo, hi) may use: the rest of the graph needs its share. The rest is priced
  // as one set, since a merged stage can hold nodes on both sides of the piece.
  int budget(int lo, int hi);

  int lo_of(int t) const { return leaves_.range[t].first; }
  int hi_of(int t) const { return leaves_.range[t].second; }

  Frontier node_frontier(int t, int q);

  // A Parallel node's children side by side at downstream depth q, as consecutive groups: a group
  // of one child is that child's own frontier, a group of several is one stage. Stores the prefix
  // frontiers [0, c) for c = 1..k and the node's frontier (c = k, which includes all children as one
  // stage).
  void parallel_prefix(int t, int q);

  // The suffix frontiers [c, k) of a Parallel node's children (c = k - 1..1), as parallel_prefix.
  void parallel_suffix(int t, int q);

  // Suffix frontiers of a Series node's children for downstream depth q; stores (t, i, q) for every
  // suffix start i and the node's frontier (i = 0).
  void series(int t, int q);

  // Around a merged group [a, c) of Parallel node par's children, the others are partitioned as the
  // prefix [0, a) and the suffix [c, k) of its children at downstream depth qq: search_outside
  // computes them (before the tracker is used for the group), outside reads them (the empty frontier
  // at the ends; null where the search has none).
  void search_outside(int par, int qq);
  std::pair<Frontier const*, Frontier const*> outside(int par, int a, int c, int qq) const;

  // A stage made of a group [a, c) of the children of the Parallel child i of Series t, together
  // with the Series run i+1..j right after it (where the branches join), other than the whole
  // Parallel node (a plain run). The Parallel node's other children are partitioned beside it,
  // feeding it. In search mode (`target` null) every candidate goes into `best`; in rebuild mode the
  // first candidate equal to `target` is emitted with its parts and true is returned.
  bool merged(int t, int i, int q, std::vector<Frontier> const& suffix, int cap, std::vector<int>& best,
              Point const* target);

  // A stage made of the Series run i..j of t together with a group [a, c) of the children of the
  // Parallel child j + 1 right after the run (where the branches fork), other than the whole
  // Parallel node (a plain run). The Parallel node's other children are partitioned beside the
  // group, fed by the stage, and feed what follows the Parallel node, as the group does. Modes as
  // in merged.
  bool forked(int t, int i, int q, std::vector<Frontier> const& suffix, int cap, std::vector<int>& best,
              Point const* target);

  void emit(StageRef const& s, int in_flight);

  void rebuild_node(int t, int q, Point target);

  // The children [0, index) (prefix) or [index, k) (suffix) of Parallel node t as stored.
  void rebuild_parallel(Part part, int t, int index, int q, Point target);

  void rebuild_series(int t, int i, int q, Point target);

  static inline Frontier const kEmpty{{0, 0}};

  Problem const& p_;
  SpTree const& tree_;
  LeafOrder const& leaves_;
  int64_t b_, m_;
  int devices_;
  int depth_cap_ = 0;  // the current evaluation's (at most devices_)
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

}  // namespace gp::partition::gpp
