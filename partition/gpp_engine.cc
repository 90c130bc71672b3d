// Objective and search: see partition/gpp_dp.h (least step time, not GRAPHPIPE.md's tau first).
#include "partition/gpp_engine.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace gp::partition::gpp {

Engine::Engine(Problem const& p, SpTree const& tree, LeafOrder const& leaves, int64_t micro_batch,
               BoundaryRows& boundaries)
    : p_(p),
      tree_(tree),
      leaves_(leaves),
      b_(micro_batch),
      m_(p.batch / micro_batch),
      devices_(p.cluster.size()),
      cost_(p, leaves.order, micro_batch),
      tracker_(p),
      boundaries_(boundaries) {
  boundaries_.single.resize(leaves.order.size());
  single_.resize(leaves.order.size());
  // Longest path of per-node least per-replica times: a stage meeting tau holds at most tau * b of
  // it (each of its replicas runs all its nodes), so a plan at tau is at least path / (tau * b)
  // stages deep.
  parallel_children_.resize(tree.nodes.size());
  for (int t = 0; t < static_cast<int>(tree.nodes.size()); ++t) {
    if (tree.nodes[t].kind != SpKind::kSeries) continue;
    for (int c = 0; c < static_cast<int>(tree.nodes[t].children.size()); ++c)
      if (tree.nodes[tree.nodes[t].children[c]].kind == SpKind::kParallel) parallel_children_[t].push_back(c);
  }
  {
    std::vector<double> least(p.nodes.size(), std::numeric_limits<double>::infinity());
    for (int l = 0; l < cost_.levels(); ++l) {
      std::vector<NodeTime> const& t = p.node_times(micro_batch / cost_.replicas(l));
      for (std::size_t v = 0; v < least.size(); ++v) least[v] = std::min(least[v], t[v].total_s());
    }
    std::vector<double> longest(p.nodes.size(), 0.0);
    for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) {  // ids are a topological order
      longest[v] += least[v];
      path_work_ = std::max(path_work_, longest[v]);
      for (int e : p.out_edges[v]) longest[p.edges[e].dst] = std::max(longest[p.edges[e].dst], longest[v]);
    }
  }
  // Device-seconds per node: a stage of r replicas meeting tau gives each of its nodes at most
  // r * compute(v, b / r) of its r * tau * b, so a node set needs >= sum / (tau * b) devices.
  int const n = static_cast<int>(leaves.order.size());
  work_.assign(n + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    double w = std::numeric_limits<double>::infinity();
    for (int l = 0; l < cost_.levels(); ++l) w = std::min(w, cost_.replicas(l) * cost_.compute_s(i, i + 1, l));
    work_[i + 1] = work_[i] + w;
    for (int l = 0; l + 1 < cost_.levels(); ++l)
      monotone_ = monotone_ && cost_.compute_s(i, i + 1, l + 1) <= cost_.compute_s(i, i + 1, l);
  }
}

Engine::Eval Engine::evaluate(double tau, int depth_cap) {
  tau_ = tau;
  depth_cap_ = std::clamp(depth_cap, 1, devices_);
  tau_next_ = std::numeric_limits<double>::infinity();
  memo_.clear();
  frontiers_.clear();
  Eval ev;
  Frontier const root = node_frontier(tree_.root, 0);
  ev.tau_next = tau_next_;
  if (root.empty() || expired_) return ev;
  ev.feasible = true;
  ev.depth = root.front().depth;
  ev.devices = root.front().devices;
  chosen_.clear();
  rebuild_node(tree_.root, 0, root.front());
  ev.stages = chosen_;
  for (ChosenStage const& s : chosen_) ev.tau_used = std::max(ev.tau_used, s.t);
  return ev;
}

void Engine::release() {
  memo_ = {};
  frontiers_ = {};
  single_ = {};
  merged_rows_ = {};
  merged_row_ = nullptr;
}

