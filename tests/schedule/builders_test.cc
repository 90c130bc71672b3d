#include <gtest/gtest.h>

#include "schedule/build.h"
#include "schedule/simulator.h"
#include "schedule/validate.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

using testing::StageCost;

Simulation run(partition::Plan const& plan, Policy policy, int m = 0) {
  auto s = build_schedule(plan, policy, BuildOptions{m});
  EXPECT_TRUE(s.is_ok()) << policy_name(policy) << ": " << s.status().message();
  if (!s.is_ok()) return {};
  auto sim = simulate(plan, *s);
  EXPECT_TRUE(sim.is_ok()) << sim.status().message();
  return sim.is_ok() ? *sim : Simulation{};
}

TEST(Builders, GpipeAnd1F1BMatchTheClosedFormOnAUniformChain) {
  for (int p : {1, 2, 4, 5})
    for (int m : {1, 3, 4, 8}) {
      StageCost const c{1.0, 1.5, 0.5, 100, 1000};  // tf = 1, tb = 2
      auto const plan = testing::chain(p, m, c);
      double const expected = (m + p - 1) * (1.0 + 2.0);
      for (Policy policy : {Policy::kGpipe, Policy::k1F1B, Policy::kGraph1F1B}) {
        auto sim = run(plan, policy);
        EXPECT_NEAR(sim.step_time_s, expected, 1e-9) << policy_name(policy) << " p=" << p << " m=" << m;
      }
    }
}

TEST(Builders, OneFOneBKeepsPMinusIMicroBatchesInFlightOnStageI) {
  int const p = 5, m = 8;
  auto const plan = testing::chain(p, m);
  auto sim = run(plan, Policy::k1F1B);
  ASSERT_EQ(sim.peak_in_flight.size(), static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) EXPECT_EQ(sim.peak_in_flight[i], p - i) << "stage " << i;
  auto gpipe = run(plan, Policy::kGpipe);
  for (int i = 0; i < p; ++i) EXPECT_EQ(gpipe.peak_in_flight[i], m) << "fill-drain holds every micro-batch";
  EXPECT_LT(sim.peak_memory_bytes, gpipe.peak_memory_bytes);
}

TEST(Builders, StageGraphOneFOneBHoldsFewerMicroBatchesThanTheChain) {
  int const m = 8;
  auto graph = run(testing::two_branch(m), Policy::kGraph1F1B);
  auto seq = run(testing::two_branch_as_chain(m), Policy::k1F1B);
  EXPECT_EQ(graph.peak_in_flight[0], 3);
  EXPECT_EQ(seq.peak_in_flight[0], 4);
  int total_graph = 0, total_seq = 0;
  for (int x : graph.peak_in_flight) total_graph += x;
  for (int x : seq.peak_in_flight) total_seq += x;
  EXPECT_LT(total_graph, total_seq);
  EXPECT_LT(graph.peak_memory_bytes, seq.peak_memory_bytes);
  EXPECT_LT(graph.step_time_s, seq.step_time_s) << "the branches run concurrently: a shorter fill and drain";
}

TEST(Builders, ZeroBubbleBeats1F1BWhenTheBackwardSplits) {
  StageCost const c{1.0, 1.0, 1.0, 100, 1000};
  auto const plan = testing::chain(4, 8, c);
  auto one = run(plan, Policy::k1F1B);
  auto zb = run(plan, Policy::kZeroBubble);
  EXPECT_LT(zb.step_time_s, one.step_time_s);
  EXPECT_LT(zb.mean_bubble_fraction, one.mean_bubble_fraction);
}

TEST(Builders, InterleavedRunsSeveralChunksPerDevice) {
  auto const plan = testing::looping_chain(2, 4);
  auto il = run(plan, Policy::kInterleaved);
  auto gp = run(plan, Policy::kGpipe);
  EXPECT_GT(il.step_time_s, 0);
  EXPECT_LE(il.step_time_s, gp.step_time_s + 1e-9);
}

TEST(Builders, EveryBuilderPassesTheValidatorOnManyPlans) {
  std::vector<std::pair<std::string, partition::Plan>> plans;
  for (int m : {1, 2, 3, 4, 8}) {
    for (int p : {1, 2, 3, 5}) plans.push_back({"chain p=" + std::to_string(p), testing::chain(p, m, {}, 0.1)});
    plans.push_back({"two-branch", testing::two_branch(m)});
    plans.push_back({"looping chain", testing::looping_chain(2, m)});
    plans.push_back({"replicated with skip", testing::replicated_with_skip(m)});
    plans.push_back({"replicated diamond", testing::replicated_diamond(m)});
  }
  int built = 0;
  for (auto const& [name, plan] : plans)
    for (Policy policy : concrete_policies()) {
      int const m = static_cast<int>(plan.num_micro_batches);
      if (!policy_applies(plan, policy, m).is_ok()) continue;
      auto s = build_schedule(plan, policy);
      ASSERT_TRUE(s.is_ok()) << name << " m=" << m << " " << policy_name(policy) << ": " << s.status().message();
      auto v = validate_schedule(plan, *s, CheckOptions{0});
      EXPECT_TRUE(v.empty()) << name << " m=" << m << " " << policy_name(policy) << ": " << v.front().to_string();
      ++built;
    }
  EXPECT_GT(built, 100);
}

TEST(Builders, PoliciesThatDoNotApplySaySoAndNameAnAlternative) {
  auto s = build_schedule(testing::chain(4, 8), Policy::kInterleaved);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(s.status().message().find("one stage per device: use --policy 1f1b"), std::string::npos)
      << s.status().message();
  s = build_schedule(testing::two_branch(8), Policy::k1F1B);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("use --policy graph-1f1b"), std::string::npos) << s.status().message();
  s = build_schedule(testing::looping_chain(2, 3), Policy::kInterleaved);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("--micro-batches 4"), std::string::npos) << s.status().message();
  EXPECT_FALSE(parse_policy("pipedream").is_ok());
}

TEST(Builders, AutoPicksTheFastestThatFitsTheMemoryLimit) {
  StageCost const c{1.0, 1.0, 1.0, 1000, 1000};
  auto plan = testing::chain(4, 16, c);
  auto fastest = build_schedule(plan, Policy::kAuto, BuildOptions{0, 0});
  ASSERT_TRUE(fastest.is_ok()) << fastest.status().message();
  EXPECT_EQ(fastest->policy, "zb");
  // Room for weights + optimizer (4000) and four micro-batches: gpipe (16) and zb (up to 7) do not fit.
  auto tight = build_schedule(plan, Policy::kAuto, BuildOptions{0, 4000 + 4 * 1000});
  ASSERT_TRUE(tight.is_ok()) << tight.status().message();
  EXPECT_TRUE(tight->policy == "1f1b" || tight->policy == "graph-1f1b") << tight->policy;
  auto none = build_schedule(plan, Policy::kAuto, BuildOptions{0, 4000 + 1000});
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(none.status().message().find("no schedule policy fits"), std::string::npos);
}

TEST(Builders, ReplicatedStagesAllReduceOncePerReplica) {
  auto s = build_schedule(testing::replicated_with_skip(4), Policy::kGraph1F1B);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  for (int d : {1, 2}) {
    int count = 0;
    for (auto const& in : s->devices[d]) count += in.op == Op::kAllReduce && in.stage == 1;
    EXPECT_EQ(count, 1) << "device " << d;
  }
  for (auto const& in : s->devices[0]) EXPECT_NE(in.op, Op::kAllReduce);
}

}  // namespace
}  // namespace gp::schedule
