// Balanced split (DeepSpeed's partition_balanced, torchgpipe's balance by time): the node order
// (a topological order) cut into min(N, nodes) contiguous pieces, one device each, minimising the
// largest piece's compute time at the micro-batch size; no replication, communication and memory
// are not looked at while cutting (as those tools do) but are in the plan's costs. Every candidate
// micro-batch size is tried; the plan with the least step time whose stages fit memory wins.
#include <algorithm>
#include <chrono>
#include <optional>

#include "partition/planner.h"

namespace gp::partition {

namespace {

// Cuts prefix sums `w` (w[0] = 0, w[n] = total) into at most k pieces each at most `limit`;
// returns the piece ends, or nullopt.
std::optional<std::vector<int>> greedy_cut(std::vector<double> const& w, int k, double limit) {
  int const n = static_cast<int>(w.size()) - 1;
  std::vector<int> ends;
  int begin = 0;
  while (begin < n) {
    int end = begin + 1;
    if (w[end] - w[begin] > limit) return std::nullopt;
    while (end < n && w[end + 1] - w[begin] <= limit) ++end;
    ends.push_back(end);
    begin = end;
    if (static_cast<int>(ends.size()) > k) return std::nullopt;
  }
  return ends;
}

// Exactly k contiguous pieces of n >= k items minimising the largest sum.
std::vector<int> balanced_cut(std::vector<double> const& w, int k) {
  int const n = static_cast<int>(w.size()) - 1;
  double lo = 0, hi = w[n];
  for (int v = 0; v < n; ++v) lo = std::max(lo, w[v + 1] - w[v]);
  if (!greedy_cut(w, k, lo)) {
    for (int iter = 0; iter < 200 && hi > lo; ++iter) {
      double const mid = lo + (hi - lo) / 2;
      if (mid <= lo || mid >= hi) break;
      if (greedy_cut(w, k, mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
  } else {
    hi = lo;
  }
  std::vector<int> ends = *greedy_cut(w, k, hi);
  // Fewer pieces than k: split the heaviest piece that has two or more items, at its middle.
  while (static_cast<int>(ends.size()) < k) {
    int best = -1;
    double best_w = -1;
    for (int s = 0; s < static_cast<int>(ends.size()); ++s) {
      int const b = s == 0 ? 0 : ends[s - 1];
      if (ends[s] - b >= 2 && w[ends[s]] - w[b] > best_w) {
        best = s;
        best_w = w[ends[s]] - w[b];
      }
    }
    int const b = best == 0 ? 0 : ends[best - 1];
    int cut = b + 1;
    while (cut + 1 < ends[best] && w[cut] - w[b] < (w[ends[best]] - w[b]) / 2) ++cut;
    ends.insert(ends.begin() + best, cut);
  }
  return ends;
}

}  // namespace

Result<Plan> plan_balanced(Problem const& p, PlannerOptions const& options) {
  auto const start = std::chrono::steady_clock::now();
  int const n = static_cast<int>(p.nodes.size());
  int const k = std::min(n, p.cluster.size());
  std::optional<Plan> best;
  int64_t states = 0;
  for (int64_t b : p.micro_batch_sizes()) {
    std::vector<NodeTime> const& t = p.node_times(b);
    std::vector<double> w(n + 1, 0.0);
    for (int v = 0; v < n; ++v) w[v + 1] = w[v] + t[v].total_s();
    std::vector<int> const ends = balanced_cut(w, k);
    states += static_cast<int64_t>(ends.size());
    std::vector<StageAssignment> stages;
    int begin = 0;
    for (int end : ends) {
      StageAssignment st;
      for (int v = begin; v < end; ++v) st.nodes.push_back(v);
      stages.push_back(std::move(st));
      begin = end;
    }
    ASSIGN_OR_RETURN(Plan plan, assemble_plan(p, std::move(stages), b, "balanced", StageGraphShape::kChain));
    bool fits = true;
    for (auto const& s : plan.stages) fits = fits && s.peak_memory_bytes <= p.device_memory();
    if (options.progress)
      options.progress("balanced: b=" + std::to_string(b) + (fits ? " fits" : " does not fit in memory"));
    if (!fits) continue;
    if (!best || plan.step_time_s < best->step_time_s) best = std::move(plan);
  }
  if (!best)
    return infeasible("balanced: no split into " + std::to_string(k) + " pieces fits in memory; " +
                      infeasibility_hint(p));
  best->search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  best->states_explored = states;
  return std::move(*best);
}

}  // namespace gp::partition
