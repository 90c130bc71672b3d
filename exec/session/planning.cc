#include "exec/session/planning.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <spdlog/spdlog.h>

#include "core/hash.h"
#include "exec/optimizer.h"
#include "exec/profiler.h"
#include "exec/runtime/link_probe.h"
#include "exec/runtime/threads.h"
#include "exec/session/registry.h"
#include "partition/cluster.h"
#include "partition/from_graph.h"
#include "partition/pipedream_profile.h"
#include "partition/planner.h"
#include "schedule/build.h"
#include "schedule/rank.h"
#include "schedule/schedule_text.h"

namespace gp::session {

Result<partition::Problem> build_problem(ProblemSpec const& f) {
  bool const has_model = !f.model.empty() || f.graph;
  if (has_model == !f.profile.empty())
    return invalid_argument(has_model ? "give either a model.onnx or --profile graph.txt, not both"
                                      : "give a model.onnx or --profile graph.txt");
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
  if (f.bandwidth_bytes_per_s > 0) cluster.intra_node.bandwidth = f.bandwidth_bytes_per_s;
  if (f.link_latency_s >= 0) cluster.intra_node.latency = f.link_latency_s;
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
    if (f.cost != "analytic" || f.measured)
      return invalid_argument("--cost applies to ONNX models; a PipeDream profile carries its own times");
    ASSIGN_OR_RETURN(p, partition::read_pipedream_profile(f.profile, {.profile_batch = f.profile_batch}));
    p.cluster = std::move(cluster);
    p.batch = f.batch;
  } else {
    std::shared_ptr<graph::OpGraph const> g = f.graph;
    if (!g) {
      graph::ImportOptions import = f.import;
      import.load_weights = false;
      auto loaded = graph::load_onnx(f.model, import);
      if (!loaded) return loaded.status().with_context("loading " + f.model);
      g = std::make_shared<graph::OpGraph const>(std::move(loaded).value());
    }
    std::shared_ptr<graph::CostModel const> cost = std::make_shared<graph::AnalyticCostModel>();
    std::optional<graph::MeasuredProfile> measured = f.measured;
    if (!measured && f.cost != "analytic") {
      ASSIGN_OR_RETURN(measured, graph::read_profile_file(f.cost));
    }
    if (measured) {
      auto model = std::make_shared<graph::MeasuredCostModel>(std::move(*measured), cost);
      auto missing = model->missing_ops(*g);
      if (!missing.empty())
        spdlog::warn("{} of {} ops are not in the profile {} (first: {}); they use the analytic model", missing.size(),
                     g->num_ops(), f.measured ? "measured here" : f.cost, missing.front());
      cost = model;
    }
    ASSIGN_OR_RETURN(p, partition::problem_from_graph(g, cost, std::move(cluster), f.batch));
  }
  if (f.micro_batch > 0) p.micro_batch_candidates = {f.micro_batch};
  p.allow_replication = !f.no_replication;
  p.count_communication = !f.no_communication;
  p.allow_recompute = f.recompute == "auto";
  p.optimizer_bytes_per_weight_byte = f.optimizer_bytes_per_weight_byte;
  p.update_seconds_per_weight_byte = f.update_seconds_per_weight_byte;
  RETURN_IF_ERROR(p.finalize());
  return p;
}

Result<std::string> cache_dir() {
  char const* env = std::getenv("GP_CACHE_DIR");
  char const* home = std::getenv("HOME");
  std::filesystem::path const dir =
      env ? std::filesystem::path(env) : std::filesystem::path(home ? home : "/tmp") / ".cache" / "graphpipe";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return io_error("cannot create the cache folder " + dir.string() + ": " + ec.message() + " (set GP_CACHE_DIR)");
  return dir.string();
}

Result<double> measure_update_rate(std::string const& backend, exec::OptimizerConfig const& optimizer, int threads) {
  exec::ScopedThreadBudget budget(threads);
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> b, make_backend(backend, 0));
  return exec::measure_update_seconds_per_byte(*b, optimizer);
}

