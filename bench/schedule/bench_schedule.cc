// GPP plan + its best schedule vs the best sequential plan + its best schedule, predicted by the
// simulator under one cost model (analytic roofline, V100-like devices): samples/s, bubble
// fraction, peak memory, for the zoo's branchy models and the sequential control.
//
//   bench_schedule [--size paper|small|tiny] [--devices 8,32] [--batch B] [--memory 16GiB]
//                  [--models mmt,dlrm,candle_uno,transformer] [--svg-dir DIR] [--precision fp32,bf16]
// --precision: plan each model's graph per precision (graph/precision.h: bf16 tensors count 2 bytes,
// so activations that bind the memory limit allow about twice the micro-batch; the analytic cost
// model prices bf16 compute like float32).
// With --svg-dir, the GPP plan (JSON) and the timelines (SVG) of GPP and the best sequential plan
// are written there.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "graph/cost_model.h"
#include "graph/precision.h"
#include "models/zoo.h"
#include "partition/cluster.h"
#include "partition/from_graph.h"
#include "partition/planner.h"
#include "schedule/build.h"
#include "schedule/rank.h"
#include "schedule/simulator.h"
#include "schedule/trace.h"
#include "schedule/units.h"

using namespace gp;

namespace {

std::vector<std::string> split(std::string const& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');) out.push_back(x);
  return out;
}

struct Outcome {
  bool ok = false;
  std::string why;
  partition::Plan plan;
  schedule::Schedule schedule;
  schedule::Simulation sim;
  double plan_s = 0;
};

Outcome plan_and_schedule(std::string const& planner, partition::Problem const& problem) {
  Outcome o;
  partition::PlannerOptions options;
  options.time_limit_s = 30;
  // GPP judges its best candidates by simulating their best schedules (schedule/rank.h), so the
  // plan it returns is the fastest the simulator sees among them and its estimate is that simulation.
  if (planner == "gpp") options.evaluate = schedule::simulation_evaluator();
  auto const t0 = std::chrono::steady_clock::now();
  auto plan = partition::plan_with(planner, problem, options);
  o.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!plan.is_ok()) {
    o.why = plan.status().message();
    return o;
  }
  o.plan = *plan;
  auto sched = schedule::build_schedule(o.plan, schedule::Policy::kAuto);
  if (!sched.is_ok()) {
    o.why = sched.status().message();
    return o;
  }
  o.schedule = *sched;
  auto sim = schedule::simulate(o.plan, o.schedule);
  if (!sim.is_ok()) {
    o.why = sim.status().message();
    return o;
  }
  o.sim = *sim;
  o.ok = true;
  return o;
}

void print_row(std::string const& model, int devices, std::string const& label, Outcome const& o, double baseline) {
  if (!o.ok) {
    std::printf("%-12s %4d  %-10s  no plan/schedule: %.110s\n", model.c_str(), devices, label.c_str(), o.why.c_str());
    return;
  }
  char ratio[32] = "-";
  if (baseline > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", o.sim.samples_per_s / baseline);
  // The planner's estimate over the simulated throughput of the plan it returned.
  double const est = o.sim.samples_per_s > 0 ? o.plan.samples_per_s / o.sim.samples_per_s : 0;
  std::printf("%-12s %4d  %-10s %-11s %3zu %3d %4lld %4lld %11.1f %11.1f %6.2f %7.1f%% %11s %11s %7s %7.1fs\n",
              model.c_str(), devices, label.c_str(), o.schedule.policy.c_str(), o.plan.stages.size(), o.plan.depth,
              static_cast<long long>(o.plan.micro_batch), static_cast<long long>(o.plan.num_micro_batches),
              o.plan.samples_per_s, o.sim.samples_per_s, est, 100 * o.sim.mean_bubble_fraction,
              schedule::format_bytes(o.sim.peak_memory_bytes).c_str(),
              schedule::format_bytes(o.plan.device_memory_bytes).c_str(), ratio, o.plan_s);
}

}  // namespace

