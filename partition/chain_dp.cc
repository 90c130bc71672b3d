#include "partition/chain_dp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace gp::partition {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string limit_text(double seconds) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%g s; raise --time-limit or use --planner gpp", seconds);
  return buf;
}

// Tensors leaving one producer, as stage_sums groups them: (src, tensor names).
struct EdgeGroup {
  int src = 0;
  int64_t bytes_per_sample = 0;
  std::vector<int> dsts;
};

struct StageEval {
  double time_s = kInf;
  int max_in_flight = 0;  // the most in-flight micro-batches that fit (0: none)
};

class ChainDp {
 public:
  ChainDp(Problem const& p, Downsets const& ds, int64_t micro_batch, std::string const& planner,
          PlannerOptions const& options, std::chrono::steady_clock::time_point start)
      : p_(p),
        ds_(ds),
        b_(micro_batch),
        m_(p.batch / micro_batch),
        n_devices_(p.cluster.size()),
        planner_(planner),
        options_(options),
        start_(start) {
    for (int r = 1; r <= n_devices_ && r <= b_; ++r) {
      if (b_ % r == 0 && (r == 1 || p_.allow_replication)) replicas_.push_back(r);
    }
    int const count = ds_.count();
    tsum_.assign(replicas_.size(), std::vector<NodeTime>(count));
    for (std::size_t ri = 0; ri < replicas_.size(); ++ri) {
      std::vector<NodeTime> const& t = p_.node_times(b_ / replicas_[ri]);
      for (int i = 1; i < count; ++i) {
        NodeTime const& parent = tsum_[ri][ds_.parent[i]];
        NodeTime const& node = t[ds_.added[i]];
        tsum_[ri][i] = {parent.fwd_s + node.fwd_s, parent.bwd_input_s + node.bwd_input_s,
                        parent.bwd_weight_s + node.bwd_weight_s};
      }
    }
    // Least device-seconds of each node (r replicas each run it on b / r samples) and the least
    // time of the slowest node: a chain meeting a bound tau on d devices holds at most d * tau
    // device-seconds, and tau is at least the slowest node.
    std::vector<double> node_device_s(p_.nodes.size(), kInf);
    double max_node = 0;
    for (std::size_t v = 0; v < p_.nodes.size(); ++v) {
      double least_s = kInf;
      for (std::size_t ri = 0; ri < replicas_.size(); ++ri) {
        double const t = p_.node_times(b_ / replicas_[ri])[v].total_s();
        least_s = std::min(least_s, t);
        node_device_s[v] = std::min(node_device_s[v], replicas_[ri] * t);
      }
      max_node = std::max(max_node, least_s);
    }
    wsum_.assign(count, 0);
    asum_.assign(count, 0);
    dsum_.assign(count, 0.0);
    for (int i = 1; i < count; ++i) {
      Node const& node = p_.nodes[ds_.added[i]];
      wsum_[i] = wsum_[ds_.parent[i]] + node.weight_bytes;
      asum_[i] = asum_[ds_.parent[i]] + node.activation_bytes_per_sample;
      dsum_[i] = dsum_[ds_.parent[i]] + node_device_s[ds_.added[i]];
    }
    lower_bound_ = std::max(dsum_.back() / n_devices_, max_node);
    memory_ = static_cast<double>(p_.device_memory());
    // Keys for the window: compute at the smallest per-replica sample count (a lower bound of any
    // stage's compute, node times being nondecreasing in samples).
    key_.resize(count);
    for (int i = 0; i < count; ++i) key_[i] = tsum_.back()[i].total_s();
    by_key_.resize(count);
    for (int i = 0; i < count; ++i) by_key_[i] = i;
    std::stable_sort(by_key_.begin(), by_key_.end(), [&](int a, int c) { return key_[a] < key_[c]; });
    sorted_keys_.resize(count);
    for (int k = 0; k < count; ++k) sorted_keys_[k] = key_[by_key_[k]];
    if (p_.count_communication) build_cuts();
    offset_.resize(n_devices_ + 1);
    cells_ = 0;
    for (int q = 0; q < n_devices_; ++q) {
      offset_[q] = cells_;
      cells_ += n_devices_ - q;
    }
  }