double Engine::lower_bound() const {
  // Every node sits in some stage, whose time is at least the node's own compute time.
  double lb = 0;
  for (int i = 0; i < static_cast<int>(leaves_.order.size()); ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int l = 0; l < cost_.levels(); ++l) best = std::min(best, cost_.compute_s(i, i + 1, l) / b_);
    lb = std::max(lb, best);
  }
  return lb;
}

StageRef Engine::priced_afresh(Ranges const& rg) {
  return priced(rg, [&] {
    tracker_.clear();
    for (int v = rg.lo1; v < rg.hi1; ++v) tracker_.add(leaves_.order[v]);
    for (int v = rg.lo2; v < rg.hi2; ++v) tracker_.add(leaves_.order[v]);
  });
}

Level const& Engine::level(StageRef const& s, int l) const {
  Level& lv = s.lv[l];
  if (lv.max_in_flight < 0) {
    Ranges const& rg = s.rg;
    int64_t const bytes = s.boundary_bytes;
    int const tensors = s.boundary_tensors;
    StageSums sum = cost_.sums(rg.lo1, rg.hi1, l, bytes, tensors);
    if (rg.lo2 < rg.hi2) {
      StageSums const s2 = cost_.sums(rg.lo2, rg.hi2, l, bytes, tensors);
      sum.time.fwd_s += s2.time.fwd_s;
      sum.time.bwd_input_s += s2.time.bwd_input_s;
      sum.time.bwd_weight_s += s2.time.bwd_weight_s;
      sum.weight_bytes += s2.weight_bytes;
      sum.activation_bytes_per_sample += s2.activation_bytes_per_sample;
    }
    sum.weight_bytes += cost_.copy_bytes(rg.lo1, rg.hi1, rg.lo2, rg.hi2);
    StageCost const c = stage_cost_from_sums(p_, sum, cost_.replicas(l), b_, 1, m_);
    lv = {c.time_s / static_cast<double>(b_), cost_.max_in_flight(sum, l)};
    if (p_.allow_recompute) {
      int64_t const samples = samples_per_replica(b_, cost_.replicas(l));
      int64_t const fixed = c.weight_bytes + c.optimizer_bytes;
      // The stash holds every boundary byte per micro-batch in flight; one micro-batch's own
      // activations are held once, while its forward is rerun.
      lv.max_in_flight_rc = micro_batches_that_fit(p_.device_memory(),
                                                   fixed + sum.activation_bytes_per_sample * samples, bytes * samples);
    }
  }
  return lv;
}

double Engine::recompute_t(StageRef const& s, int l) const {
  Ranges const& rg = s.rg;
  double fwd = cost_.fwd_s(rg.lo1, rg.hi1, l) + (rg.lo2 < rg.hi2 ? cost_.fwd_s(rg.lo2, rg.hi2, l) : 0.0);
  return s.lv[l].t + fwd / static_cast<double>(b_);
}

double Engine::compute(Ranges const& rg, int l) const {
  return cost_.compute_s(rg.lo1, rg.hi1, l) + (rg.lo2 < rg.hi2 ? cost_.compute_s(rg.lo2, rg.hi2, l) : 0.0);
}

int Engine::min_replicas(StageRef const& s, int in_flight, int first, double* t_out, bool* recompute_out) {
  for (int l = first; l < cost_.levels(); ++l) {
    Level const& lv = level(s, l);
    if (lv.t > tau_) {
      tau_next_ = std::min(tau_next_, lv.t);
      continue;
    }
    bool recompute = false;
    double t = lv.t;
    if (lv.max_in_flight < in_flight) {
      if (lv.max_in_flight_rc < in_flight) continue;
      t = recompute_t(s, l);
      if (t > tau_) {
        tau_next_ = std::min(tau_next_, t);
        continue;
      }
      recompute = true;
    }
    if (t_out) *t_out = t;
    if (recompute_out) *recompute_out = recompute;
    return cost_.replicas(l);
  }
  return 0;
}

