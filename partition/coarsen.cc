#include "partition/coarsen.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

namespace gp::partition {
namespace {

// A group's node times: the sums of its nodes' times in the original problem (cached there).
class GroupTimer final : public NodeTimer {
 public:
  GroupTimer(Problem const& p, std::vector<std::vector<int>> const& groups) : p_(&p), groups_(groups) {}
  NodeTime time(int node, int64_t samples, Device const& device) const override {
    std::vector<NodeTime> const& t = p_->node_times(samples, device);
    NodeTime sum;
    for (int v : groups_[node]) {
      sum.fwd_s += t[v].fwd_s;
      sum.bwd_input_s += t[v].bwd_input_s;
      sum.bwd_weight_s += t[v].bwd_weight_s;
    }
    return sum;
  }

 private:
  Problem const* p_;
  std::vector<std::vector<int>> groups_;
};

// Units: whole subtrees and runs of whole children, each at most `bound` in size. A Series' run
// that reaches the bound ends at its cheapest boundary (the latest on ties), and a run is split
// where a boundary inside it is cheaper than both of its ends; a boundary's cost: the bytes of the
// tensors made before it and read after it within the Series. So the cuts the groups leave to the DP
// are the graph's cheap ones (a transformer's residual points, where only the residual stream
// crosses, not the middle of an attention block, where the stream and the main path both do).
class Grouper {
 public:
  Grouper(Problem const& p, SpTree const& tree, std::vector<double> const& node_size) : tree_(tree) {
    int const m = static_cast<int>(tree.nodes.size());
    size_.assign(m, 0.0);
    std::vector<int> parent(m, -1), leaf_of(p.nodes.size(), -1);
    for (int t = 0; t < m; ++t) {  // children come before parents
      SpNode const& n = tree.nodes[t];
      if (n.kind == SpKind::kLeaf) {
        size_[t] = node_size[n.node];
        leaf_of[n.node] = t;
      }
      for (int c : n.children) {
        size_[t] += size_[c];
        parent[c] = t;
      }
    }
    std::vector<int> depth(m, 0);
    for (int t = m - 1; t >= 0; --t)
      if (parent[t] >= 0) depth[t] = depth[parent[t]] + 1;
    // child_index[t]: t's index among its parent's children.
    std::vector<int> child_index(m, 0);
    for (SpNode const& n : tree.nodes)
      for (int i = 0; i < static_cast<int>(n.children.size()); ++i) child_index[n.children[i]] = i;
    // Each (producer, tensors) group, at the Series node where its producer and a consumer part
    // (their lowest common ancestor): it crosses the boundaries from the producer's child to the
    // last such consumer's.
    struct Crossing {
      int64_t bytes = 0;                         // per sample
      std::map<int, std::pair<int, int>> spans;  // Series node -> first and last child crossed from
    };
    std::map<std::pair<int, std::vector<std::string>>, Crossing> crossings;
    for (Edge const& e : p.edges) {
      int ua = leaf_of[e.src], ub = leaf_of[e.dst];
      if (ua < 0 || ub < 0) continue;
      // Climb both to the children of their lowest common ancestor.
      while (depth[ua] > depth[ub]) ua = parent[ua];
      while (depth[ub] > depth[ua]) ub = parent[ub];
      if (ua == ub) continue;  // a leaf is no ancestor: only a malformed tree gets here
      while (parent[ua] != parent[ub]) {
        ua = parent[ua];
        ub = parent[ub];
      }
      int const lca = parent[ua];
      if (lca < 0 || tree.nodes[lca].kind != SpKind::kSeries) continue;
      Crossing& crossing = crossings[std::make_pair(e.src, e.tensors)];
      crossing.bytes = e.bytes_per_sample;
      auto [it, fresh] = crossing.spans.emplace(lca, std::make_pair(child_index[ua], child_index[ub]));
      if (!fresh) it->second.second = std::max(it->second.second, child_index[ub]);
    }
    cross_.assign(m, {});
    for (auto const& [key, crossing] : crossings)
      for (auto const& [t, span] : crossing.spans) {
        std::vector<double>& c = cross_[t];
        if (c.empty()) c.assign(tree.nodes[t].children.size() + 1, 0.0);
        // Boundary b lies before child b: the group crosses b = first + 1 .. last.
        c[span.first + 1] += static_cast<double>(crossing.bytes);
        c[span.second + 1] -= static_cast<double>(crossing.bytes);
      }
    for (auto& c : cross_)
      for (std::size_t b = 1; b < c.size(); ++b) c[b] += c[b - 1];
  }

  // Subtrees per unit (each unit: tree nodes whose leaves it holds), for `bound`.
  std::vector<std::vector<int>> units(double bound) const {
    std::vector<std::vector<int>> out;
    emit(tree_.root, bound, out);
    return out;
  }

