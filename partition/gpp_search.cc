#include "partition/gpp_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "partition/gpp_engine.h"

namespace gp::partition::gpp {

namespace {

std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g%s", s >= 1 ? s : s * 1e3, s >= 1 ? "s" : "ms");
  return buf;
}

// Every search of a micro-batch size ends long before this many steps (each an evaluation or a plan
// priced); the cap only stops a search that a bug would keep going forever.
constexpr int kMaxSearchSteps = 2000;

// The search on tau at one micro-batch size for a target depth that only falls: the least tau at
// which the DP reaches depth <= target lies in [lo, hi], and `found` is the plan at hi.
struct DepthSearch {
  DepthSearch(int first_target, double floor) : target(first_target), lo(floor) {}

  // Whether the least tau of the target is known: found at hi, nothing below it (lo == hi).
  bool settled() const { return found && !(lo < hi); }

  // The tau to evaluate next. beating(d) is the largest tau at which a plan of depth d still beats
  // the best plan (infinite when there is none yet); no depth below d_min can be reached.
  template <typename Beating>
  double next_probe(Beating const& beating, int d_min) {
    if (std::isinf(hi) && !std::isinf(beating(target))) {
      // One probe there either starts the bisection or shows the target hopeless (lo moves past it).
      // After probes that found no plan at all, the next leaps to a shallower depth's larger tau:
      // the depths in between would each cost an evaluation only to be found hopeless one by one.
      beating_probe = true;
      return std::max(beating(std::max(d_min, target - leap + 1)), lo);
    }
    if (std::isinf(hi)) {
      // Grow from the lower end until feasible (cheap while tau is small): small steps first, as
      // evaluations far above the optimum prune little and cost the most.
      double const factor = grow == 0 ? 1.0 : grow < 4 ? 1.1 : 4.0;
      double const tau = grow < 16 ? std::max(lo, 1e-300) * factor : std::numeric_limits<double>::infinity();
      ++grow;
      return tau;
    }
    if (below_hi) {
      // One probe below the plan just found either ends the search (lo jumps to hi) or finds a
      // plan at a smaller tau; bisection takes many probes to close the last gap.
      return std::max(lo, std::nextafter(hi, 0.0));
    }
    double const tau = lo + (hi - lo) / 2;
    return tau < hi ? tau : lo;
  }

  // Takes the evaluation at `tau`; false when even an infinite tau has no plan of the target depth.
  bool record(double tau, Engine::Eval ev) {
    bool const probed_below = below_hi;
    below_hi = false;
    if (beating_probe) leap = ev.feasible ? 1 : 2 * leap;
    beating_probe = false;
    if (!std::isinf(tau)) history.push_back(ev);
    if (ev.feasible && ev.depth <= target) {
      hi = ev.tau_used;
      found = std::move(ev);
      below_hi = !probed_below;
    } else if (std::isinf(tau)) {
      return false;
    } else {
      lo = std::min(ev.tau_next, hi);
    }
    return true;
  }

  // Starts on the current target from the bounds that the evaluations so far already give: a
  // feasible one's depth holds on [tau_used, tau_next) (a smaller tau only removes options, and the
  // plan found still meets it), and an infeasible or deeper result holds below tau_next.
  void restart() {
    found.reset();
    hi = std::numeric_limits<double>::infinity();
    grow = 1;
    for (Engine::Eval const& e : history) {
      if (e.feasible && e.depth <= target && e.tau_used < hi) {
        hi = e.tau_used;
        found = e;
      }
    }
    for (Engine::Eval const& e : history) {
      if (!(e.feasible && e.depth <= target)) lo = std::max(lo, std::min(e.tau_next, hi));
    }
    below_hi = found.has_value();
  }