int Engine::fewest_replicas(Ranges const& rg) {
  int const levels = cost_.levels();
  if (monotone_ && levels > 4) {
    // Compute falls as replicas grow (every node's does): bisect for the first level that fits;
    // the largest level that does not fit has the least time of those that do not.
    double const bound = tau_ * (1 + 1e-12), b = static_cast<double>(b_);
    int lo = 0, hi = levels;
    while (lo < hi) {
      int const mid = (lo + hi) / 2;
      if (compute(rg, mid) / b <= bound)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo > 0) tau_next_ = std::min(tau_next_, compute(rg, lo - 1) / b);
    return lo < levels ? cost_.replicas(lo) : 0;
  }
  for (int l = 0; l < levels; ++l) {
    double const t = compute(rg, l) / static_cast<double>(b_);
    // The tolerance covers summation order: stage times add the same terms in another order.
    if (t <= tau_ * (1 + 1e-12)) return cost_.replicas(l);
    tau_next_ = std::min(tau_next_, t);  // a larger tau may admit this level
  }
  return 0;
}

Frontier const* Engine::find(Part part, int t, int index, int q) const {
  auto it = memo_.find({t, static_cast<int>(part), index, q});
  return it == memo_.end() ? nullptr : &frontiers_[it->second];
}

void Engine::store(Part part, int t, int index, int q, Frontier f) {
  memo_.emplace(StateKey{t, static_cast<int>(part), index, q}, static_cast<int>(frontiers_.size()));
  frontiers_.push_back(std::move(f));
  ++states_;
  tick(1);
}

void Engine::tick(int64_t units) {
  work_units_ += units;
  if (work_units_ < next_check_) return;
  next_check_ = work_units_ + (int64_t{1} << 16);
  if (deadline_ && Clock::now() > *deadline_) expired_ = true;
}

Frontier Engine::pareto(std::vector<int> const& best) const {
  Frontier f;
  int least = std::numeric_limits<int>::max();
  for (int d = 1; d < static_cast<int>(best.size()); ++d) {
    if (best[d] < least) {
      least = best[d];
      f.push_back({d, best[d]});
    }
  }
  return f;
}

void Engine::consider(std::vector<int>& best, int depth, int devices, int budget) const {
  if (depth > depth_cap_ || devices > budget) return;
  if (depth >= static_cast<int>(best.size())) best.resize(depth + 1, std::numeric_limits<int>::max());
  if (devices < best[depth]) best[depth] = devices;
}

std::vector<int> Engine::depth_table(int t) const {
  return std::vector<int>(std::min(depth_cap_, hi_of(t) - lo_of(t)) + 1, std::numeric_limits<int>::max());
}

int Engine::need_for(double work) {
  if (std::isinf(tau_)) return 1;
  work = std::max(0.0, work) * (1 - 1e-9);
  double const w = work / (tau_ * static_cast<double>(b_));
  int const c = w >= devices_ + 1 ? devices_ + 1 : std::max(1, static_cast<int>(std::ceil(w)));
  if (c > 1) tau_next_ = std::min(tau_next_, std::nextafter(work / ((c - 1) * static_cast<double>(b_)), HUGE_VAL));
  return c;
}

int Engine::budget(int lo, int hi) {
  int const n = static_cast<int>(leaves_.order.size());
  if (lo <= 0 && hi >= n) return devices_;
  return devices_ - std::min(devices_, need_for((work_[lo] - work_[0]) + (work_[n] - work_[hi])));
}

Frontier Engine::node_frontier(int t, int q) {
  if (expired_) return {};
  if (Frontier const* f = find(Part::kNode, t, -1, q)) return *f;
  SpNode const& n = tree_.nodes[t];
  if (n.kind == SpKind::kSeries) {
    series(t, q);
  } else if (n.kind == SpKind::kParallel) {
    parallel_prefix(t, q);
  } else {
    std::vector<int> best = depth_table(t);
    if (int r = min_replicas(priced_afresh({lo_of(t), hi_of(t), hi_of(t), hi_of(t)}), q + 1))
      consider(best, 1, r, budget(lo_of(t), hi_of(t)));
    store(Part::kNode, t, -1, q, pareto(best));
  }
  return stored(Part::kNode, t, -1, q);
}

