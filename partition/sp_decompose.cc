#include "partition/sp_decompose.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <sstream>

namespace gp::partition {
namespace {

class Decomposer {
 public:
  Decomposer(int n, std::vector<std::vector<int>> succ, std::vector<std::vector<int>> pred)
      : succ_(std::move(succ)), pred_(std::move(pred)), pos_(n, -1) {}

  SpTree run(int n) {
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    tree_.root = build(std::move(all));
    return std::move(tree_);
  }

 private:
  int add(SpNode node) {
    tree_.nodes.push_back(std::move(node));
    return static_cast<int>(tree_.nodes.size()) - 1;
  }

  // `set` is sorted by id and convex in the (augmented) graph.
  int build(std::vector<int> set) {
    if (set.size() == 1) return add(SpNode{SpKind::kLeaf, set[0], {}});
    for (int i = 0; i < static_cast<int>(set.size()); ++i) pos_[set[i]] = i;
    std::vector<std::vector<int>> comps = components(set);
    if (comps.size() > 1) {
      SpNode par{SpKind::kParallel, -1, {}};
      for (auto& c : comps) par.children.push_back(build(std::move(c)));
      return add(std::move(par));
    }
    std::vector<int> cuts = series_cuts(set);
    if (cuts.empty()) {
      make_series(set);
      for (int i = 0; i < static_cast<int>(set.size()); ++i) pos_[set[i]] = i;
      cuts = series_cuts(set);
    }
    SpNode ser{SpKind::kSeries, -1, {}};
    int begin = 0;
    cuts.push_back(static_cast<int>(set.size()) - 1);
    for (int cut : cuts) {
      std::vector<int> part(set.begin() + begin, set.begin() + cut + 1);
      int child = build(std::move(part));
      // A stuck segment becomes a Series through make_series; flatten it (series of series).
      if (tree_.nodes[child].kind == SpKind::kSeries) {
        for (int c : tree_.nodes[child].children) ser.children.push_back(c);
      } else {
        ser.children.push_back(child);
      }
      begin = cut + 1;
    }
    return add(std::move(ser));
  }

  // Weakly connected components of `set` (positions in pos_), each sorted, ordered by first id.
  std::vector<std::vector<int>> components(std::vector<int> const& set) {
    int n = static_cast<int>(set.size());
    std::vector<int> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    for (int v : set) {
      for (int w : succ_[v]) {
        if (!in_set(w, set)) continue;
        int a = find(pos_[v]), b = find(pos_[w]);
        if (a != b) parent[std::max(a, b)] = std::min(a, b);
      }
    }
    std::vector<int> slot(n, -1);
    std::vector<std::vector<int>> out;
    for (int i = 0; i < n; ++i) {
      int r = find(i);
      if (slot[r] < 0) {
        slot[r] = static_cast<int>(out.size());
        out.emplace_back();
      }
      out[slot[r]].push_back(set[i]);
    }
    return out;
  }

  bool in_set(int v, std::vector<int> const& set) const {
    int p = pos_[v];
    return p >= 0 && p < static_cast<int>(set.size()) && set[p] == v;
  }

  struct CutCounts {
    std::vector<int64_t> maxima, minima, complete;  // per position p (cut after p)
  };

  // For each p: |maxima of prefix[0..p]|, |minima of suffix|, and direct edges between them.
  CutCounts cut_counts(std::vector<int> const& set) {
    int n = static_cast<int>(set.size());
    std::vector<int> first_succ(n, n), last_pred(n, -1);
    for (int i = 0; i < n; ++i) {
      for (int w : succ_[set[i]]) {
        if (in_set(w, set)) first_succ[i] = std::min(first_succ[i], pos_[w]);
      }
      for (int u : pred_[set[i]]) {
        if (in_set(u, set)) last_pred[i] = std::max(last_pred[i], pos_[u]);
      }
    }
    std::vector<int64_t> dm(n + 1, 0), dn(n + 1, 0), dc(n + 1, 0);
    for (int i = 0; i < n; ++i) {
      // i is a maximum of prefix[0..p] for p in [i, first_succ - 1].
      dm[i] += 1;
      dm[first_succ[i]] -= 1;
      // i is a minimum of the suffix after p for p in [max(last_pred, 0), i - 1].
      int lo = std::max(last_pred[i], 0);
      if (lo <= i - 1) {
        dn[lo] += 1;
        dn[i] -= 1;
      }
      for (int w : succ_[set[i]]) {
        if (!in_set(w, set)) continue;
        int j = pos_[w];
        // Edge i->j joins a maximum to a minimum for p in [last_pred(j), first_succ(i) - 1].
        int a = last_pred[j], b = first_succ[i] - 1;
        if (a <= b) {
          dc[a] += 1;
          dc[b + 1] -= 1;
        }
      }
    }
    CutCounts out{std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0)};
    int64_t m = 0, s = 0, c = 0;
    for (int p = 0; p < n; ++p) {
      m += dm[p];
      s += dn[p];
      c += dc[p];
      out.maxima[p] = m;
      out.minima[p] = s;
      out.complete[p] = c;
    }
    return out;
  }

