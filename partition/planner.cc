#include "partition/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace gp::partition {

namespace {

std::string bytes_text(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
  }
  return buf;
}

}  // namespace

std::string infeasibility_hint(Problem const& p) {
  double const factor = 1.0 + p.optimizer_bytes_per_weight_byte;
  double total_static = 0;
  double largest = 0;
  std::string largest_name;
  for (Node const& node : p.nodes) {
    double const s = factor * static_cast<double>(node.weight_bytes);
    total_static += s;
    double const one = s + static_cast<double>(node.activation_bytes_per_sample);
    if (one > largest) {
      largest = one;
      largest_name = node.name;
    }
  }
  double const memory = static_cast<double>(p.device_memory());
  int const n = p.cluster.size();
  if (largest > memory)
    return "node '" + largest_name + "' alone needs " + bytes_text(largest) +
           " (weights, optimizer state and one sample's activations) but a device has " + bytes_text(memory) +
           "; devices need at least " + bytes_text(largest);
  if (total_static > memory * n) {
    int const needed = static_cast<int>(std::ceil(total_static / memory));
    return "weights and optimizer state take " + bytes_text(total_static) + " but " + std::to_string(n) +
           " devices of " + bytes_text(memory) + " hold " + bytes_text(memory * n) + "; it needs at least " +
           std::to_string(needed) + " devices of this size, or " + bytes_text(total_static / n) +
           " per device, before activations";
  }
  return "weights and optimizer state take " + bytes_text(total_static) + " of the " + std::to_string(n) + " x " +
         bytes_text(memory) +
         " available, but the activations of the micro-batches in flight do not fit; try a "
         "smaller --micro-batch or --batch, more devices, or more memory per device";
}

double ideal_samples_per_s(Problem const& p) {
  std::vector<double> best(p.nodes.size(), std::numeric_limits<double>::infinity());
  for (int64_t b : p.micro_batch_sizes()) {
    for (int64_t s = 1; s <= b; s *= 2) {
      if (b % s != 0) continue;
      std::vector<NodeTime> const& t = p.node_times(s);
      for (std::size_t v = 0; v < best.size(); ++v)
        best[v] = std::min(best[v], t[v].total_s() / static_cast<double>(s));
    }
  }
  double work = 0;
  for (double w : best) work += w;
  return work > 0 ? p.cluster.size() / work : 0.0;
}

namespace {

Result<Plan> plan_uniform(std::string const& planner, Problem const& p, PlannerOptions const& options) {
  if (planner == "gpp") return plan_gpp(p, options);
  if (planner == "pipedream") return plan_pipedream(p, options);
  if (planner == "piper") return plan_piper(p, options);
  if (planner == "balanced") return plan_balanced(p, options);
  return invalid_argument("unknown planner '" + planner + "' (use gpp, pipedream, piper or balanced)");
}

}  // namespace

// A heterogeneous cluster is planned twice on uniform stand-ins, and each plan placed on the real
// devices: once with one stand-in per device (the slowest, smallest one: every plan fits anywhere),
// once with one stand-in per speed unit (a device twice the slowest counts twice, so faster devices
// get proportionally more work). The faster placed plan wins.
Result<Plan> plan_with(std::string const& planner, Problem const& p, PlannerOptions const& options) {
  if (planner != "gpp" && planner != "pipedream" && planner != "piper" && planner != "balanced")
    return invalid_argument("unknown planner '" + planner + "' (use gpp, pipedream, piper or balanced)");
  if (!p.cluster.heterogeneous()) return plan_uniform(planner, p, options);
  PlannerOptions inner = options;
  inner.evaluate = nullptr;  // stand-in plans are judged after placement, by their real prices
  std::optional<Plan> best;
  Status first_error = Status::ok();
  for (bool units : {false, true}) {
    int const count = units ? speed_units(p.cluster) : p.cluster.size();
    if (units && count == p.cluster.size()) continue;  // speeds differ by less than 2x: the same stand-in
    Problem const stand_in = uniform_stand_in(p, count);
    Result<Plan> plan = plan_uniform(planner, stand_in, inner);
    if (plan.is_ok()) plan = place_on_cluster(p, *plan, units);
    if (!plan.is_ok()) {
      if (first_error.is_ok()) first_error = plan.status();
      if (plan.status().code() != StatusCode::kInfeasible && plan.status().code() != StatusCode::kTimeout)
        return plan.status();
      continue;
    }
    if (options.progress)
      options.progress(planner + ": " + (units ? "speed-unit" : "per-device") +
                       " stand-in placed: " + std::to_string(plan->samples_per_s) + " samples/s");
    if (!best || plan->samples_per_s > best->samples_per_s) best = std::move(*plan);
  }
  if (!best) return first_error;
  return std::move(*best);
}

}  // namespace gp::partition