  int target;
  double lo;
  double hi = std::numeric_limits<double>::infinity();
  std::optional<Engine::Eval> found;  // depth <= target, tau_used == hi
  int grow = 0;                       // probes so far that grew tau from lo without a plan
  bool below_hi = false;              // probe just below hi next: the plan found there is often the least
  std::vector<Engine::Eval> history;  // every evaluation at a finite tau
  int leap = 1;                       // depths the next probe at a beating tau skips, plus one
  bool beating_probe = false;         // the last probe was at a beating tau
};

}  // namespace

Status search_tree(Problem const& p, SpTree const& tree, std::string const& chain, PlannerOptions const& options,
                   Clock::time_point start, Incumbent& inc) {
  int const n = static_cast<int>(p.nodes.size());
  LeafOrder const leaves = leaf_order(tree);
  if (static_cast<int>(leaves.order.size()) != n)
    return internal_error("plan_gpp: the SP tree has " + std::to_string(leaves.order.size()) + " leaves for " +
                          std::to_string(n) + " nodes");
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::optional<Plan>& best = inc.best;
  int64_t& states = inc.states;
  // Every plan at micro-batch b takes at least (m + d_min - 1) * b * tau_floor per step: search the
  // most promising b first and skip those whose floor cannot beat the best plan found. A model whose
  // weights and optimizer state do not fit one device needs two stages, and on a connected graph
  // two stages are at least two deep (an SP tree with one root child would be a single node).
  std::vector<int64_t> const sizes = p.micro_batch_sizes();
  std::vector<std::unique_ptr<Engine>> engines;
  BoundaryRows boundaries;
  std::vector<double> floors;
  std::vector<std::size_t> order;
  auto check_time = [&]() -> Status {
    if (options.time_limit_s > 0 && elapsed() > options.time_limit_s) {
      return timeout_error("gpp: search exceeded the time limit of " + std::to_string(options.time_limit_s) +
                           " s; raise --time-limit or use fewer micro-batch candidates");
    }
    return Status::ok();
  };
  std::optional<Clock::time_point> deadline;
  if (options.time_limit_s > 0)
    deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.time_limit_s));
  for (int64_t b : sizes) {
    RETURN_IF_ERROR(check_time());
    engines.push_back(std::make_unique<Engine>(p, tree, leaves, b, boundaries));
    engines.back()->set_deadline(deadline);
    floors.push_back(std::max(engines.back()->lower_bound(), engines.back()->tau_floor()));
    order.push_back(order.size());
  }
  // A plan of DP depth d at bound tau takes at least (m + d - 1) * tau * b per step. Ordering edges
  // can make the true depth smaller than the DP's, so there only depth 1 is assumed.
  bool const exact_depth = !chain.empty() || tree.added_edges.empty();
  int64_t model_bytes = 0;
  for (Node const& node : p.nodes) model_bytes += node.weight_bytes;
  model_bytes +=
      static_cast<int64_t>(std::llround(p.optimizer_bytes_per_weight_byte * static_cast<double>(model_bytes)));
  bool const connected = tree.nodes[tree.root].kind != SpKind::kParallel;
  int const d_min = exact_depth && connected && model_bytes > p.device_memory() ? 2 : 1;
  // A plan of true depth d at micro-batch b has tau >= the floor and tau >= path / (d * b) (the
  // longest path's work is split among at most d stages on it), so its step is at least
  // (m + d - 1) * b * max(floor, path / (d * b)); the least of that over d bounds every plan.
  std::vector<double> step_floors(sizes.size());
  for (std::size_t bi = 0; bi < sizes.size(); ++bi) {
    double const m = static_cast<double>(p.batch / sizes[bi]), b = static_cast<double>(sizes[bi]);
    double least = std::numeric_limits<double>::infinity();
    for (int d = d_min; d <= std::max(d_min, p.cluster.size()); ++d) {
      double const tau = std::max(floors[bi], engines[bi]->tau_for_depth(d));
      least = std::min(least, (m + d - 1) * b * tau);
      if ((m + d - 1) * b * floors[bi] >= least) break;  // larger d only grow the first term
    }
    step_floors[bi] = least;
  }
  auto step_floor = [&](std::size_t bi) { return step_floors[bi]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t c) { return step_floor(a) < step_floor(c); });
  auto beats_best = [&](double tau, int64_t b, int depth) {
    double const d = exact_depth ? depth : 1;
    return !best ||
           (static_cast<double>(p.batch / b) + d - 1) * tau * static_cast<double>(b) <= inc.bound() * (1 + 1e-9);
  };
  // The search of one micro-batch size, resumable: the first pass stops each at its first plan,
  // the second finishes them (see below).
  struct SizeSearch {
    DepthSearch search;
    int steps = 0, evaluations = 0;
    double seconds = 0;
    bool done = false;
    double best_step = std::numeric_limits<double>::infinity();  // the least step of its plans offered so far
  };
  std::vector<SizeSearch> runs;
  for (std::size_t bi = 0; bi < sizes.size(); ++bi) runs.push_back({DepthSearch(p.cluster.size(), floors[bi])});
  // The plan of the ranges an evaluation chose, priced exactly, offered to the incumbent.
  auto offer = [&](std::size_t bi, Engine::Eval const& found, double tau) -> Result<double> {
    int64_t const b = sizes[bi];
    std::vector<ChosenStage> chosen = found.stages;
    std::sort(chosen.begin(), chosen.end(),
              [](ChosenStage const& x, ChosenStage const& y) { return x.ranges.lo1 < y.ranges.lo1; });
    std::vector<StageAssignment> stages;
    for (ChosenStage const& s : chosen) {
      StageAssignment a;
      a.replicas = s.replicas;
      a.recompute = s.recompute;
      for (int i = s.ranges.lo1; i < s.ranges.hi1; ++i) a.nodes.push_back(leaves.order[i]);
      for (int i = s.ranges.lo2; i < s.ranges.hi2; ++i) a.nodes.push_back(leaves.order[i]);
      stages.push_back(std::move(a));
    }
    Plan plan;
    if (!chain.empty()) {
      ASSIGN_OR_RETURN(plan, assemble_plan(p, stages, b, "gpp", StageGraphShape::kChain));
      ASSIGN_OR_RETURN(Plan graph, assemble_plan(p, std::move(stages), b, "gpp"));
      if (graph.step_time_s <= plan.step_time_s) plan = std::move(graph);
      plan.notes = "a chain of contiguous ranges of the " + chain;
    } else {
      ASSIGN_OR_RETURN(plan, assemble_plan(p, std::move(stages), b, "gpp"));
    }
    if (options.progress) {
      options.progress("gpp: b=" + std::to_string(b) + " tau=" + seconds_text(tau) +
                       "/sample depth=" + std::to_string(plan.depth) + " step=" + seconds_text(plan.step_time_s) +
                       " states=" + std::to_string(states + engines[bi]->states()));
    }
    double const step = plan.step_time_s;
    inc.offer(std::move(plan), tau);
    return step;
  };
  // Runs the search of size bi until it ends or, with `first_plan`, until an evaluation finds a
  // plan (priced and offered at once, whatever its depth).
  auto advance = [&](std::size_t bi, bool first_plan) -> Status {
    SizeSearch& run = runs[bi];
    if (run.done) return Status::ok();
    int64_t const b = sizes[bi];
    Engine& engine = *engines[bi];
    DepthSearch& search = run.search;
    auto const b_start = Clock::now();
    auto finish = [&] {
      run.done = true;
      states += engine.states();
      if (options.progress && run.seconds > 0.1)
        options.progress("gpp: b=" + std::to_string(b) + ": " + std::to_string(run.evaluations) + " evaluations, " +
                         std::to_string(engine.states()) + " states, " + seconds_text(run.seconds));
      engine.release();
    };
    auto pause = [&] { run.seconds += std::chrono::duration<double>(Clock::now() - b_start).count(); };
    if (best && step_floor(bi) > inc.bound() * (1 + 1e-9)) {  // no plan at this b can win
      finish();
      return Status::ok();
    }
    // The largest tau at which a plan of depth `target` still beats the best plan.
    auto beating_tau = [&](int target) {
      if (!best) return std::numeric_limits<double>::infinity();
      double const d = exact_depth ? target : 1;
      return inc.bound() * (1 + 1e-9) / ((static_cast<double>(p.batch / b) + d - 1) * static_cast<double>(b));
    };
    for (; run.steps < kMaxSearchSteps; ++run.steps) {
      RETURN_IF_ERROR(check_time());
      while (search.target >= d_min &&
             !beats_best(std::max(search.lo, engine.tau_for_depth(search.target)), b, search.target))
        --search.target;
      if (search.target < d_min || (!exact_depth && !beats_best(search.lo, b, 1))) break;
      if (search.found && search.found->depth > search.target) search.restart();
      if (!search.settled()) {
        double const tau = search.next_probe(beating_tau, d_min);
        // No plan deeper than the target can settle it: the DP prunes them (fewer states).
        Engine::Eval ev = engine.evaluate(tau, search.target);
        ++run.evaluations;
        if (engine.expired()) RETURN_IF_ERROR(check_time());
        if (first_plan && ev.feasible) {
          // A plan (deeper than the target, or not yet the least tau of its depth): priced now, it
          // lets the other sizes' searches prune before any of them is searched through. The next
          // pass resumes from here.
          ASSIGN_OR_RETURN(double const step, offer(bi, ev, ev.tau_used));
          run.best_step = std::min(run.best_step, step);
          ++run.steps;
          if (!search.record(tau, std::move(ev))) break;
          pause();
          return Status::ok();
        }
        if (!search.record(tau, std::move(ev))) break;
        if (!search.settled()) continue;
      }
      // found is the shallowest plan at the least tau reaching its depth: price it, then look for
      // a shallower plan at a larger tau.
      ASSIGN_OR_RETURN(double const step, offer(bi, *search.found, search.hi));
      run.best_step = std::min(run.best_step, step);
      search.target = search.found->depth - 1;  // the loop's head lowers it further while it cannot win
      search.restart();
      if (first_plan) {
        ++run.steps;
        pause();
        return Status::ok();
      }
    }
    pause();
    finish();
    return Status::ok();
  };
  // D(tau), the least DP depth of a plan meeting tau, only falls as tau grows; the best step at a
  // size b is min over depths d of (m + d - 1) * b * tau_d with tau_d the least tau reaching depth
  // <= d. So each size's search finds tau_d for target = every depth (tau_min), then for one less
  // than the depth found each time, while some depth can still beat the best plan from tau_d's
  // lower end. The floors order the sizes only loosely (at 1,024 devices the largest b has the
  // lowest floor and one of the worst plans), so a first pass takes every size to its first plan,
  // and the second finishes the sizes in the order of those plans' steps: the best plan so far then
  // prunes every size's search from its start. Both passes prune only what cannot beat a plan
  // found, so the least step is the one a single pass finds (among plans of equal step, the one
  // kept can differ, and so can the candidates options.evaluate judges).
  for (std::size_t bi : order) RETURN_IF_ERROR(advance(bi, true));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t c) { return runs[a].best_step < runs[c].best_step; });
  for (std::size_t bi : order) RETURN_IF_ERROR(advance(bi, false));
  if (options.progress && elapsed() > 0.2)  // long searches only: a failing short one prints one error line
    options.progress("gpp: searched the " + (chain.empty() ? std::string("SP tree") : "chain of the " + chain) + " (" +
                     std::to_string(n) + " nodes) by " + seconds_text(elapsed()));
  return Status::ok();
}

}  // namespace gp::partition::gpp