int worker_threads(exec::TrainConfig const& config, int devices, bool mpi) {
  if (config.pipeline.threads_per_worker > 0) return static_cast<int>(config.pipeline.threads_per_worker);
  if (mpi) return exec::rank_thread_budget();
  return std::max(1, exec::available_cores() / std::max(1, devices));
}

int calibration_concurrency(std::string const& backend, int devices, bool mpi, int threads, int cores, int gpus) {
  if (backend == "cpu") return std::max(1, cores / std::max(1, threads));
  if (mpi) return 1;
  int const g = std::max(1, gpus);
  return std::max(1, (devices + g - 1) / g);
}

namespace {

// What the planner is priced with when config.pipeline.cost is "profile": per-op times and the
// optimizer's update rate, both measured on the training backend under one worker's thread budget.
struct Measured {
  graph::MeasuredProfile profile;
  double update_seconds_per_weight_byte = 0;
};

// The imported graph's wiring (each op's name and type, the names and shapes of what it reads and
// writes): the same file imports to other graphs with --no-fusion or after an importer change (a
// fusion that removes or re-wires ops), and a profile holds the ops of one.
uint64_t graph_key(graph::OpGraph const& graph) {
  uint64_t h = kFnvOffset;
  auto add = [&](std::string_view s) { h = fnv1a(std::string_view("\0", 1), fnv1a(s, h)); };
  for (graph::Op const& op : graph.ops()) {
    add(op.name);
    add(op.type);
    for (auto const* list : {&op.inputs, &op.outputs})
      for (graph::TensorId t : *list) {
        if (t == graph::kNoTensor) {
          add("-");
          continue;
        }
        add(graph.tensor(t).name);
        add(graph.tensor(t).shape.to_string());
      }
  }
  return h;
}

// The per-op profile: made once per model (its file and the graph it imports to), backend (and its
// TF32 setting), thread budget, calibration concurrency and micro-batch size, and kept in the
// cache folder for the next run.
Result<graph::MeasuredProfile> measured_profile(ModelFile const& model, graph::OpGraph const& graph, int threads,
                                                int concurrency, int64_t micro_batch, std::string const& backend_name,
                                                BackendSettings const& settings) {
  ASSIGN_OR_RETURN(std::string const cache, cache_dir());
  bool const gpu = backend_name != "cpu";
  char name[160];
  // Per precision too: a bf16 graph has other ops (its casts) and other times.
  std::snprintf(name, sizeof name, "%016llx-%016llx-%s%s-%s-t%d-c%d-b%lld.profile.json",
                static_cast<unsigned long long>(model.hash), static_cast<unsigned long long>(graph_key(graph)),
                backend_name.c_str(), gpu && settings.tf32_matmul ? "-tf32" : "",
                graph::precision_name(graph::graph_precision(graph)), gpu ? 0 : threads, concurrency,
                static_cast<long long>(micro_batch));
  std::string const path = (std::filesystem::path(cache) / name).string();
  if (std::filesystem::exists(path)) {
    auto cached = graph::read_profile_file(path);
    if (cached.is_ok()) {
      spdlog::info("cost model: measured profile {} (cached)", path);
      return cached;
    }
    spdlog::warn("cost model: ignoring the unreadable cached profile {} ({})", path, cached.status().message());
  }
  spdlog::info("cost model: profiling {} on {} with {} threads per worker, {} executor{} at once (once; cached in {})",
               graph.name(), backend_name, threads, concurrency, concurrency == 1 ? "" : "s", cache);
  exec::ScopedThreadBudget budget(threads);
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> backend, make_backend(backend_name, 0, settings));
  exec::ProfileOptions options;
  options.samples.clear();
  for (int64_t s = 1; s < micro_batch; s *= 2) options.samples.push_back(s);
  options.samples.push_back(micro_batch);
  options.model_name = graph.name();
  options.threads = threads;
  // As many executors at once as workers will share this process's cores or one GPU.
  options.calibrate_concurrency = concurrency;
  if (gpu)  // each on a stream of its own, as the workers sharing the GPU are
    options.calibration_backend = [backend_name, settings] { return make_backend(backend_name, 0, settings); };
  options.thread_setup = [threads] { exec::set_thread_budget(threads); };
  auto profile = exec::profile_graph(graph, *backend, options);
  if (!profile.is_ok()) return profile.status().with_context("profiling for the planner (use pipeline.cost: analytic)");
  Status const cached = graph::write_profile_file(*profile, path);
  if (!cached) spdlog::warn("cost model: the profile was not cached ({})", cached.message());
  return profile;
}

