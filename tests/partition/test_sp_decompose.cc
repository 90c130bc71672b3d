#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "partition/sp_decompose.h"

namespace gp::partition {
namespace {

using Edges = std::vector<std::pair<int, int>>;

std::string decompose(int n, Edges const& edges, int* added = nullptr) {
  auto tree = sp_decompose(n, edges);
  EXPECT_TRUE(tree.is_ok()) << tree.status().message();
  if (!tree.is_ok()) return "";
  if (added) *added = static_cast<int>(tree->added_edges.size());
  return tree->to_string();
}

// Reachability of the SP order of a tree: u < v iff they sit in different children of a Series
// node, u's child first.
std::vector<std::vector<bool>> sp_order(SpTree const& t, int n) {
  std::vector<std::vector<bool>> less(n, std::vector<bool>(n, false));
  for (SpNode const& node : t.nodes) {
    if (node.kind != SpKind::kSeries) continue;
    for (std::size_t i = 0; i < node.children.size(); ++i) {
      for (std::size_t j = i + 1; j < node.children.size(); ++j) {
        for (int u : t.leaves(node.children[i])) {
          for (int v : t.leaves(node.children[j])) less[u][v] = true;
        }
      }
    }
  }
  return less;
}

std::vector<std::vector<bool>> closure(int n, Edges const& edges) {
  std::vector<std::vector<bool>> r(n, std::vector<bool>(n, false));
  for (auto [u, v] : edges) r[u][v] = true;
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (r[i][k] && r[k][j]) r[i][j] = true;
      }
    }
  }
  return r;
}

// The tree is a valid SP form of the graph plus its added edges: every leaf once, and the SP
// order equals the reachability of the augmented graph.
void expect_valid(int n, Edges const& edges) {
  auto tree = sp_decompose(n, edges);
  ASSERT_TRUE(tree.is_ok()) << tree.status().message();
  std::vector<int> leaves = tree->leaves(tree->root);
  std::sort(leaves.begin(), leaves.end());
  ASSERT_EQ(static_cast<int>(leaves.size()), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(leaves[i], i);
  Edges augmented = edges;
  augmented.insert(augmented.end(), tree->added_edges.begin(), tree->added_edges.end());
  for (auto [u, v] : tree->added_edges) EXPECT_LT(u, v);
  EXPECT_EQ(sp_order(*tree, n), closure(n, augmented)) << tree->to_string();
  for (SpNode const& node : tree->nodes) {
    if (node.kind == SpKind::kLeaf) continue;
    EXPECT_GE(node.children.size(), 2u);
    for (int c : node.children) EXPECT_NE(tree->nodes[c].kind, node.kind) << tree->to_string();
  }
}

TEST(SpDecompose, ChainIsOneSeriesNode) {
  EXPECT_EQ(decompose(4, {{0, 1}, {1, 2}, {2, 3}}), "S(0,1,2,3)");
  EXPECT_EQ(decompose(1, {}), "0");
}

TEST(SpDecompose, Diamond) { EXPECT_EQ(decompose(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}}), "S(0,P(1,2),3)"); }

TEST(SpDecompose, ResidualSkipEdgeIsTransitive) {
  // x -> f -> g -> add, x -> add.
  EXPECT_EQ(decompose(4, {{0, 1}, {1, 2}, {2, 3}, {0, 3}}), "S(0,1,2,3)");
}

TEST(SpDecompose, NestedDiamonds) {
  // 0 -> {1, 2}; 1 -> {3, 4} -> 5; 2 -> 6; {5, 6} -> 7.
  Edges e{{0, 1}, {0, 2}, {1, 3}, {1, 4}, {3, 5}, {4, 5}, {2, 6}, {5, 7}, {6, 7}};
  EXPECT_EQ(decompose(8, e), "S(0,P(S(1,P(3,4),5),S(2,6)),7)");
  expect_valid(8, e);
}

TEST(SpDecompose, InterleavedIdsKeepBranchesTogether) {
  // Two branches 0->1->3->5 and 0->2->4->5 with ids interleaved.
  Edges e{{0, 1}, {1, 3}, {3, 5}, {0, 2}, {2, 4}, {4, 5}};
  EXPECT_EQ(decompose(6, e), "S(0,P(S(1,3),S(2,4)),5)");
}

TEST(SpDecompose, MultipleSourcesAndSinks) {
  // Sources 0 and 1 feed 2; 2 feeds sinks 3 and 4.
  EXPECT_EQ(decompose(5, {{0, 2}, {1, 2}, {2, 3}, {2, 4}}), "S(P(0,1),2,P(3,4))");
  // Disconnected components become one Parallel node.
  EXPECT_EQ(decompose(4, {{0, 2}, {1, 3}}), "P(S(0,2),S(1,3))");
}

TEST(SpDecompose, WheatstoneBridgeGetsOneOrderingEdge) {
  // N graph: a->c, b->c, b->d (the smallest non-series-parallel poset).
  int added = 0;
  std::string s = decompose(4, {{0, 2}, {1, 2}, {1, 3}}, &added);
  EXPECT_EQ(added, 1);
  EXPECT_EQ(s, "S(0,1,P(2,3))");  // the earliest cut that needs one edge: 0 -> 1
  expect_valid(4, {{0, 2}, {1, 2}, {1, 3}});
  // Bridge: s->a, s->b, a->b, a->t, b->t is series-parallel as a poset (a->b orders them).
  EXPECT_EQ(decompose(4, {{0, 1}, {0, 2}, {1, 2}, {1, 3}, {2, 3}}, &added), "S(0,1,2,3)");
  EXPECT_EQ(added, 0);
  // Bridge with the cross edge in the middle of two branches: 0->1->2->5, 0->3->4->5, 1->4.
  Edges e{{0, 1}, {1, 2}, {2, 5}, {0, 3}, {3, 4}, {4, 5}, {1, 4}};
  decompose(6, e, &added);
  EXPECT_GE(added, 1);
  expect_valid(6, e);
}

TEST(SpDecompose, RejectsEdgesAgainstTheOrder) {
  EXPECT_FALSE(sp_decompose(3, {{1, 0}}).is_ok());
  EXPECT_FALSE(sp_decompose(3, {{0, 5}}).is_ok());
  EXPECT_FALSE(sp_decompose(0, {}).is_ok());
}

TEST(SpDecompose, RandomDagsGiveValidTrees) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int const n = 1 + static_cast<int>(rng() % 12);
    Edges e;
    for (int u = 0; u < n; ++u) {
      for (int v = u + 1; v < n; ++v) {
        if (rng() % 4 == 0) e.emplace_back(u, v);
      }
    }
    expect_valid(n, e);
  }
}

TEST(SpDecompose, LongChainAndWideParallelAreFast) {
  int const n = 3000;
  Edges chain;
  for (int i = 0; i + 1 < n; ++i) chain.emplace_back(i, i + 1);
  auto t = sp_decompose(n, chain);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->nodes[t->root].children.size(), static_cast<std::size_t>(n));
  Edges fan;
  for (int i = 1; i + 1 < n; ++i) {
    fan.emplace_back(0, i);
    fan.emplace_back(i, n - 1);
  }
  auto f = sp_decompose(n, fan);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->nodes[f->root].children.size(), 3u);
  EXPECT_TRUE(f->added_edges.empty());
}

}  // namespace
}  // namespace gp::partition
