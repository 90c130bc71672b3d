#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>

#include "partition/brute_force.h"
#include "partition/gpp_dp.h"
#include "partition/gpp_engine.h"
#include "partition/gpp_ranges.h"
#include "partition/planner.h"
#include "partition/sp_decompose.h"
#include "tests/partition/random_sp_problem.h"
#include "tests/partition/table_problem.h"

namespace gp::partition {
namespace {

using testing::random_dag;
using testing::random_problem;
using testing::random_sp_dag;
using testing::table_problem;
using testing::TableNode;

// Every node in exactly one stage, devices within the cluster, memory within every device.
void expect_valid_plan(Problem const& p, Plan const& plan) {
  EXPECT_TRUE(validate_plan(plan).is_ok()) << validate_plan(plan).message();
  std::multiset<std::string> names;
  int devices = 0;
  for (PlanStage const& s : plan.stages) {
    names.insert(s.nodes.begin(), s.nodes.end());
    devices += s.replicas;
    EXPECT_LE(s.peak_memory_bytes, p.device_memory()) << "stage " << s.id;
  }
  EXPECT_LE(devices, p.cluster.size());
  ASSERT_EQ(names.size(), p.nodes.size());
  for (Node const& n : p.nodes) EXPECT_EQ(names.count(n.name), 1u) << n.name;
}

double rel(double a, double b) { return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300}); }

TEST(Gpp, EqualsBruteForceOverSpPiecesOnRandomSeriesParallelDags) {
  std::mt19937 rng(2024);
  int compared = 0, infeasible = 0, better = 0;
  for (int trial = 0; trial < 3000; ++trial) {  // cheap (small DAGs); fork merges need many to show
    int const n = 1 + static_cast<int>(rng() % 9);
    int const devices = 1 + static_cast<int>(rng() % 4);
    int64_t const batch = trial % 2 ? 4 : 8;
    Problem p = random_problem(random_sp_dag(n, rng), devices, batch, rng);
    if (trial % 5 == 0) p.count_communication = false;
    if (trial % 7 == 0) p.allow_replication = false;
    ASSERT_TRUE(p.finalize().is_ok());
    auto tree = sp_decompose(p);
    ASSERT_TRUE(tree.is_ok());
    ASSERT_TRUE(tree->added_edges.empty());
    auto brute = brute_force(p, BruteForceSpace::kSpPieces, &*tree);
    auto gpp = plan_gpp_on_tree(p, *tree);
    ASSERT_EQ(brute.is_ok(), gpp.is_ok())
        << "trial " << trial << ": " << brute.status().message() << " / " << gpp.status().message();
    if (!gpp.is_ok()) {
      EXPECT_EQ(gpp.status().code(), StatusCode::kInfeasible) << gpp.status().message();
      ++infeasible;
      continue;
    }
    ++compared;
    expect_valid_plan(p, *gpp);
    // GPP minimises the step time itself, not tau first: it must reach the least step time of any
    // plan whose stages are SP pieces.
    EXPECT_LT(rel(gpp->step_time_s, brute->min_step_time_s), 1e-9)
        << "trial " << trial << " n=" << n << " devices=" << devices << " tree " << tree->to_string() << "\n gpp "
        << plan_to_json(*gpp) << "\n brute " << plan_to_json(brute->plan);
    EXPECT_LE(gpp->step_time_s, brute->plan.step_time_s * (1 + 1e-9)) << "trial " << trial;
    better += gpp->step_time_s < brute->plan.step_time_s * (1 - 1e-9);
    EXPECT_GT(gpp->states_explored, 0);
  }
  EXPECT_GE(compared, 200);
  EXPECT_GE(infeasible, 1);  // the memory range makes some problems impossible; they must say so
  // The tau-first objective of GRAPHPIPE.md step 4 (brute->plan) is beaten on some of them.
  EXPECT_GE(better, 1);
}

