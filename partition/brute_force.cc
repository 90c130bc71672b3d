#include "partition/brute_force.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace gp::partition {
namespace {

constexpr int kMaxNodes = 12;
constexpr int kMaxBruteForceDevices = 8;

struct Candidate {
  std::vector<uint32_t> blocks;
  std::vector<int> replicas;
  std::vector<int> depths;  // per block
  int depth = 0;
  double max_time = 0;
};

class Enumerator {
 public:
  Enumerator(Problem const& p, BruteForceSpace space, std::unordered_set<uint32_t> pieces,
             std::unordered_map<uint32_t, int> merges)
      : p_(p),
        space_(space),
        pieces_(std::move(pieces)),
        merges_(std::move(merges)),
        n_(static_cast<int>(p.nodes.size())),
        devices_(p.cluster.size()),
        sizes_(p.micro_batch_sizes()),
        best_(sizes_.size()) {
    // reach[v]: nodes reachable from v (v included); used for convexity.
    reach_.assign(n_, 0);
    for (int v = n_ - 1; v >= 0; --v) {
      reach_[v] = 1u << v;
      for (int e : p.out_edges[v]) reach_[v] |= reach_[p.edges[e].dst];
    }
  }

  void run() {
    std::vector<uint32_t> blocks;
    assign(0, blocks);
  }

  std::vector<std::optional<Candidate>> const& best() const { return best_; }
  std::vector<int64_t> const& sizes() const { return sizes_; }
  double min_step() const { return min_step_; }
  int64_t partitions() const { return partitions_; }
  int64_t plans() const { return plans_; }

 private:
  void assign(int v, std::vector<uint32_t>& blocks) {
    if (v == n_) return evaluate(blocks);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      blocks[b] |= 1u << v;
      assign(v + 1, blocks);
      blocks[b] &= ~(1u << v);
    }
    if (static_cast<int>(blocks.size()) < devices_) {
      blocks.push_back(1u << v);
      assign(v + 1, blocks);
      blocks.pop_back();
    }
  }

  bool convex(uint32_t s) const {
    uint32_t down = 0, up = 0;
    for (int v = 0; v < n_; ++v) {
      if (s >> v & 1u)
        down |= reach_[v];
      else
        continue;
    }
    for (int v = 0; v < n_; ++v) {
      if (reach_[v] & s) up |= 1u << v;
    }
    return ((down & up) & ~s) == 0;
  }

