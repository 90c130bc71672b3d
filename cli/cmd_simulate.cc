#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "partition/plan.h"
#include "schedule/build.h"
#include "schedule/report.h"
#include "schedule/schedule_text.h"
#include "schedule/simulator.h"
#include "schedule/trace.h"

namespace gp::cli {
namespace {

struct SimulateArgs {
  std::string plan_path;
  std::string schedule_path;
  std::string policy = "auto";
  int micro_batches = 0;
  std::string trace;
  std::string svg;
  bool json = false;
};

Status run_simulate(SimulateArgs const& a) {
  ASSIGN_OR_RETURN(partition::Plan plan, partition::read_plan_file(a.plan_path));
  schedule::Schedule sched;
  if (!a.schedule_path.empty()) {
    if (a.micro_batches > 0)
      return invalid_argument(
          "--micro-batches applies when building a schedule; a given --schedule fixes its own count");
    ASSIGN_OR_RETURN(sched, schedule::read_schedule_file(a.schedule_path));
  } else {
    ASSIGN_OR_RETURN(schedule::Policy policy, schedule::parse_policy(a.policy));
    ASSIGN_OR_RETURN(sched, schedule::build_schedule(plan, policy, schedule::BuildOptions{a.micro_batches, -1}));
  }
  auto simulated = schedule::simulate(plan, sched);
  if (!simulated.is_ok()) {
    return simulated.status().with_context(a.schedule_path.empty() ? std::string("simulating") : a.schedule_path);
  }
  auto const& sim = *simulated;
  std::fputs(
      (a.json ? schedule::simulation_json(plan, sched, sim) : schedule::simulation_table(plan, sched, sim)).c_str(),
      stdout);
  std::string const title = a.plan_path + " (" + sched.policy + ")";
  if (!a.trace.empty()) {
    RETURN_IF_ERROR(schedule::write_text_file(schedule::timeline_to_chrome_trace(sim.timeline, title), a.trace));
    std::fprintf(stderr, "wrote %s (Chrome trace: open in https://ui.perfetto.dev)\n", a.trace.c_str());
  }
  if (!a.svg.empty()) {
    RETURN_IF_ERROR(schedule::write_text_file(schedule::timeline_to_svg(sim.timeline, title), a.svg));
    std::fprintf(stderr, "wrote %s\n", a.svg.c_str());
  }
  return Status::ok();
}

}  // namespace

void add_simulate_command(CLI::App& root, CommandList& commands) {
  auto args = std::make_shared<SimulateArgs>();
  auto* app =
      root.add_subcommand("simulate", "Predict a plan's step time, bubbles and memory by simulating its schedule");
  app->footer(R"(Examples:
  graphpipe simulate plan.json
  graphpipe simulate plan.json --policy 1f1b --micro-batches 16 --svg timeline.svg
  graphpipe simulate plan.json --schedule sched.txt --trace timeline.json --json)");
  app->add_option("plan", args->plan_path, "Plan JSON (from 'graphpipe partition')")->required();
  app->add_option("--schedule", args->schedule_path, "Schedule text to simulate (default: build one with --policy)");
  app->add_option("--policy", args->policy, "gpipe|1f1b|interleaved|graph-1f1b|zb|auto")->capture_default_str();
  app->add_option("-m,--micro-batches", args->micro_batches, "Micro-batches per step (default: the plan's)");
  app->add_option("--trace", args->trace, "Write the timeline as Chrome trace JSON");
  app->add_option("--svg", args->svg, "Write the timeline as an SVG Gantt chart");
  app->add_flag("--json", args->json, "Print the summary as JSON");
  commands.push_back({app, [args] { return run_simulate(*args); }});
}

}  // namespace gp::cli
