#include "partition/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

namespace gp::partition {

struct Problem::TimeCache {
  std::mutex mutex;
  // Keyed by (samples, device speed, peak flops, memory bandwidth): a copied Problem whose cluster
  // was changed afterwards still gets the right times. std::map keeps references stable.
  std::map<std::tuple<int64_t, double, double, double>, std::vector<NodeTime>> times;
};

Status Problem::finalize() {
  int const n = static_cast<int>(nodes.size());
  if (n == 0) return invalid_argument("problem '" + model + "' has no nodes");
  if (n > kMaxNodes)
    return unsupported("problem '" + model + "' has " + std::to_string(n) + " operators; the planners handle up to " +
                       std::to_string(kMaxNodes) +
                       " (at 50,000 PipeDream's search alone runs past a minute): export a coarser model");
  if (!timer) return invalid_argument("problem '" + model + "' has no node timer (cost model)");
  if (cluster.size() == 0) return invalid_argument("problem '" + model + "': the cluster has no devices");
  if (batch <= 0) return invalid_argument("batch must be positive, got " + std::to_string(batch));
  for (int64_t b : micro_batch_candidates) {
    if (b <= 0 || batch % b != 0)
      return invalid_argument("micro-batch size " + std::to_string(b) + " does not divide the batch " +
                              std::to_string(batch) + "; pick a divisor of the batch");
  }
  out_edges.assign(n, {});
  in_edges.assign(n, {});
  for (int e = 0; e < static_cast<int>(edges.size()); ++e) {
    Edge const& edge = edges[e];
    if (edge.src < 0 || edge.src >= n || edge.dst < 0 || edge.dst >= n)
      return invalid_argument("edge " + std::to_string(e) + " refers to a node outside 0.." + std::to_string(n - 1));
    if (edge.src >= edge.dst)
      return invalid_argument("edge " + nodes[edge.src].name + " -> " + nodes[edge.dst].name +
                              " goes against the node order: node ids must be a topological order");
    out_edges[edge.src].push_back(e);
    in_edges[edge.dst].push_back(e);
  }
  shared_of.assign(n, {});
  for (int w = 0; w < static_cast<int>(shared_weights.size()); ++w) {
    SharedWeight const& sw = shared_weights[w];
    if (sw.readers.size() < 2 || sw.bytes < 0 || !std::is_sorted(sw.readers.begin(), sw.readers.end()) ||
        std::adjacent_find(sw.readers.begin(), sw.readers.end()) != sw.readers.end())
      return invalid_argument("shared weight '" + sw.name + "' needs two or more distinct readers, increasing");
    for (int v : sw.readers) {
      if (v < 0 || v >= n)
        return invalid_argument("shared weight '" + sw.name + "' names a reader outside 0.." + std::to_string(n - 1));
      shared_of[v].push_back(w);
    }
  }
  time_cache = std::make_shared<TimeCache>();
  smallest_memory = -1;
  smallest_memory = device_memory();
  return Status::ok();
}

Device Problem::reference_device() const {
  Device ref = cluster.devices.empty() ? Device{} : cluster.devices.front();
  for (Device const& d : cluster.devices) {
    if (d.speed < ref.speed) ref = d;
  }
  ref.memory_bytes = device_memory();
  return ref;
}

int64_t Problem::device_memory() const {
  if (smallest_memory >= 0) return smallest_memory;
  int64_t memory = std::numeric_limits<int64_t>::max();
  for (Device const& d : cluster.devices) memory = std::min(memory, d.memory_bytes);
  return cluster.devices.empty() ? 0 : memory;
}

std::vector<int64_t> Problem::micro_batch_sizes() const {
  if (!micro_batch_candidates.empty()) {
    std::vector<int64_t> sizes = micro_batch_candidates;
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
  }
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= batch; b *= 2) {
    if (batch % b == 0) sizes.push_back(b);
  }
  return sizes;
}

std::vector<NodeTime> const& Problem::node_times(int64_t samples) const {
  return node_times(samples, reference_device());
}

std::vector<NodeTime> const& Problem::node_times(int64_t samples, Device const& device) const {
  if (!time_cache) time_cache = std::make_shared<TimeCache>();
  auto key = std::make_tuple(samples, device.speed, device.peak_flops, device.memory_bandwidth);
  std::lock_guard<std::mutex> lock(time_cache->mutex);
  auto it = time_cache->times.find(key);
  if (it != time_cache->times.end()) return it->second;
  std::vector<NodeTime> times(nodes.size());
  if (samples > 0) {
    for (int v = 0; v < static_cast<int>(nodes.size()); ++v) times[v] = timer->time(v, samples, device);
  }
  return time_cache->times.emplace(key, std::move(times)).first->second;
}