// plan_gpp searches the SP pieces and every chain (few downsets here), then prices each chain
// found as the graph of its stages: it is at least as fast as the best of both spaces, and no
// faster than the best convex plan of any shape.
TEST(Gpp, NeverBelowTheBestChainOnRandomDags) {
  std::mt19937 rng(77);
  int compared = 0, chain_won = 0, sp_won = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int const n = 2 + static_cast<int>(rng() % 8);
    int const devices = 1 + static_cast<int>(rng() % 4);
    bool const sp = trial % 2 == 0;
    Problem p = random_problem(sp ? random_sp_dag(n, rng) : random_dag(n, rng), devices, 8, rng);
    if (trial % 5 == 0) p.count_communication = false;
    ASSERT_TRUE(p.finalize().is_ok());
    auto tree = sp_decompose(p);
    ASSERT_TRUE(tree.is_ok());
    auto gpp = plan_gpp(p);
    auto chains = brute_force(p, BruteForceSpace::kChains);
    auto all = brute_force(p, BruteForceSpace::kAllConvex);
    auto pieces = plan_gpp_on_tree(p, *tree);
    ASSERT_EQ(gpp.is_ok(), pieces.is_ok() || chains.is_ok()) << "trial " << trial;
    if (!gpp.is_ok()) continue;
    ASSERT_TRUE(all.is_ok());
    ++compared;
    expect_valid_plan(p, *gpp);
    EXPECT_GE(gpp->step_time_s, all->min_step_time_s * (1 - 1e-12)) << "trial " << trial;
    if (chains.is_ok()) {
      EXPECT_LE(gpp->step_time_s, chains->min_step_time_s * (1 + 1e-9)) << "trial " << trial << "\n"
                                                                        << plan_to_json(*gpp);
    }
    if (pieces.is_ok()) {
      EXPECT_LE(gpp->step_time_s, pieces->step_time_s * (1 + 1e-9)) << "trial " << trial;
    }
    chain_won += pieces.is_ok() && gpp->step_time_s < pieces->step_time_s * (1 - 1e-9);
    sp_won += chains.is_ok() && gpp->step_time_s < chains->min_step_time_s * (1 - 1e-9);
  }
  EXPECT_GE(compared, 200);
  EXPECT_GE(chain_won, 5);  // the widening matters: chains beat every plan of SP pieces on some DAGs
  EXPECT_GE(sp_won, 5);     // and graphs of stages beat every chain on others
}

// Too many downsets for the chain DP inside GPP: the chains of a few topological orders, the node
// order among them, still contain PipeDream-style's linearised plans (between 1,000 and 50,000
// downsets PipeDream-style's full search can find a chain none of those orders holds).
TEST(Gpp, NeverBelowTheLinearisedChainOnBranchyGraphs) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 6; ++trial) {
    int const branches = 3 + trial % 3, length = 10;  // 11^3 and more downsets
    testing::RandomDag dag{2 + branches * length, {}};
    int const join = 1 + branches * length;
    for (int b = 0; b < branches; ++b) {
      int prev = 0;
      for (int k = 0; k < length; ++k) {
        dag.edges.emplace_back(prev, 1 + b * length + k);
        prev = 1 + b * length + k;
      }
      dag.edges.emplace_back(prev, join);
    }
    Problem p = random_problem(dag, 3 + trial, 16, rng, 1 << 20, 1 << 21);
    ASSERT_TRUE(p.finalize().is_ok());
    auto gpp = plan_gpp(p);
    ASSERT_TRUE(gpp.is_ok()) << gpp.status().message();
    expect_valid_plan(p, *gpp);
    PlannerOptions linearised;
    linearised.max_downsets = 1000;
    for (auto const* name : {"pipedream", "balanced"}) {
      auto seq = plan_with(name, p, linearised);
      ASSERT_TRUE(seq.is_ok()) << name << ": " << seq.status().message();
      if (std::string(name) == "pipedream") {
        EXPECT_NE(seq->notes.find("linearised"), std::string::npos);
      }
      EXPECT_LE(gpp->step_time_s, seq->step_time_s * (1 + 1e-9)) << name << " trial " << trial;
    }
  }
}

