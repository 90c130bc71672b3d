// Random small Problems for the GPP tests: series-parallel DAGs (with transitive skip edges, node
// ids shuffled into a random topological order) and arbitrary DAGs, with continuous random costs so
// that distinct plans practically never tie.
#pragma once

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "tests/partition/table_problem.h"

namespace gp::partition::testing {

struct RandomDag {
  int n = 0;
  std::vector<std::pair<int, int>> edges;
};

// Vertex series-parallel DAG with exactly n nodes.
inline RandomDag random_sp_dag(int n, std::mt19937& rng) {
  struct Part {
    std::vector<int> nodes, sources, sinks;
  };
  int next = 0;
  std::vector<std::pair<int, int>> edges;
  auto build = [&](auto&& self, int size) -> Part {
    if (size == 1) {
      int v = next++;
      return {{v}, {v}, {v}};
    }
    int const left = 1 + static_cast<int>(rng() % (size - 1));
    Part a = self(self, left);
    Part b = self(self, size - left);
    Part out;
    out.nodes = a.nodes;
    out.nodes.insert(out.nodes.end(), b.nodes.begin(), b.nodes.end());
    if (rng() % 2 == 0) {
      for (int u : a.sinks) {
        for (int v : b.sources) edges.emplace_back(u, v);
      }
      out.sources = a.sources;
      out.sinks = b.sinks;
    } else {
      out.sources = a.sources;
      out.sources.insert(out.sources.end(), b.sources.begin(), b.sources.end());
      out.sinks = a.sinks;
      out.sinks.insert(out.sinks.end(), b.sinks.begin(), b.sinks.end());
    }
    return out;
  };
  build(build, n);
  // Transitive skip edges (like residuals) keep the poset series-parallel.
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (auto [u, v] : edges) reach[u][v] = true;
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (reach[i][k] && reach[k][j]) reach[i][j] = true;
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v)
      if (reach[u][v] && rng() % 6 == 0) edges.emplace_back(u, v);
  // Relabel by a random topological order.
  std::vector<int> indeg(n, 0), label(n, -1);
  std::vector<std::vector<int>> succ(n);
  for (auto [u, v] : edges) {
    succ[u].push_back(v);
    ++indeg[v];
  }
  std::vector<int> ready;
  for (int v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push_back(v);
  int id = 0;
  while (!ready.empty()) {
    std::size_t pick = rng() % ready.size();
    int v = ready[pick];
    ready.erase(ready.begin() + static_cast<long>(pick));
    label[v] = id++;
    for (int w : succ[v])
      if (--indeg[w] == 0) ready.push_back(w);
  }
  RandomDag dag{n, {}};
  for (auto [u, v] : edges) dag.edges.emplace_back(label[u], label[v]);
  std::sort(dag.edges.begin(), dag.edges.end());
  dag.edges.erase(std::unique(dag.edges.begin(), dag.edges.end()), dag.edges.end());
  return dag;
}

inline RandomDag random_dag(int n, std::mt19937& rng) {
  RandomDag dag{n, {}};
  for (int u = 0; u < n; ++u)
    for (int v = u + 1; v < n; ++v)
      if (rng() % 3 == 0) dag.edges.emplace_back(u, v);
  return dag;
}

// Costs per sample in [0.5, 2) s, weights up to 100 B, activations up to 50 B/sample, edges up to
// 2000 B/sample per producer; memory from `memory_lo` to `memory_hi` bytes.
inline Problem random_problem(RandomDag const& dag, int devices, int64_t batch, std::mt19937& rng,
                              int64_t memory_lo = 600, int64_t memory_hi = 6000) {
  std::uniform_real_distribution<double> t(0.5, 2.0);
  std::vector<TableNode> rows(dag.n);
  for (auto& r : rows) {
    r.fwd_s = t(rng);
    r.bwd_input_s = t(rng);
    r.bwd_weight_s = t(rng) * 0.5;
    r.weight_bytes = static_cast<int64_t>(rng() % 100);
    r.activation_bytes_per_sample = static_cast<int64_t>(rng() % 50);
  }
  // One output tensor per producer (shared by its consumers), as in an ONNX graph.
  std::vector<int64_t> out_bytes(dag.n);
  for (auto& b : out_bytes) b = static_cast<int64_t>(rng() % 2000);
  std::vector<std::array<int64_t, 3>> edges;
  for (auto [u, v] : dag.edges) edges.push_back({u, v, out_bytes[u]});
  int64_t const memory = memory_lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(memory_hi - memory_lo));
  Problem p = table_problem(rows, edges, devices, memory, batch);
  p.cluster.intra_node = Link{1e6, 1e-3};
  p.cluster.inter_node = Link{1e5, 1e-2};
  for (std::size_t e = 0; e < p.edges.size(); ++e) p.edges[e].tensors = {"t" + std::to_string(p.edges[e].src)};
  return p;
}

}  // namespace gp::partition::testing
