// The Boost.Graph-backed topological order, neighbour queries and widest antichain against small
// straightforward references: a plain Kahn (smallest id first) over the ops' tensors on every zoo
// model, and brute force plus a simple augmenting-path matching on random DAGs.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <set>

#include "graph/analysis.h"
#include "models/zoo.h"

namespace gp::graph {
namespace {

// Op i writes t<i>; an edge (u, v) makes v read t<u> (once per listed edge); sources read x.
OpGraph from_edges(int n, std::vector<std::pair<int, int>> const& edges, Status* status = nullptr) {
  OpGraph g;
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
    op.type = "Add";
    op.inputs = ins[static_cast<std::size_t>(i)].empty() ? std::vector<TensorId>{in} : ins[static_cast<std::size_t>(i)];
    op.outputs = {outs[static_cast<std::size_t>(i)]};
    g.add_op(op);
  }
  if (n > 0) g.mark_output(outs.back());
  Status const s = g.finalize();
  if (status)
    *status = s;
  else
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  return g;
}

// Successor sets read straight from the ops' input and output tensors.
std::vector<std::set<OpId>> reference_successors(OpGraph const& g) {
  std::vector<std::set<OpId>> succ(g.num_ops());
  for (Op const& op : g.ops())
    for (TensorId t : op.inputs)
      if (t != kNoTensor && g.tensor(t).producer != kNoOp)
        succ[static_cast<std::size_t>(g.tensor(t).producer)].insert(op.id);
  return succ;
}

// The order recorded before Boost.Graph computed it: Kahn's algorithm, smallest ready id first.
std::vector<OpId> reference_topo_order(OpGraph const& g) {
  auto const succ = reference_successors(g);
  std::vector<int> indeg(g.num_ops(), 0);
  for (auto const& s : succ)
    for (OpId v : s) ++indeg[static_cast<std::size_t>(v)];
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (std::size_t v = 0; v < g.num_ops(); ++v)
    if (indeg[v] == 0) ready.push(static_cast<OpId>(v));
  std::vector<OpId> order;
  while (!ready.empty()) {
    OpId const v = ready.top();
    ready.pop();
    order.push_back(v);
    for (OpId s : succ[static_cast<std::size_t>(v)])
      if (--indeg[static_cast<std::size_t>(s)] == 0) ready.push(s);
  }
  return order;
}

void expect_neighbours_match(OpGraph const& g, std::string const& what) {
  auto const succ = reference_successors(g);
  std::vector<std::vector<OpId>> pred(g.num_ops());
  for (std::size_t u = 0; u < g.num_ops(); ++u)
    for (OpId v : succ[u]) pred[static_cast<std::size_t>(v)].push_back(static_cast<OpId>(u));
  for (std::size_t v = 0; v < g.num_ops(); ++v) {
    OpId const id = static_cast<OpId>(v);
    EXPECT_EQ(g.successors(id), std::vector<OpId>(succ[v].begin(), succ[v].end())) << what << " op " << v;
    EXPECT_EQ(g.predecessors(id), pred[v]) << what << " op " << v;
  }
}

// Maximum antichain by a plain augmenting-path (Kuhn) matching on the reachability graph, then
// the Konig construction: the left side's alternating-reachable set does not depend on which
// maximum matching was found, so the antichain is the same set whatever the matching algorithm.
std::vector<OpId> reference_antichain(OpGraph const& g) {
  Reachability const r(g);
  int const n = static_cast<int>(g.num_ops());
  std::vector<int> ml(static_cast<std::size_t>(n), -1), mr(static_cast<std::size_t>(n), -1);
  for (int u = 0; u < n; ++u) {
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    std::function<bool(int)> augment = [&](int a) {
      for (int v = 0; v < n; ++v) {
        if (!r.reaches(a, v) || seen[static_cast<std::size_t>(v)]) continue;
        seen[static_cast<std::size_t>(v)] = true;
        if (mr[static_cast<std::size_t>(v)] < 0 || augment(mr[static_cast<std::size_t>(v)])) {
          ml[static_cast<std::size_t>(a)] = v;
          mr[static_cast<std::size_t>(v)] = a;
          return true;
        }
      }
      return false;
    };
    augment(u);
  }
  std::vector<bool> left(static_cast<std::size_t>(n), false), right(static_cast<std::size_t>(n), false);
  std::vector<int> stack;
  for (int u = 0; u < n; ++u)
    if (ml[static_cast<std::size_t>(u)] < 0) {
      left[static_cast<std::size_t>(u)] = true;
      stack.push_back(u);
    }
  while (!stack.empty()) {
    int const u = stack.back();
    stack.pop_back();
    for (int v = 0; v < n; ++v) {
      if (!r.reaches(u, v) || right[static_cast<std::size_t>(v)]) continue;
      right[static_cast<std::size_t>(v)] = true;
      int const w = mr[static_cast<std::size_t>(v)];
      if (w >= 0 && !left[static_cast<std::size_t>(w)]) {
        left[static_cast<std::size_t>(w)] = true;
        stack.push_back(w);
      }
    }
  }
  std::vector<OpId> out;
  for (int v = 0; v < n; ++v)
    if (left[static_cast<std::size_t>(v)] && !right[static_cast<std::size_t>(v)]) out.push_back(v);
  return out;
}

std::size_t brute_force_width(OpGraph const& g) {
  Reachability const r(g);
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

void expect_antichain(OpGraph const& g, std::vector<OpId> const& a, std::string const& what) {
  Reachability const r(g);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end())) << what;
  for (OpId u : a)
    for (OpId v : a) EXPECT_FALSE(r.reaches(u, v)) << what << ": " << u << " reaches " << v;
}

