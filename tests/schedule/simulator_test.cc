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
