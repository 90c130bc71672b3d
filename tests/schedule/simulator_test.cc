#include <gtest/gtest.h>

#include "schedule/build.h"
#include "schedule/schedule_text.h"
#include "schedule/simulator.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

TEST(Simulator, TransfersDelayTheCriticalPath) {
  // One micro-batch through two stages: F0, send, F1, B1, gradient back, B0.
  auto const plan = testing::chain(2, 1, {1.0, 2.0, 0.0, 100, 1000}, 0.25);
  auto s = build_schedule(plan, Policy::kGpipe);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  auto sim = simulate(plan, *s);
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_NEAR(sim->step_time_s, 2 * 1.0 + 2 * 2.0 + 2 * 0.25, 1e-12);
  EXPECT_EQ(sim->samples_per_step, 4);
  EXPECT_NEAR(sim->samples_per_s, 4 / sim->step_time_s, 1e-12);
  EXPECT_NEAR(sim->devices[0].bubble_fraction, 1 - 3.0 / 6.5, 1e-12);
}

TEST(Simulator, CommunicationOverlapsCompute) {
  // Fill-drain with transfers shorter than a forward: the sends overlap the next micro-batch's
  // compute, so only the transfers on the fill and drain path add to the step.
  int const p = 3, m = 16;
  double const c = 0.1;
  auto const plan = testing::chain(p, m, {1.0, 1.0, 1.0, 100, 1000}, c);
  auto s = build_schedule(plan, Policy::kGpipe);
  ASSERT_TRUE(s.is_ok());
  auto sim = simulate(plan, *s);
  ASSERT_TRUE(sim.is_ok());
  EXPECT_NEAR(sim->step_time_s, (m + p - 1) * 3.0 + 2 * (p - 1) * c, 1e-9);
  // Sends and receives appear on their own streams.
  bool send = false, recv = false;
  for (auto const& iv : sim->timeline.intervals) {
    send |= iv.stream == Stream::kSend && iv.op == Op::kSend;
    recv |= iv.stream == Stream::kRecv && iv.op == Op::kRecv;
  }
  EXPECT_TRUE(send);
  EXPECT_TRUE(recv);
}

TEST(Simulator, AllReduceEndsTheStep) {
  auto const plan = testing::replicated_with_skip(4);
  auto s = build_schedule(plan, Policy::kGraph1F1B);
  ASSERT_TRUE(s.is_ok());
  auto sim = simulate(plan, *s);
  ASSERT_TRUE(sim.is_ok());
  double ar_end = 0;
  int ar = 0;
  for (auto const& iv : sim->timeline.intervals)
    if (iv.op == Op::kAllReduce) ar_end = std::max(ar_end, iv.end_s), ++ar;
  EXPECT_EQ(ar, 2);
  EXPECT_LE(ar_end, sim->step_time_s);
  EXPECT_GT(sim->devices[1].peak_memory_bytes, sim->devices[1].static_bytes);
}

// A weight stages 0 and 2 of a chain read: at STEP devices 0 and 2 all-reduce their copies'
// gradients once both have reached it; device 1 holds no copy and is not held up.
TEST(Simulator, TiedWeightsAreAllReducedAtStepOverTheDevicesHoldingACopy) {
  auto plan = testing::chain(3, 1, {1.0, 2.0, 0.0, 100, 1000});
  auto s = build_schedule(plan, Policy::kGpipe);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  auto base = simulate(plan, *s);
  ASSERT_TRUE(base.is_ok()) << base.status().message();
  EXPECT_NEAR(base->step_time_s, 9.0, 1e-12);  // F 0-1-2, B 2-1-0: device 0 ends at 9, 1 at 7, 2 at 5
  plan.tied_weights.push_back({"wte", 1000, {0, 2}, 0.5});
  auto sim = simulate(plan, *s);
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_NEAR(sim->step_time_s, 9.5, 1e-12);
  std::vector<std::vector<std::pair<double, double>>> tied(3);
  for (auto const& iv : sim->timeline.intervals)
    if (iv.op == Op::kAllReduce) tied[iv.device].emplace_back(iv.start_s, iv.end_s);
  EXPECT_EQ(tied[0], (std::vector<std::pair<double, double>>{{9.0, 9.5}}));
  EXPECT_TRUE(tied[1].empty());
  EXPECT_EQ(tied[2], (std::vector<std::pair<double, double>>{{9.0, 9.5}}));

  // Two groups sharing device 1, met in the groups' order on every device: {0,1} when device 0
  // arrives at 9, then {1,2}.
  plan.tied_weights = {{"a", 100, {0, 1}, 0.5}, {"b", 100, {1, 2}, 0.25}};
  auto two = simulate(plan, *s);
  ASSERT_TRUE(two.is_ok()) << two.status().message();
  EXPECT_NEAR(two->step_time_s, 9.75, 1e-12);
  std::vector<std::pair<double, double>> on1;
  for (auto const& iv : two->timeline.intervals)
    if (iv.op == Op::kAllReduce && iv.device == 1) on1.emplace_back(iv.start_s, iv.end_s);
  EXPECT_EQ(on1, (std::vector<std::pair<double, double>>{{9.0, 9.5}, {9.5, 9.75}}));
}

// Every order of three tied groups over a 4-stage chain's stage pairs simulates to the end (no
// false deadlock when a STEP runs one group and then waits for another), each group's devices
// ending no earlier than their slowest member's arrival plus the group's time.
TEST(Simulator, AnyTiedGroupsOverAChainRunToTheEnd) {
  auto plan = testing::chain(4, 1, {1.0, 2.0, 0.0, 100, 1000});
  auto s = build_schedule(plan, Policy::kGpipe);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  std::vector<std::vector<int>> pairs;
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) pairs.push_back({a, b});
  int runs = 0;
  for (auto const& x : pairs)
    for (auto const& y : pairs)
      for (auto const& z : pairs) {
        if (x == y || y == z || x == z) continue;
        plan.tied_weights = {{"x", 8, x, 0.5}, {"y", 8, y, 0.25}, {"z", 8, z, 0.125}};
        auto sim = simulate(plan, *s);
        ASSERT_TRUE(sim.is_ok()) << x[0] << x[1] << " " << y[0] << y[1] << " " << z[0] << z[1] << ": "
                                 << sim.status().message();
        // Device k reaches STEP at 12 - 2k (B runs 3, 2, 1, 0); a group ends after its last member's
        // arrival plus its time, and all three take at most their sum after the last arrival.
        for (auto const& t : plan.tied_weights)
          EXPECT_GE(sim->step_time_s, 12.0 - 2.0 * t.stages.front() + t.allreduce_s - 1e-12);
        EXPECT_LE(sim->step_time_s, 12.0 + 0.875 + 1e-12);
        ++runs;
      }
  EXPECT_EQ(runs, 120);
}

TEST(Simulator, RejectsAnInvalidSchedule) {
  auto const plan = testing::chain(2, 1);
  auto s = parse_schedule(
      "graphpipe-schedule 1\nstages 2\nmicro-batches 1\ndevices 2\ndevice 0:\n  STEP\ndevice 1:\n  STEP\n");
  ASSERT_TRUE(s.is_ok());
  auto sim = simulate(plan, *s);
  ASSERT_FALSE(sim.is_ok());
  EXPECT_NE(sim.status().message().find("never runs 'F s0 m0'"), std::string::npos) << sim.status().message();
}

}  // namespace
}  // namespace gp::schedule