  // The (stage, replicas) transitions evaluated since the last call.
  int64_t take_transitions() { return std::exchange(transitions_, 0); }
  double optimum() const { return optimum_; }
  int64_t micro_batch() const { return b_; }
  double lower_bound() const { return lower_bound_; }
  // A chain of at most `stages` stages runs on at most stages x (most replicas) devices.
  double lower_bound(int stages) const {
    double const devices = std::min<double>(n_devices_, static_cast<double>(stages) * replicas_.back());
    return std::max(lower_bound_, dsum_.back() / devices);
  }
  // Each stage's weights and optimizer state fit one device, so a chain has at least this many.
  int fewest_stages() const {
    // (Each stage rounds its optimizer bytes, by at most half a byte: n_devices_ covers that.)
    double const fixed = static_cast<double>(wsum_.back()) * (1.0 + p_.optimizer_bytes_per_weight_byte) - n_devices_;
    return std::max(1, static_cast<int>(std::ceil(fixed / memory_)));
  }

  // The least time of the whole graph as one stage that fits; infinite when none does.
  double single_stage_s() { return single_stage().first; }
  // The whole graph as one stage: its least time among the replica counts that fit, and that count.
  std::pair<double, int> single_stage() {
    std::pair<double, int> best{kInf, 0};
    int64_t const weights = weight_bytes(0, ds_.count() - 1);
    for (std::size_t ri = 0; ri < replicas_.size(); ++ri) {
      StageEval const ev = eval(0, ds_.count() - 1, ri, weights);
      if (ev.max_in_flight >= 1 && ev.time_s < best.first) best = {ev.time_s, replicas_[ri]};
    }
    return best;
  }
  std::vector<int> all_nodes() const { return ds_.difference(ds_.count() - 1, 0); }

  // The best chain of at most max_stages stages, or nullopt when no such chain fits or none has
  // max T_s <= cap (a chain above the cap cannot matter to the caller); errors for limits.
  // optimum() is then its max T_s.
  Result<std::optional<std::vector<StageAssignment>>> solve(double cap, int max_stages) {
    max_stages_ = std::clamp(max_stages, 1, n_devices_);
    int const count = ds_.count();
    if (static_cast<double>(count) * cells_ > 3e7)
      return infeasible(planner_ + ": " + std::to_string(count) + " downsets x " + std::to_string(cells_) +
                        " (stages after, devices) cells is too large a DP table; lower --devices or use gpp");
    // Cells above the bound are left infinite, which keeps every cell at or under it exact; a
    // bound near the optimum keeps the table sparse, so start just above the lower bound.
    double bound = 1.25 * lower_bound_;
    for (int round = 0;; ++round) {
      if (round >= 8 || !(bound > 0)) bound = kInf;
      bool const capped = bound >= cap;
      if (capped) bound = cap;
      RETURN_IF_ERROR(run(bound));
      double const best = at(count - 1, 0, n_devices_);
      if (!std::isinf(best) && best <= bound) {
        optimum_ = best;
        return std::optional<std::vector<StageAssignment>>(reconstruct(bound));
      }
      // A round the bound cut nothing from is the unbounded one.
      if (capped || std::isinf(bound) || !cut_) return std::optional<std::vector<StageAssignment>>();
      bound *= 1.5;
    }
  }

 private:
  double& at(int i, int q, int d) { return f_[static_cast<std::size_t>(i) * cells_ + offset_[q] + (d - 1)]; }

