// The sequential planners: PipeDream-style and Piper-style chain DPs against brute force over all
// chains of downsets, memory limits, replication, the downset cap, and the balanced split.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "partition/downsets.h"
#include "partition/planner.h"
#include "tests/partition/table_problem.h"

namespace gp::partition {
namespace {

using testing::table_problem;
using testing::TableNode;

double max_time(Plan const& plan) {
  double t = 0;
  for (auto const& s : plan.stages) t = std::max(t, s.time_s);
  return t;
}

void expect_chain_and_fits(Plan const& plan, Problem const& p) {
  ASSERT_TRUE(validate_plan(plan).is_ok()) << validate_plan(plan).message();
  // A sequential pipeline runs its stages as a chain, even where two stages share no tensor (parallel
  // branches cut apart): stage i of k holds k - i micro-batches, and there is an edge i -> i + 1.
  int const k = static_cast<int>(plan.stages.size());
  EXPECT_EQ(plan.depth, k);
  for (auto const& s : plan.stages) EXPECT_EQ(s.depth, k - s.id) << "stage " << s.id;
  for (int s = 0; s + 1 < k; ++s) {
    bool linked = false;
    for (auto const& e : plan.edges) linked = linked || (e.src == s && e.dst == s + 1);
    EXPECT_TRUE(linked) << "no edge " << s << " -> " << s + 1;
  }
  int devices = 0;
  std::size_t nodes = 0;
  for (auto const& s : plan.stages) {
    EXPECT_LE(s.peak_memory_bytes, p.device_memory()) << "stage " << s.id;
    devices += s.replicas;
    nodes += s.nodes.size();
  }
  EXPECT_LE(devices, p.cluster.size());
  EXPECT_EQ(nodes, p.nodes.size());
}

PlannerOptions bottleneck_objective() {
  PlannerOptions options;
  options.chain_objective = ChainObjective::kBottleneck;
  return options;
}

struct ChainOptimum {
  double max_time = INFINITY;   // the least max T_s
  double step_time = INFINITY;  // the least (m + k - 1) max T_s
};

// Over every chain of downsets, every replica count dividing b, memory checked.
ChainOptimum brute_force_chain(Problem const& p, Downsets const& ds, int64_t b) {
  int64_t const m = p.batch / b;
  ChainOptimum best;
  std::vector<std::pair<int, int>> chain;  // (downset index, replicas)
  std::function<void(int, int)> extend = [&](int from, int devices_left) {
    if (from == ds.count() - 1) {
      int const k = static_cast<int>(chain.size());
      double worst = 0;
      int prev = 0;
      for (int i = 0; i < k; ++i) {
        StageCost c = stage_cost(p, ds.difference(chain[i].first, prev), chain[i].second, b, k - i, m);
        if (!c.fits) return;
        worst = std::max(worst, c.time_s);
        prev = chain[i].first;
      }
      best.max_time = std::min(best.max_time, worst);
      best.step_time = std::min(best.step_time, static_cast<double>(m + k - 1) * worst);
      return;
    }
    for (int next = 1; next < ds.count(); ++next) {
      if (ds.size[next] <= ds.size[from] || !ds.subset(from, next)) continue;
      for (int r = 1; r <= devices_left; ++r) {
        if (b % r != 0 || (r > 1 && !p.allow_replication)) continue;
        chain.push_back({next, r});
        extend(next, devices_left - r);
        chain.pop_back();
      }
    }
  };
  extend(0, p.cluster.size());
  return best;
}

Problem random_dag(std::mt19937& rng, int n, int devices) {
  std::uniform_real_distribution<double> time(0.1, 2.0);
  std::uniform_int_distribution<int> bytes(1, 40);
  std::bernoulli_distribution edge(0.35);
  std::vector<TableNode> rows;
  for (int i = 0; i < n; ++i) rows.push_back({time(rng), time(rng), time(rng) / 2, bytes(rng) * 10, bytes(rng)});
  std::vector<std::array<int64_t, 3>> edges;
  for (int j = 1; j < n; ++j) {
    bool any = false;
    for (int i = 0; i < j; ++i) {
      if (edge(rng)) {
        edges.push_back({i, j, bytes(rng)});
        any = true;
      }
    }
    if (!any) edges.push_back({std::uniform_int_distribution<int>(0, j - 1)(rng), j, bytes(rng)});
  }
  // A node has one output, the same size on each of its edges (the cost model counts a tensor
  // leaving a stage once, whichever consumers it has there).
  std::vector<int64_t> out_bytes(n, 0);
  for (auto& e : edges) {
    if (out_bytes[e[0]] == 0) out_bytes[e[0]] = e[2];
    e[2] = out_bytes[e[0]];
  }
  Problem p = table_problem(rows, edges, devices, 1 << 30, 8);
  p.micro_batch_candidates = {4};
  p.cluster.intra_node = Link{200.0, 0.05};
  // Memory that binds: about a third of the whole model's weights+optimizer and some activations.
  int64_t w = 0, a = 0;
  for (auto const& node : p.nodes) w += node.weight_bytes, a += node.activation_bytes_per_sample;
  for (auto& d : p.cluster.devices) d.memory_bytes = (4 * w) / 3 + a * 4;
  return p;
}

TEST(Downsets, EnumeratesEveryIdealOnce) {
  Problem p = table_problem({{}, {}, {}, {}}, {{0, 1, 1}, {0, 2, 1}, {1, 3, 1}, {2, 3, 1}}, 2, 1 << 20, 4);
  ASSERT_TRUE(p.finalize().is_ok());
  auto ds = enumerate_downsets(p, 100);
  ASSERT_TRUE(ds.is_ok());
  EXPECT_EQ(ds->count(), 6);  // {}, 0, 01, 02, 012, 0123
  EXPECT_EQ(ds->size.front(), 0);
  EXPECT_EQ(ds->size.back(), 4);
  EXPECT_EQ(ds->difference(ds->count() - 1, 1), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(prefix_downsets(p).count(), 5);
  auto capped = enumerate_downsets(p, 5);
  EXPECT_EQ(capped.status().code(), StatusCode::kInfeasible);
}

struct Compared {
  int compared = 0;  // planner runs checked against brute force
  int differ = 0;    // of which the least max T_s was not the least step time
  int copies = 0;    // of which the plan holds copies of a shared weight
};

// Both chain DPs on `p`, under both objectives, against brute force over every chain of downsets.
void expect_chain_dps_equal_brute_force(Problem const& p, int trial, Compared& c) {
  auto ds = enumerate_downsets(p, 1000);
  ASSERT_TRUE(ds.is_ok());
  ChainOptimum const expected = brute_force_chain(p, *ds, 4);
  for (char const* planner : {"pipedream", "piper"}) {
    auto plan = plan_with(planner, p);
    auto least_max = plan_with(planner, p, bottleneck_objective());
    if (std::isinf(expected.max_time)) {
      EXPECT_EQ(plan.status().code(), StatusCode::kInfeasible) << planner << " trial " << trial;
      EXPECT_EQ(least_max.status().code(), StatusCode::kInfeasible) << planner << " trial " << trial;
      continue;
    }
    ASSERT_TRUE(plan.is_ok()) << planner << " trial " << trial << ": " << plan.status().message();
    ASSERT_TRUE(least_max.is_ok()) << planner << " trial " << trial << ": " << least_max.status().message();
    // The search's objective; a plan then adds its tied weights' all-reduce (priced after the search).
    double tied_s = 0;
    for (auto const& t : plan->tied_weights) tied_s += t.allreduce_s;
    EXPECT_NEAR(plan->step_time_s - tied_s, expected.step_time, 1e-9 * expected.step_time)
        << planner << " trial " << trial;
    EXPECT_NEAR(max_time(*least_max), expected.max_time, 1e-9 * expected.max_time) << planner << " trial " << trial;
    expect_chain_and_fits(*plan, p);
    expect_chain_and_fits(*least_max, p);
    ++c.compared;
    c.differ += plan->step_time_s < least_max->step_time_s * (1 - 1e-9);
    c.copies += !plan->tied_weights.empty();
  }
}

TEST(ChainPlanners, EqualBruteForceOnRandomDags) {
  std::mt19937 rng(7);
  Compared c;
  for (int trial = 0; trial < 30; ++trial) {
    int const n = 4 + trial % 4;
    Problem p = random_dag(rng, n, 1 + trial % 4);
    p.allow_replication = trial % 3 != 0;
    if (trial % 5 >= 3) {  // few micro-batches, where fill and drain weigh most, and memory to spare
      p.batch = trial % 5 == 3 ? 12 : 4;
      for (auto& d : p.cluster.devices) d.memory_bytes *= 3;
    }
    ASSERT_TRUE(p.finalize().is_ok());
    expect_chain_dps_equal_brute_force(p, trial, c);
  }
  EXPECT_GE(c.compared, 16);  // many trials have a feasible chain
  EXPECT_GE(c.differ, 1);     // and in some the least max T_s is not the least step time
}

// Weights several nodes read (a tied embedding and output projection): a stage that reads one
// without its first reader holds a copy, weights and optimizer state, and the chain DPs count it
// while they search, so they still equal brute force (whose stage_cost counts the copies) and no
// stage of their plans goes over memory. (Before, a copy was counted nowhere in the search: the
// plans could go over memory, and over the optimum of the plans that fit.)
TEST(ChainPlanners, EqualBruteForceWithSharedWeights) {
  std::mt19937 rng(11);
  Compared c;
  for (int trial = 0; trial < 30; ++trial) {
    int const n = 4 + trial % 4;
    Problem p = random_dag(rng, n, 2 + trial % 3);
    p.allow_replication = trial % 2 == 0;
    for (int w = 0; w < 1 + trial % 2; ++w) {
      std::vector<int> readers;
      for (int v = 0; v < n; ++v)
        if (std::bernoulli_distribution(0.4)(rng)) readers.push_back(v);
      if (readers.size() < 2) readers = {0, n - 1};
      p.shared_weights.push_back(
          {"w" + std::to_string(w), std::uniform_int_distribution<int64_t>(50, 300)(rng), readers});
      p.nodes[readers.front()].weight_bytes += p.shared_weights.back().bytes;  // counted at the first reader
    }
    // Memory that binds: about half the model's weights+optimizer (copies not counted), activations.
    int64_t w = 0, a = 0;
    for (auto const& node : p.nodes) w += node.weight_bytes, a += node.activation_bytes_per_sample;
    for (auto& d : p.cluster.devices) d.memory_bytes = 2 * w + a * 4;
    ASSERT_TRUE(p.finalize().is_ok());
    expect_chain_dps_equal_brute_force(p, trial, c);
  }
  EXPECT_GE(c.compared, 16);
  EXPECT_GE(c.copies, 4);  // plans that hold copies
}

TEST(ChainPlanners, ReplicateAHeavyStage) {
  // One node 10x heavier than the rest: with 4 devices the best chain replicates it.
  Problem p =
      table_problem({{1, 1, 0, 0, 1}, {10, 10, 0, 0, 1}, {1, 1, 0, 0, 1}}, {{0, 1, 0}, {1, 2, 0}}, 4, 1 << 30, 8);
  p.micro_batch_candidates = {8};
  ASSERT_TRUE(p.finalize().is_ok());
  auto plan = plan_pipedream(p, bottleneck_objective());
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  int max_replicas = 0;
  for (auto const& s : plan->stages) max_replicas = std::max(max_replicas, s.replicas);
  EXPECT_GE(max_replicas, 2);
  p.allow_replication = false;
  auto single = plan_piper(p, bottleneck_objective());
  ASSERT_TRUE(single.is_ok());
  for (auto const& s : single->stages) EXPECT_EQ(s.replicas, 1);
  EXPECT_GT(max_time(*single), max_time(*plan));
}

TEST(ChainPlanners, MemoryLimitsTheInFlightStages) {
  // A chain of 4 equal nodes, 400 bytes of activations per micro-batch each, 1200 bytes per device:
  // 4 one-node stages would hold 4 micro-batches (1600) at the first stage; the best chain that
  // fits is 1 | 1 | 2 nodes (in flight 3, 2, 1).
  std::vector<TableNode> rows(4, TableNode{1, 1, 0, 0, 100});
  Problem p = table_problem(rows, {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}}, 4, 1200, 8);
  p.micro_batch_candidates = {4};
  p.allow_replication = false;
  ASSERT_TRUE(p.finalize().is_ok());
  for (char const* planner : {"pipedream", "piper", "balanced"}) {
    auto plan = plan_with(planner, p);
    if (std::string(planner) == "balanced") {
      // Balanced cuts 4 pieces without looking at memory: depth 4 does not fit at any b.
      EXPECT_EQ(plan.status().code(), StatusCode::kInfeasible) << plan.status().message();
      continue;
    }
    ASSERT_TRUE(plan.is_ok()) << planner << ": " << plan.status().message();
    expect_chain_and_fits(*plan, p);
    EXPECT_EQ(plan->depth, 3) << planner;
    EXPECT_EQ(plan->stages.back().nodes.size(), 2u) << planner;
  }
}

TEST(ChainPlanners, DownsetCapGivesPiperAnErrorAndPipeDreamALinearisedPlan) {
  // Two parallel chains of 12 nodes: 13 * 13 + 2 downsets.
  std::vector<TableNode> rows(26, TableNode{1, 1, 0, 0, 1});
  std::vector<std::array<int64_t, 3>> edges;
  for (int branch = 0; branch < 2; ++branch) {
    int prev = 0;
    for (int k = 0; k < 12; ++k) {
      int const v = 1 + branch * 12 + k;
      edges.push_back({prev, v, 1});
      prev = v;
    }
    edges.push_back({prev, 25, 1});
  }
  Problem p = table_problem(rows, edges, 4, 1 << 30, 8);
  ASSERT_TRUE(p.finalize().is_ok());
  PlannerOptions options = bottleneck_objective();
  options.max_downsets = 100;
  auto piper = plan_piper(p, options);
  EXPECT_EQ(piper.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(piper.status().message().find("piper: the DAG has more than 100 downsets"), std::string::npos)
      << piper.status().message();
  auto pipedream = plan_pipedream(p, options);
  ASSERT_TRUE(pipedream.is_ok()) << pipedream.status().message();
  EXPECT_NE(pipedream->notes.find("linearised"), std::string::npos);
  expect_chain_and_fits(*pipedream, p);
  options.max_downsets = 1000;
  auto full = plan_piper(p, options);
  ASSERT_TRUE(full.is_ok());
  EXPECT_LE(max_time(*full), max_time(*pipedream) * (1 + 1e-12));
}

TEST(ChainPlanners, TimeLimitGivesTimeout) {
  // 12 independent middle nodes: 2^12 + 2 downsets, more than the DP looks at before checking.
  std::vector<TableNode> rows(14, TableNode{1, 1, 0, 0, 1});
  std::vector<std::array<int64_t, 3>> edges;
  for (int v = 1; v < 13; ++v) edges.push_back({0, v, 1}), edges.push_back({v, 13, 1});
  Problem p = table_problem(rows, edges, 4, 1 << 30, 8);
  ASSERT_TRUE(p.finalize().is_ok());
  PlannerOptions options;
  options.time_limit_s = 1e-9;
  auto plan = plan_piper(p, options);
  EXPECT_EQ(plan.status().code(), StatusCode::kTimeout) << plan.status().message();
}

TEST(Balanced, SplitsTheOrderIntoEqualPieces) {
  std::vector<TableNode> rows(8, TableNode{1, 1, 0, 10, 1});
  std::vector<std::array<int64_t, 3>> edges;
  for (int v = 1; v < 8; ++v) edges.push_back({v - 1, v, 4});
  Problem p = table_problem(rows, edges, 4, 1 << 30, 16);
  ASSERT_TRUE(p.finalize().is_ok());
  auto plan = plan_balanced(p);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 4u);
  for (auto const& s : plan->stages) {
    EXPECT_EQ(s.nodes.size(), 2u);
    EXPECT_EQ(s.replicas, 1);
  }
  expect_chain_and_fits(*plan, p);
  EXPECT_EQ(plan->planner, "balanced");
  // Uneven nodes: the heaviest piece is as light as possible.
  std::vector<TableNode> uneven = {{5, 0, 0, 0, 1}, {1, 0, 0, 0, 1}, {1, 0, 0, 0, 1},
                                   {1, 0, 0, 0, 1}, {1, 0, 0, 0, 1}, {1, 0, 0, 0, 1}};
  Problem q = table_problem(uneven, {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {3, 4, 0}, {4, 5, 0}}, 2, 1 << 30, 1);
  q.count_communication = false;
  ASSERT_TRUE(q.finalize().is_ok());
  auto two = plan_balanced(q);
  ASSERT_TRUE(two.is_ok());
  EXPECT_EQ(two->stages[0].nodes.size(), 1u);
  EXPECT_DOUBLE_EQ(max_time(*two), 5.0);
}

TEST(Planners, ImpossibleRequestsSayWhatWouldFit) {
  // 4 nodes of 1 GiB weights (4 GiB with the optimizer each) on 2 devices of 6 GiB.
  std::vector<TableNode> rows(4, TableNode{1, 1, 0, int64_t{1} << 30, 1});
  Problem p = table_problem(rows, {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}}, 2, int64_t{6} << 30, 8);
  ASSERT_TRUE(p.finalize().is_ok());
  for (char const* planner : {"pipedream", "piper", "balanced"}) {
    auto plan = plan_with(planner, p);
    ASSERT_EQ(plan.status().code(), StatusCode::kInfeasible) << planner;
    EXPECT_NE(plan.status().message().find("at least 3 devices"), std::string::npos) << plan.status().message();
  }
  // One node bigger than a device.
  rows[2].weight_bytes = int64_t{2} << 30;
  Problem big = table_problem(rows, {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}}, 8, int64_t{6} << 30, 8);
  ASSERT_TRUE(big.finalize().is_ok());
  auto plan = plan_piper(big);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("node 'n2' alone needs"), std::string::npos) << plan.status().message();
  EXPECT_EQ(plan_with("magic", p).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gp::partition
