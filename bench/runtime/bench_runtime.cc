// Measured against predicted: the pipeline runtime on this machine's cores, for a multi-branch
// model (MMT) and the sequential transformer at small size. For each: the GPP plan and the best
// sequential plan on 2 workers of 1 core each, and 1 worker on every core; each measured samples/s
// next to the simulator's prediction from a profile measured here under the worker's thread
// budget (graphpipe profile --threads), and measured peak memory per device next to the plan's.
//
//   bench_runtime [--steps N] [--batch B] [--micro-batches M] [--only MODEL] [--size small|tiny]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include <optional>

#include "exec/optimizer.h"
#include "exec/profiler.h"
#include "exec/runtime/link_probe.h"
#include "exec/runtime/threads.h"
#include "exec/session/planning.h"
#include "exec/session/registry.h"
#include "exec/session/training.h"
#include "graph/cost_model.h"
#include "partition/planner.h"
#include "schedule/build.h"
#include "schedule/simulator.h"

namespace {

using namespace gp;

struct Options {
  int steps = 6;
  int64_t batch = 32;
  int64_t micro_batches = 4;
  std::string only;
  std::string size = "small";
};

struct ModelInput {
  std::string name;
  session::ModelFile file;
  std::shared_ptr<graph::OpGraph const> graph;
};

struct Row {
  std::string model, what;
  int workers = 0;
  double predicted = 0, measured = 0;
  std::vector<int64_t> mem_predicted, mem_measured;
};

template <typename T>
T check(Result<T> r, std::string const& what) {
  if (!r.is_ok()) {
    std::cerr << "bench_runtime: " << what << ": " << r.status().message() << std::endl;
    std::exit(1);
  }
  return std::move(r).value();
}
void check(Status s, std::string const& what) {
  if (!s.is_ok()) {
    std::cerr << "bench_runtime: " << what << ": " << s.message() << std::endl;
    std::exit(1);
  }
}

exec::TrainConfig config_for(Options const& o) {
  exec::TrainConfig c;
  c.batch = o.batch;
  c.micro_batches = o.micro_batches;
  c.steps = o.steps;
  c.seed = 1;
  c.optimizer.lr = 0.01f;
  c.data.samples = o.batch;  // one fixed batch, as bench_train: no data generation in the timed loop
  c.log_interval = 1 << 30;
  return c;
}

// A profile measured under `threads` compute threads, at the sizes a replica can see.
graph::MeasuredProfile measured_profile(graph::OpGraph const& g, int threads, int64_t b) {
  exec::ScopedThreadBudget budget(threads);
  auto be = check(session::make_backend("cpu", 0), "backend");
  exec::ProfileOptions po;
  po.samples.clear();
  for (int64_t s = 1; s <= b; s *= 2) po.samples.push_back(s);
  if (po.samples.back() != b) po.samples.push_back(b);
  po.repeats = 3;
  int const cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  po.threads = threads;
  po.calibrate_concurrency = std::max(1, cores / threads);
  po.thread_setup = [threads] { exec::set_thread_budget(threads); };
  po.model_name = g.name();
  return check(exec::profile_graph(g, *be, po), "profile");
}

partition::Plan plan_for(std::shared_ptr<graph::OpGraph const> g, graph::MeasuredProfile const& profile,
                         std::string const& planner, int devices, exec::TrainConfig const& c, int threads,
                         bool replication = true) {
  session::ProblemSpec spec;
  spec.graph = std::move(g);
  spec.devices = devices;
  spec.memory = "8GiB";
  static double const bandwidth = exec::measure_in_process_bandwidth();  // worker threads' "links"
  spec.bandwidth_bytes_per_s = bandwidth;
  spec.batch = c.batch;
  spec.micro_batch = c.micro_batch_size();
  spec.measured = profile;
  spec.recompute = "never";
  spec.no_replication = !replication;
  spec.optimizer_bytes_per_weight_byte = exec::state_bytes_per_weight_byte(c.optimizer);
  spec.update_seconds_per_weight_byte = check(session::measure_update_rate("cpu", c.optimizer, threads), "update");
  auto p = check(session::build_problem(spec), "problem");
  return check(partition::plan_with(planner, p), planner);
}

// Trains `plan` (or, without one, one worker under `threads`) through a training session.
std::unique_ptr<session::TrainingSession> train(ModelInput const& m, exec::TrainConfig c,
                                                std::optional<partition::Plan> plan, int threads) {
  c.pipeline.threads_per_worker = 1;
  c.pipeline.timeout_s = 120;
  session::TrainOptions options;
  options.model = m.file;
  options.graph = m.graph;
  options.plan = std::move(plan);
  options.devices = options.plan ? options.plan->num_devices : 1;
  exec::ScopedThreadBudget budget(threads);  // one worker computes on the calling thread
  auto s = check(session::TrainingSession::create(std::move(c), std::move(options)), "session");
  check(s->run(), "train");
  return s;
}

Row run_pipeline(ModelInput const& m, std::string const& what, exec::TrainConfig const& c,
                 partition::Plan const& plan) {
  auto s = train(m, c, plan, 1);
  schedule::Simulation const& sim = s->plan()->simulation;
  Row r{m.name,
        what + " (" + s->plan()->schedule.policy + ")",
        plan.num_devices,
        sim.samples_per_s,
        s->samples_per_s(),
        {},
        {}};
  for (auto const& d : s->measurements()) {
    r.mem_measured.push_back(d.peak_bytes);
    r.mem_predicted.push_back(sim.devices[d.device].peak_memory_bytes);
  }
  return r;
}

Row run_single(ModelInput const& m, exec::TrainConfig const& c, int threads, schedule::Simulation const& sim) {
  auto s = train(m, c, std::nullopt, threads);
  Row r{m.name,
        "1 worker, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads"),
        1,
        sim.samples_per_s,
        s->samples_per_s(),
        {},
        {}};
  r.mem_measured.push_back(s->measurements().front().peak_bytes);
  r.mem_predicted.push_back(sim.devices[0].peak_memory_bytes);
  return r;
}

