#include "tests/schedule/test_plans.h"

#include <algorithm>

namespace gp::schedule::testing {

partition::PlanStage make_stage(int id, std::vector<int> devices, StageCost c) {
  partition::PlanStage s;
  s.id = id;
  s.nodes = {"op" + std::to_string(id)};
  s.replicas = static_cast<int>(devices.size());
  s.devices = std::move(devices);
  s.fwd_s = c.fwd;
  s.bwd_input_s = c.bwd_input;
  s.bwd_weight_s = c.bwd_weight;
  s.allreduce_s = 0.5;
  s.time_s = c.fwd + c.bwd_input + c.bwd_weight;
  s.weight_bytes = c.weight;
  s.optimizer_bytes = 3 * c.weight;
  s.activation_bytes_per_micro_batch = c.act;
  return s;
}

void add_edge(partition::Plan& plan, int src, int dst, double transfer_s, int64_t bytes) {
  partition::PlanEdge e;
  e.src = src;
  e.dst = dst;
  e.tensors = {"t" + std::to_string(src) + "_" + std::to_string(dst)};
  e.bytes_per_micro_batch = bytes;
  e.transfer_s = transfer_s;
  plan.edges.push_back(e);
}

void finish(partition::Plan& plan, int micro_batches) {
  int const n = static_cast<int>(plan.stages.size());
  int devices = 0;
  for (auto& s : plan.stages)
    for (int d : s.devices) devices = std::max(devices, d + 1);
  for (int s = n - 1; s >= 0; --s) {
    plan.stages[s].depth = 1;
    for (auto const& e : plan.edges)
      if (e.src == s) plan.stages[s].depth = std::max(plan.stages[s].depth, 1 + plan.stages[e.dst].depth);
    plan.depth = std::max(plan.depth, plan.stages[s].depth);
  }
  plan.model = "test";
  plan.planner = "test";
  plan.num_devices = devices;
  plan.micro_batch = 4;
  plan.num_micro_batches = micro_batches;
  plan.batch = 4 * micro_batches;
}

partition::Plan chain(int p, int m, StageCost c, double transfer_s) {
  partition::Plan plan;
  for (int k = 0; k < p; ++k) plan.stages.push_back(make_stage(k, {k}, c));
  for (int k = 0; k + 1 < p; ++k) add_edge(plan, k, k + 1, transfer_s);
  finish(plan, m);
  return plan;
}

partition::Plan two_branch(int m, StageCost c) {
  partition::Plan plan;
  for (int k = 0; k < 4; ++k) plan.stages.push_back(make_stage(k, {k}, c));
  add_edge(plan, 0, 1);
  add_edge(plan, 0, 2);
  add_edge(plan, 1, 3);
  add_edge(plan, 2, 3);
  finish(plan, m);
  return plan;
}

partition::Plan two_branch_as_chain(int m, StageCost c) { return chain(4, m, c); }

partition::Plan looping_chain(int p, int m) {
  partition::Plan plan;
  for (int k = 0; k < 2 * p; ++k) plan.stages.push_back(make_stage(k, {k % p}, {0.5, 0.5, 0.5, 100, 1000}));
  for (int k = 0; k + 1 < 2 * p; ++k) add_edge(plan, k, k + 1, 0.01);
  finish(plan, m);
  return plan;
}

partition::Plan replicated_with_skip(int m) {
  partition::Plan plan;
  plan.stages.push_back(make_stage(0, {0}));
  plan.stages.push_back(make_stage(1, {1, 2}, {0.6, 0.5, 0.5, 100, 1000}));
  plan.stages.push_back(make_stage(2, {3}));
  add_edge(plan, 0, 1, 0.1);
  add_edge(plan, 1, 2, 0.1);
  add_edge(plan, 0, 2, 0.2);
  finish(plan, m);
  return plan;
}

partition::Plan replicated_diamond(int m) {
  partition::Plan plan;
  plan.stages.push_back(make_stage(0, {0, 1}));
  plan.stages.push_back(make_stage(1, {2}, {2, 1.5, 1.5, 100, 1000}));
  plan.stages.push_back(make_stage(2, {3, 4}));
  plan.stages.push_back(make_stage(3, {5}));
  add_edge(plan, 0, 1, 0.05);
  add_edge(plan, 0, 2, 0.05);
  add_edge(plan, 1, 3, 0.05);
  add_edge(plan, 2, 3, 0.05);
  finish(plan, m);
  return plan;
}

}  // namespace gp::schedule::testing