TEST(Order, ZooModelsKeepTheirTopologicalOrderNeighboursAndAntichain) {
  for (auto const& info : models::model_list()) {
    for (models::Size size : {models::Size::kTiny, models::Size::kSmall}) {
      std::string const what = info.name + " " + models::size_name(size);
      auto g = models::build_graph(info.name, size, 0, /*load_weights=*/false);
      ASSERT_TRUE(g.is_ok()) << what << ": " << g.status().to_string();
      EXPECT_EQ(g->topo_order(), reference_topo_order(*g)) << what;
      EXPECT_EQ(g->topo_order().size(), g->num_ops()) << what;
      expect_neighbours_match(*g, what);
      auto const a = widest_antichain(*g);
      EXPECT_EQ(a, reference_antichain(*g)) << what;
      expect_antichain(*g, a, what);
    }
  }
}

TEST(Order, RandomDagsMatchTheReferences) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 80; ++trial) {
    int const n = 1 + static_cast<int>(rng() % 13);
    double const p = 0.05 + 0.1 * static_cast<double>(rng() % 6);
    // A random permutation makes edges run against the id order too; some edges are doubled
    // (one op reading the same producer twice, or two tensors between the same pair).
    std::vector<int> perm(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::pair<int, int>> edges;
    for (int u = 0; u < n; ++u)
      for (int v = u + 1; v < n; ++v)
        if (std::uniform_real_distribution<>(0, 1)(rng) < p) {
          edges.push_back({perm[static_cast<std::size_t>(u)], perm[static_cast<std::size_t>(v)]});
          if (rng() % 5 == 0) edges.push_back(edges.back());
        }
    auto g = from_edges(n, edges);
    std::string const what = "trial " + std::to_string(trial);
    EXPECT_EQ(g.topo_order(), reference_topo_order(g)) << what;
    expect_neighbours_match(g, what);
    auto const a = widest_antichain(g);
    EXPECT_EQ(a.size(), brute_force_width(g)) << what;
    EXPECT_EQ(a, reference_antichain(g)) << what;
    expect_antichain(g, a, what);
  }
}

TEST(Order, CyclesAreRefusedNamingTheSmallestOpOnOne) {
  Status s;
  from_edges(4, {{0, 1}, {1, 2}, {2, 1}, {2, 3}}, &s);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("the operator graph has a cycle through 'op1'"), std::string::npos) << s.to_string();
  from_edges(5, {{0, 4}, {4, 3}, {3, 4}, {1, 2}}, &s);
  EXPECT_NE(s.to_string().find("the operator graph has a cycle through 'op3'"), std::string::npos) << s.to_string();
  from_edges(2, {{0, 1}, {1, 1}}, &s);
  EXPECT_NE(s.to_string().find("operator 'op1' consumes its own output"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace gp::graph
