#include "graph/analysis.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <functional>

namespace gp::graph {
namespace {

using Row = std::vector<uint64_t>;

bool test(Row const& r, std::size_t i) { return (r[i / 64] >> (i % 64)) & 1u; }
void set(Row& r, std::size_t i) { r[i / 64] |= uint64_t{1} << (i % 64); }

// Calls fn(i) for each set bit of (a & ~b), in increasing order; stops when fn returns true.
template <typename Fn>
bool for_each_bit(Row const& a, Row const& b, Fn&& fn) {
  for (std::size_t w = 0; w < a.size(); ++w) {
    uint64_t bits = a[w] & ~b[w];
    while (bits) {
      std::size_t const i = w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
      bits &= bits - 1;
      if (fn(i)) return true;
    }
  }
  return false;
}

// Hopcroft-Karp on the bipartite graph left u -> right v when u reaches v.
class Matching {
 public:
  explicit Matching(Reachability const& reach)
      : r_(reach), n_(reach.size()), words_((n_ + 63) / 64), ml_(n_, -1), mr_(n_, -1), dist_(n_) {
    for (std::size_t u = 0; u < n_; ++u)  // greedy start
      for_each_bit(r_.row(static_cast<OpId>(u)), Row(words_, 0), [&](std::size_t v) {
        if (mr_[v] >= 0) return false;
        ml_[u] = static_cast<int>(v);
        mr_[v] = static_cast<int>(u);
        return true;
      });
    while (bfs()) {
      bool grew = false;
      for (std::size_t u = 0; u < n_; ++u)
        if (ml_[u] < 0) grew |= dfs(u);
      if (!grew) break;  // cannot happen when bfs() is right; never loop forever
    }
  }

  std::vector<int> const& left() const { return ml_; }
  std::vector<int> const& right() const { return mr_; }

 private:
  bool bfs() {
    constexpr int kInf = 1 << 30;
    std::deque<std::size_t> queue;
    for (std::size_t u = 0; u < n_; ++u) {
      dist_[u] = ml_[u] < 0 ? 0 : kInf;
      if (ml_[u] < 0) queue.push_back(u);
    }
    Row seen(words_, 0);
    bool found = false;
    while (!queue.empty()) {
      std::size_t const u = queue.front();
      queue.pop_front();
      for_each_bit(r_.row(static_cast<OpId>(u)), seen, [&](std::size_t v) {
        set(seen, v);
        int const w = mr_[v];
        if (w < 0)
          found = true;
        else if (dist_[static_cast<std::size_t>(w)] == kInf) {
          dist_[static_cast<std::size_t>(w)] = dist_[u] + 1;
          queue.push_back(static_cast<std::size_t>(w));
        }
        return false;
      });
    }
    dead_.assign(words_, 0);
    return found;
  }

  // Along layered edges only. A right vertex tried once in a phase is not tried again: its
  // partner either failed (and would fail again) or is now on an augmenting path.
  bool dfs(std::size_t u) {
    return for_each_bit(r_.row(static_cast<OpId>(u)), dead_, [&](std::size_t v) {
      if (test(dead_, v)) return false;
      int const w = mr_[v];
      if (w >= 0 && dist_[static_cast<std::size_t>(w)] != dist_[u] + 1) return false;
      set(dead_, v);
      if (w < 0 || dfs(static_cast<std::size_t>(w))) {
        ml_[u] = static_cast<int>(v);
        mr_[v] = static_cast<int>(u);
        return true;
      }
      return false;
    });
  }

  Reachability const& r_;
  std::size_t n_, words_;
  std::vector<int> ml_, mr_, dist_;
  Row dead_;
};

}  // namespace

Reachability::Reachability(OpGraph const& graph) {
  std::size_t const n = graph.num_ops();
  std::size_t const words = (n + 63) / 64;
  rows_.assign(n, Row(words, 0));
  auto const& topo = graph.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    Row& row = rows_[static_cast<std::size_t>(*it)];
    for (OpId s : graph.successors(*it)) {
      set(row, static_cast<std::size_t>(s));
      Row const& sr = rows_[static_cast<std::size_t>(s)];
      for (std::size_t w = 0; w < words; ++w) row[w] |= sr[w];
    }
  }
}

std::vector<OpId> fork_points(OpGraph const& graph) {
  std::vector<OpId> out;
  for (std::size_t v = 0; v < graph.num_ops(); ++v)
    if (graph.successors(static_cast<OpId>(v)).size() > 1) out.push_back(static_cast<OpId>(v));
  return out;
}

std::vector<OpId> join_points(OpGraph const& graph) {
  std::vector<OpId> out;
  for (std::size_t v = 0; v < graph.num_ops(); ++v)
    if (graph.predecessors(static_cast<OpId>(v)).size() > 1) out.push_back(static_cast<OpId>(v));
  return out;
}

int64_t branch_count(OpGraph const& graph) {
  int64_t n = 0;
  for (OpId v : fork_points(graph)) n += static_cast<int64_t>(graph.successors(v).size());
  int64_t entries = 0;
  for (Op const& op : graph.ops()) {
    if (!graph.predecessors(op.id).empty()) continue;
    bool reads_input = false;
    for (TensorId t : op.inputs) reads_input |= t != kNoTensor && graph.tensor(t).role == TensorRole::kInput;
    entries += reads_input;
  }
  return entries > 1 ? n + entries : n;
}

std::vector<OpId> widest_antichain(OpGraph const& graph) {
  std::size_t const n = graph.num_ops();
  if (n == 0) return {};
  Reachability const reach(graph);
  Matching const m(reach);
  // Konig: from the unmatched left vertices, alternate (any edge left->right, matched edge
  // right->left). The antichain is every v whose left copy is reached and right copy is not.
  std::size_t const words = (n + 63) / 64;
  Row left_seen(words, 0), right_seen(words, 0);
  std::deque<std::size_t> queue;
  for (std::size_t u = 0; u < n; ++u)
    if (m.left()[u] < 0) {
      set(left_seen, u);
      queue.push_back(u);
    }
  while (!queue.empty()) {
    std::size_t const u = queue.front();
    queue.pop_front();
    for_each_bit(reach.row(static_cast<OpId>(u)), right_seen, [&](std::size_t v) {
      set(right_seen, v);
      int const w = m.right()[v];
      if (w >= 0 && !test(left_seen, static_cast<std::size_t>(w))) {
        set(left_seen, static_cast<std::size_t>(w));
        queue.push_back(static_cast<std::size_t>(w));
      }
      return false;
    });
  }
  std::vector<OpId> out;
  for (std::size_t v = 0; v < n; ++v)
    if (test(left_seen, v) && !test(right_seen, v)) out.push_back(static_cast<OpId>(v));
  return out;
}

}  // namespace gp::graph
