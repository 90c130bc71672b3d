#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>

#include "cli/commands.h"
#include "core/file_io.h"
#include "cli/partition_problem.h"
#include "partition/planner.h"

namespace gp::cli {
namespace {

struct PartitionOptions {
  PartitionFlags flags;
  std::string planner = "gpp";
  std::string out;
  std::string dot;
  bool json = false;
};

std::string plan_dot(partition::Plan const& plan) {
  std::string s = "digraph plan {\n  rankdir=LR;\n  node [shape=box];\n";
  for (auto const& st : plan.stages) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "  s%d [label=\"stage %d\\n%zu ops: %s .. %s\\nx%d  depth %d\\nT=%s\"];\n", st.id,
                  st.id, st.nodes.size(), st.nodes.front().c_str(), st.nodes.back().c_str(), st.replicas, st.depth,
                  format_seconds(st.time_s).c_str());
    s += buf;
  }
  for (auto const& e : plan.edges) {
    s += "  s" + std::to_string(e.src) + " -> s" + std::to_string(e.dst) + " [label=\"" +
         format_bytes(static_cast<double>(e.bytes_per_micro_batch)) + "\"];\n";
  }
  return s + "}\n";
}

Status write_text_atomic(std::string const& text, std::string const& path) { return write_file_atomic(path, text); }

void print_plan(partition::Plan const& plan, int64_t device_memory) {
  std::printf(
      "%s: %zu stages on %d of %d devices (planner %s)\n", plan.model.c_str(), plan.stages.size(),
      [&] {
        int d = 0;
        for (auto const& s : plan.stages) d += s.replicas;
        return d;
      }(),
      plan.num_devices, plan.planner.c_str());
  std::printf("%5s %6s  %-28s %-28s %-9s %4s %5s %11s %21s\n", "stage", "ops", "first op", "last op", "devices", "x",
              "depth", "T_s", "memory/device");
  auto clip = [](std::string const& s) { return s.size() > 28 ? s.substr(0, 25) + "..." : s; };
  for (auto const& s : plan.stages) {
    std::string devices = std::to_string(s.devices.front());
    if (s.devices.size() > 1) devices += "-" + std::to_string(s.devices.back());
    // Heterogeneous plans list each device's memory: the stage must fit the smallest of its own.
    int64_t const own = plan.device_memory.empty() ? device_memory : partition::stage_memory_limit(plan, s);
    std::string const mem = format_bytes(double(s.peak_memory_bytes)) + " / " + format_bytes(double(own));
    std::printf("%5d %6zu  %-28s %-28s %-9s %4d %5d %11s %21s%s%s\n", s.id, s.nodes.size(),
                clip(s.nodes.front()).c_str(), clip(s.nodes.back()).c_str(), devices.c_str(), s.replicas, s.depth,
                format_seconds(s.time_s).c_str(), mem.c_str(), s.recompute ? "  recompute" : "",
                s.peak_memory_bytes > own ? "  OVER" : "");
  }
  if (!plan.tied_weights.empty()) {
    // Weights several stages read: a copy each, their gradients all-reduced once per step.
    double bytes = 0, seconds = 0;
    std::set<int> stages;
    for (auto const& t : plan.tied_weights) {
      bytes += static_cast<double>(t.bytes);
      seconds += t.allreduce_s;
      stages.insert(t.stages.begin(), t.stages.end());
    }
    std::string list;
    for (int s : stages) list += (list.empty() ? "" : ",") + std::to_string(s);
    std::printf("tied weights: %zu (%s, first '%s') read by stages %s: a copy in each, all-reduced in %s per step\n",
                plan.tied_weights.size(), format_bytes(bytes).c_str(), plan.tied_weights.front().name.c_str(),
                list.c_str(), format_seconds(seconds).c_str());
  }
  std::printf("\nprediction: %s per sample, %.1f samples/s, step %s (B=%lld, b=%lld, m=%lld, depth %d)\n",
              format_seconds(plan.time_per_sample_s).c_str(), plan.samples_per_s,
              format_seconds(plan.step_time_s).c_str(), (long long)plan.batch, (long long)plan.micro_batch,
              (long long)plan.num_micro_batches, plan.depth);
  std::printf("search: %s, %lld states explored\n", format_seconds(plan.search_time_s).c_str(),
              (long long)plan.states_explored);
  if (!plan.notes.empty()) std::printf("note: %s\n", plan.notes.c_str());
}

Status run_partition(PartitionOptions const& o) {
  ASSIGN_OR_RETURN(partition::Problem p, build_problem(o.flags));
  ASSIGN_OR_RETURN(partition::PlannerOptions const search, planner_options(o.flags));
  ASSIGN_OR_RETURN(partition::Plan plan, partition::plan_with(o.planner, p, search));
  RETURN_IF_ERROR(partition::validate_plan(plan));
  if (!o.out.empty()) RETURN_IF_ERROR(partition::write_plan_file(plan, o.out));
  if (!o.dot.empty()) RETURN_IF_ERROR(write_text_atomic(plan_dot(plan), o.dot));
  if (o.json) {
    std::fputs(partition::plan_to_json(plan).c_str(), stdout);
  } else {
    print_plan(plan, p.device_memory());
    if (!o.out.empty()) std::printf("plan written to %s\n", o.out.c_str());
  }
  return Status::ok();
}

}  // namespace

void add_partition_command(CLI::App& root, CommandList& commands) {
  auto opts = std::make_shared<PartitionOptions>();
  auto* app = root.add_subcommand("partition", "Partition a model into a graph of pipeline stages");
  add_partition_flags(*app, opts->flags);
  app->add_option("--planner", opts->planner, "gpp | pipedream | piper | balanced")
      ->check(CLI::IsMember({"gpp", "pipedream", "piper", "balanced"}));
  app->add_option("-o,--out", opts->out, "Write the plan JSON here (atomically)");
  app->add_option("--dot", opts->dot, "Write the stage graph as Graphviz DOT");
  app->add_flag("--json", opts->json, "Print the plan JSON instead of the table");
  app->footer(
      "Examples:\n"
      "  graphpipe partition mmt.onnx --devices 8 --memory 16GiB --batch 128 -o plan.json\n"
      "  graphpipe partition --profile graph.txt --devices 4 --batch 1 --no-replication --no-communication --planner "
      "piper");
  commands.push_back({app, [opts] { return run_partition(*opts); }});
}

}  // namespace gp::cli
