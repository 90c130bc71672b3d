// Fork/join points, branches and the widest antichain on hand-made graphs; the antichain is
// also checked against brute force on random DAGs.
#include <gtest/gtest.h>

#include <random>

#include "graph/analysis.h"
#include "graph/dot.h"

namespace gp::graph {
namespace {

// Op i writes tensor t<i>; an edge (u, v) makes v read t<u>; ops without predecessors read x.
OpGraph from_edges(int n, std::vector<std::pair<int, int>> const& edges) {
  OpGraph g;
  g.set_name("hand");
  TensorInfo x;
  x.name = "x";
  x.shape = Shape{{kBatch, 4}};
  x.role = TensorRole::kInput;
  TensorId const in = g.add_tensor(x);
  g.mark_input(in);
  std::vector<TensorId> outs;
  for (int i = 0; i < n; ++i) {
    TensorInfo t;
    t.name = "t" + std::to_string(i);
    t.shape = Shape{{kBatch, 4}};
    outs.push_back(g.add_tensor(t));
  }
  std::vector<std::vector<TensorId>> ins(static_cast<std::size_t>(n));
  for (auto [u, v] : edges) ins[static_cast<std::size_t>(v)].push_back(outs[static_cast<std::size_t>(u)]);
  for (int i = 0; i < n; ++i) {
    Op op;
    op.name = "op" + std::to_string(i);
    op.type = ins[static_cast<std::size_t>(i)].size() > 1 ? "Add" : "Relu";
    op.inputs = ins[static_cast<std::size_t>(i)].empty() ? std::vector<TensorId>{in} : ins[static_cast<std::size_t>(i)];
    op.outputs = {outs[static_cast<std::size_t>(i)]};
    g.add_op(op);
  }
  g.mark_output(outs.back());
  EXPECT_TRUE(g.finalize().is_ok());
  return g;
}

TEST(Analysis, Chain) {
  auto g = from_edges(4, {{0, 1}, {1, 2}, {2, 3}});
  EXPECT_TRUE(fork_points(g).empty());
  EXPECT_TRUE(join_points(g).empty());
  EXPECT_EQ(branch_count(g), 0);
  EXPECT_EQ(widest_antichain(g).size(), 1u);
}

TEST(Analysis, Diamond) {
  auto g = from_edges(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  EXPECT_EQ(fork_points(g), std::vector<OpId>{0});
  EXPECT_EQ(join_points(g), std::vector<OpId>{3});
  EXPECT_EQ(branch_count(g), 2);
  EXPECT_EQ(widest_antichain(g), (std::vector<OpId>{1, 2}));
  Reachability r(g);
  EXPECT_TRUE(r.reaches(0, 3));
  EXPECT_FALSE(r.reaches(1, 2));
  EXPECT_FALSE(r.reaches(3, 0));
  EXPECT_FALSE(r.reaches(0, 0));
}

TEST(Analysis, ThreeParallelBranchesOfDifferentLengths) {
  // 0 -> {1 -> 2 -> 3, 4, 5 -> 6} -> 7
  auto g = from_edges(8, {{0, 1}, {1, 2}, {2, 3}, {0, 4}, {0, 5}, {5, 6}, {3, 7}, {4, 7}, {6, 7}});
  EXPECT_EQ(branch_count(g), 3);
  EXPECT_EQ(fork_points(g).size(), 1u);
  EXPECT_EQ(join_points(g).size(), 1u);
  auto const a = widest_antichain(g);
  EXPECT_EQ(a.size(), 3u);
  Reachability r(g);
  for (OpId u : a)
    for (OpId v : a) EXPECT_FALSE(r.reaches(u, v)) << u << " " << v;
}

TEST(Analysis, DisconnectedSourcesAndEmptyGraph) {
  auto g = from_edges(5, {});
  EXPECT_EQ(widest_antichain(g).size(), 5u);
  EXPECT_EQ(branch_count(g), 5);  // five ops read the input side by side
  // Two towers from the input joined at the end, one of them forking: 2 entries + 2 fork edges.
  auto towers = from_edges(6, {{0, 1}, {1, 5}, {2, 3}, {2, 4}, {3, 5}, {4, 5}});
  EXPECT_EQ(branch_count(towers), 4);
  EXPECT_EQ(widest_antichain(towers).size(), 3u);
  OpGraph empty;
  ASSERT_TRUE(empty.finalize().is_ok());
  EXPECT_TRUE(widest_antichain(empty).empty());
  EXPECT_EQ(branch_count(empty), 0);
}

std::size_t brute_force_width(OpGraph const& g) {
  Reachability r(g);
  int const n = static_cast<int>(g.num_ops());
  std::size_t best = 0;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    bool ok = true;
    for (int u = 0; u < n && ok; ++u)
      for (int v = 0; v < n && ok; ++v)
        if (((mask >> u) & 1) && ((mask >> v) & 1) && r.reaches(u, v)) ok = false;
    if (ok) best = std::max<std::size_t>(best, static_cast<std::size_t>(__builtin_popcount(mask)));
  }
  return best;
}

TEST(Analysis, AntichainMatchesBruteForceOnRandomDags) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 60; ++trial) {
    int const n = 2 + static_cast<int>(rng() % 11);
    double const p = 0.1 + 0.1 * static_cast<double>(rng() % 5);
    std::vector<std::pair<int, int>> edges;
    for (int u = 0; u < n; ++u)
      for (int v = u + 1; v < n; ++v)
        if (std::uniform_real_distribution<>(0, 1)(rng) < p) edges.push_back({u, v});
    auto g = from_edges(n, edges);
    auto const a = widest_antichain(g);
    EXPECT_EQ(a.size(), brute_force_width(g)) << "trial " << trial;
    Reachability r(g);
    for (OpId u : a)
      for (OpId v : a) EXPECT_FALSE(r.reaches(u, v));
  }
}

TEST(Analysis, LargeLayeredGraph) {
  // 40 layers of 50 ops, each op feeding two ops of the next layer: the widest antichain is one
  // layer (50) and the computation stays fast on 2,000 ops.
  int const layers = 40, width = 50;
  std::vector<std::pair<int, int>> edges;
  for (int l = 0; l + 1 < layers; ++l)
    for (int i = 0; i < width; ++i) {
      edges.push_back({l * width + i, (l + 1) * width + i});
      edges.push_back({l * width + i, (l + 1) * width + (i + 1) % width});
    }
  auto g = from_edges(layers * width, edges);
  EXPECT_EQ(widest_antichain(g).size(), static_cast<std::size_t>(width));
  EXPECT_EQ(branch_count(g), 2 * width * (layers - 1) + width);  // + the first layer's entries
}

TEST(Dot, OpsAndShapedEdges) {
  auto g = from_edges(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  std::string const dot = to_dot(g);
  EXPECT_EQ(dot.rfind("digraph \"hand\" {", 0), 0u) << dot;
  EXPECT_NE(dot.find("op0 [label=\"Relu\nop0\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("op3 [label=\"Add\nop3\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("op0 -> op1 [label=\"[N,4]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("in0 -> op0;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("op3 -> out4 [label=\"[N,4]\"];"), std::string::npos) << dot;
  EXPECT_EQ(dot.back(), '\n');
  std::size_t edges = 0;
  for (std::size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 1)) ++edges;
  EXPECT_EQ(edges, 4u + 1u + 1u);  // op edges, the input edge, the output edge
  EXPECT_FALSE(write_dot(g, "/nonexistent-dir/x.dot").is_ok());
}

}  // namespace
}  // namespace gp::graph