  void evaluate(std::vector<uint32_t> const& blocks) {
    int const k = static_cast<int>(blocks.size());
    for (uint32_t s : blocks) {
      if (space_ == BruteForceSpace::kSpPieces ? !pieces_.count(s) : !convex(s)) return;
    }
    // At most one merged stage per Parallel node (its fork side or its join side, not both).
    std::vector<int> merged;
    for (uint32_t s : blocks) {
      auto it = merges_.find(s);
      if (it == merges_.end()) continue;
      if (std::find(merged.begin(), merged.end(), it->second) != merged.end()) return;
      merged.push_back(it->second);
    }
    std::vector<int> block_of(n_);
    for (int b = 0; b < k; ++b) {
      for (int v = 0; v < n_; ++v) {
        if (blocks[b] >> v & 1u) block_of[v] = b;
      }
    }
    std::vector<uint32_t> succ(k, 0);
    for (Edge const& e : p_.edges) {
      int const a = block_of[e.src], b = block_of[e.dst];
      if (a != b) succ[a] |= 1u << b;
    }
    // Depth by repeated relaxation; more than k rounds of change means a cycle.
    std::vector<int> depth(k, 1);
    for (int round = 0;; ++round) {
      bool changed = false;
      for (int a = 0; a < k; ++a) {
        for (int b = 0; b < k; ++b) {
          if ((succ[a] >> b & 1u) && depth[a] < depth[b] + 1) {
            depth[a] = depth[b] + 1;
            changed = true;
          }
        }
      }
      if (!changed) break;
      if (round > k) return;
    }
    ++partitions_;
    if (space_ != BruteForceSpace::kChains) return price(blocks, depth);
    // A sequential pipeline runs its stages in one linear order (any topological order of the
    // stage graph); the stage at position i holds k - i micro-batches.
    std::vector<int> preds(k, 0), order;
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b)
        if (succ[a] >> b & 1u) ++preds[b];
    linear_orders(blocks, succ, preds, order);
  }

  void linear_orders(std::vector<uint32_t> const& blocks, std::vector<uint32_t> const& succ, std::vector<int>& preds,
                     std::vector<int>& order) {
    int const k = static_cast<int>(blocks.size());
    if (static_cast<int>(order.size()) == k) {
      std::vector<int> depth(k);
      for (int i = 0; i < k; ++i) depth[order[i]] = k - i;
      return price(blocks, depth);
    }
    for (int s = 0; s < k; ++s) {
      if (preds[s] != 0 || std::find(order.begin(), order.end(), s) != order.end()) continue;
      order.push_back(s);
      for (int b = 0; b < k; ++b)
        if (succ[s] >> b & 1u) --preds[b];
      linear_orders(blocks, succ, preds, order);
      for (int b = 0; b < k; ++b)
        if (succ[s] >> b & 1u) ++preds[b];
      order.pop_back();
    }
  }

  void price(std::vector<uint32_t> const& blocks, std::vector<int> const& depth) {
    int const k = static_cast<int>(blocks.size());
    int const d = *std::max_element(depth.begin(), depth.end());
    for (std::size_t bi = 0; bi < sizes_.size(); ++bi) {
      int64_t const mb = sizes_[bi];
      int64_t const m = p_.batch / mb;
      std::vector<std::vector<std::pair<int, double>>> options(k);  // (replicas, time) that fit
      for (int s = 0; s < k; ++s) {
        std::vector<int> nodes;
        for (int v = 0; v < n_; ++v) {
          if (blocks[s] >> v & 1u) nodes.push_back(v);
        }
        for (int r = 1; r <= devices_ && r <= mb; r *= 2) {
          if (mb % r != 0) break;
          StageCost const c = stage_cost(p_, nodes, r, mb, depth[s], m);
          if (c.fits) options[s].emplace_back(r, c.time_s);
        }
      }
      std::vector<int> reps(k);
      combos(0, 0, 0.0, options, reps, blocks, depth, d, bi, m);
    }
  }

  void combos(int s, int used, double max_time, std::vector<std::vector<std::pair<int, double>>> const& options,
              std::vector<int>& reps, std::vector<uint32_t> const& blocks, std::vector<int> const& depths, int depth,
              std::size_t bi, int64_t m) {
    if (s == static_cast<int>(options.size())) {
      ++plans_;
      min_step_ = std::min(min_step_, static_cast<double>(m + depth - 1) * max_time);
      std::optional<Candidate>& best = best_[bi];
      if (!best || max_time < best->max_time || (max_time == best->max_time && depth < best->depth)) {
        best = Candidate{blocks, reps, depths, depth, max_time};
      }
      return;
    }
    for (auto [r, t] : options[s]) {
      if (used + r > devices_) break;
      reps[s] = r;
      combos(s + 1, used + r, std::max(max_time, t), options, reps, blocks, depths, depth, bi, m);
    }
  }

  Problem const& p_;
  BruteForceSpace space_;
  std::unordered_set<uint32_t> pieces_;
  std::unordered_map<uint32_t, int> merges_;  // a merged piece -> its Parallel node
  int n_, devices_;
  std::vector<int64_t> sizes_;
  std::vector<uint32_t> reach_;
  std::vector<std::optional<Candidate>> best_;
  double min_step_ = std::numeric_limits<double>::infinity();
  int64_t partitions_ = 0, plans_ = 0;
};