TEST(Gpp, ValidOnRandomNonSeriesParallelDags) {
  std::mt19937 rng(99);
  int non_sp = 0;
  for (int trial = 0; trial < 60; ++trial) {
    int const n = 4 + static_cast<int>(rng() % 6);
    Problem p = random_problem(random_dag(n, rng), 1 + static_cast<int>(rng() % 4), 8, rng, 3000, 8000);
    ASSERT_TRUE(p.finalize().is_ok());
    auto tree = sp_decompose(p);
    ASSERT_TRUE(tree.is_ok());
    non_sp += !tree->added_edges.empty();
    auto gpp = plan_gpp(p);
    auto all = brute_force(p, BruteForceSpace::kAllConvex);
    if (!gpp.is_ok()) continue;
    expect_valid_plan(p, *gpp);
    ASSERT_TRUE(all.is_ok());
    // GPP's plan is one of the convex plans: never better than the best of them.
    EXPECT_GE(gpp->step_time_s, all->min_step_time_s * (1 - 1e-12));
  }
  EXPECT_GT(non_sp, 5);
}

TEST(Gpp, OnChainsEqualsTheBestSequentialPlan) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    int const n = 2 + static_cast<int>(rng() % 7);
    testing::RandomDag chain{n, {}};
    for (int i = 0; i + 1 < n; ++i) chain.edges.emplace_back(i, i + 1);
    Problem p = random_problem(chain, 1 + static_cast<int>(rng() % 4), 8, rng, 2000, 8000);
    ASSERT_TRUE(p.finalize().is_ok());
    auto tree = sp_decompose(p);
    ASSERT_TRUE(tree.is_ok());
    EXPECT_EQ(tree->nodes[tree->root].kind, n == 1 ? SpKind::kLeaf : SpKind::kSeries);
    auto gpp = plan_gpp(p);
    auto seq = brute_force(p, BruteForceSpace::kChains);
    ASSERT_EQ(gpp.is_ok(), seq.is_ok());
    if (!gpp.is_ok()) continue;
    EXPECT_LT(rel(gpp->step_time_s, seq->min_step_time_s), 1e-9) << "trial " << trial;
  }
}

TEST(Gpp, OnChainsMatchesTheSequentialPlanners) {
  // On a chain GPP's stages are the chain's runs, so with the same objective (the step time) it
  // finds the sequential planners' optimum; against their own objective (the least max T_s per
  // micro-batch size) it is never worse, and sometimes better.
  std::mt19937 rng(17);
  int better = 0, compared = 0;
  PlannerOptions own;
  own.chain_objective = ChainObjective::kBottleneck;
  for (int trial = 0; trial < 30; ++trial) {
    int const n = 3 + static_cast<int>(rng() % 12);
    testing::RandomDag chain{n, {}};
    for (int i = 0; i + 1 < n; ++i) chain.edges.emplace_back(i, i + 1);
    Problem p = random_problem(chain, 2 + static_cast<int>(rng() % 7), 8, rng, 4000, 9000);
    ASSERT_TRUE(p.finalize().is_ok());
    auto gpp = plan_gpp(p);
    if (!gpp.is_ok()) continue;
    for (auto const* name : {"pipedream", "piper"}) {
      auto seq = plan_with(name, p);
      ASSERT_TRUE(seq.is_ok()) << name << ": " << seq.status().message();
      EXPECT_NEAR(gpp->step_time_s, seq->step_time_s, 1e-9 * seq->step_time_s) << name << " trial " << trial;
      auto seq_own = plan_with(name, p, own);
      ASSERT_TRUE(seq_own.is_ok()) << name << ": " << seq_own.status().message();
      EXPECT_LE(gpp->step_time_s, seq_own->step_time_s * (1 + 1e-9)) << name << " trial " << trial;
      ++compared;
      better += rel(gpp->step_time_s, seq_own->step_time_s) > 1e-9;
    }
  }
  EXPECT_GE(compared, 40);
  EXPECT_GE(better, 1);
}

