// Objective and search: see partition/gpp_dp.h (least step time, not GRAPHPIPE.md's tau first).
#include "partition/gpp_dp.h"

#include "partition/chain_dp.h"
#include "partition/coarsen.h"
#include "partition/downsets.h"
#include "partition/gpp_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace gp::partition {

namespace {
// plan_gpp also runs the sequential planners' DP over every chain between downsets when the graph
// has at most this many downsets (it then takes milliseconds; gnmt's 7,874 take seconds).
constexpr int64_t kChainDownsets = 1000;
// Graphs up to this many nodes get chains of four topological orders, larger ones of the node order.
constexpr int kAllChainOrdersUpTo = 300;

using gpp::Clock;
using gpp::Incumbent;
using gpp::search_tree;

std::string bytes_text(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g GiB", static_cast<double>(bytes) / static_cast<double>(1LL << 30));
  return buf;
}

Result<Plan> finish(Problem const& p, Incumbent& inc, Clock::time_point start) {
  int const n = static_cast<int>(p.nodes.size());
  std::optional<Plan>& best = inc.best;
  if (!best) {
    int64_t need = 0;
    std::string node;
    for (int v = 0; v < n; ++v) {
      Node const& nd = p.nodes[v];
      int64_t const bytes = nd.weight_bytes +
                            static_cast<int64_t>(std::llround(p.optimizer_bytes_per_weight_byte * nd.weight_bytes)) +
                            nd.activation_bytes_per_sample;
      if (bytes > need) {
        need = bytes;
        node = nd.name;
      }
    }
    std::string msg = "gpp: no plan fits " + std::to_string(p.cluster.size()) + " devices of " +
                      bytes_text(p.device_memory()) + " at any micro-batch size";
    if (need > p.device_memory()) {
      msg += "; node '" + node + "' alone needs " + bytes_text(need) + " per device (weights, optimizer state and " +
             "one sample's activations): use devices with more memory";
    } else {
      msg += "; use more devices, devices with more memory, or smaller micro-batches";
    }
    return infeasible(msg);
  }
  best->tau_s = inc.best_tau;
  best->states_explored = inc.states;
  best->search_time_s = std::chrono::duration<double>(Clock::now() - start).count();
  return std::move(*best);
}

Status check_problem(Problem const& p) {
  if (static_cast<int>(p.out_edges.size()) != static_cast<int>(p.nodes.size()))
    return internal_error("plan_gpp: Problem::finalize() was not called");
  if (p.cluster.size() <= 0) return invalid_argument("plan_gpp: the cluster has no devices");
  // Every weight and its optimizer state live on some device: a bound that needs no search (a
  // 10,000-node graph far too large for the cluster took a minute of search to be refused).
  double static_bytes = 0, memory = 0;
  for (Node const& node : p.nodes) static_bytes += (1.0 + p.optimizer_bytes_per_weight_byte) * node.weight_bytes;
  for (Device const& d : p.cluster.devices) memory += static_cast<double>(d.memory_bytes);
  if (static_bytes > memory)
    return infeasible("gpp: no plan fits in memory: " + infeasibility_hint(p) +
                      "; use more devices, or devices with more memory");
  return Status::ok();
}

// True when the tree is one Series of leaves over the graph's own edges: its pieces are then
// already every chain of contiguous ranges, and no chain tree adds anything.
bool is_plain_chain(SpTree const& tree) {
  if (!tree.added_edges.empty()) return false;
  SpNode const& root = tree.nodes[tree.root];
  if (root.kind == SpKind::kLeaf) return true;
  if (root.kind != SpKind::kSeries) return false;
  for (int c : root.children)
    if (tree.nodes[c].kind != SpKind::kLeaf) return false;
  return true;
}

// Judges up to options.evaluate_candidates of the plans found (best formula first, duplicates
// dropped) with options.evaluate and makes the one judged fastest the best.
Status judge(Problem const& p, PlannerOptions const& options, Incumbent& inc) {
  std::vector<Plan>& cands = inc.candidates;
  std::stable_sort(cands.begin(), cands.end(),
                   [](Plan const& a, Plan const& b) { return a.step_time_s < b.step_time_s; });
  std::set<std::string> seen;
  std::optional<Plan> best;
  double best_rate = -1;
  int judged = 0;
  std::string why;
  for (Plan& plan : cands) {
    if (judged >= options.evaluate_candidates) break;
    std::string key = std::to_string(plan.micro_batch);
    for (PlanStage const& st : plan.stages) {
      key += "|" + std::to_string(st.replicas);
      for (std::string const& v : st.nodes) key += "," + v;
    }
    if (!seen.insert(key).second) continue;
    ++judged;
    Result<double> rate = options.evaluate(plan);
    if (!rate.is_ok()) {
      if (why.empty()) why = rate.status().message();
      continue;
    }
    if (*rate > best_rate) {
      best_rate = *rate;
      best = std::move(plan);
    }
  }
  if (options.progress && judged > 0)
    options.progress("gpp: judged " + std::to_string(judged) + " candidate plans" +
                     (best ? "" : " and none could be scheduled: " + why));
  if (!best) return Status::ok();  // keep the formula's best; its own scheduling reports the problem
  char buf[160];
  std::snprintf(buf, sizeof buf, "judged fastest of %d candidates: %.1f samples/s (formula %.1f)", judged, best_rate,
                best->samples_per_s);
  best->notes = best->notes.empty() ? buf : best->notes + "; " + buf;
  best->samples_per_s = best_rate;
  best->step_time_s = best_rate > 0 ? static_cast<double>(p.batch) / best_rate : best->step_time_s;
  inc.best_tau = best->time_per_sample_s;
  inc.best = std::move(best);
  return Status::ok();
}

// The stages of `chain` (a plan with chain depths) priced as the graph of the same stages: never
// deeper, so never slower and never more memory.
Result<Plan> regraph(Problem const& p, Plan const& chain) {
  std::unordered_map<std::string, int> id;
  for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v) id.emplace(p.nodes[v].name, v);
  std::vector<StageAssignment> stages;
  for (PlanStage const& s : chain.stages) {
    StageAssignment a;
    a.replicas = s.replicas;
    for (std::string const& name : s.nodes) {
      auto it = id.find(name);
      if (it == id.end()) return internal_error("plan_gpp: the chain names an unknown node " + name);
      a.nodes.push_back(it->second);
    }
    stages.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(Plan graph, assemble_plan(p, std::move(stages), chain.micro_batch, "gpp"));
  return graph.step_time_s <= chain.step_time_s ? graph : chain;
}

}  // namespace

