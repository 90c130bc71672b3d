#include "cli/partition_problem.h"

#include <cstdio>

#include "cli/commands.h"

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
  app.add_option("--rank", f.search.rank,
                 "How gpp picks among its best candidate plans: 'simulation' (the best schedule of each, "
                 "simulated) or 'formula' ((m + D - 1) max T_s only)")
      ->check(CLI::IsMember({"simulation", "formula"}))
      ->capture_default_str();
  app.add_option("--max-downsets", f.search.max_downsets, "Downset limit of the pipedream/piper planners");
  app.add_option("--time-limit", f.search.time_limit_s, "Stop a planner after this many seconds (0: none)");
  app.add_option("--gpp-max-nodes", f.search.gpp_max_nodes,
                 "gpp plans a graph of more operators on half as many groups (whole series-parallel subtrees "
                 "and runs of them, cut where the fewest bytes cross) and expands the plan; 0: every operator "
                 "(exact, but its time and memory grow with the square of long runs)")
      ->capture_default_str();
  app.add_option(
         "--chain-objective", f.search.chain_objective,
         "What pipedream/piper minimise: 'step' (step time, as gpp) or 'bottleneck' (their own: max stage time)")
      ->check(CLI::IsMember({"step", "bottleneck"}))
      ->capture_default_str();
}

Result<partition::PlannerOptions> planner_options(PartitionFlags const& flags) {
  return session::planner_options(flags.search,
                                  [](std::string const& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
}

Result<partition::Problem> build_problem(PartitionFlags const& f) {
  session::ProblemSpec spec = f;
  if (!spec.model.empty()) {
    ASSIGN_OR_RETURN(spec.import, import_options());
  }
  return session::build_problem(spec);
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