Link const& Problem::pipeline_link() const {
  return cluster.size() <= cluster.devices_per_node ? cluster.intra_node : cluster.inter_node;
}

int64_t samples_per_replica(int64_t micro_batch, int replicas) {
  if (replicas <= 0 || micro_batch < replicas) return 0;
  return (micro_batch + replicas - 1) / replicas;
}

int micro_batches_that_fit(int64_t memory, int64_t fixed_bytes, int64_t per_micro_batch) {
  int64_t const avail = memory - fixed_bytes;
  if (avail < 0) return 0;
  if (per_micro_batch <= 0) return std::numeric_limits<int32_t>::max();
  return static_cast<int>(std::min<int64_t>(avail / per_micro_batch, std::numeric_limits<int32_t>::max()));
}

namespace {

// Membership marks reused across calls (stage_cost is called very often).
std::vector<char>& marks_for(std::size_t n) {
  thread_local std::vector<char> marks;
  if (marks.size() < n) marks.resize(n, 0);
  return marks;
}

// Ring all-reduce of `bytes` over `replicas` devices on `link`.
double allreduce_time(double bytes, int replicas, Link const& link) {
  if (replicas <= 1 || bytes <= 0) return 0.0;
  double const r = replicas;
  return 2.0 * (r - 1.0) / r * bytes / link.bandwidth + 2.0 * (r - 1.0) * link.latency;
}

}  // namespace

StageSums stage_sums(Problem const& p, std::vector<int> const& nodes, int64_t samples, Device const* device) {
  StageSums sums;
  std::vector<NodeTime> const& times = device ? p.node_times(samples, *device) : p.node_times(samples);
  std::vector<char>& in_stage = marks_for(p.nodes.size());
  for (int v : nodes) in_stage[v] = 1;
  // Distinct boundary groups: (producer, tensors). Small per stage, so a sorted vector is enough.
  std::vector<std::pair<int, std::vector<std::string> const*>> groups;
  auto add_group = [&](Edge const& e, bool entering) {
    for (auto const& [src, tensors] : groups) {
      if (src == e.src && *tensors == e.tensors) return;
    }
    groups.emplace_back(e.src, &e.tensors);
    if (e.bytes_per_sample > 0) {
      sums.boundary_bytes_per_sample += e.bytes_per_sample;
      ++sums.boundary_tensors;
      if (entering) sums.input_bytes_per_sample += e.bytes_per_sample;
    }
  };
  for (int v : nodes) {
    Node const& node = p.nodes[v];
    sums.time.fwd_s += times[v].fwd_s;
    sums.time.bwd_input_s += times[v].bwd_input_s;
    sums.time.bwd_weight_s += times[v].bwd_weight_s;
    sums.weight_bytes += node.weight_bytes;
    sums.activation_bytes_per_sample += node.activation_bytes_per_sample;
    for (int e : p.in_edges[v]) {
      if (!in_stage[p.edges[e].src]) add_group(p.edges[e], true);
    }
    for (int e : p.out_edges[v]) {
      if (!in_stage[p.edges[e].dst]) add_group(p.edges[e], false);
    }
  }
  // Shared weights the stage reads without their first reader: a copy it trains.
  if (!p.shared_weights.empty() && p.shared_of.size() == p.nodes.size()) {
    std::vector<int> copies;
    for (int v : nodes)
      for (int w : p.shared_of[v])
        if (!in_stage[p.shared_weights[w].readers.front()] &&
            std::find(copies.begin(), copies.end(), w) == copies.end())
          copies.push_back(w);
    for (int w : copies) sums.weight_bytes += p.shared_weights[w].bytes;
  }
  for (int v : nodes) in_stage[v] = 0;
  return sums;
}