SpTree chain_tree(Problem const& p, std::vector<int> const& order) {
  SpTree tree;
  SpNode root;
  root.kind = SpKind::kSeries;
  std::set<std::pair<int, int>> edges;
  for (Edge const& e : p.edges) edges.emplace(e.src, e.dst);
  for (std::size_t i = 0; i < order.size(); ++i) {
    tree.nodes.push_back({SpKind::kLeaf, order[i], {}});
    root.children.push_back(static_cast<int>(i));
    if (i > 0 && !edges.count({order[i - 1], order[i]})) tree.added_edges.emplace_back(order[i - 1], order[i]);
  }
  tree.nodes.push_back(std::move(root));
  tree.root = static_cast<int>(tree.nodes.size()) - 1;
  return tree;
}

std::vector<ChainOrder> chain_orders(Problem const& p, SpTree const& tree) {
  int const n = static_cast<int>(p.nodes.size());
  std::vector<ChainOrder> out;
  auto add = [&](std::string name, std::vector<int> order) {
    for (ChainOrder const& o : out)
      if (o.order == order) return;
    out.push_back({std::move(name), std::move(order)});
  };
  std::vector<int> ids(n);
  for (int v = 0; v < n; ++v) ids[v] = v;
  add("node order", ids);
  // The other orders cost one search each (about 0.5 s at 1,000 nodes and 1,024 devices) and never
  // beat the node order on a bench row above this size (bench/partition/README.md).
  if (n > kAllChainOrdersUpTo) return out;
  add("SP leaf order", leaf_order(tree).order);
  // Levels: longest path (in nodes) from a source, and to a sink; ids are a topological order.
  std::vector<int> from_source(n, 0), to_sink(n, 0);
  for (int v = 0; v < n; ++v)
    for (int e : p.out_edges[v])
      from_source[p.edges[e].dst] = std::max(from_source[p.edges[e].dst], from_source[v] + 1);
  for (int v = n - 1; v >= 0; --v)
    for (int e : p.out_edges[v]) to_sink[v] = std::max(to_sink[v], to_sink[p.edges[e].dst] + 1);
  // Sorting by either level keeps every edge forward (its head's level is strictly larger).
  std::vector<int> asap = ids, alap = ids;
  std::stable_sort(asap.begin(), asap.end(), [&](int a, int b) { return from_source[a] < from_source[b]; });
  std::stable_sort(alap.begin(), alap.end(), [&](int a, int b) { return to_sink[a] > to_sink[b]; });
  add("as soon as possible", std::move(asap));
  add("as late as possible", std::move(alap));
  return out;
}