void Engine::parallel_prefix(int t, int q) {
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  std::vector<Frontier> child(k);
  for (int c = 0; c < k; ++c) child[c] = node_frontier(n.children[c], q);
  std::vector<Frontier> prefix(k + 1);
  prefix[0] = {{0, 0}};
  for (int c = 1; c <= k; ++c) {
    std::vector<int> best = depth_table(t);
    int const hi = hi_of(n.children[c - 1]);
    int const cap = budget(lo_of(t), hi);
    for (Point a : prefix[c - 1]) {
      for (Point x : child[c - 1]) consider(best, std::max(a.depth, x.depth), a.devices + x.devices, cap);
    }
    tracker_.clear();
    int tracked = hi;  // the tracker holds [tracked, hi); it catches up only on a price miss
    for (int a = c - 2; a >= 0; --a) {
      int const lo = lo_of(n.children[a]);
      Ranges const rg{lo, hi, hi, hi};
      int const fewest = fewest_replicas(rg);
      if (fewest == 0 || fewest > cap) break;  // larger groups only need more
      if (prefix[a].empty() || fewest + prefix[a].back().devices > cap) continue;
      StageRef const lv = priced(rg, [&] {
        for (int v = lo; v < tracked; ++v) tracker_.add(leaves_.order[v]);
        tracked = lo;
      });
      if (int r = min_replicas(lv, q + 1, level_of(fewest))) {
        for (Point pa : prefix[a]) consider(best, std::max(pa.depth, 1), pa.devices + r, cap);
      }
    }
    prefix[c] = pareto(best);
    if (c < k) store(Part::kParallelPrefix, t, c, q, prefix[c]);
  }
  store(Part::kParallelPrefix, t, k, q, prefix[k]);
  store(Part::kNode, t, -1, q, prefix[k]);
}

void Engine::parallel_suffix(int t, int q) {
  if (find(Part::kParallelSuffix, t, 1, q)) return;
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  std::vector<Frontier> child(k);
  for (int c = 1; c < k; ++c) child[c] = node_frontier(n.children[c], q);
  std::vector<Frontier> suffix(k + 1);
  suffix[k] = {{0, 0}};
  for (int c = k - 1; c >= 1; --c) {
    std::vector<int> best = depth_table(t);
    int const lo = lo_of(n.children[c]);
    int const cap = budget(lo, hi_of(t));
    for (Point a : suffix[c + 1]) {
      for (Point x : child[c]) consider(best, std::max(a.depth, x.depth), a.devices + x.devices, cap);
    }
    tracker_.clear();
    int tracked = lo;  // the tracker holds [lo, tracked)
    for (int e = c + 2; e <= k; ++e) {
      int const hi = hi_of(n.children[e - 1]);
      Ranges const rg{lo, hi, hi, hi};
      int const fewest = fewest_replicas(rg);
      if (fewest == 0 || fewest > cap) break;
      if (suffix[e].empty() || fewest + suffix[e].back().devices > cap) continue;
      StageRef const lv = priced(rg, [&] {
        for (; tracked < hi; ++tracked) tracker_.add(leaves_.order[tracked]);
      });
      if (int r = min_replicas(lv, q + 1, level_of(fewest))) {
        for (Point pe : suffix[e]) consider(best, std::max(pe.depth, 1), pe.devices + r, cap);
      }
    }
    suffix[c] = pareto(best);
    store(Part::kParallelSuffix, t, c, q, suffix[c]);
  }
}