  void build_cuts() {
    std::map<std::pair<int, std::vector<std::string>>, int> index;
    for (Edge const& e : p_.edges) {
      auto [it, inserted] = index.try_emplace({e.src, e.tensors}, static_cast<int>(groups_.size()));
      if (inserted) groups_.push_back({e.src, e.bytes_per_sample, {}});
      groups_[it->second].dsts.push_back(e.dst);
    }
    cuts_.resize(ds_.count());
    for (int i = 0; i < ds_.count(); ++i) {
      for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
        if (!ds_.contains(i, groups_[g].src)) continue;
        for (int dst : groups_[g].dsts) {
          if (!ds_.contains(i, dst)) {
            cuts_[i].push_back(g);
            break;
          }
        }
      }
    }
  }

  // Weight bytes of stage D_i \ D_j: its nodes' and a copy of each shared weight
  // (Problem::shared_weights) it reads without holding the first reader, as stage_sums counts.
  // Found once per stage and passed to fits_once and eval for each replica count.
  int64_t weight_bytes(int j, int i) const {
    int64_t bytes = wsum_[i] - wsum_[j];
    auto in_stage = [&](int v) { return ds_.contains(i, v) && !ds_.contains(j, v); };
    for (SharedWeight const& w : p_.shared_weights) {
      if (in_stage(w.readers.front())) continue;
      for (int v : w.readers)
        if (in_stage(v)) {
          bytes += w.bytes;
          break;
        }
    }
    return bytes;
  }

  // Whether stage D_i \ D_j, of `w` weight bytes (weight_bytes), on r replicas holds one
  // micro-batch: eval's memory test, from the sums.
  bool fits_once(int j, int i, int r, int64_t w) const {
    int64_t const fixed = w + static_cast<int64_t>(std::llround(p_.optimizer_bytes_per_weight_byte * w));
    int64_t const per_flight = (asum_[i] - asum_[j]) * samples_per_replica(b_, r);
    return micro_batches_that_fit(static_cast<int64_t>(memory_), fixed, per_flight) >= 1;
  }

  // Stage D_i \ D_j, of `weights` bytes (weight_bytes), on replicas_[ri] replicas; the same
  // arithmetic as stage_cost.
  StageEval eval(int j, int i, std::size_t ri, int64_t weights) {
    ++transitions_;
    StageSums sums;
    NodeTime const& a = tsum_[ri][i];
    NodeTime const& c = tsum_[ri][j];
    sums.time = {a.fwd_s - c.fwd_s, a.bwd_input_s - c.bwd_input_s, a.bwd_weight_s - c.bwd_weight_s};
    sums.weight_bytes = weights;
    sums.activation_bytes_per_sample = asum_[i] - asum_[j];
    if (p_.count_communication) {
      for (int g : cuts_[j]) {  // into the stage: leaves D_j, lands in D_i
        bool lands = false;
        for (int dst : groups_[g].dsts) lands = lands || (ds_.contains(i, dst) && !ds_.contains(j, dst));
        if (lands && groups_[g].bytes_per_sample > 0) {
          sums.boundary_bytes_per_sample += groups_[g].bytes_per_sample;
          ++sums.boundary_tensors;
        }
      }
      for (int g : cuts_[i]) {  // out of the stage: produced in D_i \ D_j, leaves D_i
        if (!ds_.contains(j, groups_[g].src) && groups_[g].bytes_per_sample > 0) {
          sums.boundary_bytes_per_sample += groups_[g].bytes_per_sample;
          ++sums.boundary_tensors;
        }
      }
    }
    StageCost const cost = stage_cost_from_sums(p_, sums, replicas_[ri], b_, 1, m_);
    StageEval ev;
    ev.time_s = cost.time_s;
    ev.max_in_flight =
        std::min(n_devices_, micro_batches_that_fit(static_cast<int64_t>(memory_),
                                                    cost.weight_bytes + cost.optimizer_bytes, cost.activation_bytes));
    return ev;
  }

  // Candidate j for i: strict subsets of D_i whose compute difference is within the bound and
  // whose chain fits in `most` - 1 devices.
  template <typename F>
  void for_each_candidate(int i, double bound, int most, F&& f) {
    double const low = key_[i] - bound;
    auto first =
        std::isinf(bound) ? sorted_keys_.begin() : std::lower_bound(sorted_keys_.begin(), sorted_keys_.end(), low);
    if (first != sorted_keys_.begin()) cut_ = true;
    auto last = std::upper_bound(sorted_keys_.begin(), sorted_keys_.end(), key_[i]);
    for (auto it = first; it != last; ++it) {
      int const j = by_key_[it - sorted_keys_.begin()];
      if (fewest_[j] >= most) {
        cut_ = true;
        continue;
      }
      if (ds_.size[j] >= ds_.size[i] || !ds_.subset(j, i)) continue;
      f(j);
    }
  }

  // f(i, q, d) = min over (j, r) of max(T, f(j, q + 1, d - r)). f is nonincreasing in d, so along
  // d the candidate is f(j, ...) until that drops to T, and T from there on: those suffixes go into
  // `pending_` at their first d and reach the cells by a prefix minimum once i is done. A row of
  // f(j, q + 1, .) infinite at its most devices ends the q loop (f is nondecreasing in q).
  Status run(double bound) {
    int const count = ds_.count();
    int const n = n_devices_;
    int const qn = max_stages_;  // a stage with q stages after it is at most the max_stages-th from the end
    cut_ = false;
    f_.assign(static_cast<std::size_t>(count) * cells_, kInf);
    pending_.assign(cells_, kInf);
    for (int q = 0; q < n; ++q) {
      for (int d = 1; d <= n - q; ++d) at(0, q, d) = 0.0;
    }
    // A chain of D_j meeting the bound needs at least fewest_[j] devices, and the stages after D_i
    // of any plan meeting it leave D_i at most most_[i]: pairs that cannot fit between the two
    // are skipped. That changes only cells no plan meeting the bound passes through (the slack
    // covers rounding in the sums).
    fewest_.assign(count, 1);
    most_.assign(count, n);
    if (!std::isinf(bound)) {
      double const slack = 1e-9 * dsum_.back();
      for (int i = 0; i < count; ++i) {
        double const need = std::ceil((dsum_[i] - slack) / bound);
        fewest_[i] = i == 0 ? 0 : static_cast<int>(std::clamp(need, 1.0, n + 1.0));
        double const after = std::ceil((dsum_.back() - dsum_[i] - slack) / bound);
        most_[i] = n - static_cast<int>(std::clamp(after, 0.0, n + 1.0));
      }
    }
    for (int i = 1; i < count; ++i) {
      if ((i & 1023) == 0) RETURN_IF_ERROR(check_time(i, count));
      double* const cell = &at(i, 0, 1);
      std::fill(pending_.begin(), pending_.end(), kInf);
      int const most_i = most_[i];
      if (most_i < 1) {
        cut_ = true;
        continue;
      }
      for_each_candidate(i, bound, most_i, [&](int j) {
        int64_t const weights = weight_bytes(j, i);
        for (std::size_t ri = 0; ri < replicas_.size(); ++ri) {
          int const r = replicas_[ri];
          if (fewest_[j] + r > most_i) {
            cut_ = true;
            break;
          }
          // Compute alone over the bound: so is the stage time (it adds nonnegative terms to it).
          NodeTime const& a = tsum_[ri][i];
          NodeTime const& c = tsum_[ri][j];
          if ((a.fwd_s - c.fwd_s) + (a.bwd_input_s - c.bwd_input_s) + (a.bwd_weight_s - c.bwd_weight_s) > bound) {
            cut_ = true;
            continue;
          }
          if (!fits_once(j, i, r, weights)) continue;  // eval would say so, at many times the cost
          StageEval const ev = eval(j, i, ri, weights);
          if (ev.max_in_flight == 0) continue;
          if (ev.time_s > bound) {
            cut_ = true;
            continue;
          }
          double const t = ev.time_s;
          int const q_last = std::min(n - 1, ev.max_in_flight - 1);
          if (j == 0) {
            for (int q = 0; q <= q_last && q < qn && r <= n - q; ++q) {
              double& p = pending_[offset_[q] + r - 1];
              p = std::min(p, t);
            }
            continue;
          }
          for (int q = 0; q <= std::min({q_last, n - 2, qn - 2}); ++q) {
            int const most = n - q - r;  // devices left to D_j at most
            if (most < 1) break;
            double const* row = &at(j, q + 1, 1);  // row[e - 1] = f(j, q + 1, e)
            if (std::isinf(row[most - 1])) continue;
            int lo = 1, hi = most + 1;  // first e with row[e - 1] <= t
            while (lo < hi) {
              int const mid = (lo + hi) / 2;
              if (row[mid - 1] <= t)
                hi = mid;
              else
                lo = mid + 1;
            }
            double* const out = cell + offset_[q] + r - 1;  // out[e] = f(i, q, e + r)
            if (lo <= most) {
              double& p = pending_[offset_[q] + lo + r - 1];
              p = std::min(p, t);
            }
            for (int e = lo - 1; e >= 1 && !std::isinf(row[e - 1]); --e) out[e] = std::min(out[e], row[e - 1]);
          }
        }
      });
      // The prefix minimum also keeps skipped cells nonincreasing in d (at most d devices).
      for (int q = 0; q < qn; ++q) {
        double run_min = kInf;
        for (int d = 1; d <= n - q; ++d) {
          double& c = cell[offset_[q] + d - 1];
          run_min = std::min({run_min, pending_[offset_[q] + d - 1], c});
          c = run_min;
        }
      }
    }
    return Status::ok();
  }

  std::vector<StageAssignment> reconstruct(double bound) {
    std::vector<StageAssignment> stages;
    int i = ds_.count() - 1, q = 0, d = n_devices_;
    while (i != 0) {
      double const target = at(i, q, d);
      bool found = false;
      for_each_candidate(i, bound, n_devices_ + 1, [&](int j) {
        int64_t const weights = weight_bytes(j, i);
        for (std::size_t ri = 0; ri < replicas_.size() && !found; ++ri) {
          int const r = replicas_[ri];
          if (d < r) continue;
          StageEval const ev = eval(j, i, ri, weights);
          if (ev.max_in_flight < q + 1 || ev.time_s > bound) continue;
          double cand;
          if (j == 0) {
            cand = ev.time_s;
          } else {
            if (d - r < 1 || q + 1 > n_devices_ - 1 || q + 1 >= max_stages_) continue;
            cand = std::max(ev.time_s, at(j, q + 1, d - r));
          }
          if (cand == target && !found) {
            found = true;
            stages.push_back({ds_.difference(i, j), r});
            next_ = {j, q + 1, d - r};
          }
        }
      });
      if (!found) break;  // cannot happen: the table was filled by the same candidates
      std::tie(i, q, d) = next_;
    }
    std::reverse(stages.begin(), stages.end());
    return stages;
  }

  Status check_time(int i, int count) {
    double const elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (options_.time_limit_s > 0 && elapsed > options_.time_limit_s)
      return timeout_error(planner_ + ": search stopped at the time limit of " + limit_text(options_.time_limit_s));
    if (options_.progress && elapsed - last_progress_ >= 1.0) {
      last_progress_ = elapsed;
      options_.progress(planner_ + ": b=" + std::to_string(b_) + " downset " + std::to_string(i) + "/" +
                        std::to_string(count) + " transitions=" + std::to_string(transitions_));
    }
    return Status::ok();
  }

  Problem const& p_;
  Downsets const& ds_;
  int64_t b_, m_;
  int n_devices_;
  std::string const& planner_;
  PlannerOptions const& options_;
  std::chrono::steady_clock::time_point start_;
  double last_progress_ = 0;
  std::vector<int> replicas_;
  std::vector<std::vector<NodeTime>> tsum_;
  std::vector<int64_t> wsum_, asum_;
  std::vector<double> dsum_;  // least device-seconds of each downset
  double lower_bound_ = 0, memory_ = 0, optimum_ = kInf;
  int max_stages_ = 1;
  bool cut_ = false;  // the last run skipped something for the bound
  std::vector<int> fewest_, most_;
  std::vector<double> key_, sorted_keys_;
  std::vector<int> by_key_;
  std::vector<EdgeGroup> groups_;
  std::vector<std::vector<int>> cuts_;
  std::vector<int> offset_;
  int cells_ = 0;
  std::vector<double> f_, pending_;
  int64_t transitions_ = 0;
  std::tuple<int, int, int> next_;
};

}  // namespace