// k equal branches between a light source and sink: GPP runs them as concurrent stages.
Problem branches(int k, int64_t batch) {
  std::vector<TableNode> rows;
  std::vector<std::array<int64_t, 3>> edges;
  rows.push_back({0.01, 0.01, 0.0, 10, 100});
  for (int i = 0; i < k; ++i) {
    rows.push_back({0.4, 0.4, 0.2, 1000, 100});
    edges.push_back({0, i + 1, 100});
    edges.push_back({i + 1, k + 1, 100});
  }
  rows.push_back({0.01, 0.01, 0.0, 10, 100});
  Problem p = table_problem(rows, edges, k + 2, 1LL << 30, batch);
  p.count_communication = false;
  p.allow_replication = false;
  return p;
}

TEST(Gpp, ConcurrentBranchesBeatTheBestSequentialPlan) {
  for (int k : {4, 5, 6}) {
    Problem p = branches(k, 8);
    ASSERT_TRUE(p.finalize().is_ok());
    auto gpp = plan_gpp(p);
    ASSERT_TRUE(gpp.is_ok()) << gpp.status().message();
    auto seq = brute_force(p, BruteForceSpace::kChains);
    ASSERT_TRUE(seq.is_ok()) << seq.status().message();
    expect_valid_plan(p, *gpp);
    EXPECT_EQ(gpp->depth, 3) << plan_to_json(*gpp);
    EXPECT_LT(gpp->depth, seq->plan.depth) << plan_to_json(seq->plan) << plan_to_json(*gpp);
    EXPECT_LT(gpp->stages[0].in_flight * gpp->stages[0].activation_bytes_per_micro_batch,
              seq->plan.stages[0].in_flight * seq->plan.stages[0].activation_bytes_per_micro_batch);
    EXPECT_LT(gpp->step_time_s, seq->min_step_time_s);
    EXPECT_LT(gpp->step_time_s, seq->plan.step_time_s);
  }
}

TEST(Gpp, LightBranchSharesTheForkStage) {
  // S(a, b, P(S(c, d, e), f)), as at the top of GNMT: f is light. On 3 devices without replication,
  // f on its own wastes a device (best max T_s 6: {a,b} {c,d,e} {f}); merged with the fork run,
  // {a,b,f} {c,d} {e} or {a,b,f} {c} {d,e} reach 4.
  std::vector<TableNode> rows = {{0.5, 0.5, 0, 0, 1}, {0.5, 0.5, 0, 0, 1}, {1, 1, 0, 0, 1},
                                 {1, 1, 0, 0, 1},     {1, 1, 0, 0, 1},     {0.05, 0.05, 0, 0, 1}};
  Problem p = table_problem(rows, {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {3, 4, 1}, {1, 5, 1}}, 3, 1 << 30, 64);
  p.count_communication = false;
  p.allow_replication = false;
  p.micro_batch_candidates = {1};
  ASSERT_TRUE(p.finalize().is_ok());
  auto tree = sp_decompose(p);
  ASSERT_TRUE(tree.is_ok());
  EXPECT_EQ(tree->to_string(), "S(0,1,P(S(2,3,4),5))");
  auto gpp = plan_gpp(p);
  ASSERT_TRUE(gpp.is_ok()) << gpp.status().message();
  expect_valid_plan(p, *gpp);
  double max_t = 0;
  bool fork_stage = false;
  for (auto const& st : gpp->stages) {
    max_t = std::max(max_t, st.time_s);
    fork_stage = fork_stage || st.nodes == std::vector<std::string>{"n0", "n1", "n5"};
  }
  EXPECT_NEAR(max_t, 4.0, 1e-9) << plan_to_json(*gpp);
  EXPECT_TRUE(fork_stage) << plan_to_json(*gpp);
  auto brute = brute_force(p, BruteForceSpace::kSpPieces, &*tree);
  ASSERT_TRUE(brute.is_ok());
  EXPECT_LT(rel(gpp->step_time_s, brute->min_step_time_s), 1e-12);
}