Result<Plan> plan_gpp_on_tree(Problem const& p, SpTree const& tree, PlannerOptions const& options) {
  auto const start = Clock::now();
  RETURN_IF_ERROR(check_problem(p));
  Incumbent inc;
  RETURN_IF_ERROR(search_tree(p, tree, "", options, start, inc));
  return finish(p, inc, start);
}

namespace {

// plan_gpp above options.gpp_max_nodes: on groups of the nodes (partition/coarsen.h), the plan
// expanded; candidates are judged as the graph's plans.
Result<Plan> plan_gpp_on_groups(Problem const& p, SpTree const& tree, PlannerOptions const& options,
                                Clock::time_point start) {
  ASSIGN_OR_RETURN(Coarsening c, coarsen(p, tree, std::max(1, options.gpp_max_nodes / 2)));
  char buffer[300];
  std::snprintf(buffer, sizeof buffer,
                "%zu nodes planned as %zu groups (whole series-parallel subtrees and runs of them, cut where "
                "the fewest bytes cross; the largest holds %.2g%% of the model's compute and memory; "
                "--gpp-max-nodes 0 plans every node)",
                p.nodes.size(), c.problem.nodes.size(), 100 * c.largest_size / 2);
  std::string const note = buffer;
  if (options.progress) options.progress("gpp: " + note);
  PlannerOptions inner = options;
  inner.gpp_max_nodes = 0;
  if (options.time_limit_s > 0)
    inner.time_limit_s =
        std::max(1e-3, options.time_limit_s - std::chrono::duration<double>(Clock::now() - start).count());
  if (options.evaluate)
    inner.evaluate = [&](Plan const& grouped) -> Result<double> {
      ASSIGN_OR_RETURN(Plan plan, expand_plan(p, c, grouped));
      return options.evaluate(plan);
    };
  ASSIGN_OR_RETURN(Plan grouped, plan_gpp(c.problem, inner));
  ASSIGN_OR_RETURN(Plan plan, expand_plan(p, c, grouped));
  if (options.evaluate) {  // the judged rate, as judge() keeps it
    plan.samples_per_s = grouped.samples_per_s;
    plan.step_time_s = grouped.step_time_s;
  }
  plan.notes = plan.notes.empty() ? note : plan.notes + "; " + note;
  plan.search_time_s = std::chrono::duration<double>(Clock::now() - start).count();
  return plan;
}

}  // namespace

Result<Plan> plan_gpp(Problem const& p, PlannerOptions const& options) {
  auto const start = Clock::now();
  RETURN_IF_ERROR(check_problem(p));
  ASSIGN_OR_RETURN(SpTree tree, sp_decompose(p));
  if (options.gpp_max_nodes > 0 && static_cast<int>(p.nodes.size()) > options.gpp_max_nodes)
    return plan_gpp_on_groups(p, tree, options, start);
  Incumbent inc;
  if (options.evaluate) inc.slack = std::max(1.0, options.evaluate_slack);
  RETURN_IF_ERROR(search_tree(p, tree, "", options, start, inc));
  if (is_plain_chain(tree)) {
    if (options.evaluate) RETURN_IF_ERROR(judge(p, options, inc));
    return finish(p, inc, start);
  }
  // A chain of stages is a graph of stages: search the chains of contiguous ranges of a few
  // topological orders too, so that GPP never returns less than those chains (the node order is
  // the one the sequential planners linearise a branchy graph along).
  for (ChainOrder const& o : chain_orders(p, tree))
    RETURN_IF_ERROR(search_tree(p, chain_tree(p, o.order), o.name, options, start, inc));
  // Small graphs: every chain the sequential planners can build (stages between downsets), when
  // there are few enough downsets for their DP to take milliseconds.
  if (auto downsets = enumerate_downsets(p, kChainDownsets); downsets.is_ok()) {
    PlannerOptions chain_options = options;
    chain_options.chain_objective = ChainObjective::kStepTime;
    if (options.time_limit_s > 0)
      chain_options.time_limit_s =
          std::max(1e-3, options.time_limit_s - std::chrono::duration<double>(Clock::now() - start).count());
    auto chain = plan_chain(p, *downsets, "gpp", chain_options);
    if (!chain.is_ok() && chain.status().code() != StatusCode::kInfeasible) return chain.status();
    if (chain.is_ok()) {
      inc.states += chain->states_explored;
      ASSIGN_OR_RETURN(Plan graph, regraph(p, *chain));
      graph.notes = "a chain between downsets";
      double const tau = graph.time_per_sample_s;
      inc.offer(std::move(graph), tau);
    }
  } else if (downsets.status().code() != StatusCode::kInfeasible) {
    return downsets.status();
  }
  if (options.evaluate) RETURN_IF_ERROR(judge(p, options, inc));
  return finish(p, inc, start);
}

}  // namespace gp::partition