Result<Measured> measure(exec::TrainConfig const& config, ModelFile const& model, graph::OpGraph const& graph,
                         int threads, int concurrency, std::string const& backend_name) {
  Measured m;
  ASSIGN_OR_RETURN(m.profile, measured_profile(model, graph, threads, concurrency, config.micro_batch_size(),
                                               backend_name, backend_settings(config)));
  ASSIGN_OR_RETURN(m.update_seconds_per_weight_byte, measure_update_rate(backend_name, config.optimizer, threads));
  return m;
}

// Rank 0's measurement on every rank: its update rate's 8 bytes, then its profile's JSON (numbers
// written to round-trip exactly).
Result<Measured> measure_on_rank0(exec::TrainConfig const& config, ModelFile const& model, graph::OpGraph const& graph,
                                  int threads, int concurrency, std::string const& backend_name, double timeout_s) {
  ASSIGN_OR_RETURN(RankInfo const me, start_mpi());
  std::string message;
  if (me.rank == 0) {
    ASSIGN_OR_RETURN(Measured m, measure(config, model, graph, threads, concurrency, backend_name));
    message.resize(sizeof(double));
    std::memcpy(message.data(), &m.update_seconds_per_weight_byte, sizeof(double));
    message += graph::profile_to_json(m.profile);
  }
  ASSIGN_OR_RETURN(message, broadcast_from_rank0(message, timeout_s));
  if (message.size() < sizeof(double)) return internal_error("rank 0's measured costs arrived truncated");
  Measured m;
  std::memcpy(&m.update_seconds_per_weight_byte, message.data(), sizeof(double));
  ASSIGN_OR_RETURN(m.profile, graph::profile_from_json(message.substr(sizeof(double))));
  return m;
}

std::string threads_text(int threads, char const* per) {
  return std::to_string(threads) + (threads == 1 ? " thread per " : " threads per ") + per;
}

// Worker threads on GPUs run worker d on GPU d mod gpus (TrainingSession::prepare): with one GPU
// every link is a copy within it; with more, workers 0 and 1 are on two GPUs, and a peer copy (the
// slower kind, where some workers share a GPU) prices every link.
Result<exec::MeasuredLink> measure_gpu_workers_link(std::string const& backend, int devices,
                                                    BackendSettings const& settings) {
  std::string why;
  int const gpus = gpu_count(&why);
  if (gpus == 0) return unsupported(why);
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> from, make_backend(backend, 0, settings));
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> to,
                   make_backend(backend, std::min(devices, gpus) > 1 ? 1 : 0, settings));
  auto link = exec::measure_device_link(*from, *to);
  if (!link.is_ok()) return link.status().with_context("measuring the link between two GPU workers");
  return link;
}