Result<Plan> plan_chain(Problem const& p, Downsets const& downsets, std::string const& planner,
                        PlannerOptions const& options) {
  auto const start = std::chrono::steady_clock::now();
  int const n = p.cluster.size();
  bool const step_objective = options.chain_objective == ChainObjective::kStepTime;
  std::optional<Plan> best;
  int64_t states = 0;
  auto consider = [&](std::vector<StageAssignment> stages, int64_t b) -> Status {
    ASSIGN_OR_RETURN(Plan plan, assemble_plan(p, std::move(stages), b, planner, StageGraphShape::kChain));
    if (!best || plan.step_time_s < best->step_time_s) best = std::move(plan);
    return Status::ok();
  };
  // Every chain at micro-batch b of two or more stages takes at least (m + 1) times the DP's lower
  // bound per step: the most promising sizes go first, so that the caps below skip the rest.
  std::vector<std::unique_ptr<ChainDp>> dps;
  for (int64_t b : p.micro_batch_sizes())
    dps.push_back(std::make_unique<ChainDp>(p, downsets, b, planner, options, start));
  std::stable_sort(dps.begin(), dps.end(), [&](auto const& x, auto const& y) {
    return static_cast<double>(p.batch / x->micro_batch() + 1) * x->lower_bound() <
           static_cast<double>(p.batch / y->micro_batch() + 1) * y->lower_bound();
  });
  // One stage (data parallelism alone) costs one evaluation per size and, where it fits, is often
  // the plan to beat: it sets the caps before any DP runs.
  for (auto const& dp : dps) {
    if (!step_objective) break;
    auto const [time_s, replicas] = dp->single_stage();
    if (replicas > 0) RETURN_IF_ERROR(consider({{dp->all_nodes(), replicas}}, dp->micro_batch()));
  }
  for (auto& owned : dps) {
    double const elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.time_limit_s > 0 && elapsed > options.time_limit_s)
      return timeout_error(planner + ": search stopped at the time limit of " + limit_text(options.time_limit_s));
    ChainDp& dp = *owned;
    auto release = std::unique_ptr<ChainDp>(std::move(owned));  // the table goes with this size
    int64_t const b = dp.micro_batch();
    double const m = static_cast<double>(p.batch / b);
    // A chain beats the best so far only if (m + D - 1) max T_s is under its step time (the slack
    // covers assemble_plan summing stage times in another order): with one stage, the whole
    // graph as a stage must meet step / m; with more, the DP's optimum must meet step / (m + 1),
    // and a DP capped there is exact whenever it does.
    double cap = kInf;
    if (best) {
      double const one_stage = best->step_time_s / m * (1 + 1e-9);
      cap = best->step_time_s / (m + 1) * (1 + 1e-9);
      if (dp.lower_bound() > one_stage) continue;
      // Under the step objective every size's single stage is already in `best`.
      double const single = step_objective ? kInf : dp.single_stage_s();
      if (single <= one_stage) cap = std::max(cap, single);
      if (dp.lower_bound() > cap) continue;
    }
    auto stages = dp.solve(cap, n);
    states += dp.take_transitions();
    RETURN_IF_ERROR(stages.status());
    if (!*stages) continue;
    int const k = static_cast<int>((*stages)->size());
    double const least = dp.optimum();  // no chain of any length has a smaller max T_s
    RETURN_IF_ERROR(consider(std::move(**stages), b));
    if (!step_objective) continue;
    // The step time: a chain of K < k stages trades a larger max T_s for a shorter fill and
    // drain. Its max T_s is at least `least`, so only K with (m + K - 1) least under the best step
    // can win, and a DP capped at step / (m + K - 1) and limited to K stages decides each exactly.
    for (int K = dp.fewest_stages(); K < k; ++K) {
      double const cap_k = best->step_time_s / (m + K - 1) * (1 + 1e-9);
      if (std::max(least, dp.lower_bound(K)) > cap_k) continue;
      if (K == 1) {
        if (dp.single_stage_s() <= cap_k) {
          auto one = dp.solve(cap_k, 1);
          states += dp.take_transitions();
          RETURN_IF_ERROR(one.status());
          if (*one) RETURN_IF_ERROR(consider(std::move(**one), b));
        }
        continue;
      }
      auto shorter = dp.solve(cap_k, K);
      states += dp.take_transitions();
      RETURN_IF_ERROR(shorter.status());
      if (*shorter) RETURN_IF_ERROR(consider(std::move(**shorter), b));
    }
  }
  if (!best) return infeasible(planner + ": no chain of stages fits in memory; " + infeasibility_hint(p));
  best->search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  best->states_explored = states;
  return std::move(*best);
}

}  // namespace gp::partition