TEST(Gpp, MemoryDecidesTheMicroBatchAndDepth) {
  // A 4-node chain on 4 devices; activations so large that deep pipelines do not fit at big b.
  std::vector<TableNode> rows(4, TableNode{1.0, 1.0, 0.0, 0, 1000});
  Problem p = table_problem(rows, {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}}, 4, 1000 * 8 * 2, 16);
  p.count_communication = false;
  p.allow_replication = false;
  ASSERT_TRUE(p.finalize().is_ok());
  auto gpp = plan_gpp(p);
  ASSERT_TRUE(gpp.is_ok()) << gpp.status().message();
  expect_valid_plan(p, *gpp);
  auto seq = brute_force(p, BruteForceSpace::kChains);
  ASSERT_TRUE(seq.is_ok());
  EXPECT_LT(rel(gpp->step_time_s, seq->plan.step_time_s), 1e-12);
}

// A weight nodes 0 and 2 of a chain read (a tied embedding and output projection): counted at node
// 0, a copy wherever node 2 sits without it. Weights x 4 (Adam) against 3,000 bytes: {0} 2,800
// and {2} with its copy 2,800 fit, {1, 2} with the copy (3,200) does not, though without the copy
// (800) it would. GPP plans with the copies: three stages; on two devices nothing fits.
TEST(Gpp, PlansTheCopiesOfAWeightSeveralStagesRead) {
  std::vector<TableNode> rows = {{1.0, 1.0, 0.0, 700, 0}, {1.0, 1.0, 0.0, 100, 0}, {1.0, 1.0, 0.0, 100, 0}};
  for (int devices : {3, 2}) {
    Problem p = table_problem(rows, {{0, 1, 1}, {1, 2, 1}}, devices, 3000, 4);
    p.shared_weights.push_back({"tied", 600, {0, 2}});
    p.allow_replication = false;
    ASSERT_TRUE(p.finalize().is_ok());
    auto gpp = plan_gpp(p);
    if (devices == 2) {
      ASSERT_FALSE(gpp.is_ok()) << "planned " << gpp->stages.size() << " stages";
      EXPECT_EQ(gpp.status().code(), StatusCode::kInfeasible) << gpp.status().message();
      continue;
    }
    ASSERT_TRUE(gpp.is_ok()) << gpp.status().message();
    expect_valid_plan(p, *gpp);
    ASSERT_EQ(gpp->stages.size(), 3u);
    EXPECT_EQ(gpp->stages[2].weight_bytes, 700);  // node 2's own and the copy
    ASSERT_EQ(gpp->tied_weights.size(), 1u);
    EXPECT_EQ(gpp->tied_weights[0].stages, (std::vector<int>{0, 2}));
    // The DP's prefix sums count a copy for a stage of one or two ranges of positions that reads
    // the weight without its first reader, as stage_sums does.
    RangeCost const cost(p, {0, 1, 2}, 4);
    EXPECT_EQ(cost.copy_bytes(2, 3, 3, 3), 600);
    EXPECT_EQ(cost.copy_bytes(1, 3, 3, 3), 600);
    EXPECT_EQ(cost.copy_bytes(1, 2, 2, 3), 600);
    EXPECT_EQ(cost.copy_bytes(0, 1, 2, 3), 0);  // holds the first reader
    EXPECT_EQ(cost.copy_bytes(0, 3, 3, 3), 0);
    EXPECT_EQ(cost.copy_bytes(1, 2, 2, 2), 0);  // reads it nowhere
    EXPECT_EQ(cost.copy_bytes(1, 3, 3, 3), stage_sums(p, {1, 2}, 1).weight_bytes - 200);
  }
}