void Engine::series(int t, int q) {
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  std::vector<Frontier> suffix(k + 1);
  suffix[k] = {{0, 0}};
  for (int i = k - 1; i >= 0; --i) {
    std::vector<int> best = depth_table(t);
    int const lo = lo_of(n.children[i]);
    int const cap = budget(lo, hi_of(t));
    int const child = n.children[i];
    if (tree_.nodes[child].kind == SpKind::kParallel && i + 1 < k) merged(t, i, q, suffix, cap, best, nullptr);
    forked(t, i, q, suffix, cap, best, nullptr);
    tracker_.clear();
    int tracked = lo;  // the tracker holds [lo, tracked); it catches up only when a run is priced
    for (int j = i; j < k; ++j) {
      int const chi = hi_of(n.children[j]);
      Ranges const rg{lo, chi, chi, chi};
      int const fewest = fewest_replicas(rg);
      if (fewest == 0 || fewest > cap) break;  // fewest only grows with the run
      if (suffix[j + 1].empty() || fewest + suffix[j + 1].back().devices > cap) continue;
      StageRef const lv = priced(rg, [&] {
        for (; tracked < chi; ++tracked) tracker_.add(leaves_.order[tracked]);
      });
      for (Point rest : suffix[j + 1]) {
        int const r = min_replicas(lv, q + rest.depth + 1, level_of(fewest));
        if (r == 0) break;  // later points hold more in flight: they fail too
        consider(best, rest.depth + 1, rest.devices + r, cap);
      }
    }
    if (tree_.nodes[child].kind != SpKind::kLeaf) {
      int const child_need = need(lo_of(child), hi_of(child));
      for (Point rest : suffix[i + 1]) {
        if (q + rest.depth >= depth_cap_) break;
        if (rest.devices + child_need > cap) continue;
        Frontier const inner = node_frontier(child, q + rest.depth);
        for (Point c : inner) consider(best, rest.depth + c.depth, rest.devices + c.devices, cap);
      }
    }
    suffix[i] = pareto(best);
    store(Part::kSeriesSuffix, t, i, q, suffix[i]);
  }
  store(Part::kNode, t, -1, q, suffix[0]);
}

void Engine::search_outside(int par, int qq) {
  node_frontier(par, qq);
  parallel_suffix(par, qq);
}

std::pair<Frontier const*, Frontier const*> Engine::outside(int par, int a, int c, int qq) const {
  int const k = static_cast<int>(tree_.nodes[par].children.size());
  return {a == 0 ? &kEmpty : find(Part::kParallelPrefix, par, a, qq),
          c == k ? &kEmpty : find(Part::kParallelSuffix, par, c, qq)};
}

bool Engine::merged(int t, int i, int q, std::vector<Frontier> const& suffix, int cap, std::vector<int>& best,
                    Point const* target) {
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  int const par = n.children[i];
  SpNode const& pn = tree_.nodes[par];
  int const groups = static_cast<int>(pn.children.size());
  int const run_lo = hi_of(par);
  // The other children sit at downstream depth q' = q + rest.depth + 1: their frontiers first, as
  // computing them reuses the tracker.
  std::vector<int> qs;
  for (int j = i + 1; j < k; ++j) {
    for (Point rest : suffix[j + 1]) {
      if (q + rest.depth + 1 < depth_cap_) qs.push_back(q + rest.depth + 1);
    }
  }
  std::sort(qs.begin(), qs.end());
  qs.erase(std::unique(qs.begin(), qs.end()), qs.end());
  for (int qq : qs) {
    search_outside(par, qq);
  }
  for (int a = 0; a < groups; ++a) {
    for (int c = a + 1; c <= groups; ++c) {
      if (a == 0 && c == groups) break;  // the whole node: a plain run
      int const glo = lo_of(pn.children[a]), ghi = hi_of(pn.children[c - 1]);
      if (fewest_replicas({glo, ghi, ghi, ghi}) == 0) break;  // larger groups only need more
      tracker_.clear();
      int tracked = -1;  // the tracker holds the group and the run [run_lo, tracked); -1: nothing
      for (int j = i + 1; j < k; ++j) {
        int const run_hi = hi_of(n.children[j]);
        Ranges const rg{glo, ghi, run_lo, run_hi};
        int const fewest = fewest_replicas(rg);
        if (fewest == 0 || fewest > cap) break;
        if (suffix[j + 1].empty()) continue;
        StageRef const lv = priced(rg, [&] {
          if (tracked < 0) {
            for (int v = glo; v < ghi; ++v) tracker_.add(leaves_.order[v]);
            tracked = run_lo;
          }
          for (; tracked < run_hi; ++tracked) tracker_.add(leaves_.order[tracked]);
        });
        for (Point rest : suffix[j + 1]) {
          int const r = min_replicas(lv, q + rest.depth + 1, level_of(fewest));
          if (r == 0) break;
          int const qq = q + rest.depth + 1;
          if (qq >= depth_cap_) break;
          auto const [pre, suf] = outside(par, a, c, qq);
          if (!pre || !suf) continue;
          for (Point x : *pre) {
            for (Point y : *suf) {
              int const depth = rest.depth + 1 + std::max(x.depth, y.depth);
              int const used = rest.devices + r + x.devices + y.devices;
              if (!target) {
                consider(best, depth, used, cap);
              } else if (depth == target->depth && used == target->devices) {
                emit(lv, q + rest.depth + 1);
                if (a > 0) rebuild_parallel(Part::kParallelPrefix, par, a, qq, x);
                if (c < groups) rebuild_parallel(Part::kParallelSuffix, par, c, qq, y);
                if (j + 1 < k) rebuild_series(t, j + 1, q, rest);
                return true;
              }
            }
          }
        }
      }
    }
  }
  return false;
}

