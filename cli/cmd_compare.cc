#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/partition_problem.h"
#include "exec/runtime/threads.h"
#include "exec/session/model_file.h"
#include "exec/session/planning.h"
#include "exec/session/training.h"
#include "graph/onnx_import.h"
#include "partition/planner.h"
#include "schedule/build.h"
#include "schedule/simulator.h"

namespace gp::cli {
namespace {

struct CompareOptions {
  PartitionFlags flags;
  bool json = false;
  bool train = false;
  int64_t steps = 5;
  std::string loss = "cross_entropy";
};

struct Trained {
  std::string what;
  double predicted = 0, measured = 0;
};

exec::TrainConfig train_config(CompareOptions const& o, int64_t batch, int64_t micro_batches) {
  exec::TrainConfig c;
  c.model.path = o.flags.model;
  c.loss = o.loss == "mse" ? exec::LossKind::kMse : exec::LossKind::kCrossEntropy;
  c.batch = batch;
  c.micro_batches = micro_batches;
  c.steps = o.steps;
  c.data.samples = batch;  // one fixed batch: no data generation in the timed steps
  c.log_interval = 1 << 30;
  return c;
}

// The model --train trains, read once and loaded with its weights; the planners plan this graph.
struct TrainModel {
  session::ModelFile file;
  std::shared_ptr<graph::OpGraph const> graph;
};

// Trains `plan` (or, without one, the model on one worker) through a training session over the
// steps and measures samples/s over the steps after the first.
Result<Trained> train_one(CompareOptions const& o, TrainModel const& model, std::optional<partition::Plan> plan,
                          int64_t micro_batches, double predicted) {
  session::TrainOptions options;
  options.model = model.file;
  options.graph = model.graph;
  options.devices = plan ? plan->num_devices : 1;
  options.plan = plan;
  ASSIGN_OR_RETURN(auto s, session::TrainingSession::create(train_config(o, o.flags.batch, micro_batches), options));
  RETURN_IF_ERROR(s->run());
  std::string const what =
      plan ? plan->planner + " (" + std::to_string(plan->num_devices) + " workers, " + s->plan()->schedule.policy + ")"
           : "1 worker (" + std::to_string(exec::thread_budget()) + " threads)";
  return Trained{what, plan ? s->plan()->simulation.samples_per_s : predicted, s->samples_per_s()};
}

// GPP's plan, the best sequential plan and one worker, trained here: measured next to predicted.
Status train_and_report(CompareOptions const& o, TrainModel const& model, std::optional<partition::Plan> const* plans) {
  int best_seq = -1;
  for (int k = 1; k < 4; ++k)
    if (plans[k] && (best_seq < 0 || plans[k]->samples_per_s > plans[best_seq]->samples_per_s)) best_seq = k;
  std::vector<Trained> rows;
  for (int k : {0, best_seq}) {
    if (k < 0 || !plans[k]) continue;
    std::fprintf(stderr, "training the %s plan for %lld steps...\n", plans[k]->planner.c_str(), (long long)o.steps);
    ASSIGN_OR_RETURN(Trained t, train_one(o, model, plans[k], plans[k]->num_micro_batches, 0));
    rows.push_back(t);
  }
  // One device runs F and B of each micro-batch in turn (the Trainer's order): 1F1B on one stage.
  PartitionFlags one_flags = o.flags;
  one_flags.devices = 1;
  one_flags.cluster.clear();
  one_flags.graph = model.graph;
  ASSIGN_OR_RETURN(one_flags.update_seconds_per_weight_byte,
                   session::measure_update_rate("cpu", train_config(o, 1, 1).optimizer, exec::thread_budget()));
  ASSIGN_OR_RETURN(partition::Problem one, build_problem(one_flags));
  ASSIGN_OR_RETURN(partition::Plan one_plan, partition::plan_with("gpp", one, {}));
  ASSIGN_OR_RETURN(schedule::Schedule sched, schedule::build_schedule(one_plan, schedule::Policy::k1F1B));
  ASSIGN_OR_RETURN(schedule::Simulation sim, schedule::simulate(one_plan, sched));
  std::fprintf(stderr, "training on 1 worker for %lld steps...\n", (long long)o.steps);
  ASSIGN_OR_RETURN(Trained single, train_one(o, model, std::nullopt, one_plan.num_micro_batches, sim.samples_per_s));
  rows.push_back(single);
  std::printf(
      "\nmeasured on this machine (%lld steps, the first not timed), predicted by the simulator from the "
      "%s cost model:\n",
      (long long)o.steps, o.flags.cost.c_str());
  std::printf("%-36s %14s %14s %10s %10s\n", "run", "predicted/s", "measured/s", "meas/pred", "GPP/this");
  for (auto const& r : rows)
    std::printf("%-36s %14.1f %14.1f %10.2f %10.2f\n", r.what.c_str(), r.predicted, r.measured,
                r.measured / std::max(r.predicted, 1e-9), rows[0].measured / std::max(r.measured, 1e-9));
  return Status::ok();
}

Status run_compare(CompareOptions const& o) {
  PartitionFlags flags = o.flags;
  TrainModel model;
  if (o.train) {
    if (o.steps < 2) return invalid_argument("--steps must be >= 2 (the first step is not timed)");
    if (o.loss != "cross_entropy" && o.loss != "mse") return invalid_argument("--loss must be cross_entropy or mse");
    if (flags.model.empty()) return invalid_argument("--train needs an ONNX model (not --profile)");
    ASSIGN_OR_RETURN(model.file, session::read_model_file(flags.model));
    ASSIGN_OR_RETURN(graph::ImportOptions import, import_options());
    ASSIGN_OR_RETURN(graph::OpGraph g, session::load_graph(model.file, import));
    model.graph = std::make_shared<graph::OpGraph const>(std::move(g));
    RETURN_IF_ERROR(session::check_weights_loaded(*model.graph, flags.model).with_context("--train"));
    flags.graph = model.graph;  // the planners plan the graph that trains
    int const workers = flags.devices > 0 ? flags.devices : 1;
    ASSIGN_OR_RETURN(flags.update_seconds_per_weight_byte,
                     session::measure_update_rate("cpu", train_config(o, 1, 1).optimizer,
                                                  std::max(1, exec::available_cores() / workers)));
  }
  ASSIGN_OR_RETURN(partition::Problem p, build_problem(flags));
  ASSIGN_OR_RETURN(partition::PlannerOptions const search, planner_options(o.flags));
  auto results = session::compare_planners(p, search, o.flags.search.rank == "simulation", [](std::string const& name) {
    std::fprintf(stderr, "running %s...\n", name.c_str());
  });
  char const* planners[4];
  std::optional<partition::Plan> plans[4];
  std::string errors[4];
  for (int k = 0; k < 4; ++k) {
    planners[k] = session::kPlanners[k];
    plans[k] = std::move(results[k].plan);
    errors[k] = std::move(results[k].error);
  }
  bool const simulated = o.flags.search.rank == "simulation";
  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (int k = 0; k < 4; ++k) {
      nlohmann::json row{{"planner", planners[k]}};
      if (plans[k]) {
        double peak = 0;
        for (auto const& s : plans[k]->stages) peak = std::max(peak, double(s.peak_memory_bytes));
        row.update({{"search_time_s", plans[k]->search_time_s},
                    {"states_explored", plans[k]->states_explored},
                    {"depth", plans[k]->depth},
                    {"stages", plans[k]->stages.size()},
                    {"micro_batch", plans[k]->micro_batch},
                    {"samples_per_s", plans[k]->samples_per_s},
                    {"peak_memory_bytes", peak},
                    {"notes", plans[k]->notes}});
        if (plans[0]) row["gpp_ratio"] = plans[0]->samples_per_s / plans[k]->samples_per_s;
      } else {
        row["error"] = errors[k];
      }
      rows.push_back(row);
    }
    std::printf(
        "%s\n",
        nlohmann::json{{"model", p.model}, {"devices", p.cluster.size()}, {"batch", p.batch}, {"planners", rows}}
            .dump(2)
            .c_str());
    return Status::ok();
  }
  std::printf("%s on %d devices of %s, batch %lld; samples/s: %s\n", p.model.c_str(), p.cluster.size(),
              format_bytes(double(p.device_memory())).c_str(), (long long)p.batch,
              simulated ? "simulated, best schedule of each plan" : "the planners' formula (m + D - 1) max T_s");
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
    std::printf("%-10s %12s %12lld %6d %7zu %5lld %12.1f %14s %9s%s\n", planners[k],
                format_seconds(pl.search_time_s).c_str(), (long long)pl.states_explored, pl.depth, pl.stages.size(),
                (long long)pl.micro_batch, pl.samples_per_s, format_bytes(peak).c_str(), ratio,
                pl.planner == "gpp"                    ? (pl.notes.rfind("a chain", 0) == 0 ? "  (a chain)" : "")
                : pl.notes.rfind("linearised", 0) == 0 ? "  (linearised)"
                                                       : "");
  }
  if (o.train) return train_and_report(o, model, plans);
  return Status::ok();
}

}  // namespace