TEST(Gpp, RecomputesStagesOnlyWhereTheyWouldNotFitAndWhereItPays) {
  // The chain of MemoryDecidesTheMicroBatchAndDepth: activations bind, inputs are small. With
  // recomputation a stage keeps 1 byte per sample per micro-batch in flight instead of 1000. At
  // 3,200 bytes per device the best plain plan is [0] [1] [2,3] at b = 1 (step 18 x 4 s); four
  // stages need the first to recompute (step 19 x 3 s).
  std::vector<TableNode> rows(4, TableNode{1.0, 1.0, 0.0, 0, 1000});
  Problem p = table_problem(rows, {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}}, 4, 3200, 16);
  p.count_communication = false;
  p.allow_replication = false;
  ASSERT_TRUE(p.finalize().is_ok());
  auto plain = plan_gpp(p);
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  for (PlanStage const& s : plain->stages) EXPECT_FALSE(s.recompute);
  p.allow_recompute = true;
  auto rc = plan_gpp(p);
  ASSERT_TRUE(rc.is_ok()) << rc.status().message();
  expect_valid_plan(p, *rc);
  EXPECT_LT(rc->step_time_s, plain->step_time_s * (1 - 1e-9)) << plan_to_json(*rc);
  int recomputing = 0;
  std::map<std::string, int> id;
  for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) id[p.nodes[v].name] = v;
  for (PlanStage const& s : rc->stages) {
    std::vector<int> nodes;
    for (auto const& name : s.nodes) nodes.push_back(id.at(name));
    int const d = static_cast<int>(s.in_flight);
    StageCost const without = stage_cost(p, nodes, s.replicas, rc->micro_batch, d, rc->num_micro_batches);
    if (!s.recompute) {
      EXPECT_TRUE(without.fits) << "stage " << s.id;
      continue;
    }
    ++recomputing;
    EXPECT_FALSE(without.fits) << "stage " << s.id << " recomputes although it fits without";
    // The memory the plan states is the recomputing formula, and the backward pays one forward.
    // 1 byte per sample enters every stage but the first (the model's own inputs are not edges).
    EXPECT_EQ(s.stash_bytes_per_micro_batch, nodes.front() == 0 ? 0 : rc->micro_batch);
    EXPECT_EQ(s.peak_memory_bytes, s.weight_bytes + s.optimizer_bytes + s.in_flight * s.stash_bytes_per_micro_batch +
                                       s.activation_bytes_per_micro_batch);
    // T_s counts the rerun forward; bwd_input_s stays the input-gradient pass (the simulator adds
    // fwd_s to a recomputing B, so counting it there too would price it twice).
    EXPECT_NEAR(s.time_s, without.time_s + without.fwd_s, 1e-12);
    EXPECT_NEAR(s.bwd_input_s, without.bwd_input_s, 1e-12);
  }
  EXPECT_GE(recomputing, 1);
}

TEST(Gpp, ImpossibleRequestsSayWhatWouldFit) {
  std::vector<TableNode> rows(3, TableNode{1.0, 1.0, 0.0, 1000, 10});
  Problem p = table_problem(rows, {{0, 1, 1}, {1, 2, 1}}, 2, 2000, 4);  // weights x4 alone exceed memory
  ASSERT_TRUE(p.finalize().is_ok());
  auto r = plan_gpp(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(r.status().message().find("alone needs"), std::string::npos) << r.status().message();
  // Fits one node per device but not three nodes on two devices.
  Problem q = table_problem(rows, {{0, 1, 1}, {1, 2, 1}}, 2, 4100, 4);
  ASSERT_TRUE(q.finalize().is_ok());
  auto s = plan_gpp(q);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("more devices"), std::string::npos) << s.status().message();
}

TEST(Gpp, DeterministicAndReportsSearch) {
  std::mt19937 rng(11);
  Problem p = random_problem(random_sp_dag(9, rng), 4, 8, rng, 5000, 6000);
  ASSERT_TRUE(p.finalize().is_ok());
  std::vector<std::string> lines;
  PlannerOptions opt;
  opt.progress = [&](std::string const& s) { lines.push_back(s); };
  auto a = plan_gpp(p, opt);
  auto b = plan_gpp(p);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  a->search_time_s = b->search_time_s = 0;
  EXPECT_EQ(plan_to_json(*a), plan_to_json(*b));
  EXPECT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("states="), std::string::npos);
  EXPECT_GT(a->tau_s, 0);
  EXPECT_EQ(a->planner, "gpp");
}

