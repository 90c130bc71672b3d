#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "partition/cluster.h"
#include "partition/plan.h"
#include "schedule/build.h"
#include "schedule/report.h"
#include "schedule/schedule_text.h"
#include "schedule/simulator.h"
#include "schedule/trace.h"
#include "schedule/validate.h"

namespace gp::cli {
namespace {

struct ScheduleArgs {
  std::string plan_path;
  std::string policy = "auto";
  int micro_batches = 0;
  std::string memory;
  std::string output;
  std::string check;
  std::string check_plan;
  std::string trace;
  std::string svg;
  bool json = false;
};

Result<int64_t> memory_limit(std::string const& text) {
  if (text.empty()) return int64_t{-1};
  auto bytes = partition::parse_bytes(text);
  if (!bytes.is_ok()) return invalid_argument("--memory-limit: " + bytes.status().message());
  return *bytes;
}

Status write_pictures(schedule::Simulation const& sim, std::string const& title, std::string const& trace,
                      std::string const& svg) {
  if (!trace.empty()) {
    RETURN_IF_ERROR(schedule::write_text_file(schedule::timeline_to_chrome_trace(sim.timeline, title), trace));
    std::fprintf(stderr, "wrote %s (Chrome trace: open in https://ui.perfetto.dev)\n", trace.c_str());
  }
  if (!svg.empty()) {
    RETURN_IF_ERROR(schedule::write_text_file(schedule::timeline_to_svg(sim.timeline, title), svg));
    std::fprintf(stderr, "wrote %s\n", svg.c_str());
  }
  return Status::ok();
}

Status run_check(ScheduleArgs const& a) {
  if (a.check_plan.empty()) return invalid_argument("--check needs the plan it was built for: add --plan plan.json");
  ASSIGN_OR_RETURN(partition::Plan plan, partition::read_plan_file(a.check_plan));
  ASSIGN_OR_RETURN(schedule::Schedule sched, schedule::read_schedule_file(a.check));
  ASSIGN_OR_RETURN(int64_t limit, memory_limit(a.memory));
  auto violations = schedule::validate_schedule(plan, sched, schedule::CheckOptions{limit});
  if (!violations.empty()) {
    std::string msg =
        a.check + ": " + std::to_string(violations.size()) + " problem" + (violations.size() == 1 ? "" : "s");
    for (size_t i = 0; i < violations.size() && i < 50; ++i) msg += "\n  " + violations[i].to_string();
    if (violations.size() > 50) msg += "\n  ... and " + std::to_string(violations.size() - 50) + " more";
    return invalid_argument(msg);
  }
  ASSIGN_OR_RETURN(schedule::Simulation sim, schedule::simulate(plan, sched));
  if (a.json) {
    std::fputs(schedule::simulation_json(plan, sched, sim).c_str(), stdout);
  } else {
    std::printf("%s: valid for %s (every rule holds: order, once, matched transfers, no deadlock, memory)\n",
                a.check.c_str(), a.check_plan.c_str());
    std::fputs(schedule::simulation_table(plan, sched, sim).c_str(), stdout);
  }
  return write_pictures(sim, a.check, a.trace, a.svg);
}

Status run_build(ScheduleArgs const& a) {
  if (a.plan_path.empty())
    return invalid_argument("give a plan: graphpipe schedule plan.json --policy 1f1b -o sched.txt");
  ASSIGN_OR_RETURN(partition::Plan plan, partition::read_plan_file(a.plan_path));
  ASSIGN_OR_RETURN(schedule::Policy policy, schedule::parse_policy(a.policy));
  ASSIGN_OR_RETURN(int64_t limit, memory_limit(a.memory));
  ASSIGN_OR_RETURN(schedule::Schedule sched,
                   schedule::build_schedule(plan, policy, schedule::BuildOptions{a.micro_batches, limit}));
  ASSIGN_OR_RETURN(schedule::Simulation sim, schedule::simulate(plan, sched));
  if (a.output.empty() || a.output == "-") {
    std::fputs(schedule::print_schedule(sched).c_str(), stdout);
  } else {
    RETURN_IF_ERROR(schedule::write_schedule_file(sched, a.output));
    if (a.json) {
      std::fputs(schedule::simulation_json(plan, sched, sim).c_str(), stdout);
    } else {
      std::printf("wrote %s\n", a.output.c_str());
      std::fputs(schedule::simulation_table(plan, sched, sim).c_str(), stdout);
    }
  }
  return write_pictures(sim, a.plan_path + " (" + sched.policy + ")", a.trace, a.svg);
}

}  // namespace

void add_schedule_command(CLI::App& root, CommandList& commands) {
  auto args = std::make_shared<ScheduleArgs>();
  auto* app = root.add_subcommand("schedule", "Build a micro-batch schedule from a plan, or check one");
  app->footer(R"(Examples:
  graphpipe schedule plan.json --policy graph-1f1b -o sched.txt --svg sched.svg
  graphpipe schedule plan.json --policy auto --memory-limit 16GiB -o sched.txt
  graphpipe schedule --check sched.txt --plan plan.json

Policies: gpipe (fill-drain), 1f1b (PipeDream-Flush, chains), interleaved (several stages per
device, looping placement), graph-1f1b (GraphPipe's stage-graph 1F1B), zb (B/W split, W fills
bubbles), auto (the fastest by simulation that fits the memory limit).)");
  app->add_option("plan", args->plan_path, "Plan JSON (from 'graphpipe partition')");
  app->add_option("--policy", args->policy, "gpipe|1f1b|interleaved|graph-1f1b|zb|auto")->capture_default_str();
  app->add_option("-m,--micro-batches", args->micro_batches, "Micro-batches per step (default: the plan's)");
  app->add_option("--memory-limit", args->memory, "Per-device memory limit, e.g. 16GiB (default: the plan's)");
  app->add_option("-o,--output", args->output, "Schedule text file to write (default: print it)");
  app->add_option("--check", args->check, "Check this schedule file instead of building one (needs --plan)");
  app->add_option("--plan", args->check_plan, "The plan a checked schedule was built for");
  app->add_option("--trace", args->trace, "Write the simulated timeline as Chrome trace JSON");
  app->add_option("--svg", args->svg, "Write the simulated timeline as an SVG Gantt chart");
  app->add_flag("--json", args->json, "Print the simulation summary as JSON");
  commands.push_back({app, [args] { return args->check.empty() ? run_build(*args) : run_check(*args); }});
}

}  // namespace gp::cli