StageCost stage_cost_from_sums(Problem const& p, StageSums const& sums, int replicas, int64_t micro_batch,
                               int in_flight, int64_t num_micro_batches, bool recompute) {
  StageCost cost;
  int64_t const samples = samples_per_replica(micro_batch, replicas);
  cost.weight_bytes = sums.weight_bytes;
  cost.optimizer_bytes = static_cast<int64_t>(std::llround(p.optimizer_bytes_per_weight_byte * sums.weight_bytes));
  cost.recompute = recompute;
  cost.activation_bytes =
      recompute
          ? (static_cast<int64_t>(in_flight) * sums.input_bytes_per_sample + sums.activation_bytes_per_sample) * samples
          : static_cast<int64_t>(in_flight) * sums.activation_bytes_per_sample * samples;
  if (samples == 0 || (!p.allow_replication && replicas != 1)) {
    cost.time_s = std::numeric_limits<double>::infinity();
    cost.fits = false;
    return cost;
  }
  cost.fwd_s = sums.time.fwd_s;
  cost.bwd_input_s = sums.time.bwd_input_s;
  cost.bwd_weight_s = sums.time.bwd_weight_s;
  if (p.count_communication) {
    Link const& link = p.pipeline_link();
    double const bytes = static_cast<double>(sums.boundary_bytes_per_sample) * samples;
    // Each boundary tensor goes once each way (activation forward, gradient backward).
    cost.comm_s = 2.0 * (sums.boundary_tensors * link.latency + bytes / link.bandwidth);
    cost.allreduce_s =
        allreduce_time(static_cast<double>(sums.weight_bytes), replicas, p.cluster.link_for_group(replicas));
  }
  double const m = static_cast<double>(std::max<int64_t>(1, num_micro_batches));
  // Recomputation reruns the forward before B: T_s counts it, while bwd_input_s stays the
  // input-gradient pass alone, as PlanStage keeps it (the simulator adds fwd_s to a recomputing B).
  cost.time_s =
      cost.fwd_s * (recompute ? 2 : 1) + cost.bwd_input_s + cost.bwd_weight_s + cost.comm_s + cost.allreduce_s / m;
  cost.fits = cost.memory_bytes() <= p.device_memory();
  return cost;
}

StageCost stage_cost(Problem const& p, std::vector<int> const& nodes, int replicas, int64_t micro_batch, int in_flight,
                     int64_t num_micro_batches, bool recompute) {
  int64_t const samples = samples_per_replica(micro_batch, replicas);
  return stage_cost_from_sums(p, stage_sums(p, nodes, samples), replicas, micro_batch, in_flight, num_micro_batches,
                              recompute);
}

StageCost stage_cost_on(Problem const& p, std::vector<int> const& nodes, std::vector<int> const& devices,
                        int64_t micro_batch, int in_flight, int64_t num_micro_batches, bool recompute) {
  int const replicas = static_cast<int>(devices.size());
  // The slowest of the devices sets the pace; the smallest memory must hold the stage.
  Device slow = p.cluster.devices[devices.front()];
  int64_t memory = slow.memory_bytes;
  bool one_node = true;
  for (int d : devices) {
    Device const& dev = p.cluster.devices[d];
    if (dev.speed < slow.speed) slow = dev;
    memory = std::min(memory, dev.memory_bytes);
    one_node = one_node && dev.node == p.cluster.devices[devices.front()].node;
  }
  int64_t const samples = samples_per_replica(micro_batch, replicas);
  StageCost c = stage_cost_from_sums(p, stage_sums(p, nodes, samples, &slow), replicas, micro_batch, in_flight,
                                     num_micro_batches, recompute);
  if (p.count_communication && replicas > 1) {
    double const m = static_cast<double>(std::max<int64_t>(1, num_micro_batches));
    c.time_s -= c.allreduce_s / m;
    c.allreduce_s = allreduce_time(static_cast<double>(c.weight_bytes), replicas,
                                   one_node ? p.cluster.intra_node : p.cluster.inter_node);
    c.time_s += c.allreduce_s / m;
  }
  c.fits = c.memory_bytes() <= memory && std::isfinite(c.time_s);
  return c;
}