// The search asks the DP for plans no deeper than its target depth only (Engine::evaluate's cap,
// which prunes every deeper partial plan): at each cap the capped evaluation must find exactly the
// uncapped one's plan when that plan is no deeper, and no plan otherwise; and whatever it finds
// must hold until its tau_next.
TEST(Gpp, TheDepthCapKeepsEveryPlanNoDeeperThanIt) {
  std::mt19937 rng(5);
  int compared = 0, refused = 0;
  for (int trial = 0; trial < 150; ++trial) {
    int const n = 4 + static_cast<int>(rng() % 12);
    int const devices = 2 + static_cast<int>(rng() % 14);
    Problem p = random_problem(random_sp_dag(n, rng), devices, 16, rng);
    ASSERT_TRUE(p.finalize().is_ok());
    auto tree = sp_decompose(p);
    ASSERT_TRUE(tree.is_ok());
    LeafOrder const leaves = leaf_order(*tree);
    gpp::BoundaryRows rows;
    for (int64_t b : p.micro_batch_sizes()) {
      gpp::Engine engine(p, *tree, leaves, b, rows);
      double const floor = std::max(engine.lower_bound(), engine.tau_floor());
      for (double scale : {1.0, 1.3, 2.0, 4.0, 16.0}) {
        double const tau = floor * scale;
        gpp::Engine::Eval const all = engine.evaluate(tau);
        for (int cap = 1; cap <= devices; ++cap) {
          gpp::Engine::Eval const capped = engine.evaluate(tau, cap);
          SCOPED_TRACE("trial " + std::to_string(trial) + " b=" + std::to_string(b) + " tau x" + std::to_string(scale) +
                       " cap " + std::to_string(cap));
          if (all.feasible && all.depth <= cap) {
            ASSERT_TRUE(capped.feasible);
            EXPECT_EQ(capped.depth, all.depth);
            EXPECT_EQ(capped.devices, all.devices);
            EXPECT_EQ(capped.tau_used, all.tau_used);
            ++compared;
          } else {
            EXPECT_FALSE(capped.feasible) << "depth " << capped.depth;
            ++refused;
          }
          EXPECT_GT(capped.tau_next, tau);
          // Below tau_next nothing has changed (same result, capped); the DP compares times with a
          // tolerance of 1e-12 relative (summation order), so "below" is below that.
          if (std::isfinite(capped.tau_next)) {
            gpp::Engine::Eval const later = engine.evaluate(capped.tau_next * (1 - 1e-11), cap);
            EXPECT_EQ(later.feasible, capped.feasible);
            if (later.feasible && capped.feasible) {
              EXPECT_EQ(later.depth, capped.depth);
              EXPECT_EQ(later.devices, capped.devices);
            }
          }
        }
      }
    }
  }
  EXPECT_GE(compared, 500);
  EXPECT_GE(refused, 500);
}

TEST(GppRangeCost, AgreesWithStageCost) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    Problem p = random_problem(random_sp_dag(10, rng), 4, 8, rng);
    // Shared tensors: a producer's edges carry one tensor name, so groups span several consumers.
    ASSERT_TRUE(p.finalize().is_ok());
    auto tree = sp_decompose(p);
    ASSERT_TRUE(tree.is_ok());
    LeafOrder const lo = leaf_order(*tree);
    RangeCost const rc(p, lo.order, 8);
    BoundaryTracker tracker(p);
    for (int a = 0; a < 10; ++a) {
      tracker.clear();
      std::vector<int> nodes;
      for (int b = a; b < 10; ++b) {
        tracker.add(lo.order[b]);
        nodes.push_back(lo.order[b]);
        for (int l = 0; l < rc.levels(); ++l) {
          int const r = rc.replicas(l);
          StageSums const s = rc.sums(a, b + 1, l, tracker);
          StageCost const fast = stage_cost_from_sums(p, s, r, 8, 1, 1);
          StageCost const ref = stage_cost(p, nodes, r, 8, 1, 1);
          EXPECT_LT(rel(fast.time_s, ref.time_s), 1e-12);
          EXPECT_EQ(fast.comm_s == ref.comm_s || rel(fast.comm_s, ref.comm_s) < 1e-12, true);
          int const cap = rc.max_in_flight(s, l);
          for (int f = 1; f <= 6; ++f) EXPECT_EQ(stage_cost(p, nodes, r, 8, f, 1).fits, f <= cap);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gp::partition
