// Heterogeneous clusters: plan on a uniform stand-in, then place stages on real devices and price
// them there (partition/problem.h, place_on_cluster).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>

#include "partition/problem.h"

namespace gp::partition {

namespace {

double slowest_speed(Cluster const& c) {
  double s = c.devices.front().speed;
  for (Device const& d : c.devices) s = std::min(s, d.speed);
  return s;
}

// Devices of one kind (speed, FLOP/s, bandwidth, memory), fastest kinds first.
struct DeviceClass {
  Device device;
  int units = 1;          // floor(speed / slowest)
  std::vector<int> free;  // device ids not yet given, ascending (so a stage stays within few nodes)
};

std::vector<DeviceClass> device_classes(Cluster const& c, bool units) {
  std::map<std::tuple<double, double, double, int64_t>, int> index;
  std::vector<DeviceClass> classes;
  double const slow = slowest_speed(c);
  for (int d = 0; d < c.size(); ++d) {
    Device const& dev = c.devices[d];
    auto key = std::make_tuple(-dev.speed, -dev.peak_flops, -dev.memory_bandwidth, -dev.memory_bytes);
    auto [it, fresh] = index.emplace(key, static_cast<int>(classes.size()));
    if (fresh) {
      DeviceClass k;
      k.device = dev;
      k.units = units ? std::max(1, static_cast<int>(std::floor(dev.speed / slow + 1e-9))) : 1;
      classes.push_back(k);
    }
    classes[it->second].free.push_back(d);
  }
  std::stable_sort(classes.begin(), classes.end(), [](DeviceClass const& a, DeviceClass const& b) {
    return a.device.speed > b.device.speed ||
           (a.device.speed == b.device.speed && a.device.memory_bytes > b.device.memory_bytes);
  });
  return classes;
}

}  // namespace

int speed_units(Cluster const& c) {
  if (c.devices.empty()) return 0;
  double const slow = slowest_speed(c);
  int units = 0;
  for (Device const& d : c.devices) units += std::max(1, static_cast<int>(std::floor(d.speed / slow + 1e-9)));
  return units;
}

Problem uniform_stand_in(Problem const& p, int count) {
  Problem q = p;
  Device ref = p.reference_device();
  q.cluster.devices.assign(std::max(count, 0), ref);
  // Keep the node structure's proportion: as many stand-ins per node as real devices per node
  // scaled by the count, so the pipeline link is the inter-node one exactly when the cluster spans nodes.
  int const per_node = std::max(1, static_cast<int>(std::llround(static_cast<double>(p.cluster.devices_per_node) *
                                                                 count / std::max(1, p.cluster.size()))));
  q.cluster.devices_per_node = p.cluster.size() <= p.cluster.devices_per_node ? std::max(count, 1) : per_node;
  for (int i = 0; i < count; ++i) q.cluster.devices[i].node = i / q.cluster.devices_per_node;
  q.time_cache = nullptr;
  (void)q.finalize();  // p was finalized; the stand-in differs only in its cluster
  return q;
}

Result<Plan> place_on_cluster(Problem const& p, Plan const& plan, bool units) {
  std::unordered_map<std::string, int> id;
  for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) id.emplace(p.nodes[v].name, v);
  std::vector<DeviceClass> classes = device_classes(p.cluster, units);
  int const k = static_cast<int>(plan.stages.size());
  std::vector<StageAssignment> stages(k);
  for (int s = 0; s < k; ++s) {
    PlanStage const& ps = plan.stages[s];
    for (std::string const& name : ps.nodes) {
      auto it = id.find(name);
      if (it == id.end()) return internal_error("place_on_cluster: the plan names an unknown node " + name);
      stages[s].nodes.push_back(it->second);
    }
    stages[s].recompute = ps.recompute;
  }
  // A device of u speed units takes u consecutive single-replica stages of a path (each the only
  // consumer of the one before, and that one its only producer) as one stage: the stand-in plan
  // gave them u devices' worth of work. Merging keeps the stage convex and the graph acyclic.
  std::vector<char> gone(k, 0);
  std::vector<int> replicas(k);
  for (int s = 0; s < k; ++s) replicas[s] = plan.stages[s].replicas;
  if (units) {
    std::vector<std::vector<int>> succ(k), pred(k);
    for (PlanEdge const& e : plan.edges) {
      succ[e.src].push_back(e.dst);
      pred[e.dst].push_back(e.src);
    }
    for (DeviceClass& cls : classes) {
      if (cls.units < 2) continue;
      for (int s = 0; s < k && !cls.free.empty(); ++s) {
        std::vector<int> path{s};
        while (static_cast<int>(path.size()) < cls.units) {
          int const last = path.back();
          if (gone[last] || replicas[last] != 1 || succ[last].size() != 1) break;
          int const next = succ[last].front();
          if (pred[next].size() != 1 || gone[next] || replicas[next] != 1) break;
          path.push_back(next);
        }
        if (static_cast<int>(path.size()) != cls.units || gone[path.back()]) continue;
        for (std::size_t i = 1; i < path.size(); ++i) {
          stages[s].nodes.insert(stages[s].nodes.end(), stages[path[i]].nodes.begin(), stages[path[i]].nodes.end());
          stages[s].recompute = stages[s].recompute || stages[path[i]].recompute;
          gone[path[i]] = 1;
        }
        // The merged stage's successor is the last one's: rewire so later paths see the merge.
        succ[s] = succ[path.back()];
        for (int t : succ[s])
          for (int& q : pred[t])
            if (q == path.back()) q = s;
        stages[s].devices = {cls.free.front()};
        stages[s].replicas = 1;
        cls.free.erase(cls.free.begin());
        gone[s] = 2;  // placed
      }
    }
  }
  // The heaviest stages choose first: most replicas (stand-in devices), then the longest time.
  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    PlanStage const& x = plan.stages[a];
    PlanStage const& y = plan.stages[b];
    return x.replicas > y.replicas || (x.replicas == y.replicas && x.time_s * x.replicas > y.time_s * y.replicas);
  });
  for (int s : order) {
    if (gone[s]) continue;
    int const r = replicas[s];
    int pick = -1, count = 0;
    // Exactly r units: r / u devices of the fastest class of u units dividing r that has them.
    for (int c = 0; c < static_cast<int>(classes.size()) && pick < 0; ++c) {
      int const u = classes[c].units;
      if (u <= r && r % u == 0 && static_cast<int>(classes[c].free.size()) >= r / u) pick = c, count = r / u;
    }
    // Else one device of more units (the least such), which runs the stage faster than planned.
    for (int c = static_cast<int>(classes.size()) - 1; c >= 0 && pick < 0; --c) {
      if (classes[c].units > r && !classes[c].free.empty()) pick = c, count = 1;
    }
    if (pick < 0 && r > 1) {
      // A data-parallel stage over mixed classes: enough devices, fastest first, to cover r units;
      // replicas split the samples evenly, so the slowest of them sets the pace.
      int have = 0;
      std::vector<int> ids;
      for (DeviceClass& cls : classes)
        for (int d : cls.free)
          if (have < r) have += cls.units, ids.push_back(d);
      if (have >= r) {
        for (DeviceClass& cls : classes)
          cls.free.erase(std::remove_if(cls.free.begin(), cls.free.end(),
                                        [&](int d) { return std::find(ids.begin(), ids.end(), d) != ids.end(); }),
                         cls.free.end());
        std::sort(ids.begin(), ids.end());
        stages[s].replicas = static_cast<int>(ids.size());
        stages[s].devices = std::move(ids);
        continue;
      }
    }
    if (pick < 0)
      return infeasible("place_on_cluster: no free devices left for stage " + std::to_string(s) + " (" +
                        std::to_string(r) + (units ? " speed units)" : " devices)"));
    auto& free = classes[pick].free;
    stages[s].devices.assign(free.begin(), free.begin() + count);
    free.erase(free.begin(), free.begin() + count);
    stages[s].replicas = count;
  }
  bool const chain = plan.planner != "gpp";
  std::vector<StageAssignment> kept;
  for (int s = 0; s < k; ++s)
    if (gone[s] != 1) kept.push_back(std::move(stages[s]));
  stages = std::move(kept);
  ASSIGN_OR_RETURN(Plan placed, assemble_plan(p, std::move(stages), plan.micro_batch, plan.planner,
                                              chain ? StageGraphShape::kChain : StageGraphShape::kGraph));
  for (PlanStage const& st : placed.stages) {
    int64_t const memory = stage_memory_limit(placed, st);
    if (st.peak_memory_bytes > memory)
      return infeasible("place_on_cluster: stage " + std::to_string(st.id) + " needs " +
                        std::to_string(st.peak_memory_bytes) + " bytes on devices of " + std::to_string(memory));
  }
  placed.notes = plan.notes.empty() ? "" : plan.notes + "; ";
  placed.notes += units ? "planned on " + std::to_string(plan.num_devices) +
                              " stand-in devices (one per speed unit), placed on the heterogeneous cluster"
                        : "planned on the slowest device's uniform stand-in, placed on the heterogeneous cluster";
  placed.search_time_s = plan.search_time_s;
  placed.states_explored = plan.states_explored;
  return placed;
}

}  // namespace gp::partition