Result<Plan> assemble_plan(Problem const& p, std::vector<StageAssignment> stages, int64_t micro_batch,
                           std::string planner, StageGraphShape shape) {
  int const n = static_cast<int>(p.nodes.size());
  if (static_cast<int>(p.out_edges.size()) != n)
    return internal_error("assemble_plan: Problem::finalize() was not called");
  if (micro_batch <= 0 || p.batch % micro_batch != 0)
    return invalid_argument("micro-batch size " + std::to_string(micro_batch) + " does not divide the batch " +
                            std::to_string(p.batch));
  if (stages.empty()) return invalid_argument(planner + ": a plan needs at least one stage");
  std::vector<int> stage_of(n, -1);
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    if (stages[s].nodes.empty()) return internal_error(planner + ": stage " + std::to_string(s) + " has no nodes");
    if (stages[s].replicas < 1) return internal_error(planner + ": stage " + std::to_string(s) + " has no replicas");
    for (int v : stages[s].nodes) {
      if (v < 0 || v >= n)
        return internal_error(planner + ": stage " + std::to_string(s) + " names node " + std::to_string(v) +
                              " out of range");
      if (stage_of[v] != -1) return internal_error(planner + ": node " + p.nodes[v].name + " is in two stages");
      stage_of[v] = s;
    }
    std::sort(stages[s].nodes.begin(), stages[s].nodes.end());
  }
  for (int v = 0; v < n; ++v) {
    if (stage_of[v] == -1) return internal_error(planner + ": node " + p.nodes[v].name + " is in no stage");
  }
  int const k = static_cast<int>(stages.size());
  // Stage graph; topological order by Kahn, ties broken by the smallest node id of the stage.
  std::vector<std::set<int>> succ(k);
  std::vector<int> indegree(k, 0);
  for (Edge const& e : p.edges) {
    int const a = stage_of[e.src], b = stage_of[e.dst];
    if (shape == StageGraphShape::kChain && b < a)
      return internal_error(planner + ": stage " + std::to_string(b) + " consumes a tensor of the later stage " +
                            std::to_string(a) + " (a chain must list its stages in pipeline order)");
    if (a != b && succ[a].insert(b).second) ++indegree[b];
  }
  if (shape == StageGraphShape::kChain) {
    for (int s = 0; s + 1 < static_cast<int>(stages.size()); ++s) {
      if (succ[s].insert(s + 1).second) ++indegree[s + 1];
    }
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (int s = 0; s < k; ++s) {
    if (indegree[s] == 0) ready.emplace(stages[s].nodes.front(), s);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    int const s = ready.top().second;
    ready.pop();
    order.push_back(s);
    for (int t : succ[s]) {
      if (--indegree[t] == 0) ready.emplace(stages[t].nodes.front(), t);
    }
  }
  if (static_cast<int>(order.size()) != k)
    return internal_error(planner + ": the stage graph has a cycle (a stage is not convex)");
  std::vector<int> new_id(k);
  for (int i = 0; i < k; ++i) new_id[order[i]] = i;

  int total_devices = 0;
  std::set<int> taken;
  for (auto const& st : stages) {
    total_devices += st.replicas;
    if (!st.devices.empty() && static_cast<int>(st.devices.size()) != st.replicas)
      return internal_error(planner + ": a stage lists " + std::to_string(st.devices.size()) + " devices for " +
                            std::to_string(st.replicas) + " replicas");
    for (int d : st.devices) {
      if (d < 0 || d >= p.cluster.size() || !taken.insert(d).second)
        return internal_error(planner + ": device " + std::to_string(d) + " is out of range or in two stages");
    }
  }
  if (total_devices > p.cluster.size())
    return infeasible(planner + ": the plan needs " + std::to_string(total_devices) + " devices but the cluster has " +
                      std::to_string(p.cluster.size()));

  Plan plan;
  plan.model = p.model;
  plan.planner = std::move(planner);
  plan.num_devices = p.cluster.size();
  plan.device_memory_bytes = p.device_memory();
  if (p.cluster.heterogeneous())
    for (Device const& d : p.cluster.devices) plan.device_memory.push_back(d.memory_bytes);
  plan.batch = p.batch;
  plan.micro_batch = micro_batch;
  plan.num_micro_batches = p.batch / micro_batch;
  plan.stages.resize(k);
  std::vector<std::set<int>> new_succ(k);
  for (int s = 0; s < k; ++s) {
    for (int t : succ[s]) new_succ[new_id[s]].insert(new_id[t]);
  }
  std::vector<int> depth(k, 1);
  for (int i = k - 1; i >= 0; --i) {
    for (int t : new_succ[i]) depth[i] = std::max(depth[i], depth[t] + 1);
  }
  int next_device = 0;
  double max_time = 0;
  for (int i = 0; i < k; ++i) {
    StageAssignment const& st = stages[order[i]];
    PlanStage& ps = plan.stages[i];
    ps.id = i;
    for (int v : st.nodes) ps.nodes.push_back(p.nodes[v].name);
    ps.replicas = st.replicas;
    if (!st.devices.empty()) {
      ps.devices = st.devices;
    } else {
      for (int r = 0; r < st.replicas; ++r) ps.devices.push_back(next_device++);
    }
    ps.depth = depth[i];
    auto price = [&](bool recompute) {
      if (st.devices.empty())
        return stage_cost(p, st.nodes, st.replicas, micro_batch, depth[i], plan.num_micro_batches, recompute);
      return stage_cost_on(p, st.nodes, st.devices, micro_batch, depth[i], plan.num_micro_batches, recompute);
    };
    StageCost c = price(false);
    if (st.recompute || (!c.fits && p.allow_recompute)) {
      StageCost const rc = price(true);
      if (st.recompute || rc.fits) c = rc;
    }
    int64_t const samples = samples_per_replica(micro_batch, st.replicas);
    ps.fwd_s = c.fwd_s;
    ps.bwd_input_s = c.bwd_input_s;
    ps.bwd_weight_s = c.bwd_weight_s;
    ps.comm_s = c.comm_s;
    ps.allreduce_s = c.allreduce_s;
    ps.time_s = c.time_s;
    ps.weight_bytes = c.weight_bytes;
    ps.optimizer_bytes = c.optimizer_bytes;
    ps.update_s = static_cast<double>(c.weight_bytes) * p.update_seconds_per_weight_byte;
    int64_t act_per_sample = 0;
    for (int v : st.nodes) act_per_sample += p.nodes[v].activation_bytes_per_sample;
    ps.activation_bytes_per_micro_batch = act_per_sample * samples;
    ps.in_flight = depth[i];
    ps.recompute = c.recompute;
    ps.stash_bytes_per_micro_batch = stage_sums(p, st.nodes, samples).input_bytes_per_sample * samples;
    ps.peak_memory_bytes = c.memory_bytes();
    max_time = std::max(max_time, c.time_s);
    plan.depth = std::max(plan.depth, depth[i]);
  }
  // Edges: distinct (producer, tensors) groups per stage pair.
  std::map<std::pair<int, int>, PlanEdge> plan_edges;
  std::map<std::pair<int, int>, std::vector<std::pair<int, std::vector<std::string> const*>>> seen;
  for (Edge const& e : p.edges) {
    int const a = new_id[stage_of[e.src]], b = new_id[stage_of[e.dst]];
    if (a == b) continue;
    PlanEdge& pe = plan_edges[{a, b}];
    pe.src = a;
    pe.dst = b;
    auto& groups = seen[{a, b}];
    bool duplicate = false;
    for (auto const& [src, tensors] : groups) duplicate = duplicate || (src == e.src && *tensors == e.tensors);
    if (duplicate) continue;
    groups.emplace_back(e.src, &e.tensors);
    if (e.tensors.empty()) {
      pe.tensors.push_back(p.nodes[e.src].name + "->" + p.nodes[e.dst].name);
    } else {
      for (auto const& t : e.tensors) {
        if (std::find(pe.tensors.begin(), pe.tensors.end(), t) == pe.tensors.end()) pe.tensors.push_back(t);
      }
    }
    pe.bytes_per_micro_batch += e.bytes_per_sample * micro_batch;
  }
  if (shape == StageGraphShape::kChain) {
    for (int s = 0; s + 1 < k; ++s) {
      PlanEdge& pe = plan_edges[{s, s + 1}];  // an ordering edge where no tensor passes
      pe.src = s;
      pe.dst = s + 1;
    }
  }
  for (auto& [key, pe] : plan_edges) {
    pe.transfer_s =
        p.count_communication ? p.pipeline_link().transfer_time(static_cast<double>(pe.bytes_per_micro_batch)) : 0.0;
    plan.edges.push_back(std::move(pe));
  }
  // Weights several stages read: one all-reduce of their copies' gradients per step, over the
  // devices of those stages, on the link they share.
  double tied_s = 0;
  for (SharedWeight const& sw : p.shared_weights) {
    std::set<int> holders;
    for (int v : sw.readers) holders.insert(new_id[stage_of[v]]);
    if (holders.size() < 2) continue;
    PlanTiedWeight tw;
    tw.name = sw.name;
    tw.bytes = sw.bytes;
    tw.stages.assign(holders.begin(), holders.end());
    std::vector<int> devices;
    for (int s : tw.stages) devices.insert(devices.end(), plan.stages[s].devices.begin(), plan.stages[s].devices.end());
    bool one_node = true;
    for (int d : devices)
      one_node =
          one_node && d < p.cluster.size() && p.cluster.devices[d].node == p.cluster.devices[devices.front()].node;
    Link const& link = one_node ? p.cluster.intra_node : p.cluster.inter_node;
    tw.allreduce_s = p.count_communication
                         ? allreduce_time(static_cast<double>(sw.bytes), static_cast<int>(devices.size()), link)
                         : 0.0;
    tied_s += tw.allreduce_s;
    plan.tied_weights.push_back(std::move(tw));
  }
  plan.time_per_sample_s = max_time / static_cast<double>(micro_batch);
  plan.tau_s = plan.time_per_sample_s;
  plan.step_time_s = static_cast<double>(plan.num_micro_batches + plan.depth - 1) * max_time + tied_s;
  plan.samples_per_s = plan.step_time_s > 0 ? static_cast<double>(plan.batch) / plan.step_time_s : 0.0;
  return plan;
}

}  // namespace gp::partition
