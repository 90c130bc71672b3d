// Activation recomputation in the schedule layer: a recomputing stage's B costs one more forward,
// and between F and backward it holds only its inputs (stash bytes), with the full activations
// needed on top while B runs (schedule/memory.h).
#include <gtest/gtest.h>

#include <memory>

#include "partition/problem.h"
#include "schedule/build.h"
#include "schedule/memory.h"
#include "schedule/plan_view.h"
#include "schedule/report.h"
#include "schedule/simulator.h"
#include "schedule/validate.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

constexpr int64_t kAct = 1000, kStash = 100, kWeight = 1000;

partition::Plan with_stash(partition::Plan plan) {
  for (auto& s : plan.stages) s.stash_bytes_per_micro_batch = kStash;
  return plan;
}

Simulation simulated(partition::Plan const& plan, Policy policy) {
  auto s = build_schedule(plan, policy);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  if (!s.is_ok()) return {};
  auto sim = simulate(plan, *s);
  EXPECT_TRUE(sim.is_ok()) << sim.status().message();
  return sim.is_ok() ? *sim : Simulation{};
}

TEST(Recompute, OneStageStepGrowsByOneForwardPerMicroBatch) {
  int const m = 4;
  auto plan = with_stash(testing::chain(1, m, {0.5, 1.0, 0.25, kAct, kWeight}));
  Simulation const keep = simulated(plan, Policy::k1F1B);
  plan.stages[0].recompute = true;
  Simulation const rc = simulated(plan, Policy::k1F1B);
  EXPECT_NEAR(keep.step_time_s, m * (0.5 + 1.0 + 0.25), 1e-12);
  EXPECT_NEAR(rc.step_time_s, keep.step_time_s + m * 0.5, 1e-12);
  // Every B lasts bwd_input + bwd_weight + fwd.
  int backwards = 0;
  for (auto const& iv : rc.timeline.intervals)
    if (iv.op == Op::kBackward) {
      ++backwards;
      EXPECT_NEAR(iv.end_s - iv.start_s, 1.75, 1e-12) << iv.label;
    }
  EXPECT_EQ(backwards, m);
}

TEST(Recompute, TwoStagesTheRecomputingBottleneckAddsMForwards) {
  // Stage 0 is cheap, so stage 1 (which recomputes) is busy from its first F to its last B: the
  // step grows by exactly m of its forwards.
  int const m = 6;
  auto plan = with_stash(testing::chain(2, m, {1.0, 2.0, 0.0, kAct, kWeight}));
  plan.stages[0].fwd_s = plan.stages[0].bwd_input_s = 0.01;
  Simulation const keep = simulated(plan, Policy::k1F1B);
  EXPECT_NEAR(keep.step_time_s, 0.01 + m * 3.0 + 0.01, 1e-9);
  plan.stages[1].recompute = true;
  Simulation const rc = simulated(plan, Policy::k1F1B);
  EXPECT_NEAR(rc.step_time_s, keep.step_time_s + m * 1.0, 1e-9);
  // Recomputing the cheap stage instead costs only its own forwards, off the critical path here.
  plan.stages[1].recompute = false;
  plan.stages[0].recompute = true;
  Simulation const rc0 = simulated(plan, Policy::k1F1B);
  EXPECT_LE(rc0.step_time_s, keep.step_time_s + m * 0.01 + 1e-9);
  EXPECT_GE(rc0.step_time_s, keep.step_time_s);
}

TEST(Recompute, SplitBackwardPricesTheForwardOnBNotW) {
  int const m = 4;
  auto plan = with_stash(testing::chain(2, m, {1.0, 1.0, 1.0, kAct, kWeight}));
  plan.stages[1].recompute = true;
  Simulation const sim = simulated(plan, Policy::kZeroBubble);
  int b = 0, w = 0;
  for (auto const& iv : sim.timeline.intervals) {
    if (iv.stage != 1) continue;
    if (iv.op != Op::kBackward && iv.op != Op::kWeight) continue;
    ++(iv.op == Op::kBackward ? b : w);
    EXPECT_NEAR(iv.end_s - iv.start_s, iv.op == Op::kBackward ? 2.0 : 1.0, 1e-12) << iv.label;
  }
  EXPECT_EQ(b, m);
  EXPECT_EQ(w, m);
}

TEST(Recompute, PeakMemoryFollowsThePlanFormula) {
  // 1F1B on 2 stages: stage 0 holds 2 micro-batches at once, stage 1 one.
  int const m = 4;
  auto plan = with_stash(testing::chain(2, m, {1.0, 1.0, 1.0, kAct, kWeight}));
  Simulation const keep = simulated(plan, Policy::k1F1B);
  ASSERT_EQ(keep.peak_in_flight, (std::vector<int>{2, 1}));
  int64_t const fixed = kWeight + 3 * kWeight;  // weights + optimizer state (test_plans.cc)
  EXPECT_EQ(keep.devices[0].peak_memory_bytes, fixed + 2 * kAct);
  EXPECT_EQ(keep.devices[1].peak_memory_bytes, fixed + 1 * kAct);
  for (auto& s : plan.stages) s.recompute = true;
  Simulation const rc = simulated(plan, Policy::k1F1B);
  EXPECT_EQ(rc.peak_in_flight, keep.peak_in_flight);
  // weights + optimizer + in_flight * stash + activations (partition/plan.h)
  for (int d = 0; d < 2; ++d)
    EXPECT_EQ(rc.devices[d].peak_memory_bytes, fixed + rc.peak_in_flight[d] * kStash + kAct) << "device " << d;
  // It pays with 2 micro-batches in flight; with 1 the stash comes on top of the activations.
  EXPECT_LT(rc.devices[0].peak_memory_bytes, keep.devices[0].peak_memory_bytes);
  EXPECT_EQ(rc.devices[1].peak_memory_bytes, keep.devices[1].peak_memory_bytes + kStash);
  // With the stash as large as the activations it never pays: one more micro-batch's worth.
  for (auto& s : plan.stages) s.stash_bytes_per_micro_batch = kAct;
  Simulation const big = simulated(plan, Policy::k1F1B);
  EXPECT_EQ(big.devices[0].peak_memory_bytes, fixed + 3 * kAct);
  EXPECT_EQ(big.devices[1].peak_memory_bytes, fixed + 2 * kAct);
}