 private:
  void emit(int t, double bound, std::vector<std::vector<int>>& out) const {
    SpNode const& n = tree_.nodes[t];
    if (n.kind == SpKind::kLeaf || size_[t] <= bound) {
      out.push_back({t});
      return;
    }
    std::vector<double> const& cross = cross_[t];
    bool const series = n.kind == SpKind::kSeries && !cross.empty();
    int first = 0;  // the run is children [first, j)
    double run_size = 0;
    int const k = static_cast<int>(n.children.size());
    // The run [a, b) as units: split where a boundary inside is cheaper than both of its ends (the
    // ends of the Series count as dear: what crosses them is not known here).
    std::function<void(int, int)> split = [&](int a, int b) {
      if (series && b - a > 1) {
        double const ends = std::min(a == 0 ? HUGE_VAL : cross[a], b == k ? HUGE_VAL : cross[b]);
        int cut = -1;
        for (int i = a + 1; i < b; ++i)
          if (cross[i] < ends && (cut < 0 || cross[i] < cross[cut])) cut = i;
        if (cut > 0) {
          split(a, cut);
          split(cut, b);
          return;
        }
      }
      out.emplace_back(n.children.begin() + a, n.children.begin() + b);
    };
    auto close = [&](int end) {  // the run [first, end) is done; the rest of it starts the next
      if (end > first) split(first, end);
      first = end;
    };
    for (int j = 0; j < k; ++j) {
      int const c = n.children[j];
      if (size_[c] > bound && tree_.nodes[c].kind != SpKind::kLeaf) {
        close(j);
        emit(c, bound, out);
        first = j + 1;
        run_size = 0;
        continue;
      }
      while (j > first && run_size + size_[c] > bound) {
        int end = j;
        if (series) {  // the cheapest boundary of the run; the latest on ties
          for (int b = j - 1; b > first; --b)
            if (cross[b] < cross[end]) end = b;
        }
        close(end);
        run_size = 0;
        for (int i = first; i < j; ++i) run_size += size_[n.children[i]];
      }
      run_size += size_[c];
    }
    close(k);
  }

