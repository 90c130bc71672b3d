#include "cli/partition_problem.h"
#include "schedule/rank.h"

#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "graph/cost_model.h"
#include "graph/onnx_import.h"
#include "partition/cluster.h"
#include "partition/from_graph.h"
#include "partition/pipedream_profile.h"

namespace gp::cli {

void add_partition_flags(CLI::App& app, PartitionFlags& f) {
  app.add_option("model", f.model, "ONNX model file");
  app.add_option("--profile", f.profile, "PipeDream profile graph.txt to plan instead of an ONNX model");
  app.add_option("--profile-batch", f.profile_batch,
                 "Samples the PipeDream profile was measured at (default 1: a sample is one profiled batch)");
  app.add_option("--devices,-n", f.devices, "Number of devices (uniform cluster)");
  app.add_option("--memory,-m", f.memory, "Memory per device, e.g. 16GiB");
  app.add_option("--cluster", f.cluster, "Cluster YAML (devices, memory, speeds, links) instead of --devices/--memory");
  app.add_option("--bandwidth", f.bandwidth, "Bandwidth between devices, e.g. 100GB/s");
  app.add_option("--batch,-B", f.batch, "Global (mini-)batch size B");
  app.add_option("--micro-batch,-b", f.micro_batch, "Micro-batch size b (default: best power of two dividing B)");
  app.add_option("--cost", f.cost, "Cost model: 'analytic' (roofline) or a profile JSON from 'graphpipe profile'");
  app.add_flag("--no-replication", f.no_replication, "No data-parallel stages (one device per stage)");
  app.add_flag("--no-communication", f.no_communication, "Ignore transfer and all-reduce time");
  app.add_option("--recompute", f.recompute,
                 "Activation recomputation: 'auto' (a stage that would not fit keeps only its inputs and "
                 "reruns its forward before backward) or 'never'")
      ->check(CLI::IsMember({"auto", "never"}))
      ->capture_default_str();
  app.add_option("--rank", f.rank,
                 "How gpp picks among its best candidate plans: 'simulation' (the best schedule of each, "
                 "simulated) or 'formula' ((m + D - 1) max T_s only)")
      ->check(CLI::IsMember({"simulation", "formula"}))
      ->capture_default_str();
  app.add_option("--max-downsets", f.max_downsets, "Downset limit of the pipedream/piper planners");
  app.add_option("--time-limit", f.time_limit_s, "Stop a planner after this many seconds (0: none)");
  app.add_option(
         "--chain-objective", f.chain_objective,
         "What pipedream/piper minimise: 'step' (step time, as gpp) or 'bottleneck' (their own: max stage time)")
      ->check(CLI::IsMember({"step", "bottleneck"}))
      ->capture_default_str();
}

partition::PlannerOptions planner_options(PartitionFlags const& flags) {
  partition::PlannerOptions options;
  options.max_downsets = flags.max_downsets;
  options.time_limit_s = flags.time_limit_s;
  options.chain_objective = flags.chain_objective == "bottleneck" ? partition::ChainObjective::kBottleneck
                                                                  : partition::ChainObjective::kStepTime;
  if (flags.rank == "simulation") options.evaluate = schedule::simulation_evaluator();
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  options.progress = [last](std::string const& line) {
    auto const now = std::chrono::steady_clock::now();
    if (now - *last < std::chrono::milliseconds(500)) return;
    *last = now;
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  return options;
}

Result<partition::Problem> build_problem(PartitionFlags const& f) {
  if (f.model.empty() == f.profile.empty())
    return invalid_argument(f.model.empty() ? "give a model.onnx or --profile graph.txt"
                                            : "give either a model.onnx or --profile graph.txt, not both");
  partition::Cluster cluster;
  if (!f.cluster.empty()) {
    ASSIGN_OR_RETURN(cluster, partition::Cluster::from_yaml_file(f.cluster));
    if (f.devices > 0 && f.devices != cluster.size())
      return invalid_argument("--devices " + std::to_string(f.devices) + " disagrees with the " +
                              std::to_string(cluster.size()) + " devices of " + f.cluster + "; drop one of them");
  } else {
    if (f.devices <= 0) return invalid_argument("give --devices N (a positive count) or --cluster c.yaml");
    ASSIGN_OR_RETURN(int64_t memory, partition::parse_bytes(f.memory));
    if (memory <= 0) return invalid_argument("--memory must be positive");
    cluster = partition::Cluster::uniform(f.devices, memory);
  }
  if (!f.bandwidth.empty()) {
    ASSIGN_OR_RETURN(double bw, partition::parse_bandwidth(f.bandwidth));
    if (bw <= 0) return invalid_argument("--bandwidth must be positive");
    cluster.intra_node.bandwidth = bw;
  }
  if (f.batch <= 0) return invalid_argument("--batch must be positive");
  if (f.micro_batch < 0) return invalid_argument("--micro-batch must be positive");
  if (f.micro_batch > 0 && f.batch % f.micro_batch != 0) {
    std::string divisors;
    for (int64_t d = 1; d <= f.batch && divisors.size() < 40; ++d) {
      if (f.batch % d == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
    }
    return invalid_argument("batch " + std::to_string(f.batch) + " is not divisible by micro-batch " +
                            std::to_string(f.micro_batch) + "; use a divisor of the batch (" + divisors + ")");
  }

  partition::Problem p;
  if (!f.profile.empty()) {
    if (f.cost != "analytic")
      return invalid_argument("--cost applies to ONNX models; a PipeDream profile carries its own times");
    ASSIGN_OR_RETURN(p, partition::read_pipedream_profile(f.profile, {.profile_batch = f.profile_batch}));
    p.cluster = std::move(cluster);
    p.batch = f.batch;
  } else {
    ASSIGN_OR_RETURN(graph::ImportOptions import, import_options());
    import.load_weights = false;
    auto loaded = graph::load_onnx(f.model, import);
    if (!loaded) return loaded.status().with_context("loading " + f.model);
    auto g = std::make_shared<graph::OpGraph const>(std::move(loaded).value());
    std::shared_ptr<graph::CostModel const> cost = std::make_shared<graph::AnalyticCostModel>();
    if (f.cost != "analytic") {
      ASSIGN_OR_RETURN(graph::MeasuredProfile profile, graph::read_profile_file(f.cost));
      auto measured = std::make_shared<graph::MeasuredCostModel>(std::move(profile), cost);
      auto missing = measured->missing_ops(*g);
      if (!missing.empty())
        std::fprintf(stderr, "warning: %zu of %zu ops are not in %s (first: %s); they use the analytic model\n",
                     missing.size(), g->num_ops(), f.cost.c_str(), missing.front().c_str());
      cost = measured;
    }
    ASSIGN_OR_RETURN(p, partition::problem_from_graph(g, cost, std::move(cluster), f.batch));
  }
  if (f.micro_batch > 0) p.micro_batch_candidates = {f.micro_batch};
  p.allow_replication = !f.no_replication;
  p.count_communication = !f.no_communication;
  p.allow_recompute = f.recompute == "auto";
  RETURN_IF_ERROR(p.finalize());
  return p;
}

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes >= double(1 << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1 << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1 << 20));
  return buf;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

}  // namespace gp::cli