void add_compare_command(CLI::App& root, CommandList& commands) {
  auto opts = std::make_shared<CompareOptions>();
  auto* app =
      root.add_subcommand("compare", "Run every planner (gpp, pipedream, piper, balanced) and compare their plans");
  add_partition_flags(*app, opts->flags);
  app->add_flag("--json", opts->json, "Print JSON instead of the table");
  app->add_flag("--train", opts->train,
                "Also train the GPP plan, the best sequential plan and one worker here (worker threads) and print "
                "measured samples/s next to predicted");
  app->add_option("--steps", opts->steps, "Steps per trained plan with --train (the first is not timed)")
      ->default_val(5);
  app->add_option("--loss", opts->loss, "Loss for --train: cross_entropy or mse")->default_val("cross_entropy");
  app->footer(
      "Examples:\n  graphpipe compare mmt.onnx --devices 16 --memory 16GiB --batch 128 --time-limit 60\n"
      "  graphpipe profile mmt_small.onnx --threads 1 --batch-sizes 1,2,4,8 -o p1.json\n"
      "  graphpipe compare mmt_small.onnx --devices 2 --memory 1GiB --batch 32 --micro-batch 8 --cost p1.json "
      "--train --steps 6");
  commands.push_back({app, [opts] { return run_compare(*opts); }});
}

}  // namespace gp::cli
