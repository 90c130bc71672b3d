// The sequential planners on PipeDream's real profiles must reach the optima both PipeDream's
// optimizer and Piper reach (../shared/data/pipedream-profiles/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "partition/pipedream_profile.h"
#include "partition/planner.h"

namespace gp::partition {
namespace {

std::string profile_path(std::string const& model) {
  return std::string(GP_SOURCE_DIR) + "/../shared/data/pipedream-profiles/" + model + "/graph.txt";
}

// k stages, one device each, no replication, no communication, no memory limit, one micro-batch.
Problem optimum_problem(std::string const& model, int k) {
  auto problem = read_pipedream_profile(profile_path(model));
  EXPECT_TRUE(problem.is_ok()) << problem.status().message();
  Problem p = std::move(problem).value();
  p.cluster = Cluster::uniform(k, int64_t{1} << 50);
  p.batch = 1;
  p.micro_batch_candidates = {1};
  p.allow_replication = false;
  p.count_communication = false;
  EXPECT_TRUE(p.finalize().is_ok());
  return p;
}

double max_stage_ms(Plan const& plan) {
  double t = 0;
  for (auto const& s : plan.stages) t = std::max(t, s.time_s);
  return t * 1e3;
}

struct Optimum {
  char const* model;
  int layers;
  int k;
  double ms;
};

class ProfileOptimum : public ::testing::TestWithParam<Optimum> {};

TEST_P(ProfileOptimum, PipeDreamAndPiperReachIt) {
  Optimum const o = GetParam();
  Problem p = optimum_problem(o.model, o.k);
  EXPECT_EQ(static_cast<int>(p.nodes.size()), o.layers);
  PlannerOptions options;
  options.chain_objective = ChainObjective::kBottleneck;  // the README's optima are of max T_s
  for (char const* planner : {"pipedream", "piper"}) {
    auto plan = plan_with(planner, p, options);
    ASSERT_TRUE(plan.is_ok()) << planner << ": " << plan.status().message();
    EXPECT_NEAR(max_stage_ms(*plan), o.ms, 0.005) << planner << " on " << o.model << " k=" << o.k;
    EXPECT_LE(static_cast<int>(plan->stages.size()), o.k);
    EXPECT_TRUE(plan->notes.empty()) << plan->notes;
    EXPECT_TRUE(validate_plan(*plan).is_ok());
  }
  // A balanced split is a chain of the same kind, so it can only be as good or worse.
  auto balanced = plan_balanced(p);
  ASSERT_TRUE(balanced.is_ok()) << balanced.status().message();
  EXPECT_GE(max_stage_ms(*balanced), o.ms - 0.005);
}

INSTANTIATE_TEST_SUITE_P(Readme, ProfileOptimum,
                         ::testing::Values(Optimum{"alexnet", 23, 4, 28.72}, Optimum{"vgg16", 41, 4, 216.45},
                                           Optimum{"vgg16", 41, 8, 159.53}, Optimum{"resnet18", 71, 8, 35.21},
                                           Optimum{"resnet50", 177, 4, 111.50}, Optimum{"resnet50", 177, 8, 56.68},
                                           Optimum{"gnmt", 48, 8, 19.03}),
                         [](auto const& info) {
                           return std::string(info.param.model) + "_k" + std::to_string(info.param.k);
                         });

TEST(PipeDreamProfile, ReadsNodesEdgesListsAndInputTime) {
  std::string const text =
      "node1 -- Input0 -- forward_compute_time=5.000, backward_compute_time=0.000, activation_size=64.0, "
      "parameter_size=0.000\n"
      "node3 -- LSTM(2, 2) -- forward_compute_time=1.500, backward_compute_time=2.500, activation_size=[8.0; 4.0; "
      "4.0], parameter_size=96.000\n"
      "node2 -- Linear(a=1, b=2) -- forward_compute_time=1.000, backward_compute_time=2.000, activation_size=32.0, "
      "parameter_size=16.000\n"
      "\tnode1 -- node2\n"
      "\tnode2 -- node3\n";
  auto parsed = parse_pipedream_profile(text, "toy", {.profile_batch = 4});
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  Problem p = std::move(parsed).value();
  p.cluster = Cluster::uniform(2, 1 << 20);
  p.batch = 8;
  ASSERT_TRUE(p.finalize().is_ok());
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[1].name, "node2");  // topological, then by number
  EXPECT_EQ(p.nodes[1].kind, "Linear(a=1, b=2)");
  EXPECT_EQ(p.nodes[2].activation_bytes_per_sample, 4);  // (8 + 4 + 4) / profile batch 4
  EXPECT_EQ(p.nodes[2].weight_bytes, 96);
  auto const& t = p.node_times(8);    // twice the profiled batch
  EXPECT_DOUBLE_EQ(t[0].fwd_s, 0.0);  // Input: data loading is not model time
  EXPECT_DOUBLE_EQ(t[1].fwd_s, 2e-3);
  EXPECT_DOUBLE_EQ(t[2].bwd_s(), 5e-3);
  ASSERT_EQ(p.edges.size(), 2u);
  EXPECT_EQ(p.edges[0].bytes_per_sample, 16);
}

TEST(PipeDreamProfile, ErrorsNameTheLine) {
  auto bad = parse_pipedream_profile(
      "node1 -- X -- forward_compute_time=abc, backward_compute_time=0, activation_size=1, parameter_size=0\n", "toy");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("toy:1"), std::string::npos) << bad.status().message();
  auto undefined = parse_pipedream_profile(
      "node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=1, parameter_size=0\n\tnode1 -- "
      "node9\n",
      "toy");
  ASSERT_FALSE(undefined.is_ok());
  EXPECT_NE(undefined.status().message().find("node9"), std::string::npos);
  EXPECT_EQ(read_pipedream_profile("/nonexistent/graph.txt").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gp::partition
