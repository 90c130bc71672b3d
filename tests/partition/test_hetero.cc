// Heterogeneous clusters: stages placed on real devices, priced on them, within each one's memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <vector>

#include "partition/planner.h"
#include "partition/problem.h"
#include "tests/partition/table_problem.h"

namespace gp::partition {
namespace {

using testing::table_problem;
using testing::TableNode;

// k equal branches of `length` nodes between a light source and sink.
Problem branches(int k, int length, int devices, int64_t memory, int64_t batch) {
  std::vector<TableNode> rows;
  std::vector<std::array<int64_t, 3>> edges;
  rows.push_back({0.001, 0.001, 0.0, 10, 10});
  for (int b = 0; b < k; ++b) {
    int prev = 0;
    for (int i = 0; i < length; ++i) {
      rows.push_back({0.1, 0.1, 0.05, 1000, 100});
      int const v = static_cast<int>(rows.size()) - 1;
      edges.push_back({prev, v, 10});
      prev = v;
    }
    edges.push_back({prev, k * length + 1, 10});
  }
  rows.push_back({0.001, 0.001, 0.0, 10, 10});
  Problem p = table_problem(rows, edges, devices, memory, batch);
  p.count_communication = false;
  return p;
}

// Every device in at most one stage, every stage within the memory of each of its devices.
void expect_placed(Problem const& p, Plan const& plan) {
  EXPECT_TRUE(validate_plan(plan).is_ok()) << validate_plan(plan).message();
  ASSERT_EQ(plan.device_memory.size(), static_cast<std::size_t>(p.cluster.size()));
  std::set<int> used;
  for (PlanStage const& s : plan.stages) {
    for (int d : s.devices) {
      EXPECT_TRUE(used.insert(d).second) << "device " << d << " twice";
      EXPECT_LE(s.peak_memory_bytes, p.cluster.devices[d].memory_bytes) << "stage " << s.id << " device " << d;
    }
  }
}

TEST(Heterogeneous, FasterDevicesGetMoreWorkAndTheStepIsPricedOnThem) {
  // 4 branches on 2 devices twice as fast and 4 reference devices; against 6 reference devices.
  // Pipelines only (no data parallelism), as when weights are too large to replicate.
  Problem uniform = branches(4, 6, 6, int64_t{1} << 30, 32);
  uniform.allow_replication = false;
  ASSERT_TRUE(uniform.finalize().is_ok());
  Problem mixed = uniform;
  mixed.cluster.devices[0].speed = mixed.cluster.devices[1].speed = 2.0;
  ASSERT_TRUE(mixed.finalize().is_ok());
  ASSERT_TRUE(mixed.cluster.heterogeneous());
  for (std::string planner : {"gpp", "pipedream", "balanced"}) {
    auto u = plan_with(planner, uniform);
    auto h = plan_with(planner, mixed);
    ASSERT_TRUE(u.is_ok() && h.is_ok()) << planner << ": " << u.status().message() << " / " << h.status().message();
    expect_placed(mixed, *h);
    EXPECT_GE(h->samples_per_s, u->samples_per_s * (1 - 1e-9)) << planner;
    // Each stage's time is that of its slowest device: recompute the compute part from the table.
    for (PlanStage const& s : h->stages) {
      double speed = 10;
      for (int d : s.devices) speed = std::min(speed, mixed.cluster.devices[d].speed);
      double per_sample = 0;
      for (auto const& name : s.nodes) per_sample += name == "n0" || name == "n25" ? 0.002 : 0.25;
      double const samples = static_cast<double>(h->micro_batch) / s.replicas;
      EXPECT_NEAR(s.fwd_s + s.bwd_input_s + s.bwd_weight_s, per_sample * samples / speed, 1e-9)
          << planner << " stage " << s.id;
    }
    if (planner == "gpp") {
      // The speed-unit stand-in (8 units: 8 stages, two consecutive ones of a branch merged on each
      // fast device) beats planning for the slowest device everywhere.
      EXPECT_GT(h->samples_per_s, u->samples_per_s * 1.2) << plan_to_json(*h);
      double fast_work = 0, slow_work = 0;
      for (PlanStage const& s : h->stages)
        (mixed.cluster.devices[s.devices.front()].speed > 1 ? fast_work : slow_work) +=
            static_cast<double>(s.nodes.size()) / s.replicas;
      EXPECT_GT(fast_work / 2, slow_work / 4) << "a fast device should hold more nodes than a slow one";
    }
  }
}

TEST(Heterogeneous, EachStageFitsItsOwnDevicesMemory) {
  // Two devices with a lot of memory, two with little: nothing may land where it does not fit.
  Problem p = branches(2, 4, 4, int64_t{1} << 30, 16);
  ASSERT_TRUE(p.finalize().is_ok());
  int64_t weights = 0;
  for (Node const& n : p.nodes) weights += n.weight_bytes;
  for (int d = 0; d < 4; ++d) p.cluster.devices[d].memory_bytes = d < 2 ? weights * 8 : weights;
  ASSERT_TRUE(p.finalize().is_ok());
  for (std::string planner : {"gpp", "pipedream", "piper", "balanced"}) {
    auto h = plan_with(planner, p);
    if (!h.is_ok()) {
      EXPECT_EQ(h.status().code(), StatusCode::kInfeasible) << planner << ": " << h.status().message();
      continue;
    }
    expect_placed(p, *h);
    auto back = plan_from_json(plan_to_json(*h));  // the per-device memory survives JSON
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_EQ(back->device_memory, h->device_memory);
  }
}

}  // namespace
}  // namespace gp::partition