Result<partition::Plan> make_plan(exec::TrainConfig const& config, ModelFile const& model,
                                  std::shared_ptr<graph::OpGraph const> const& graph,
                                  TrainingPlanContext const& context, std::string& cost_name) {
  if (context.plan) {
    cost_name = "the given plan's";
    return *context.plan;
  }
  if (!config.pipeline.plan.empty()) {
    cost_name = "the plan's";
    return partition::read_plan_file(config.pipeline.plan);
  }
  ProblemSpec spec;
  spec.graph = graph;
  spec.devices = context.devices;
  spec.memory = config.pipeline.memory;
  spec.batch = config.batch;
  spec.micro_batch = config.micro_batch_size();
  spec.no_replication = !config.pipeline.replication;
  spec.optimizer_bytes_per_weight_byte = exec::state_bytes_per_weight_byte(config.optimizer);
  cost_name = config.pipeline.cost;
  if (config.pipeline.cost == "profile") {
    int const threads = worker_threads(config, context.devices, context.mpi);
    int const concurrency =
        calibration_concurrency(context.backend, context.devices, context.mpi, threads, exec::available_cores(),
                                context.backend == "cpu" ? 0 : gpu_count());
    Measured m;
    if (context.mpi) {
      ASSIGN_OR_RETURN(
          m, measure_on_rank0(config, model, *graph, threads, concurrency, context.backend, context.timeout_s * 10));
      cost_name = "measured on rank 0, " + threads_text(threads, "rank");
    } else {
      ASSIGN_OR_RETURN(m, measure(config, model, *graph, threads, concurrency, context.backend));
      // Worker threads exchange tensors through memory (CPU workers) or their GPUs' copies: price
      // links at what the transport delivers here.
      char bw[64];
      if (context.backend == "cpu") {
        spec.bandwidth_bytes_per_s = exec::measure_in_process_bandwidth();
        std::snprintf(bw, sizeof bw, "%.3fGB/s", spec.bandwidth_bytes_per_s / 1e9);
      } else if (context.devices > 1) {
        ASSIGN_OR_RETURN(exec::MeasuredLink const link,
                         measure_gpu_workers_link(context.backend, context.devices, backend_settings(config)));
        spec.bandwidth_bytes_per_s = link.bandwidth_bytes_per_s;
        spec.link_latency_s = link.latency_s;
        std::snprintf(bw, sizeof bw, "%.3fGB/s + %.1fus", link.bandwidth_bytes_per_s / 1e9, link.latency_s * 1e6);
      } else {
        std::snprintf(bw, sizeof bw, "none (one device)");
      }
      cost_name = "measured, " + threads_text(threads, "worker") + ", links " + bw;
    }
    if (context.backend != "cpu" && concurrency > 1)
      cost_name += ", " + std::to_string(concurrency) + " workers sharing a GPU calibrated together";
    spec.measured = std::move(m.profile);
    spec.update_seconds_per_weight_byte = m.update_seconds_per_weight_byte;
  } else {
    spec.cost = config.pipeline.cost;
  }
  ASSIGN_OR_RETURN(partition::Problem problem, build_problem(spec));
  return partition::plan_with(config.pipeline.planner, problem, partition::PlannerOptions{});
}

}  // namespace

Result<TrainingPlan> plan_training(exec::TrainConfig const& config, ModelFile const& model,
                                   std::shared_ptr<graph::OpGraph const> const& graph,
                                   TrainingPlanContext const& context) {
  TrainingPlan out;
  ASSIGN_OR_RETURN(out.plan, make_plan(config, model, graph, context, out.cost_name));
  if (out.plan.num_devices != context.devices)
    return invalid_argument("the plan is for " + std::to_string(out.plan.num_devices) + " devices, not " +
                            std::to_string(context.devices) + (context.mpi ? " ranks" : "") + ": use --devices " +
                            std::to_string(out.plan.num_devices) + " or replan");
  if (!config.pipeline.schedule.empty()) {
    ASSIGN_OR_RETURN(out.schedule, schedule::read_schedule_file(config.pipeline.schedule));
  } else {
    ASSIGN_OR_RETURN(schedule::Policy policy, schedule::parse_policy(config.pipeline.policy));
    schedule::BuildOptions options;
    options.micro_batches = static_cast<int>(config.micro_batches);
    options.memory_limit_bytes = out.plan.device_memory_bytes;
    options.ordered_transport = context.ordered_transport;
    ASSIGN_OR_RETURN(out.schedule, schedule::build_schedule(out.plan, policy, options));
  }
  auto sim = schedule::simulate(out.plan, out.schedule);
  if (!sim.is_ok()) return sim.status().with_context("the schedule does not fit the plan");
  out.simulation = std::move(sim).value();
  return out;
}