int main(int argc, char** argv) {
  std::string size_name = "paper", devices_arg = "8,32", memory = "16GiB", svg_dir;
  std::string models_arg = "mmt,dlrm,candle_uno,transformer", precisions_arg = "fp32";
  int64_t batch = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string const k = argv[i], v = argv[i + 1];
    if (k == "--size")
      size_name = v;
    else if (k == "--devices")
      devices_arg = v;
    else if (k == "--batch")
      batch = std::stoll(v);
    else if (k == "--memory")
      memory = v;
    else if (k == "--models")
      models_arg = v;
    else if (k == "--svg-dir")
      svg_dir = v;
    else if (k == "--precision")
      precisions_arg = v;
    else {
      std::fprintf(stderr, "bench_schedule: unknown option %s (see the comment at the top of bench_schedule.cc)\n",
                   k.c_str());
      return 2;
    }
  }
  auto size = models::parse_size(size_name);
  auto mem = partition::parse_bytes(memory);
  if (!size.is_ok() || !mem.is_ok()) {
    std::fprintf(stderr, "bench_schedule: bad --size or --memory\n");
    return 2;
  }
  std::printf("GPP plan + best schedule vs best sequential plan (pipedream, piper, balanced) + best schedule\n");
  std::printf(
      "size %s, batch %lld, %s per device, analytic cost model; schedule = auto (fastest fitting memory)\n"
      "planner s/s: the planner's own estimate (sequential planners: B / ((m + D - 1) max T_s); GPP: the simulation\n"
      "of its best candidates' schedules, formula in its notes); samples/s, bubble, peak mem: simulated;\n"
      "est/sim: planner s/s over samples/s; vs seq: simulated samples/s over the best sequential plan's\n\n",
      size_name.c_str(), static_cast<long long>(batch), memory.c_str());
  std::printf("%-12s %4s  %-10s %-11s %3s %3s %4s %4s %11s %11s %6s %8s %11s %11s %7s %8s\n", "model", "dev", "plan",
              "schedule", "st", "D", "b", "m", "planner s/s", "samples/s", "est/sim", "bubble", "peak mem", "limit",
              "vs seq", "plan t");
  auto cost = std::make_shared<graph::AnalyticCostModel const>();
  for (auto const& model_name : split(models_arg))
    for (auto const& precision_name : split(precisions_arg)) {
      auto precision = graph::parse_precision(precision_name);
      if (!precision.is_ok()) {
        std::fprintf(stderr, "bench_schedule: %s\n", precision.status().message().c_str());
        return 2;
      }
      std::string const name = model_name + (*precision == graph::Precision::kFloat32 ? "" : " " + precision_name);
      auto g = models::build_graph(model_name, *size, 0, false);
      if (g.is_ok() && *precision != graph::Precision::kFloat32) g = graph::apply_precision(*g, *precision);
      if (!g.is_ok()) {
        std::printf("%-12s  cannot build: %s\n", name.c_str(), g.status().message().c_str());
        continue;
      }
      auto graph = std::make_shared<graph::OpGraph const>(std::move(*g));
      for (auto const& dev_text : split(devices_arg)) {
        int const n = std::stoi(dev_text);
        auto problem = partition::problem_from_graph(graph, cost, partition::Cluster::uniform(n, *mem), batch);
        if (!problem.is_ok()) {
          std::printf("%-12s %4d  problem: %s\n", name.c_str(), n, problem.status().message().c_str());
          continue;
        }
        Outcome gpp = plan_and_schedule("gpp", *problem);
        Outcome best_seq;
        std::string seq_name;
        std::vector<std::pair<std::string, Outcome>> seqs;
        for (std::string planner : {"pipedream", "piper", "balanced"}) {
          seqs.emplace_back(planner, plan_and_schedule(planner, *problem));
          auto const& o = seqs.back().second;
          if (o.ok && (!best_seq.ok || o.sim.samples_per_s > best_seq.sim.samples_per_s))
            best_seq = o, seq_name = planner;
        }
        double const base = best_seq.ok ? best_seq.sim.samples_per_s : 0;
        for (auto const& [planner, o] : seqs) print_row(name, n, planner, o, base);
        print_row(name, n, "gpp", gpp, base);
        if (!svg_dir.empty() && gpp.ok) {
          std::string const path = svg_dir + "/" + name + "_" + std::to_string(n) + "_gpp.svg";
          (void)partition::write_plan_file(gpp.plan, svg_dir + "/" + name + "_" + std::to_string(n) + "_gpp.json");
          (void)schedule::write_text_file(
              schedule::timeline_to_svg(gpp.sim.timeline,
                                        name + ", " + std::to_string(n) + " devices, GPP plan, " + gpp.schedule.policy),
              path);
          if (best_seq.ok) {
            std::string const spath = svg_dir + "/" + name + "_" + std::to_string(n) + "_" + seq_name + ".svg";
            (void)schedule::write_text_file(
                schedule::timeline_to_svg(best_seq.sim.timeline, name + ", " + std::to_string(n) + " devices, " +
                                                                     seq_name + " plan, " + best_seq.schedule.policy),
                spath);
          }
        }
        std::fflush(stdout);
      }
    }
  return 0;
}