  SpTree const& tree_;
  std::vector<double> size_;
  std::vector<std::vector<double>> cross_;  // per Series node: bytes crossing the boundary before each child
};

}  // namespace

Result<Coarsening> coarsen(Problem const& p, SpTree const& tree, int max_groups) {
  int const n = static_cast<int>(p.nodes.size());
  if (max_groups < 1) return invalid_argument("coarsen: max_groups must be positive");
  if (p.out_edges.size() != p.nodes.size()) return internal_error("coarsen: Problem::finalize() was not called");
  // Sizes: a node's share of the compute plus its share of the memory, at the largest candidate
  // micro-batch size.
  std::vector<int64_t> const sizes = p.micro_batch_sizes();
  int64_t const samples = sizes.empty() ? p.batch : *std::max_element(sizes.begin(), sizes.end());
  std::vector<NodeTime> const& times = p.node_times(samples);
  std::vector<double> work(n), memory(n);
  double total_work = 0, total_memory = 0;
  for (int v = 0; v < n; ++v) {
    Node const& node = p.nodes[v];
    work[v] = times[v].total_s();
    memory[v] = (1.0 + p.optimizer_bytes_per_weight_byte) * static_cast<double>(node.weight_bytes) +
                static_cast<double>(node.activation_bytes_per_sample) * static_cast<double>(samples);
    total_work += work[v];
    total_memory += memory[v];
  }
  std::vector<double> node_size(n);
  for (int v = 0; v < n; ++v)
    node_size[v] = (total_work > 0 ? work[v] / total_work : 0.0) + (total_memory > 0 ? memory[v] / total_memory : 0.0);

  // The least bound leaving at most max_groups units (the count falls as the bound grows; at 2,
  // everything is one unit).
  Grouper const grouper(p, tree, node_size);
  double lo = 0, hi = 2.0;
  std::vector<std::vector<int>> units = grouper.units(hi);
  for (int it = 0; it < 50 && hi - lo > 1e-9 * hi; ++it) {
    double const mid = (lo + hi) / 2;
    auto u = grouper.units(mid);
    if (static_cast<int>(u.size()) <= max_groups) {
      hi = mid;
      units = std::move(u);
    } else {
      lo = mid;
    }
  }

  // Groups: each unit's leaves; then ids in a topological order of the group graph (ties by the
  // smallest node id, so the order follows the graph's).
  int const k = static_cast<int>(units.size());
  std::vector<std::vector<int>> members(k);
  std::vector<int> unit_of(n, -1);
  for (int u = 0; u < k; ++u) {
    for (int t : units[u])
      for (int v : tree.leaves(t)) members[u].push_back(v);
    std::sort(members[u].begin(), members[u].end());
    for (int v : members[u]) {
      if (unit_of[v] >= 0) return internal_error("coarsen: node " + p.nodes[v].name + " is in two groups");
      unit_of[v] = u;
    }
  }
  for (int v = 0; v < n; ++v)
    if (unit_of[v] < 0) return internal_error("coarsen: node " + p.nodes[v].name + " is in no group");
  std::vector<std::vector<int>> succ(k);
  std::vector<int> indegree(k, 0);
  std::set<std::pair<int, int>> unit_edges;
  for (Edge const& e : p.edges) {
    int const a = unit_of[e.src], b = unit_of[e.dst];
    if (a != b && unit_edges.emplace(a, b).second) {
      succ[a].push_back(b);
      ++indegree[b];
    }
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (int u = 0; u < k; ++u)
    if (indegree[u] == 0) ready.emplace(members[u].front(), u);
  std::vector<int> id_of(k, -1);
  int next = 0;
  while (!ready.empty()) {
    int const u = ready.top().second;
    ready.pop();
    id_of[u] = next++;
    for (int w : succ[u])
      if (--indegree[w] == 0) ready.emplace(members[w].front(), w);
  }
  if (next != k) return internal_error("coarsen: the groups of '" + p.model + "' form a cycle");

  Coarsening c;
  c.groups.resize(k);
  for (int u = 0; u < k; ++u) c.groups[id_of[u]] = std::move(members[u]);
  for (auto const& g : c.groups)
    if (g.size() > 1) {
      double s = 0;
      for (int v : g) s += node_size[v];
      c.largest_size = std::max(c.largest_size, s);
    }
  std::vector<int> group_of(n);
  for (int g = 0; g < k; ++g)
    for (int v : c.groups[g]) group_of[v] = g;

  Problem& q = c.problem;
  q.model = p.model;
  q.nodes.resize(k);
  for (int g = 0; g < k; ++g) {
    Node& node = q.nodes[g];
    Node const& first = p.nodes[c.groups[g].front()];
    node.name = c.groups[g].size() == 1 ? first.name : first.name + "+" + std::to_string(c.groups[g].size() - 1);
    node.kind = c.groups[g].size() == 1 ? first.kind : "group";
    for (int v : c.groups[g]) {
      node.weight_bytes += p.nodes[v].weight_bytes;
      node.activation_bytes_per_sample += p.nodes[v].activation_bytes_per_sample;
    }
  }
  // Edges between groups: one per (source group, destination group, tensors), the tensors of a
  // profile's edges (which have none) named after their producer, so that the boundary groups stay
  // the graph's (producer, tensors) groups.
  std::set<std::tuple<int, int, std::vector<std::string>>> seen;
  for (Edge const& e : p.edges) {
    int const a = group_of[e.src], b = group_of[e.dst];
    if (a == b) continue;
    std::vector<std::string> tensors = e.tensors.empty() ? std::vector<std::string>{p.nodes[e.src].name} : e.tensors;
    if (!seen.emplace(a, b, tensors).second) continue;
    q.edges.push_back({a, b, e.bytes_per_sample, std::move(tensors)});
  }
  // Shared weights: read by several groups, or held whole by one (its bytes are already in the
  // group of its first reader).
  for (SharedWeight const& w : p.shared_weights) {
    std::vector<int> readers;
    for (int v : w.readers) readers.push_back(group_of[v]);
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    if (readers.size() < 2) continue;
    int const counted = group_of[w.readers.front()];
    if (readers.front() != counted) {  // the first reader among the groups counts the bytes
      q.nodes[counted].weight_bytes -= w.bytes;
      q.nodes[readers.front()].weight_bytes += w.bytes;
    }
    q.shared_weights.push_back({w.name, w.bytes, std::move(readers)});
  }
  q.timer = std::make_shared<GroupTimer>(p, c.groups);
  q.cluster = p.cluster;
  q.batch = p.batch;
  q.micro_batch_candidates = p.micro_batch_candidates;
  q.optimizer_bytes_per_weight_byte = p.optimizer_bytes_per_weight_byte;
  q.update_seconds_per_weight_byte = p.update_seconds_per_weight_byte;
  q.allow_replication = p.allow_replication;
  q.count_communication = p.count_communication;
  q.allow_recompute = p.allow_recompute;
  RETURN_IF_ERROR(q.finalize());
  return c;
}

Result<Plan> expand_plan(Problem const& p, Coarsening const& c, Plan const& coarse) {
  std::unordered_map<std::string, int> group_id;
  for (int g = 0; g < static_cast<int>(c.problem.nodes.size()); ++g) group_id.emplace(c.problem.nodes[g].name, g);
  std::vector<StageAssignment> stages;
  for (PlanStage const& s : coarse.stages) {
    StageAssignment a;
    a.replicas = s.replicas;
    a.recompute = s.recompute;
    for (std::string const& name : s.nodes) {
      auto it = group_id.find(name);
      if (it == group_id.end()) return internal_error("expand_plan: the plan names an unknown group " + name);
      a.nodes.insert(a.nodes.end(), c.groups[it->second].begin(), c.groups[it->second].end());
    }
    stages.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(Plan plan, assemble_plan(p, std::move(stages), coarse.micro_batch, coarse.planner));
  plan.tau_s = coarse.tau_s;
  plan.states_explored = coarse.states_explored;
  plan.notes = coarse.notes;
  return plan;
}

}  // namespace gp::partition
