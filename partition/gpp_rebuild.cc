// The rebuild half of the GPP engine: from the memo of an evaluation, the stages of the root's best
// point, found by retracing the choices the search made (series, parallel_prefix/suffix, merged and
// forked in rebuild mode).
#include "partition/gpp_engine.h"

#include <algorithm>

namespace gp::partition::gpp {

void Engine::emit(StageRef const& s, int in_flight) {
  double t = 0;
  bool recompute = false;
  int const r = min_replicas(s, in_flight, 0, &t, &recompute);
  chosen_.push_back({s.rg, r, t, recompute});
}

void Engine::rebuild_node(int t, int q, Point target) {
  SpNode const& n = tree_.nodes[t];
  if (n.kind == SpKind::kSeries) return rebuild_series(t, 0, q, target);
  if (n.kind == SpKind::kParallel)
    return rebuild_parallel(Part::kParallelPrefix, t, static_cast<int>(n.children.size()), q, target);
  emit(priced_afresh({lo_of(t), hi_of(t), hi_of(t), hi_of(t)}), q + 1);
}

void Engine::rebuild_parallel(Part part, int t, int index, int q, Point target) {
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  bool const prefix = part == Part::kParallelPrefix;
  if (prefix ? index == 0 : index == k) return;
  // The group next to the boundary: children [a, index) (prefix) or [index, e) (suffix).
  int const edge_child = prefix ? index - 1 : index;
  auto rest_of = [&](int boundary) -> Frontier {
    if (prefix ? boundary == 0 : boundary == k) return kEmpty;
    Frontier const* f = find(part, t, boundary, q);
    return f ? *f : Frontier{};
  };
  // One child, partitioned on its own.
  {
    Frontier const rest = rest_of(prefix ? index - 1 : index + 1);
    Frontier const* own = find(Part::kNode, n.children[edge_child], -1, q);
    if (own) {
      for (Point x : rest) {
        for (Point y : *own) {
          if (std::max(x.depth, y.depth) == target.depth && x.devices + y.devices == target.devices) {
            rebuild_parallel(part, t, prefix ? index - 1 : index + 1, q, x);
            rebuild_node(n.children[edge_child], q, y);
            return;
          }
        }
      }
    }
  }
  // Several children as one stage.
  for (int other = prefix ? index - 2 : index + 2; prefix ? other >= 0 : other <= k; other += prefix ? -1 : 1) {
    int const lo = lo_of(n.children[prefix ? other : index]);
    int const hi = hi_of(n.children[prefix ? index - 1 : other - 1]);
    Ranges const rg{lo, hi, hi, hi};
    if (fewest_replicas(rg) == 0) break;
    StageRef const lv = priced_afresh(rg);
    int const r = min_replicas(lv, q + 1);
    if (r == 0) continue;
    for (Point x : rest_of(other)) {
      if (std::max(x.depth, 1) == target.depth && x.devices + r == target.devices) {
        emit(lv, q + 1);
        rebuild_parallel(part, t, other, q, x);
        return;
      }
    }
  }
}

void Engine::rebuild_series(int t, int i, int q, Point target) {
  SpNode const& n = tree_.nodes[t];
  int const k = static_cast<int>(n.children.size());
  std::vector<Frontier> suffix(k + 1);
  suffix[k] = kEmpty;
  for (int j = i + 1; j < k; ++j) {
    Frontier const* f = find(Part::kSeriesSuffix, t, j, q);
    if (f) suffix[j] = *f;
  }
  int const lo = lo_of(n.children[i]);
  tracker_.clear();
  int tracked = lo;  // the tracker holds [lo, tracked)
  for (int j = i; j < k; ++j) {
    int const chi = hi_of(n.children[j]);
    Ranges const rg{lo, chi, chi, chi};
    if (fewest_replicas(rg) == 0) break;
    StageRef const lv = priced(rg, [&] {
      for (; tracked < chi; ++tracked) tracker_.add(leaves_.order[tracked]);
    });
    for (Point rest : suffix[j + 1]) {
      int const r = min_replicas(lv, q + rest.depth + 1);
      if (r == 0) break;
      if (rest.depth + 1 == target.depth && rest.devices + r == target.devices) {
        emit(lv, q + rest.depth + 1);
        if (j + 1 < k) rebuild_series(t, j + 1, q, rest);
        return;
      }
    }
  }
  int const child = n.children[i];
  for (Point rest : suffix[i + 1]) {
    if (q + rest.depth >= depth_cap_) break;
    Frontier const* inner = find(Part::kNode, child, -1, q + rest.depth);
    if (!inner) continue;  // the search never needed this state
    for (Point c : Frontier(*inner)) {
      if (rest.depth + c.depth == target.depth && rest.devices + c.devices == target.devices) {
        rebuild_node(child, q + rest.depth, c);
        if (i + 1 < k) rebuild_series(t, i + 1, q, rest);
        return;
      }
    }
  }
  std::vector<int> unused;
  if (tree_.nodes[child].kind == SpKind::kParallel && i + 1 < k && merged(t, i, q, suffix, devices_, unused, &target))
    return;
  forked(t, i, q, suffix, devices_, unused, &target);
}

}  // namespace gp::partition::gpp
