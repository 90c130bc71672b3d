#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/partition_problem.h"
#include "partition/planner.h"

namespace gp::cli {
namespace {

struct Options {
  PartitionFlags flags;
  bool json = false;
};

Status run(Options const& o) {
  ASSIGN_OR_RETURN(partition::Problem p, build_problem(o.flags));
  char const* const planners[] = {"gpp", "pipedream", "piper", "balanced"};
  std::optional<partition::Plan> plans[4];
  std::string errors[4];
  for (int k = 0; k < 4; ++k) {
    std::fprintf(stderr, "running %s...\n", planners[k]);
    auto plan = partition::plan_with(planners[k], p, planner_options(o.flags));
    if (plan) plans[k] = std::move(plan).value();
    else errors[k] = plan.status().message();
  }
  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (int k = 0; k < 4; ++k) {
      nlohmann::json row{{"planner", planners[k]}};
      if (plans[k]) {
        double peak = 0;
        for (auto const& s : plans[k]->stages) peak = std::max(peak, double(s.peak_memory_bytes));
        row.update({{"search_time_s", plans[k]->search_time_s}, {"states_explored", plans[k]->states_explored},
                    {"depth", plans[k]->depth}, {"stages", plans[k]->stages.size()}, {"micro_batch", plans[k]->micro_batch},
                    {"samples_per_s", plans[k]->samples_per_s}, {"peak_memory_bytes", peak}, {"notes", plans[k]->notes}});
        if (plans[0]) row["gpp_ratio"] = plans[0]->samples_per_s / plans[k]->samples_per_s;
      } else {
        row["error"] = errors[k];
      }
      rows.push_back(row);
    }
    std::printf("%s\n", nlohmann::json{{"model", p.model}, {"devices", p.cluster.size()}, {"batch", p.batch}, {"planners", rows}}.dump(2).c_str());
    return Status::ok();
  }
  std::printf("%s on %d devices of %s, batch %lld\n", p.model.c_str(), p.cluster.size(),
              format_bytes(double(p.device_memory())).c_str(), (long long)p.batch);
  std::printf("%-10s %12s %12s %6s %7s %5s %12s %14s %9s\n", "planner", "search", "states", "depth", "stages", "b",
              "samples/s", "peak memory", "GPP/this");
  for (int k = 0; k < 4; ++k) {
    if (!plans[k]) {
      std::printf("%-10s n/a (%s)\n", planners[k], errors[k].c_str());
      continue;
    }
    auto const& pl = *plans[k];
    double peak = 0;
    for (auto const& s : pl.stages) peak = std::max(peak, double(s.peak_memory_bytes));
    char ratio[32] = "-";
    if (plans[0]) std::snprintf(ratio, sizeof ratio, "%.2f", plans[0]->samples_per_s / pl.samples_per_s);
    std::printf("%-10s %12s %12lld %6d %7zu %5lld %12.1f %14s %9s%s\n", planners[k], format_seconds(pl.search_time_s).c_str(),
                (long long)pl.states_explored, pl.depth, pl.stages.size(), (long long)pl.micro_batch, pl.samples_per_s,
                format_bytes(peak).c_str(), ratio, pl.notes.empty() ? "" : "  (linearised)");
  }
  return Status::ok();
}

}  // namespace

void add_compare_command(CLI::App& root, CommandList& commands) {
  auto opts = std::make_shared<Options>();
  auto* app = root.add_subcommand("compare", "Run every planner (gpp, pipedream, piper, balanced) and compare their plans");
  add_partition_flags(*app, opts->flags);
  app->add_flag("--json", opts->json, "Print JSON instead of the table");
  app->footer("Example:\n  graphpipe compare mmt.onnx --devices 16 --memory 16GiB --batch 128 --time-limit 60");
  commands.push_back({app, [opts] { return run(*opts); }});
}

}  // namespace gp::cli