  std::vector<int> series_cuts(std::vector<int> const& set) {
    CutCounts cc = cut_counts(set);
    std::vector<int> cuts;
    for (int p = 0; p + 1 < static_cast<int>(set.size()); ++p) {
      if (cc.maxima[p] * cc.minima[p] == cc.complete[p]) cuts.push_back(p);
    }
    return cuts;
  }

  // No series cut exists: add the fewest maximum->minimum edges that create one (earliest on ties).
  void make_series(std::vector<int> const& set) {
    int n = static_cast<int>(set.size());
    CutCounts cc = cut_counts(set);
    int best = 0;
    int64_t best_missing = INT64_MAX;
    for (int p = 0; p + 1 < n; ++p) {
      int64_t missing = cc.maxima[p] * cc.minima[p] - cc.complete[p];
      if (missing < best_missing) {
        best_missing = missing;
        best = p;
      }
    }
    std::vector<int> maxima, minima;
    for (int i = 0; i <= best; ++i) {
      bool is_max = true;
      for (int w : succ_[set[i]]) {
        if (in_set(w, set) && pos_[w] <= best) is_max = false;
      }
      if (is_max) maxima.push_back(set[i]);
    }
    for (int i = best + 1; i < n; ++i) {
      bool is_min = true;
      for (int u : pred_[set[i]]) {
        if (in_set(u, set) && pos_[u] > best) is_min = false;
      }
      if (is_min) minima.push_back(set[i]);
    }
    for (int u : maxima) {
      for (int v : minima) {
        if (std::find(succ_[u].begin(), succ_[u].end(), v) != succ_[u].end()) continue;
        succ_[u].push_back(v);
        pred_[v].push_back(u);
        tree_.added_edges.emplace_back(u, v);
      }
    }
  }

  std::vector<std::vector<int>> succ_, pred_;
  std::vector<int> pos_;
  SpTree tree_;
};

void print(SpTree const& t, int i, std::ostringstream& os) {
  SpNode const& n = t.nodes[i];
  if (n.kind == SpKind::kLeaf) {
    os << n.node;
    return;
  }
  os << (n.kind == SpKind::kSeries ? "S(" : "P(");
  for (size_t k = 0; k < n.children.size(); ++k) {
    if (k) os << ',';
    print(t, n.children[k], os);
  }
  os << ')';
}

}  // namespace

std::string SpTree::to_string() const {
  std::ostringstream os;
  if (root >= 0) print(*this, root, os);
  return os.str();
}

std::vector<int> SpTree::leaves(int t) const {
  std::vector<int> out, stack{t};
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (nodes[i].kind == SpKind::kLeaf) {
      out.push_back(nodes[i].node);
      continue;
    }
    for (auto it = nodes[i].children.rbegin(); it != nodes[i].children.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

Result<SpTree> sp_decompose(int num_nodes, std::vector<std::pair<int, int>> const& edges) {
  if (num_nodes <= 0) return invalid_argument("series-parallel decomposition: the graph has no nodes");
  std::vector<std::vector<int>> succ(num_nodes), pred(num_nodes);
  for (auto [u, v] : edges) {
    if (u < 0 || v < 0 || u >= num_nodes || v >= num_nodes) {
      return invalid_argument("series-parallel decomposition: edge " + std::to_string(u) + "->" + std::to_string(v) +
                              " names a node outside 0.." + std::to_string(num_nodes - 1));
    }
    if (u >= v) {
      return invalid_argument("series-parallel decomposition: edge " + std::to_string(u) + "->" + std::to_string(v) +
                              " goes backwards; node ids must be a topological order");
    }
    succ[u].push_back(v);
    pred[v].push_back(u);
  }
  for (auto& s : succ) {
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
  }
  for (auto& p : pred) {
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  Decomposer d(num_nodes, std::move(succ), std::move(pred));
  return d.run(num_nodes);
}

Result<SpTree> sp_decompose(Problem const& problem) {
  std::vector<std::pair<int, int>> edges;
  edges.reserve(problem.edges.size());
  for (Edge const& e : problem.edges) edges.emplace_back(e.src, e.dst);
  return sp_decompose(static_cast<int>(problem.nodes.size()), edges);
}

}  // namespace gp::partition
