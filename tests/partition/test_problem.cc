#include <gtest/gtest.h>

#include <cmath>

#include "partition/problem.h"
#include "tests/partition/table_problem.h"

namespace gp::partition {
namespace {

using testing::table_problem;
using testing::TableNode;

// 0 -> 1 -> 3, 0 -> 2 -> 3 (a diamond); per-sample times in seconds.
Problem diamond(int devices = 4, int64_t memory = 1 << 30) {
  std::vector<TableNode> rows = {
      {1.0, 2.0, 0.0, 100, 10}, {2.0, 3.0, 1.0, 200, 20}, {1.5, 1.5, 0.5, 300, 30}, {0.5, 0.5, 0.0, 0, 40}};
  Problem p = table_problem(rows, {{0, 1, 1000}, {0, 2, 1000}, {1, 3, 2000}, {2, 3, 3000}}, devices, memory, 8);
  p.cluster.intra_node = Link{1e6, 0.01};
  return p;
}

TEST(Problem, FinalizeRejectsEdgesAgainstTheNodeOrder) {
  Problem p = diamond();
  p.edges.push_back({3, 1, 10, {}});
  Status s = p.finalize();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("topological"), std::string::npos) << s.message();
}

TEST(Problem, FinalizeRefusesGraphsTooLargeToPlan) {
  std::vector<TableNode> rows(Problem::kMaxNodes + 1, TableNode{1.0, 1.0, 0.0, 0, 4});
  std::vector<std::array<int64_t, 3>> chain;
  for (int i = 0; i < Problem::kMaxNodes; ++i) chain.push_back({i, i + 1, 4});
  Problem p = table_problem(rows, chain, 4, 1 << 30, 8);
  Status s = p.finalize();
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("has 50001 operators; the planners handle up to 50000"), std::string::npos) << s.message();
}

TEST(Problem, FinalizeRejectsMissingTimerAndBadMicroBatch) {
  Problem p = diamond();
  p.timer.reset();
  EXPECT_NE(p.finalize().message().find("timer"), std::string::npos);
  Problem q = diamond();
  q.micro_batch_candidates = {3};
  Status s = q.finalize();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not divide"), std::string::npos) << s.message();
}

TEST(Problem, MicroBatchSizesArePowersOfTwoDividingTheBatch) {
  Problem p = diamond();
  p.batch = 24;
  EXPECT_EQ(p.micro_batch_sizes(), (std::vector<int64_t>{1, 2, 4, 8}));
  p.micro_batch_candidates = {6, 3, 6};
  EXPECT_EQ(p.micro_batch_sizes(), (std::vector<int64_t>{3, 6}));
}

TEST(StageCost, SumsComputeMemoryAndBoundaryTransfers) {
  Problem p = diamond();
  ASSERT_TRUE(p.finalize().is_ok());
  // Stage {1, 3}: in-edges 0->1 (1000 B/sample), 2->3 (3000 B/sample); 1->3 is internal.
  StageCost c = stage_cost(p, {1, 3}, 1, 4, 2, 2);
  EXPECT_DOUBLE_EQ(c.fwd_s, (2.0 + 0.5) * 4);
  EXPECT_DOUBLE_EQ(c.bwd_input_s, (3.0 + 0.5) * 4);
  EXPECT_DOUBLE_EQ(c.bwd_weight_s, 1.0 * 4);
  double const comm = 2.0 * (2 * 0.01 + (1000.0 + 3000.0) * 4 / 1e6);
  EXPECT_DOUBLE_EQ(c.comm_s, comm);
  EXPECT_DOUBLE_EQ(c.allreduce_s, 0.0);
  EXPECT_DOUBLE_EQ(c.time_s, 10.0 + 14.0 + 4.0 + comm);
  EXPECT_EQ(c.weight_bytes, 200);
  EXPECT_EQ(c.optimizer_bytes, 600);
  EXPECT_EQ(c.activation_bytes, 2 * (20 + 40) * 4);
  EXPECT_TRUE(c.fits);
}

TEST(StageCost, ReplicasSplitTheMicroBatchAndPayAllReducePerStep) {
  Problem p = diamond();
  p.count_communication = true;
  ASSERT_TRUE(p.finalize().is_ok());
  p.cluster.intra_node = Link{1e6, 0.0};
  StageCost one = stage_cost(p, {0}, 1, 8, 1, 4);
  StageCost two = stage_cost(p, {0}, 2, 8, 1, 4);
  EXPECT_DOUBLE_EQ(two.fwd_s, one.fwd_s / 2);
  EXPECT_DOUBLE_EQ(two.allreduce_s, 2.0 * 0.5 * 100 / 1e6);  // ring: 2 (r-1)/r W / bandwidth
  EXPECT_DOUBLE_EQ(two.time_s, two.fwd_s + two.bwd_input_s + two.comm_s + two.allreduce_s / 4);
  EXPECT_EQ(two.activation_bytes, 10 * 4);
  // More replicas than samples is not a stage.
  StageCost bad = stage_cost(p, {0}, 16, 8, 1, 4);
  EXPECT_FALSE(bad.fits);
  EXPECT_TRUE(std::isinf(bad.time_s));
}