TEST(Recompute, SplitHoldsWhatWNeedsUntilW) {
  int const m = 4;
  auto plan = with_stash(testing::chain(1, m, {1.0, 1.0, 1.0, kAct, kWeight}));
  plan.stages[0].recompute = true;
  auto s = build_schedule(plan, Policy::kZeroBubble);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  auto view = PlanView::make(plan);
  ASSERT_TRUE(view.is_ok());
  // Walk the list: F adds the stash; B peaks at + activations and then keeps them for W instead of
  // the stash; W frees them.
  int64_t bytes = view->static_bytes(0), peak = bytes;
  for (auto const& in : s->devices[0]) {
    if (in.op == Op::kForward) bytes += kStash;
    if (in.op == Op::kBackward) {
      peak = std::max(peak, bytes + kAct);
      bytes += kAct - kStash;
    }
    if (in.op == Op::kWeight) bytes -= kAct;
    peak = std::max(peak, bytes);
  }
  EXPECT_EQ(bytes, view->static_bytes(0));
  auto const mem = account_memory(*view, *s);
  EXPECT_EQ(mem[0].peak_bytes, peak);
  EXPECT_GT(peak, view->static_bytes(0) + kAct);
}

TEST(Recompute, ValidatorAndReportSayWhichStagesRecompute) {
  int const m = 4;
  auto plan = with_stash(testing::chain(2, m, {1.0, 1.0, 1.0, kAct, kWeight}));
  plan.stages[0].recompute = true;
  auto s = build_schedule(plan, Policy::k1F1B);
  ASSERT_TRUE(s.is_ok());
  // Device 0 peaks at 4000 + 2 * 100 + 1000 = 5200 bytes.
  auto const v = validate_schedule(plan, *s, CheckOptions{5100});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "memory");
  EXPECT_NE(v[0].message.find("peak 5.1 KiB"), std::string::npos) << v[0].message;
  EXPECT_NE(v[0].message.find("2 micro-batches of stage 0 (inputs only: it recomputes)"), std::string::npos)
      << v[0].message;
  EXPECT_TRUE(validate_schedule(plan, *s, CheckOptions{5200}).empty());
  auto sim = simulate(plan, *s);
  ASSERT_TRUE(sim.is_ok());
  std::string const table = simulation_table(plan, *s, *sim);
  EXPECT_NE(table.find("s0(rc)"), std::string::npos) << table;
  EXPECT_EQ(table.find("s1(rc)"), std::string::npos) << table;
  EXPECT_NE(simulation_json(plan, *s, *sim).find("\"recompute_stages\": [\n    0\n  ]"), std::string::npos);
}

// A planner's recomputing stage and the simulator price the rerun forward once: a one-stage plan
// from partition::assemble_plan simulates at m * T_s, T_s as the plan states it.
class FixedTimer : public partition::NodeTimer {
 public:
  partition::NodeTime time(int, int64_t samples, partition::Device const&) const override {
    double const s = static_cast<double>(samples);
    return {0.5 * s, 1.0 * s, 0.25 * s};
  }
};

TEST(Recompute, APlannedRecomputingStageSimulatesAtItsOwnStageTime) {
  partition::Problem p;
  p.model = "one";
  p.nodes = {{"a", "op", 10, 1000}, {"b", "op", 10, 1000}};
  p.edges = {{0, 1, 100, {"t"}}};
  p.timer = std::make_shared<FixedTimer>();
  p.cluster = partition::Cluster::uniform(1, int64_t{1} << 30);
  p.batch = 8;
  p.count_communication = false;
  ASSERT_TRUE(p.finalize().is_ok());
  for (bool recompute : {false, true}) {
    partition::StageAssignment stage;
    stage.nodes = {0, 1};
    stage.recompute = recompute;
    auto plan = partition::assemble_plan(p, {stage}, 2, "test");
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    ASSERT_EQ(plan->stages[0].recompute, recompute);
    // Per micro-batch of 2 samples: F 2 s, B 4 s, W 1 s, and with recompute one more F.
    EXPECT_NEAR(plan->stages[0].time_s, recompute ? 9.0 : 7.0, 1e-12);
    Simulation const sim = simulated(*plan, Policy::k1F1B);
    EXPECT_NEAR(sim.step_time_s, plan->num_micro_batches * plan->stages[0].time_s, 1e-9) << "recompute " << recompute;
  }
}

}  // namespace
}  // namespace gp::schedule