// The pieces, and the merged ones (a group of a Parallel node's children with the Series run right
// before or after it) that are not also plain pieces, each with its Parallel node.
std::pair<std::unordered_set<uint32_t>, std::unordered_map<uint32_t, int>> sp_pieces(SpTree const& tree) {
  std::unordered_set<uint32_t> pieces;
  std::unordered_map<uint32_t, int> merges;
  auto mask = [&](int t) {
    uint32_t m = 0;
    for (int v : tree.leaves(t)) m |= 1u << v;
    return m;
  };
  // Consecutive children of a Parallel node [a, c), as one mask.
  auto group = [&](int t, std::size_t a, std::size_t c) {
    uint32_t m = 0;
    for (std::size_t x = a; x < c; ++x) m |= mask(tree.nodes[t].children[x]);
    return m;
  };
  for (int t = 0; t < static_cast<int>(tree.nodes.size()); ++t) {
    pieces.insert(mask(t));
    SpNode const& n = tree.nodes[t];
    std::size_t const k = n.children.size();
    if (n.kind == SpKind::kParallel) {
      for (std::size_t a = 0; a < k; ++a)
        for (std::size_t c = a + 1; c <= k; ++c) pieces.insert(group(t, a, c));
      continue;
    }
    if (n.kind != SpKind::kSeries) continue;
    for (std::size_t i = 0; i < k; ++i) {
      uint32_t run = 0;
      for (std::size_t j = i; j < k; ++j) {
        run |= mask(n.children[j]);
        pieces.insert(run);
      }
      // A group of a Parallel child's children with the run right after it (where they join), or
      // with the run right before it (where they fork).
      int const par = n.children[i];
      if (tree.nodes[par].kind != SpKind::kParallel) continue;
      std::size_t const g = tree.nodes[par].children.size();
      for (std::size_t a = 0; a < g; ++a) {
        for (std::size_t c = a + 1; c <= g; ++c) {
          if (a == 0 && c == g) continue;  // the whole node: plain runs
          uint32_t joined = group(par, a, c);
          for (std::size_t j = i + 1; j < k; ++j) {
            joined |= mask(n.children[j]);
            merges.emplace(joined, par);
          }
          uint32_t forked = group(par, a, c);
          for (std::size_t j = i; j-- > 0;) {
            forked |= mask(n.children[j]);
            merges.emplace(forked, par);
          }
        }
      }
    }
  }
  for (auto it = merges.begin(); it != merges.end();) {
    if (pieces.count(it->first)) {
      it = merges.erase(it);
    } else {
      pieces.insert(it->first);
      ++it;
    }
  }
  return {std::move(pieces), std::move(merges)};
}

}  // namespace

Result<BruteForceResult> brute_force(Problem const& p, BruteForceSpace space, SpTree const* tree) {
  int const n = static_cast<int>(p.nodes.size());
  if (static_cast<int>(p.out_edges.size()) != n)
    return internal_error("brute_force: Problem::finalize() was not called");
  if (n > kMaxNodes || p.cluster.size() > kMaxBruteForceDevices) {
    return invalid_argument("brute force handles at most " + std::to_string(kMaxNodes) + " nodes and " +
                            std::to_string(kMaxBruteForceDevices) + " devices, got " + std::to_string(n) +
                            " nodes and " + std::to_string(p.cluster.size()) +
                            " devices; use plan_gpp for larger problems");
  }
  std::unordered_set<uint32_t> pieces;
  std::unordered_map<uint32_t, int> merges;
  if (space == BruteForceSpace::kSpPieces) {
    if (!tree) return invalid_argument("brute_force over SP pieces needs the SP tree");
    std::tie(pieces, merges) = sp_pieces(*tree);
  }
  Enumerator en(p, space, std::move(pieces), std::move(merges));
  en.run();
  std::optional<Candidate> chosen;
  int64_t chosen_b = 0;
  double chosen_step = std::numeric_limits<double>::infinity();
  for (std::size_t bi = 0; bi < en.sizes().size(); ++bi) {
    auto const& c = en.best()[bi];
    if (!c) continue;
    int64_t const m = p.batch / en.sizes()[bi];
    double const step = static_cast<double>(m + c->depth - 1) * c->max_time;
    if (step < chosen_step) {
      chosen_step = step;
      chosen = c;
      chosen_b = en.sizes()[bi];
    }
  }
  if (!chosen) return infeasible("brute force: no valid plan fits the devices and their memory");
  // A chain lists its stages in pipeline order: depth k - i at position i.
  std::vector<std::size_t> order(chosen->blocks.size());
  for (std::size_t s = 0; s < order.size(); ++s) order[s] = s;
  if (space == BruteForceSpace::kChains) {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t c) { return chosen->depths[a] > chosen->depths[c]; });
  }
  std::vector<StageAssignment> stages;
  for (std::size_t s : order) {
    StageAssignment a;
    a.replicas = chosen->replicas[s];
    for (int v = 0; v < n; ++v) {
      if (chosen->blocks[s] >> v & 1u) a.nodes.push_back(v);
    }
    stages.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(
      Plan plan, assemble_plan(p, stages, chosen_b, "brute_force",
                               space == BruteForceSpace::kChains ? StageGraphShape::kChain : StageGraphShape::kGraph));
  BruteForceResult out;
  out.plan = std::move(plan);
  out.min_step_time_s = en.min_step();
  out.partitions = en.partitions();
  out.plans = en.plans();
  return out;
}

}  // namespace gp::partition