Result<partition::PlannerOptions> planner_options(SearchSpec const& search,
                                                  std::function<void(std::string const&)> progress) {
  if (search.rank != "simulation" && search.rank != "formula")
    return invalid_argument("rank '" + search.rank + "' is not 'simulation' or 'formula'");
  if (search.chain_objective != "step" && search.chain_objective != "bottleneck")
    return invalid_argument("chain objective '" + search.chain_objective + "' is not 'step' or 'bottleneck'");
  partition::PlannerOptions options;
  if (search.gpp_max_nodes < 0)
    return invalid_argument("gpp max nodes must be 0 (every node) or positive, got " +
                            std::to_string(search.gpp_max_nodes));
  options.max_downsets = search.max_downsets;
  options.gpp_max_nodes = search.gpp_max_nodes;
  options.time_limit_s = search.time_limit_s;
  options.chain_objective = search.chain_objective == "bottleneck" ? partition::ChainObjective::kBottleneck
                                                                   : partition::ChainObjective::kStepTime;
  if (search.rank == "simulation") options.evaluate = schedule::simulation_evaluator();
  if (progress) {
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    options.progress = [last, progress = std::move(progress)](std::string const& line) {
      auto const now = std::chrono::steady_clock::now();
      if (now - *last < std::chrono::milliseconds(500)) return;
      *last = now;
      progress(line);
    };
  }
  return options;
}

std::vector<PlannerResult> compare_planners(partition::Problem const& problem, partition::PlannerOptions const& options,
                                            bool simulated, std::function<void(std::string const&)> const& on_planner) {
  std::vector<PlannerResult> out;
  for (char const* name : kPlanners) {
    if (on_planner) on_planner(name);
    PlannerResult r{name, std::nullopt, ""};
    auto plan = partition::plan_with(name, problem, options);
    if (plan)
      r.plan = std::move(plan).value();
    else
      r.error = plan.status().message();
    out.push_back(std::move(r));
  }
  for (auto& r : out) {
    if (!simulated || !r.plan || r.planner == "gpp") continue;
    auto rate = schedule::simulated_samples_per_s(*r.plan);
    if (!rate.is_ok()) continue;  // no schedule fits: keep the formula, as the planner reported it
    r.plan->samples_per_s = *rate;
    if (*rate > 0) r.plan->step_time_s = static_cast<double>(r.plan->batch) / *rate;
  }
  return out;
}

Result<graph::MeasuredProfile> profile_model(graph::OpGraph const& graph, ProfileRequest const& request) {
  RETURN_IF_ERROR(check_backend_name(request.backend));
  if (request.batch_sizes.empty()) return invalid_argument("no micro-batch sizes to profile (e.g. 1,2,4,8)");
  for (int64_t n : request.batch_sizes)
    if (n < 1) return invalid_argument("micro-batch size " + std::to_string(n) + " is not positive");
  if (request.repeats < 1) return invalid_argument("repeats must be >= 1");
  if (request.threads < 0) return invalid_argument("threads must be >= 1 (or 0 for every core)");
  std::vector<int64_t> sizes = request.batch_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  exec::ScopedThreadBudget scoped(request.threads > 0 ? request.threads : exec::thread_budget());
  RETURN_IF_ERROR(check_graph_supported(request.backend, graph));
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> backend,
                   make_backend(request.backend, 0, BackendSettings{request.tf32}));
  exec::ProfileOptions options;
  options.samples = sizes;
  options.repeats = request.repeats;
  options.model_name = graph.name();
  options.on_size = request.on_size;
  int const budget = exec::thread_budget();
  options.threads = budget;
  // By default a GPU runs one worker: one executor at a time on it (--concurrent N: N workers
  // sharing it, each executor on a stream of its own).
  options.calibrate_concurrency = request.concurrent > 0      ? request.concurrent
                                  : request.backend == "cuda" ? 1
                                                              : std::max(1, exec::available_cores() / budget);
  if (request.backend != "cpu") {
    BackendSettings const settings{request.tf32};
    std::string const name = request.backend;
    options.calibration_backend = [name, settings] { return make_backend(name, 0, settings); };
  }
  options.thread_setup = [budget] { exec::set_thread_budget(budget); };
  return exec::profile_graph(graph, *backend, options);
}

}  // namespace gp::session
