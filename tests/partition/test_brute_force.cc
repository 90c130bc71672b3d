#include <gtest/gtest.h>

#include <random>

#include "partition/brute_force.h"
#include "partition/sp_decompose.h"
#include "tests/partition/random_sp_problem.h"
#include "tests/partition/table_problem.h"

namespace gp::partition {
namespace {

using testing::table_problem;
using testing::TableNode;

TEST(BruteForce, CountsPartitionsOfADiamond) {
  std::vector<TableNode> rows(4, TableNode{1.0, 1.0, 0.0, 0, 1});
  Problem p = table_problem(rows, {{0, 1, 1}, {0, 2, 1}, {1, 3, 1}, {2, 3, 1}}, 4, 1 << 30, 1);
  ASSERT_TRUE(p.finalize().is_ok());
  auto tree = sp_decompose(p);
  ASSERT_TRUE(tree.is_ok());
  // Convex partitions: all 15 set partitions but the 4 with a block holding 0 and 3 without both
  // 1 and 2; none of the 11 has a cyclic stage graph.
  auto all = brute_force(p, BruteForceSpace::kAllConvex);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->partitions, 11);
  // SP tree S(0,P(1,2),3): singletons; {0},{1,2},{3}; {0,1,2},{3}; {0},{1,2,3}; everything; a
  // branch merged with the join: {0},{1,3},{2} and {0},{2,3},{1}; and with the fork: {0,1},{2},{3}
  // and {0,2},{1},{3}. Not {0,1},{2,3}: one Parallel node merged on both sides.
  auto sp = brute_force(p, BruteForceSpace::kSpPieces, &*tree);
  ASSERT_TRUE(sp.is_ok());
  EXPECT_EQ(sp->partitions, 9);
  auto chains = brute_force(p, BruteForceSpace::kChains);
  ASSERT_TRUE(chains.is_ok());
  EXPECT_EQ(chains->plan.stages.size(), static_cast<std::size_t>(chains->plan.depth));
  // Restricting the space never helps.
  EXPECT_LE(all->min_step_time_s, sp->min_step_time_s);
  EXPECT_LE(all->min_step_time_s, chains->min_step_time_s);
}

TEST(BruteForce, SinglesAreTheOnlyPlanWhenMemoryIsTight) {
  // Each node fits alone (1 in flight at the sink) and nothing bigger fits.
  std::vector<TableNode> rows(2, TableNode{1.0, 1.0, 0.0, 100, 0});
  Problem p = table_problem(rows, {{0, 1, 1}}, 2, 400, 2);
  ASSERT_TRUE(p.finalize().is_ok());
  auto r = brute_force(p, BruteForceSpace::kAllConvex);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->plan.stages.size(), 2u);
  Problem q = table_problem(rows, {{0, 1, 1}}, 1, 400, 2);
  ASSERT_TRUE(q.finalize().is_ok());
  EXPECT_EQ(brute_force(q, BruteForceSpace::kAllConvex).status().code(), StatusCode::kInfeasible);
}

TEST(BruteForce, RejectsLargeProblemsAndMissingTree) {
  std::vector<TableNode> rows(13, TableNode{1.0, 1.0, 0.0, 0, 0});
  Problem p = table_problem(rows, {}, 2, 1 << 30, 2);
  ASSERT_TRUE(p.finalize().is_ok());
  EXPECT_EQ(brute_force(p, BruteForceSpace::kAllConvex).status().code(), StatusCode::kInvalidArgument);
  Problem q = table_problem({rows.begin(), rows.begin() + 3}, {}, 2, 1 << 30, 2);
  ASSERT_TRUE(q.finalize().is_ok());
  EXPECT_EQ(brute_force(q, BruteForceSpace::kSpPieces).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gp::partition