bool Engine::forked(int t, int i, int q, std::vector<Frontier> const& suffix, int cap, std::vector<int>& best,
                    Point const* target) {
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  int const run_lo = lo_of(n.children[i]);
  auto const& pars = parallel_children_[t];
  for (auto it = std::upper_bound(pars.begin(), pars.end(), i); it != pars.end(); ++it) {
    int const j = *it - 1;  // the run i..j, then the Parallel child j + 1
    int const par = n.children[j + 1];
    SpNode const& pn = tree_.nodes[par];
    int const groups = static_cast<int>(pn.children.size());
    int const run_hi = lo_of(par);
    int const run_fewest = fewest_replicas({run_lo, run_hi, run_hi, run_hi});
    if (run_fewest == 0 || run_fewest > cap) break;  // the run alone is too big: so are longer ones
    Frontier const& after = suffix[j + 2];
    // The other children sit at downstream depth q + rest.depth: their frontiers first.
    for (Point rest : after) {
      int const qq = q + rest.depth;
      if (qq >= depth_cap_) break;
      search_outside(par, qq);
    }
    for (int a = 0; a < groups; ++a) {
      for (int c = a + 1; c <= groups; ++c) {
        if (a == 0 && c == groups) break;  // the whole node: a plain run
        int const glo = lo_of(pn.children[a]), ghi = hi_of(pn.children[c - 1]);
        Ranges const rg{glo, ghi, run_lo, run_hi};
        int const fewest = fewest_replicas(rg);
        if (fewest == 0 || fewest > cap) break;  // larger groups only need more
        StageRef const lv = priced_afresh(rg);
        for (Point rest : after) {
          int const qq = q + rest.depth;
          if (qq >= depth_cap_) break;
          auto const [pre, suf] = outside(par, a, c, qq);
          if (!pre || !suf) continue;
          for (Point x : *pre) {
            for (Point y : *suf) {
              int const inner = std::max(x.depth, y.depth);
              int const r = min_replicas(lv, qq + inner + 1, level_of(fewest));
              if (r == 0) continue;
              int const depth = rest.depth + inner + 1;
              int const used = rest.devices + r + x.devices + y.devices;
              if (!target) {
                consider(best, depth, used, cap);
              } else if (depth == target->depth && used == target->devices) {
                emit(lv, qq + inner + 1);
                if (a > 0) rebuild_parallel(Part::kParallelPrefix, par, a, qq, x);
                if (c < groups) rebuild_parallel(Part::kParallelSuffix, par, c, qq, y);
                if (j + 2 < k) rebuild_series(t, j + 2, q, rest);
                return true;
              }
            }
          }
        }
      }
    }
  }
  return false;
}

}  // namespace gp::partition::gpp
