#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "partition/plan.h"
#include "partition/problem.h"
#include "tests/partition/table_problem.h"

namespace gp::partition {
namespace {

Plan sample_plan() {
  // 0 -> {1, 2} -> 3 with the branches as concurrent stages.
  std::vector<testing::TableNode> rows = {{1, 1, 0, 100, 8}, {2, 1, 1, 200, 16}, {2, 2, 0, 300, 16}, {1, 1, 0, 0, 4}};
  Problem p = testing::table_problem(rows, {{0, 1, 64}, {0, 2, 64}, {1, 3, 32}, {2, 3, 32}}, 5, 1 << 30, 16);
  p.shared_weights.push_back({"tied", 100, {0, 3}});
  EXPECT_TRUE(p.finalize().is_ok());
  auto plan = assemble_plan(p, {{{0}, 1}, {{1}, 2}, {{2}, 1}, {{3}, 1}}, 4, "test");
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  plan->search_time_s = 0.25;
  plan->states_explored = 1234;
  plan->notes = "hand-made";
  return *plan;
}

TEST(PlanJson, RoundTripsEveryField) {
  Plan const plan = sample_plan();
  auto back = plan_from_json(plan_to_json(plan));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(plan_to_json(*back), plan_to_json(plan));
  EXPECT_EQ(back->stages[1].devices, (std::vector<int>{1, 2}));
  EXPECT_EQ(back->edges.size(), 4u);
  EXPECT_EQ(back->states_explored, 1234);
  EXPECT_EQ(back->notes, "hand-made");
  EXPECT_DOUBLE_EQ(back->stages[2].time_s, plan.stages[2].time_s);
  ASSERT_EQ(back->tied_weights.size(), 1u);
  EXPECT_EQ(back->tied_weights[0].stages, (std::vector<int>{0, 3}));
  EXPECT_EQ(back->tied_weights[0].bytes, 100);
  EXPECT_DOUBLE_EQ(back->tied_weights[0].allreduce_s, plan.tied_weights.at(0).allreduce_s);
}

// Plans written before tied weights were priced have no "tied_weights" and still load; a listed
// one must name existing stages, increasing.
TEST(PlanJson, TiedWeightsAreOptionalAndChecked) {
  std::string const text = plan_to_json(sample_plan());
  nlohmann::json j = nlohmann::json::parse(text);
  j.erase("tied_weights");
  auto old = plan_from_json(j.dump());
  ASSERT_TRUE(old.is_ok()) << old.status().message();
  EXPECT_TRUE(old->tied_weights.empty());
  for (auto stages : {nlohmann::json::array({0}), nlohmann::json::array({3, 0}), nlohmann::json::array({0, 9})}) {
    nlohmann::json bad = nlohmann::json::parse(text);
    bad["tied_weights"][0]["stages"] = stages;
    auto r = plan_from_json(bad.dump());
    ASSERT_FALSE(r.is_ok()) << stages.dump();
    EXPECT_NE(r.status().message().find("tied weight 'tied'"), std::string::npos) << r.status().message();
  }
}

TEST(PlanJson, WritesAtomicallyAndReadsBack) {
  Plan const plan = sample_plan();
  std::string const path = std::string(GP_BINARY_DIR) + "/test_plan_roundtrip.json";
  ASSERT_TRUE(write_plan_file(plan, path).is_ok());
  auto back = read_plan_file(path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->depth, 3);
  std::filesystem::remove(path);
  EXPECT_EQ(write_plan_file(plan, "/nonexistent/dir/plan.json").code(), StatusCode::kIoError);
  EXPECT_EQ(read_plan_file("/nonexistent/plan.json").status().code(), StatusCode::kNotFound);
}

TEST(PlanJson, RejectsOtherVersionsAndMissingFields) {
  std::string text = plan_to_json(sample_plan());
  std::string wrong = text;
  wrong.replace(wrong.find("\"version\": 1"), 12, "\"version\": 7");
  auto v = plan_from_json(wrong);
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("version 7"), std::string::npos) << v.status().message();
  std::string missing = text;
  missing.replace(missing.find("\"replicas\""), 10, "\"replicaz\"");
  auto m = plan_from_json(missing);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("stages[0] has no 'replicas'"), std::string::npos) << m.status().message();
  EXPECT_EQ(plan_from_json("{not json").status().code(), StatusCode::kParseError);
}

TEST(ValidatePlan, NamesTheProblem) {
  Plan const good = sample_plan();
  ASSERT_TRUE(validate_plan(good).is_ok());
  auto expect_error = [&](Plan const& bad, std::string const& text) {
    Status s = validate_plan(bad);
    ASSERT_FALSE(s.is_ok()) << "expected an error containing '" << text << "'";
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  Plan p = good;
  p.stages[1].nodes.push_back("n0");
  expect_error(p, "node 'n0' is in more than one stage");
  p = good;
  p.stages[1].replicas = 3;
  expect_error(p, "replicas 3 but 2 devices");
  p = good;
  p.stages[3].devices = {0};
  expect_error(p, "device 0 is used by two stages");
  p = good;
  p.edges.push_back({3, 0, {}, 0, 0});
  expect_error(p, "goes backwards");
  p = good;
  p.stages[0].depth = 2;
  expect_error(p, "longest path to a sink has 3");
  p = good;
  p.edges[0].dst = 9;
  expect_error(p, "does not exist");
  p = good;
  p.num_micro_batches = 3;
  expect_error(p, "batch 16 != micro_batch 4 x num_micro_batches 3");
  p = good;
  p.stages[2].id = 7;
  expect_error(p, "has id 7");
}

}  // namespace
}  // namespace gp::partition
