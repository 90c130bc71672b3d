#include "partition/chain_dp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace gp::partition {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

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
      : p_(p), ds_(ds), b_(micro_batch), m_(p.batch / micro_batch), n_devices_(p.cluster.size()),
        planner_(planner), options_(options), start_(start) {
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
    wsum_.assign(count, 0);
    asum_.assign(count, 0);
    for (int i = 1; i < count; ++i) {
      Node const& node = p_.nodes[ds_.added[i]];
      wsum_[i] = wsum_[ds_.parent[i]] + node.weight_bytes;
      asum_[i] = asum_[ds_.parent[i]] + node.activation_bytes_per_sample;
    }
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

  int64_t transitions() const { return transitions_; }

  // The best chain as stages, or nullopt when no chain fits; errors for limits.
  Result<std::optional<std::vector<StageAssignment>>> solve() {
    int const count = ds_.count();
    if (static_cast<double>(count) * cells_ > 3e7)
      return infeasible(planner_ + ": " + std::to_string(count) + " downsets x " + std::to_string(cells_) +
                        " (stages after, devices) cells is too large a DP table; lower --devices or use gpp");
    double max_node = 0;
    for (NodeTime const& t : p_.node_times(b_ / replicas_.back())) max_node = std::max(max_node, t.total_s());
    double bound = 2.0 * std::max(key_.back() / n_devices_, max_node);
    for (int round = 0;; ++round) {
      if (round >= 3 || bound <= 0) bound = kInf;
      RETURN_IF_ERROR(run(bound));
      double const best = at(count - 1, 0, n_devices_);
      if (!std::isinf(best) && best <= bound) return std::optional<std::vector<StageAssignment>>(reconstruct(bound));
      if (std::isinf(bound)) return std::optional<std::vector<StageAssignment>>();
      bound *= 4;
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

  // Stage D_i \ D_j on replicas_[ri] replicas; the same arithmetic as stage_cost.
  StageEval eval(int j, int i, std::size_t ri) {
    ++transitions_;
    StageSums sums;
    NodeTime const& a = tsum_[ri][i];
    NodeTime const& c = tsum_[ri][j];
    sums.time = {a.fwd_s - c.fwd_s, a.bwd_input_s - c.bwd_input_s, a.bwd_weight_s - c.bwd_weight_s};
    sums.weight_bytes = wsum_[i] - wsum_[j];
    sums.activation_bytes_per_sample = asum_[i] - asum_[j];
    if (p_.count_communication) {
      for (int g : cuts_[j]) {  // into the stage: leaves D_j, lands in D_i
        bool lands = false;
        for (int dst : groups_[g].dsts) lands = lands || ds_.contains(i, dst);
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
    double const fixed = static_cast<double>(cost.weight_bytes + cost.optimizer_bytes);
    double const per_flight = static_cast<double>(cost.activation_bytes);
    double const memory = static_cast<double>(p_.device_memory());
    if (fixed + per_flight > memory) {
      ev.max_in_flight = 0;
    } else if (per_flight <= 0) {
      ev.max_in_flight = n_devices_;
    } else {
      ev.max_in_flight = static_cast<int>(std::min<double>(n_devices_, std::floor((memory - fixed) / per_flight)));
    }
    return ev;
  }

  // Candidate j for i: strict subsets of D_i whose compute difference is within the bound.
  template <typename F>
  void for_each_candidate(int i, double bound, F&& f) {
    double const low = key_[i] - bound;
    auto first = std::isinf(bound) ? sorted_keys_.begin()
                                   : std::lower_bound(sorted_keys_.begin(), sorted_keys_.end(), low);
    auto last = std::upper_bound(sorted_keys_.begin(), sorted_keys_.end(), key_[i]);
    for (auto it = first; it != last; ++it) {
      int const j = by_key_[it - sorted_keys_.begin()];
      if (ds_.size[j] >= ds_.size[i] || !ds_.subset(j, i)) continue;
      f(j);
    }
  }

  Status run(double bound) {
    int const count = ds_.count();
    int const n = n_devices_;
    f_.assign(static_cast<std::size_t>(count) * cells_, kInf);
    for (int q = 0; q < n; ++q) {
      for (int d = 1; d <= n - q; ++d) at(0, q, d) = 0.0;
    }
    for (int i = 1; i < count; ++i) {
      if ((i & 1023) == 0) RETURN_IF_ERROR(check_time(i, count));
      for_each_candidate(i, bound, [&](int j) {
        for (std::size_t ri = 0; ri < replicas_.size(); ++ri) {
          int const r = replicas_[ri];
          StageEval const ev = eval(j, i, ri);
          if (ev.max_in_flight == 0 || ev.time_s > bound) continue;
          int const q_last = std::min(n - 1, ev.max_in_flight - 1);
          for (int q = 0; q <= q_last; ++q) {
            for (int d = r; d <= n - q; ++d) {
              double cand;
              if (j == 0) {
                cand = ev.time_s;
              } else {
                if (d - r < 1 || q + 1 > n - 1) continue;
                cand = std::max(ev.time_s, at(j, q + 1, d - r));
              }
              double& cell = at(i, q, d);
              if (cand < cell) cell = cand;
            }
          }
        }
      });
    }
    return Status::ok();
  }

  std::vector<StageAssignment> reconstruct(double bound) {
    std::vector<StageAssignment> stages;
    int i = ds_.count() - 1, q = 0, d = n_devices_;
    while (i != 0) {
      double const target = at(i, q, d);
      bool found = false;
      for_each_candidate(i, bound, [&](int j) {
        for (std::size_t ri = 0; ri < replicas_.size() && !found; ++ri) {
          int const r = replicas_[ri];
          if (d < r) continue;
          StageEval const ev = eval(j, i, ri);
          if (ev.max_in_flight < q + 1 || ev.time_s > bound) continue;
          double cand;
          if (j == 0) {
            cand = ev.time_s;
          } else {
            if (d - r < 1 || q + 1 > n_devices_ - 1) continue;
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
      return timeout_error(planner_ + ": search stopped at the time limit of " + std::to_string(options_.time_limit_s) + " s");
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
  std::vector<double> key_, sorted_keys_;
  std::vector<int> by_key_;
  std::vector<EdgeGroup> groups_;
  std::vector<std::vector<int>> cuts_;
  std::vector<int> offset_;
  int cells_ = 0;
  std::vector<double> f_;
  int64_t transitions_ = 0;
  std::tuple<int, int, int> next_;
};

}  // namespace

Result<Plan> plan_chain(Problem const& p, Downsets const& downsets, std::string const& planner,
                        PlannerOptions const& options) {
  auto const start = std::chrono::steady_clock::now();
  std::optional<Plan> best;
  int64_t states = 0;
  for (int64_t b : p.micro_batch_sizes()) {
    ChainDp dp(p, downsets, b, planner, options, start);
    ASSIGN_OR_RETURN(auto stages, dp.solve());
    states += dp.transitions();
    if (!stages) continue;
    ASSIGN_OR_RETURN(Plan plan, assemble_plan(p, std::move(*stages), b, planner, StageGraphShape::kChain));
    if (!best || plan.step_time_s < best->step_time_s) best = std::move(plan);
  }
  if (!best) return infeasible(planner + ": no chain of stages fits in memory; " + infeasibility_hint(p));
  best->search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  best->states_explored = states;
  return std::move(*best);
}

}  // namespace gp::partition
