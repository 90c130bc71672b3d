#include "schedule/plan_view.h"

#include <algorithm>
#include <string>

namespace gp::schedule {

std::vector<TiedGroup> group_tied_weights(partition::Plan const& plan, std::vector<std::vector<int>> const& stages,
                                          std::vector<double> const& seconds) {
  std::vector<TiedGroup> groups;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    std::vector<int> devices;
    for (int s : stages[i])
      devices.insert(devices.end(), plan.stages.at(s).devices.begin(), plan.stages.at(s).devices.end());
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    auto it = std::find_if(groups.begin(), groups.end(), [&](TiedGroup const& g) { return g.devices == devices; });
    if (it == groups.end()) it = groups.insert(groups.end(), TiedGroup{devices, {}, 0});
    it->members.push_back(static_cast<int>(i));
    if (i < seconds.size()) it->allreduce_s += seconds[i];
  }
  return groups;
}

Result<PlanView> PlanView::make(partition::Plan const& plan) {
  PlanView v;
  v.plan_ = &plan;
  int const n = static_cast<int>(plan.stages.size());
  if (n == 0) return invalid_argument("the plan has no stages");
  int max_device = plan.num_devices - 1;
  for (int s = 0; s < n; ++s) {
    auto const& st = plan.stages[s];
    if (st.id != s)
      return invalid_argument("plan stage " + std::to_string(s) + " has id " + std::to_string(st.id) +
                              " (ids must be 0..n-1 in order)");
    if (st.devices.empty()) return invalid_argument("plan stage " + std::to_string(s) + " has no devices");
    std::vector<int> sorted = st.devices;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return invalid_argument("plan stage " + std::to_string(s) + " lists a device twice");
    for (int d : st.devices) {
      if (d < 0) return invalid_argument("plan stage " + std::to_string(s) + " has a negative device id");
      max_device = std::max(max_device, d);
    }
  }
  v.num_devices_ = max_device + 1;
  v.in_edges_.assign(n, {});
  v.out_edges_.assign(n, {});
  v.stages_on_.assign(v.num_devices_, {});
  for (int s = 0; s < n; ++s)
    for (int d : plan.stages[s].devices) v.stages_on_[d].push_back(s);
  v.pieces_.resize(plan.edges.size());
  for (size_t e = 0; e < plan.edges.size(); ++e) {
    auto const& edge = plan.edges[e];
    if (edge.src < 0 || edge.src >= n || edge.dst < 0 || edge.dst >= n)
      return invalid_argument("plan edge " + std::to_string(e) + " refers to a stage that does not exist");
    // Stages are in topological order, so every edge points forward; this also rules out cycles.
    if (edge.src >= edge.dst)
      return invalid_argument("plan edge " + std::to_string(e) + " goes from stage " + std::to_string(edge.src) +
                              " to stage " + std::to_string(edge.dst) + " (stages must be in topological order)");
    v.out_edges_[edge.src].push_back(static_cast<int>(e));
    v.in_edges_[edge.dst].push_back(static_cast<int>(e));
    auto const& a = plan.stages[edge.src].devices;
    auto const& b = plan.stages[edge.dst].devices;
    int const k = static_cast<int>(std::max(a.size(), b.size()));
    for (int i = 0; i < k; ++i)
      v.pieces_[e].push_back(
          {static_cast<int>(e), edge.src, edge.dst, a[i % a.size()], b[i % b.size()], edge.transfer_s / k});
  }
  std::vector<std::vector<int>> tied_stages;
  std::vector<double> tied_seconds;
  for (auto const& t : plan.tied_weights) {
    for (int s : t.stages)
      if (s < 0 || s >= n)
        return invalid_argument("the plan's tied weight '" + t.name + "' names stage " + std::to_string(s) +
                                ", which does not exist");
    tied_stages.push_back(t.stages);
    tied_seconds.push_back(t.allreduce_s);
  }
  v.tied_groups_ = group_tied_weights(plan, tied_stages, tied_seconds);
  v.tied_groups_of_.assign(v.num_devices_, {});
  for (int g = 0; g < static_cast<int>(v.tied_groups_.size()); ++g)
    for (int d : v.tied_groups_[g].devices) v.tied_groups_of_[d].push_back(g);
  v.depth_.assign(n, 1);
  for (int s = n - 1; s >= 0; --s)
    for (int e : v.out_edges_[s]) v.depth_[s] = std::max(v.depth_[s], 1 + v.depth_[plan.edges[e].dst]);
  v.max_depth_ = *std::max_element(v.depth_.begin(), v.depth_.end());
  for (int s = 0; s < n && v.chain_; ++s) {
    if (v.in_edges_[s].size() > 1 || v.out_edges_[s].size() > 1) {
      v.chain_ = false;
      v.branching_stage_ = s;
    } else if (s + 1 < n && (v.out_edges_[s].size() != 1 || plan.edges[v.out_edges_[s][0]].dst != s + 1)) {
      v.chain_ = false;
      v.branching_stage_ = s;
    }
  }
  return v;
}

bool PlanView::runs_on(int stage, int device) const {
  auto const& ds = plan_->stages[stage].devices;
  return std::find(ds.begin(), ds.end(), device) != ds.end();
}

int64_t PlanView::static_bytes(int device) const {
  int64_t bytes = 0;
  for (int s : stages_on_[device]) bytes += stage(s).weight_bytes + stage(s).optimizer_bytes;
  return bytes;
}

double PlanView::backward_s(int s, bool split) const {
  auto const& st = stage(s);
  return st.bwd_input_s + (split ? 0 : st.bwd_weight_s) + (st.recompute ? st.fwd_s : 0);
}

int64_t PlanView::held_bytes(int s) const {
  auto const& st = stage(s);
  return st.recompute ? st.stash_bytes_per_micro_batch : st.activation_bytes_per_micro_batch;
}

}  // namespace gp::schedule
