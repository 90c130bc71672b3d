#include "schedule/build.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "schedule/compute_order.h"
#include "schedule/emit.h"
#include "schedule/p2p_order.h"
#include "schedule/plan_view.h"
#include "schedule/simulator.h"
#include "schedule/units.h"
#include "schedule/validate.h"

namespace gp::schedule {
namespace {

using Seq = std::vector<ComputeOp>;

Seq one_f_one_b(int stage, int warmup, int m) {
  Seq seq;
  warmup = std::min(warmup, m);
  for (int i = 0; i < warmup; ++i) seq.push_back({Op::kForward, stage, i});
  for (int i = 0; i < m; ++i) {
    seq.push_back({Op::kBackward, stage, i});
    if (warmup + i < m) seq.push_back({Op::kForward, stage, warmup + i});
  }
  return seq;
}

Seq fill_drain(int stage, int m) {
  Seq seq;
  for (int i = 0; i < m; ++i) seq.push_back({Op::kForward, stage, i});
  for (int i = 0; i < m; ++i) seq.push_back({Op::kBackward, stage, i});
  return seq;
}

// One sequence per stage replica, on its device.
OrderRequest per_stage(PlanView const& view, int m, bool gpipe) {
  OrderRequest req;
  req.micro_batches = m;
  req.sequences.resize(view.num_devices());
  for (int s = 0; s < view.num_stages(); ++s)
    for (int d : view.stage(s).devices)
      req.sequences[d].push_back(gpipe ? fill_drain(s, m) : one_f_one_b(s, view.depth(s), m));
  return req;
}

// Device groups of the interleaved placement: group g holds stages g, g + p, g + 2p, ...
struct Interleaving {
  int p = 0, v = 0;
};

Result<Interleaving> interleaving(PlanView const& view, int m) {
  if (!view.is_chain())
    return unsupported("interleaved 1F1B needs a chain of stages, but stage " + std::to_string(view.branching_stage()) +
                       " of this plan has several inputs or outputs: use --policy graph-1f1b");
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of(view.num_stages());
  for (int s = 0; s < view.num_stages(); ++s) {
    auto devs = view.stage(s).devices;
    std::sort(devs.begin(), devs.end());
    auto it = std::find(groups.begin(), groups.end(), devs);
    group_of[s] = static_cast<int>(it - groups.begin());
    if (it == groups.end()) groups.push_back(devs);
  }
  int const p = static_cast<int>(groups.size()), n = view.num_stages();
  if (p == n)
    return unsupported(
        "interleaved 1F1B needs several stages per device, but this plan runs one stage per device: use --policy 1f1b");
  for (int a = 0; a < p; ++a)
    for (int b = a + 1; b < p; ++b)
      for (int d : groups[a])
        if (std::find(groups[b].begin(), groups[b].end(), d) != groups[b].end())
          return unsupported("interleaved 1F1B needs disjoint device groups, but device " + std::to_string(d) +
                             " is shared by stages with different device sets: use --policy graph-1f1b");
  bool looping = n % p == 0;
  for (int s = 0; s < n && looping; ++s) looping = group_of[s] == s % p;
  if (!looping)
    return unsupported("interleaved 1F1B needs stage k of the chain on device group k mod " + std::to_string(p) +
                       " (the looping placement); this plan places them otherwise: use --policy graph-1f1b");
  if (m % p != 0)
    return unsupported("interleaved 1F1B needs the micro-batch count to be a multiple of the " + std::to_string(p) +
                       " device groups, but it is " + std::to_string(m) + ": use --micro-batches " +
                       std::to_string((m / p + 1) * p));
  return Interleaving{p, n / p};
}

OrderRequest interleaved_request(PlanView const& view, int m, Interleaving il) {
  OrderRequest req;
  req.micro_batches = m;
  req.sequences.resize(view.num_devices());
  int const p = il.p, v = il.v, total = m * v;
  for (int g = 0; g < p; ++g) {
    Seq fwd, bwd;
    for (int g0 = 0; g0 < m; g0 += p)
      for (int c = 0; c < v; ++c)
        for (int j = 0; j < p; ++j) {
          fwd.push_back({Op::kForward, c * p + g, g0 + j});
          bwd.push_back({Op::kBackward, (v - 1 - c) * p + g, g0 + j});
        }
    int const warmup = std::min(total, (p - g - 1) * 2 + (v - 1) * p);
    Seq seq(fwd.begin(), fwd.begin() + warmup);
    for (int i = 0; i + warmup < total; ++i) {
      seq.push_back(fwd[warmup + i]);
      seq.push_back(bwd[i]);
    }
    for (int i = total - warmup; i < total; ++i) seq.push_back(bwd[i]);
    for (int d : view.stage(g).devices) req.sequences[d].push_back(seq);
  }
  return req;
}

Result<Schedule> build_concrete(partition::Plan const& plan, PlanView const& view, Policy policy, int m) {
  RETURN_IF_ERROR(policy_applies(plan, policy, m));
  OrderRequest req;
  switch (policy) {
    case Policy::kGpipe:
      req = per_stage(view, m, true);
      break;
    case Policy::k1F1B:
    case Policy::kGraph1F1B:
      req = per_stage(view, m, false);
      break;
    case Policy::kZeroBubble:
      req = per_stage(view, m, false);
      req.defer_weight = true;
      for (int s = 0; s < view.num_stages(); ++s) req.weight_cap.push_back(view.depth(s) - 1);
      break;
    case Policy::kInterleaved: {
      ASSIGN_OR_RETURN(Interleaving il, interleaving(view, m));
      req = interleaved_request(view, m, il);
      break;
    }
    case Policy::kAuto:
      return internal_error("build_concrete(auto)");
  }
  auto make = [&](OrderRequest const& r) -> Result<Schedule> {
    auto orders = order_compute(view, r);
    if (!orders.is_ok()) return orders.status().with_context(std::string("policy ") + policy_name(policy));
    Schedule s = emit_schedule(view, m, policy_name(policy), *orders);
    if (Status st = check_schedule(plan, s, CheckOptions{0}); !st.is_ok())
      return internal_error(std::string("policy ") + policy_name(policy) +
                            " built an invalid schedule: " + st.message());
    return s;
  };
  ASSIGN_OR_RETURN(Schedule s, make(req));
  if (policy != Policy::kZeroBubble) return s;
  // Whether W's should fill early gaps depends on how long they are: simulate both, keep the faster.
  req.fill_early = true;
  ASSIGN_OR_RETURN(Schedule early, make(req));
  ASSIGN_OR_RETURN(Simulation a, simulate(plan, s));
  ASSIGN_OR_RETURN(Simulation b, simulate(plan, early));
  return b.step_time_s < a.step_time_s ? early : s;
}

}  // namespace

char const* policy_name(Policy policy) {
  switch (policy) {
    case Policy::kGpipe:
      return "gpipe";
    case Policy::k1F1B:
      return "1f1b";
    case Policy::kInterleaved:
      return "interleaved";
    case Policy::kGraph1F1B:
      return "graph-1f1b";
    case Policy::kZeroBubble:
      return "zb";
    case Policy::kAuto:
      return "auto";
  }
  return "?";
}

Result<Policy> parse_policy(std::string const& name) {
  for (Policy p :
       {Policy::kGpipe, Policy::k1F1B, Policy::kInterleaved, Policy::kGraph1F1B, Policy::kZeroBubble, Policy::kAuto})
    if (name == policy_name(p)) return p;
  return invalid_argument("unknown schedule policy '" + name +
                          "' (expected gpipe, 1f1b, interleaved, graph-1f1b, zb or auto)");
}

std::vector<Policy> concrete_policies() {
  return {Policy::kGpipe, Policy::k1F1B, Policy::kInterleaved, Policy::kGraph1F1B, Policy::kZeroBubble};
}

Status policy_applies(partition::Plan const& plan, Policy policy, int micro_batches) {
  ASSIGN_OR_RETURN(PlanView view, PlanView::make(plan));
  if (micro_batches < 1)
    return invalid_argument("a schedule needs at least one micro-batch (got " + std::to_string(micro_batches) + ")");
  if (policy == Policy::k1F1B && !view.is_chain())
    return unsupported("1f1b needs a chain of stages, but stage " + std::to_string(view.branching_stage()) +
                       " of this plan has several inputs or outputs: use --policy graph-1f1b");
  if (policy == Policy::kInterleaved) return interleaving(view, micro_batches).status();
  return Status::ok();
}

Result<Schedule> build_schedule(partition::Plan const& plan, Policy policy, BuildOptions const& options) {
  ASSIGN_OR_RETURN(PlanView view, PlanView::make(plan));
  int const m = options.micro_batches > 0 ? options.micro_batches : static_cast<int>(plan.num_micro_batches);
  if (m < 1)
    return invalid_argument("the plan gives no micro-batch count: pass the number of micro-batches (--micro-batches)");
  if (policy != Policy::kAuto) return build_concrete(plan, view, policy, m);

  int64_t const limit = options.memory_limit_bytes < 0 ? plan.device_memory_bytes : options.memory_limit_bytes;
  std::optional<Schedule> best;
  double best_time = std::numeric_limits<double>::infinity();
  std::string tried;
  for (Policy p : concrete_policies()) {
    if (!policy_applies(plan, p, m).is_ok()) continue;
    ASSIGN_OR_RETURN(Schedule s, build_concrete(plan, view, p, m));
    if (options.ordered_transport && !check_ordered_transport(s).is_ok()) {
      tried += std::string(tried.empty() ? "" : ", ") + policy_name(p) + " orders a device pair's messages apart";
      continue;
    }
    ASSIGN_OR_RETURN(Simulation sim, simulate(plan, s));
    tried += std::string(tried.empty() ? "" : ", ") + policy_name(p) + " needs " + format_bytes(sim.peak_memory_bytes);
    bool over = false;  // each device against its own memory (heterogeneous plans list them)
    for (int d = 0; d < static_cast<int>(sim.devices.size()); ++d) {
      int64_t const own = options.memory_limit_bytes < 0 ? partition::memory_of(plan, d) : limit;
      over = over || (own > 0 && sim.devices[d].peak_memory_bytes > own);
    }
    if (over) continue;
    if (sim.step_time_s < best_time) {
      best_time = sim.step_time_s;
      best = std::move(s);
    }
  }
  if (!best)
    return infeasible("no schedule policy fits the memory limit of " + format_bytes(limit) + " per device" +
                      (options.ordered_transport ? " and the ordered (NCCL) transport" : "") + " (" + tried +
                      "): use fewer micro-batches, or partition onto more devices");
  return *best;
}

}  // namespace gp::schedule