TEST(StageCost, FlagsTurnOffCommunicationAndReplication) {
  Problem p = diamond();
  p.count_communication = false;
  p.allow_replication = false;
  ASSERT_TRUE(p.finalize().is_ok());
  StageCost c = stage_cost(p, {1, 3}, 1, 4, 1, 2);
  EXPECT_DOUBLE_EQ(c.comm_s, 0.0);
  EXPECT_DOUBLE_EQ(c.time_s, 28.0);
  EXPECT_TRUE(std::isinf(stage_cost(p, {1, 3}, 2, 4, 1, 2).time_s));
}

TEST(StageCost, MemoryLimitDecidesFits) {
  Problem p = diamond(4, 200 * 4 + 2 * 60 * 4);  // exactly the {1,3} stage at b=4, in flight 2
  ASSERT_TRUE(p.finalize().is_ok());
  EXPECT_TRUE(stage_cost(p, {1, 3}, 1, 4, 2, 2).fits);
  EXPECT_FALSE(stage_cost(p, {1, 3}, 1, 4, 3, 2).fits);
}

TEST(StageCost, FromSumsEqualsStageCost) {
  Problem p = diamond();
  ASSERT_TRUE(p.finalize().is_ok());
  StageSums s = stage_sums(p, {0, 2}, samples_per_replica(8, 2));
  StageCost a = stage_cost_from_sums(p, s, 2, 8, 3, 1);
  StageCost b = stage_cost(p, {2, 0}, 2, 8, 3, 1);
  EXPECT_DOUBLE_EQ(a.time_s, b.time_s);
  EXPECT_EQ(a.memory_bytes(), b.memory_bytes());
  EXPECT_EQ(s.boundary_tensors, 2);  // 0->1 and 2->3
}

TEST(AssemblePlan, BuildsTheStageGraphDepthsAndDevices) {
  Problem p = diamond();
  ASSERT_TRUE(p.finalize().is_ok());
  auto plan = assemble_plan(p, {{{3}, 1}, {{2}, 1}, {{0}, 1}, {{1}, 1}}, 4, "test");
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 4u);
  EXPECT_EQ(plan->stages[0].nodes, std::vector<std::string>{"n0"});
  EXPECT_EQ(plan->stages[1].nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(plan->stages[3].nodes, std::vector<std::string>{"n3"});
  EXPECT_EQ(plan->stages[0].depth, 3);
  EXPECT_EQ(plan->stages[1].depth, 2);
  EXPECT_EQ(plan->stages[2].depth, 2);
  EXPECT_EQ(plan->stages[3].depth, 1);
  EXPECT_EQ(plan->depth, 3);
  EXPECT_EQ(plan->stages[2].devices, std::vector<int>{2});
  EXPECT_EQ(plan->num_micro_batches, 2);
  ASSERT_EQ(plan->edges.size(), 4u);
  EXPECT_EQ(plan->edges[0].src, 0);
  EXPECT_EQ(plan->edges[0].dst, 1);
  EXPECT_EQ(plan->edges[0].bytes_per_micro_batch, 4000);
  double max_t = 0;
  for (auto const& s : plan->stages) max_t = std::max(max_t, s.time_s);
  EXPECT_DOUBLE_EQ(plan->step_time_s, (2 + 3 - 1) * max_t);
  EXPECT_DOUBLE_EQ(plan->samples_per_s, 8 / plan->step_time_s);
  EXPECT_EQ(plan->stages[0].in_flight, 3);
  StageCost c = stage_cost(p, {0}, 1, 4, 3, 2);
  EXPECT_EQ(plan->stages[0].peak_memory_bytes, c.memory_bytes());
}

// A weight n0 and n3 read (a tied embedding and output projection): counted once at n0 in the
// node sums, a copy in any stage that reads it without n0, one all-reduce per step over the
// devices holding a copy.
Problem diamond_with_a_tied_weight() {
  Problem p = diamond();
  p.nodes[0].weight_bytes += 5000;  // the tied weight, counted at its first reader
  p.shared_weights.push_back({"tied", 5000, {0, 3}});
  p.cluster.intra_node = Link{1e6, 0.01};
  return p;
}

