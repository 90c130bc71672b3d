#include "schedule/report.h"

#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedule/plan_view.h"
#include "schedule/units.h"

namespace gp::schedule {
namespace {

// "s0,s2"; `mark`: stages that recompute their activations as "s2(rc)".
std::string stages_of(partition::Plan const& plan, int device, bool mark) {
  std::string out;
  for (auto const& s : plan.stages)
    for (int d : s.devices)
      if (d == device) out += (out.empty() ? "s" : ",s") + std::to_string(s.id) + (mark && s.recompute ? "(rc)" : "");
  return out.empty() ? "-" : out;
}

std::vector<int> recompute_stages(partition::Plan const& plan) {
  std::vector<int> out;
  for (auto const& s : plan.stages)
    if (s.recompute) out.push_back(s.id);
  return out;
}

}  // namespace

std::string simulation_table(partition::Plan const& plan, Schedule const& schedule, Simulation const& sim) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "policy %s, %d stages, %d devices, %d micro-batches of %lld samples\n",
                schedule.policy.c_str(), schedule.num_stages, schedule.num_devices(), schedule.num_micro_batches,
                static_cast<long long>(std::max<int64_t>(1, plan.micro_batch)));
  out += buf;
  std::snprintf(buf, sizeof buf, "%-7s %-14s %12s %8s %12s %12s\n", "device", "stages", "compute", "bubble",
                "static mem", "peak mem");
  out += buf;
  for (int d = 0; d < schedule.num_devices(); ++d) {
    auto const& r = sim.devices[d];
    std::snprintf(buf, sizeof buf, "%-7d %-14s %12s %7.1f%% %12s %12s\n", d, stages_of(plan, d, true).c_str(),
                  format_seconds(r.compute_busy_s).c_str(), 100 * r.bubble_fraction,
                  format_bytes(r.static_bytes).c_str(), format_bytes(r.peak_memory_bytes).c_str());
    out += buf;
  }
  if (!recompute_stages(plan).empty())
    out +=
        "(rc): the stage recomputes, keeping only its inputs for each micro-batch in flight and rerunning its "
        "forward before each backward\n";
  std::snprintf(buf, sizeof buf, "step %s, %.2f samples/s, mean bubble %.1f%%, peak memory %s",
                format_seconds(sim.step_time_s).c_str(), sim.samples_per_s, 100 * sim.mean_bubble_fraction,
                format_bytes(sim.peak_memory_bytes).c_str());
  out += buf;
  if (plan.device_memory_bytes > 0) {
    out += " (limit " + format_bytes(plan.device_memory_bytes) +
           (sim.peak_memory_bytes > plan.device_memory_bytes ? ", OVER" : "") + ")";
  }
  out += "\n";
  return out;
}

std::string simulation_json(partition::Plan const& plan, Schedule const& schedule, Simulation const& sim) {
  using nlohmann::json;
  json devices = json::array();
  for (int d = 0; d < schedule.num_devices(); ++d) {
    auto const& r = sim.devices[d];
    devices.push_back({{"device", d},
                       {"stages", stages_of(plan, d, false)},
                       {"compute_busy_s", r.compute_busy_s},
                       {"bubble_fraction", r.bubble_fraction},
                       {"static_bytes", r.static_bytes},
                       {"peak_memory_bytes", r.peak_memory_bytes}});
  }
  json doc = {{"policy", schedule.policy},
              {"stages", schedule.num_stages},
              {"devices", schedule.num_devices()},
              {"micro_batches", schedule.num_micro_batches},
              {"samples_per_step", sim.samples_per_step},
              {"step_time_s", sim.step_time_s},
              {"samples_per_s", sim.samples_per_s},
              {"mean_bubble_fraction", sim.mean_bubble_fraction},
              {"peak_memory_bytes", sim.peak_memory_bytes},
              {"device_memory_bytes", plan.device_memory_bytes},
              {"peak_in_flight", sim.peak_in_flight},
              {"recompute_stages", recompute_stages(plan)},
              {"per_device", devices}};
  return doc.dump(2) + "\n";
}

}  // namespace gp::schedule