std::string mib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(b) / (1 << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the table only: no session log lines
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--steps")
      o.steps = std::stoi(next());
    else if (a == "--batch")
      o.batch = std::stoll(next());
    else if (a == "--micro-batches")
      o.micro_batches = std::stoll(next());
    else if (a == "--only")
      o.only = next();
    else if (a == "--size")
      o.size = next();
    else {
      std::cerr << "usage: bench_runtime [--steps N] [--batch B] [--micro-batches M] [--only "
                   "MODEL] [--size S]\n";
      return 2;
    }
  }
  int const cores = static_cast<int>(std::thread::hardware_concurrency());
  std::printf("bench_runtime: in-process all-reduce %.2f GB/s (the planners' link bandwidth)\n",
              exec::measure_in_process_bandwidth() / 1e9);
  std::printf(
      "bench_runtime: %d cores, batch %lld in %lld micro-batches, %d steps (first not timed), size "
      "%s\n",
      cores, static_cast<long long>(o.batch), static_cast<long long>(o.micro_batches), o.steps, o.size.c_str());
  std::vector<Row> rows;
  std::vector<std::string> summary;
  for (std::string model : {"mmt", "transformer"}) {
    if (!o.only.empty() && o.only != model) continue;
    exec::TrainConfig c = config_for(o);
    c.model.zoo = model;
    c.model.size = o.size;
    ModelInput m;
    m.name = model;
    m.file = check(session::read_model(c.model, 1), model);
    m.graph = std::make_shared<graph::OpGraph const>(check(session::load_graph(m.file, {}), model));
    auto const& g = m.graph;
    std::cerr << model << ": profiling with 1 and " << cores << " threads..." << std::endl;
    auto cost1 = measured_profile(*g, 1, c.micro_batch_size());
    auto cost_all = measured_profile(*g, cores, c.micro_batch_size());
    auto gpp = plan_for(g, cost1, "gpp", 2, c, 1);
    partition::Plan seq = plan_for(g, cost1, "pipedream", 2, c, 1);
    auto bal = plan_for(g, cost1, "balanced", 2, c, 1);
    if (bal.samples_per_s > seq.samples_per_s) seq = bal;
    // Stages only (no data-parallel replicas): graph of stages against chain of stages.
    auto gpp_stages = plan_for(g, cost1, "gpp", 2, c, 1, false);
    partition::Plan seq_stages = plan_for(g, cost1, "pipedream", 2, c, 1, false);
    auto bal_stages = plan_for(g, cost1, "balanced", 2, c, 1, false);
    if (bal_stages.samples_per_s > seq_stages.samples_per_s) seq_stages = bal_stages;
    auto one = plan_for(g, cost_all, "gpp", 1, c, cores);
    auto one1 = plan_for(g, cost1, "gpp", 1, c, 1);
    std::cerr << model << ": training..." << std::endl;
    Row const rg = run_pipeline(m, "GPP, 2 workers x 1 thread", c, gpp);
    Row const rs = run_pipeline(m, seq.planner + ", 2 workers x 1 thread", c, seq);
    Row const rgs = run_pipeline(m, "GPP stages only, 2 x 1", c, gpp_stages);
    Row const rss = run_pipeline(m, seq_stages.planner + " stages only, 2 x 1", c, seq_stages);
    // One device runs F and B of each micro-batch in turn (the Trainer's order): 1F1B on one stage.
    schedule::BuildOptions const bo{static_cast<int>(c.micro_batches), 0};
    auto sim1 =
        check(schedule::simulate(one, check(schedule::build_schedule(one, schedule::Policy::k1F1B, bo), "schedule")),
              "simulate");
    auto sim11 =
        check(schedule::simulate(one1, check(schedule::build_schedule(one1, schedule::Policy::k1F1B, bo), "schedule")),
              "simulate");
    Row const r1 = run_single(m, c, cores, sim1);
    Row const r11 = run_single(m, c, 1, sim11);
    rows.insert(rows.end(), {rg, rs, rgs, rss, r1, r11});
    char line[320];
    std::snprintf(line, sizeof line,
                  "%-12s GPP/sequential measured %.2f (predicted %.2f), stages only %.2f (predicted "
                  "%.2f); GPP 2 workers / (2 x 1-thread) %.2f",
                  model.c_str(), rg.measured / rs.measured, rg.predicted / rs.predicted, rgs.measured / rss.measured,
                  rgs.predicted / rss.predicted, rg.measured / (2 * r11.measured));
    summary.push_back(line);
  }
  std::printf("\n%-12s %-38s %12s %12s %9s   %s\n", "model", "run", "predicted/s", "measured/s", "meas/pred",
              "peak MiB per device: measured / predicted");
  for (auto const& r : rows) {
    std::printf("%-12s %-38s %12.1f %12.1f %9.2f  ", r.model.c_str(), r.what.c_str(), r.predicted, r.measured,
                r.predicted > 0 ? r.measured / r.predicted : 0.0);
    for (std::size_t d = 0; d < r.mem_measured.size(); ++d)
      std::printf(" d%zu %s / %s", d, mib(r.mem_measured[d]).c_str(),
                  d < r.mem_predicted.size() ? mib(r.mem_predicted[d]).c_str() : "-");
    std::printf("\n");
  }
  std::printf("\n");
  for (auto const& s : summary) std::printf("%s\n", s.c_str());
  return 0;
}