TEST(StageCost, AStageReadingASharedWeightWithoutItsFirstReaderTrainsACopy) {
  Problem p = diamond_with_a_tied_weight();
  ASSERT_TRUE(p.finalize().is_ok());
  EXPECT_EQ(p.shared_of[3], std::vector<int>{0});
  EXPECT_EQ(stage_cost(p, {0}, 1, 4, 1, 2).weight_bytes, 100 + 5000);
  EXPECT_EQ(stage_cost(p, {3}, 1, 4, 1, 2).weight_bytes, 0 + 5000);  // the copy
  EXPECT_EQ(stage_cost(p, {1, 3}, 1, 4, 1, 2).weight_bytes, 200 + 5000);
  EXPECT_EQ(stage_cost(p, {0, 1, 2, 3}, 1, 4, 1, 2).weight_bytes, 600 + 5000);  // one weight, no copy
  EXPECT_EQ(stage_cost(p, {1, 2}, 1, 4, 1, 2).weight_bytes, 500);               // does not read it
  // The copy's optimizer state and, replicated, its all-reduce come with it.
  StageCost const two = stage_cost(p, {3}, 2, 4, 1, 2);
  EXPECT_EQ(two.optimizer_bytes, 3 * 5000);
  EXPECT_GT(two.allreduce_s, 0.0);
}

TEST(Problem, FinalizeRejectsASharedWeightWithoutTwoReadersInOrder) {
  for (std::vector<int> readers : std::vector<std::vector<int>>{{2}, {3, 0}, {0, 0}, {0, 7}}) {
    Problem p = diamond();
    p.shared_weights.push_back({"w", 8, readers});
    Status const s = p.finalize();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << readers.size();
    EXPECT_NE(s.message().find("shared weight 'w'"), std::string::npos) << s.message();
  }
}

TEST(AssemblePlan, TiedWeightsListTheStagesHoldingACopyAndPriceTheirAllReduce) {
  Problem p = diamond_with_a_tied_weight();
  ASSERT_TRUE(p.finalize().is_ok());
  auto plan = assemble_plan(p, {{{0}, 1}, {{1, 2}, 1}, {{3}, 2}}, 4, "test");
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->tied_weights.size(), 1u);
  PlanTiedWeight const& t = plan->tied_weights[0];
  EXPECT_EQ(t.name, "tied");
  EXPECT_EQ(t.bytes, 5000);
  EXPECT_EQ(t.stages, (std::vector<int>{0, 2}));
  // Devices 0 (stage 0) and 2, 3 (stage 2's replicas): a ring all-reduce over three.
  EXPECT_DOUBLE_EQ(t.allreduce_s, 2.0 * 2 / 3 * 5000 / 1e6 + 2.0 * 2 * 0.01);
  EXPECT_EQ(plan->stages[2].weight_bytes, 5000);
  double max_t = 0;
  for (auto const& s : plan->stages) max_t = std::max(max_t, s.time_s);
  EXPECT_DOUBLE_EQ(plan->step_time_s, (2 + 3 - 1) * max_t + t.allreduce_s);
  // One stage holding both readers: nothing tied.
  auto whole = assemble_plan(p, {{{0, 1, 2, 3}, 1}}, 4, "test");
  ASSERT_TRUE(whole.is_ok());
  EXPECT_TRUE(whole->tied_weights.empty());
  EXPECT_EQ(whole->stages[0].weight_bytes, 5600);
}

TEST(AssemblePlan, RejectsMissingDuplicateCyclicAndTooManyDevices) {
  Problem p = diamond();
  ASSERT_TRUE(p.finalize().is_ok());
  EXPECT_NE(assemble_plan(p, {{{0, 1, 2}, 1}}, 4, "t").status().message().find("n3 is in no stage"), std::string::npos);
  EXPECT_NE(assemble_plan(p, {{{0, 1, 2, 3}, 1}, {{1}, 1}}, 4, "t").status().message().find("two stages"),
            std::string::npos);
  EXPECT_NE(assemble_plan(p, {{{0, 3}, 1}, {{1, 2}, 1}}, 4, "t").status().message().find("cycle"), std::string::npos);
  auto too_many = assemble_plan(p, {{{0, 1}, 2}, {{2, 3}, 3}}, 8, "t");
  EXPECT_EQ(too_many.status().code(), StatusCode::kInfeasible);
  EXPECT_EQ(assemble_plan(p, {{{0, 1, 2, 3}, 1}}, 3, "t").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gp::partition
