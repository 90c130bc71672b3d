#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <thread>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/backend_choice.h"
#include "cli/commands.h"
#include "cli/partition_problem.h"
#include "exec/comm/communicator.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/optimizer.h"
#include "exec/profiler.h"
#include "exec/runtime/link_probe.h"
#include "exec/runtime/runtime.h"
#include "exec/runtime/threads.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "partition/cluster.h"
#include "partition/plan.h"
#include "schedule/build.h"
#include "schedule/schedule_text.h"
#include "schedule/simulator.h"
#include "schedule/trace.h"
#ifdef GP_HAVE_MPI
#include "exec/comm/mpi_communicator.h"
#endif
#ifdef GP_HAVE_NCCL
#include "exec/comm/nccl_communicator.h"
#include "exec/cuda/cuda_backend.h"
#include "schedule/p2p_order.h"
#endif
#include "exec/data.h"
#include "exec/train_config.h"
#include "exec/trainer.h"
#include "graph/onnx_export.h"
#include "graph/onnx_import.h"
#include "models/zoo.h"

namespace gp::cli {

namespace {

struct TrainArgs {
  std::string config;
  int devices = 0;  // 0: 1, or the plan's devices, or the MPI ranks
  std::string export_onnx;
  int64_t steps = -1;
  std::string launcher = "threads";
  std::string backend = "cpu";
  std::string trace;
  std::string fault;
  double timeout_s = 0;
};

Status export_tensors(std::map<std::string, exec::Tensor> const& tensors, std::string const& model_path,
                      std::string const& out) {
  std::map<std::string, graph::TensorData> values;
  for (auto const& [name, t] : tensors) {
    graph::TensorData d;
    d.dtype = t.dtype();
    d.dims = t.shape();
    d.bytes.resize(t.nbytes());
    std::memcpy(d.bytes.data(), t.raw(), t.nbytes());
    values.emplace(name, std::move(d));
  }
  RETURN_IF_ERROR(graph::export_trained_onnx(model_path, values, out));
  spdlog::info("trained model written to {}", out);
  return Status::ok();
}

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1 << 20));
  return b;
}

// $GP_CACHE_DIR, or ~/.cache/graphpipe, created if needed.
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

// The measured profile the planner uses by default: made once per model file, thread budget,
// calibration concurrency and micro-batch size, and cached under $GP_CACHE_DIR (default ~/.cache/graphpipe).
Result<std::string> cached_profile(std::string const& model_path, graph::OpGraph const& graph, int threads,
                                   int64_t micro_batch, std::string const& backend_name) {
  ASSIGN_OR_RETURN(std::string bytes, gp::read_whole_file(model_path, "model"));
  uint64_t const h = gp::fnv1a(bytes);
  ASSIGN_OR_RETURN(std::string const cache, cache_dir());
  std::filesystem::path const dir = cache;
  char name[96];
  int const concurrency = std::max(1, exec::available_cores() / threads);  // executors calibrated at once
  bool const gpu = backend_name != "cpu";
  std::snprintf(name, sizeof name, "%016llx-%s-t%d-c%d-b%lld.profile.json", static_cast<unsigned long long>(h),
                backend_name.c_str(), gpu ? 0 : threads, gpu ? 1 : concurrency, static_cast<long long>(micro_batch));
  std::string const path = (dir / name).string();
  if (std::filesystem::exists(path)) {
    spdlog::info("cost model: measured profile {} (cached)", path);
    return path;
  }
  spdlog::info("cost model: profiling {} on {} with {} threads per worker (once; cached in {})", graph.name(),
               backend_name, threads, dir.string());
  exec::ScopedThreadBudget budget(threads);
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> backend, make_backend(backend_name, 0));
  exec::ProfileOptions options;
  options.samples.clear();
  for (int64_t s = 1; s < micro_batch; s *= 2) options.samples.push_back(s);
  options.samples.push_back(micro_batch);
  options.model_name = graph.name();
  options.threads = threads;
  // As many executors at once as workers will share this process's cores (an MPI rank: its own).
  options.calibrate_concurrency = gpu ? 1 : concurrency;  // one worker per GPU
  options.thread_setup = [threads] { exec::set_thread_budget(threads); };
  auto profile = exec::profile_graph(graph, *backend, options);
  if (!profile.is_ok()) return profile.status().with_context("profiling for the planner (use pipeline.cost: analytic)");
  RETURN_IF_ERROR(graph::write_profile_file(*profile, path));
  return path;
}

// The plan: from the config's file, or made here by the configured planner for this batch and
// micro-batch size.
Result<partition::Plan> pipeline_plan(exec::TrainConfig const& config, std::string const& model_path,
                                      graph::OpGraph const& graph, int devices, bool mpi, int rank,
                                      std::string const& backend_name, std::string& cost_name,
                                      std::string& temp_profile) {
  (void)rank;  // used under MPI only
  if (!config.pipeline.plan.empty()) {
    ASSIGN_OR_RETURN(partition::Plan plan, partition::read_plan_file(config.pipeline.plan));
    cost_name = "the plan's";
    return plan;
  }
  PartitionFlags flags;
  flags.no_replication = !config.pipeline.replication;
  cost_name = config.pipeline.cost;
  int const threads = config.pipeline.threads_per_worker > 0 ? static_cast<int>(config.pipeline.threads_per_worker)
                      : mpi                                  ? exec::rank_thread_budget()
                                                             : std::max(1, exec::available_cores() / devices);
  if (config.pipeline.cost == "profile") {
    if (mpi) {
#ifdef GP_HAVE_MPI
      // Ranks profiling apart would plan apart: rank 0 profiles (or finds its cached profile), the
      // others plan with its text, and with its measured optimizer update rate.
      std::string text;
      if (rank == 0) {
        ASSIGN_OR_RETURN(std::string path,
                         cached_profile(model_path, graph, threads, config.micro_batch_size(), backend_name));
        ASSIGN_OR_RETURN(text, gp::read_whole_file(path, "profile"));
      }
      ASSIGN_OR_RETURN(text, exec::broadcast_from_rank0(text, config.pipeline.timeout_s * 10));
      ASSIGN_OR_RETURN(std::string dir, cache_dir());
      flags.cost = dir + "/rank0-" + std::to_string(::getpid()) + ".profile.json";
      RETURN_IF_ERROR(gp::write_file_atomic(flags.cost, text));
      temp_profile = flags.cost;
      cost_name =
          "measured on rank 0, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " per rank";
#endif
    } else {
      ASSIGN_OR_RETURN(flags.cost, cached_profile(model_path, graph, threads, config.micro_batch_size(), backend_name));
      // Worker threads exchange tensors through memory: price links at what it delivers here.
      char bw[32];
      std::snprintf(bw, sizeof bw, "%.3fGB/s", exec::measure_in_process_bandwidth() / 1e9);
      flags.bandwidth = bw;
      cost_name =
          "measured, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " per worker, links " + bw;
    }
  } else {
    flags.cost = config.pipeline.cost;
  }
  flags.model = model_path;
  flags.devices = devices;
  flags.memory = config.pipeline.memory;
  flags.batch = config.batch;
  flags.micro_batch = config.micro_batch_size();
  ASSIGN_OR_RETURN(partition::Problem problem, build_problem(flags));
  // Per weight byte, besides the weight: its gradient and the optimizer's moments.
  problem.optimizer_bytes_per_weight_byte = exec::state_bytes_per_weight_byte(config.optimizer);
  RETURN_IF_ERROR(problem.finalize());
  partition::PlannerOptions options;
  ASSIGN_OR_RETURN(partition::Plan plan, partition::plan_with(config.pipeline.planner, problem, options));
  if (config.pipeline.cost == "profile") {
    // The optimizer's update, measured under a worker's thread budget, priced at STEP.
    double seconds_per_byte = 0;
    {
      exec::ScopedThreadBudget budget(threads);
      ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> backend, make_backend(backend_name, 0));
      ASSIGN_OR_RETURN(seconds_per_byte, exec::measure_update_seconds_per_byte(*backend, config.optimizer));
    }
#ifdef GP_HAVE_MPI
    if (mpi) {  // rank 0's measurement, so that every rank prices the plan alike
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", seconds_per_byte);
      ASSIGN_OR_RETURN(std::string shared, exec::broadcast_from_rank0(buf, config.pipeline.timeout_s * 10));
      seconds_per_byte = std::strtod(shared.c_str(), nullptr);
    }
#endif
    partition::price_updates(plan, seconds_per_byte);
  }
  return plan;
}

// ordered_transport: the run's transport is NCCL, so auto picks among schedules it can run.
Result<schedule::Schedule> pipeline_schedule(exec::TrainConfig const& config, partition::Plan const& plan,
                                             bool ordered_transport) {
  if (!config.pipeline.schedule.empty()) return schedule::read_schedule_file(config.pipeline.schedule);
  ASSIGN_OR_RETURN(schedule::Policy policy, schedule::parse_policy(config.pipeline.policy));
  schedule::BuildOptions options;
  options.micro_batches = static_cast<int>(config.micro_batches);
  options.memory_limit_bytes = plan.device_memory_bytes;
  options.ordered_transport = ordered_transport;
  return schedule::build_schedule(plan, policy, options);
}

Status run_pipeline(TrainArgs const& args, exec::TrainConfig const& config, std::string const& model_path,
                    graph::OpGraph const& graph, std::unique_ptr<exec::Runtime>& runtime,
                    std::unique_ptr<exec::Communicator>& comm);

#ifdef GP_HAVE_MPI
// --launcher mpi --backend cuda: this rank's GPU (its local rank), its CUDA backend (handed to the
// runtime through options.make_backend) and the NCCL communicator over it. NCCL is ordered per
// device pair, so the schedule must pass check_ordered_transport first.
Status start_nccl(partition::Plan const& plan, schedule::Schedule const& sched, exec::RuntimeOptions& options,
                  std::unique_ptr<exec::Communicator>& comm) {
#ifdef GP_HAVE_NCCL
  RETURN_IF_ERROR(schedule::check_ordered_transport(sched).with_context("the NCCL transport (--backend cuda)"));
  double const timeout = options.worker.timeout_s;
  ASSIGN_OR_RETURN(int gpu, exec::select_local_gpu(timeout));
  ASSIGN_OR_RETURN(std::unique_ptr<exec::CudaBackend> backend, exec::CudaBackend::create(gpu));
  exec::NcclOptions nccl;
  for (auto const& stage : plan.stages)
    if (stage.devices.size() > 1) nccl.groups.push_back(stage.devices);
  nccl.init_timeout_s = timeout;
  nccl.compute_stream = backend->stream(exec::Backend::StreamKind::kCompute);
  nccl.memory = &backend->allocator();
  ASSIGN_OR_RETURN(comm, exec::make_nccl_communicator(nccl));
  auto owned = std::make_shared<std::unique_ptr<exec::Backend>>(std::move(backend));
  options.make_backend = [owned](int) -> Result<std::unique_ptr<exec::Backend>> {
    if (!*owned) return internal_error("the rank's CUDA backend was handed out twice");
    return std::move(*owned);
  };
  return Status::ok();
#else
  (void)plan, (void)sched, (void)options, (void)comm;
  return unsupported(
      "--launcher mpi --backend cuda: this graphpipe was built without the NCCL communicator (it needs the "
      "CUDA backend, NCCL and MPI)");
#endif
}
#endif

// The first Ctrl-C asks every worker to stop; another one more than 2 s later ends the process at
// once (repeats within 2 s are the same signal sent to the whole process group, as timeout does).
std::atomic<int64_t> g_first_interrupt_ns{0};
void on_interrupt(int) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t const ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
  int64_t expected = 0;
  if (g_first_interrupt_ns.compare_exchange_strong(expected, ns)) {
    exec::request_stop();
  } else if (ns - expected > int64_t{2000000000}) {
    _exit(130);
  }
}

// MPI ranks: an error on this rank is sent to every other rank (they stop instead of waiting).
Status run_pipeline(TrainArgs const& args, exec::TrainConfig const& config, std::string const& model_path,
                    graph::OpGraph const& graph) {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  // The runtime outlives the communicator: an NCCL communicator may still hold tensors of the
  // runtime's CUDA allocator when it is destroyed (after an error).
  std::unique_ptr<exec::Runtime> runtime;
  std::unique_ptr<exec::Communicator> comm;
  Status s = run_pipeline(args, config, model_path, graph, runtime, comm);
  if (!s.is_ok() && comm) {
    if (s.code() != StatusCode::kAborted) comm->abort(s);
    if (comm->num_devices() > 1 && s.code() != StatusCode::kAborted)
      s = s.with_context("rank " + std::to_string(comm->device()));
  }
  return s;
}

Status run_pipeline(TrainArgs const& args, exec::TrainConfig const& config, std::string const& model_path,
                    graph::OpGraph const& graph, std::unique_ptr<exec::Runtime>& runtime,
                    std::unique_ptr<exec::Communicator>& comm) {
  bool const mpi = args.launcher == "mpi";
  exec::RuntimeOptions options;
  options.worker.timeout_s = args.timeout_s > 0 ? args.timeout_s : config.pipeline.timeout_s;
  options.threads_per_worker = static_cast<int>(config.pipeline.threads_per_worker);
  if (!args.fault.empty()) {
    ASSIGN_OR_RETURN(options.worker.fault, exec::parse_fault(args.fault));
  }
  ASSIGN_OR_RETURN(int64_t memory, partition::parse_bytes(config.pipeline.memory));
  options.worker.memory_limit_bytes = memory;

#ifdef GP_HAVE_MPI
  static std::unique_ptr<exec::MpiSession> session;  // finalized at exit, after every communicator
  if (mpi) {
    ASSIGN_OR_RETURN(session, exec::MpiSession::start(nullptr, nullptr));
  }
  int const ranks = session ? session->size() : 1;
  int const rank = session ? session->rank() : 0;
#else
  if (mpi)
    return unsupported(
        "--launcher mpi: this graphpipe was built without MPI (apt-get install libopenmpi-dev "
        "openmpi-bin, then rebuild)");
  int const ranks = 1, rank = 0;
#endif
  int devices = args.devices;
  if (mpi && devices == 0) devices = ranks;
  if (mpi && devices != ranks)
    return invalid_argument("--devices " + std::to_string(devices) + " but mpirun started " + std::to_string(ranks) +
                            " ranks: one rank per device (mpirun -np " + std::to_string(devices) + ")");
  if (devices == 0) devices = 2;
  bool const lead = rank == 0;  // the one process that reports

  std::string cost_name, temp_profile;
  auto planned = pipeline_plan(config, model_path, graph, devices, mpi, rank, args.backend, cost_name, temp_profile);
  if (!temp_profile.empty()) std::filesystem::remove(temp_profile);
  if (!planned.is_ok()) return planned.status();
  partition::Plan plan = std::move(planned).value();
  if (plan.num_devices != devices)
    return invalid_argument("the plan is for " + std::to_string(plan.num_devices) + " devices, not " +
                            std::to_string(devices) + (mpi ? " ranks" : "") + ": use --devices " +
                            std::to_string(plan.num_devices) + " or replan");
  ASSIGN_OR_RETURN(schedule::Schedule sched, pipeline_schedule(config, plan, mpi && args.backend == "cuda"));
  if (lead) {
    std::string recompute;
    for (auto const& stage : plan.stages)
      if (stage.recompute) recompute += (recompute.empty() ? "; recompute: s" : ",s") + std::to_string(stage.id);
    spdlog::info("plan: {} stages on {} devices ({}), micro-batch {} x {}; schedule: {}{}", plan.stages.size(),
                 plan.num_devices, plan.planner, plan.micro_batch, plan.num_micro_batches, sched.policy, recompute);
  }
  auto sim = schedule::simulate(plan, sched);
  if (!sim.is_ok()) return sim.status().with_context("the schedule does not fit the plan");

  if (args.backend != "cpu" && !mpi) {
    // Worker threads on the GPUs of this machine, round robin (several workers may share one).
    std::string why;
    int const gpus = gpu_count(&why);
    if (gpus == 0) return unsupported(why);
    if (lead && gpus < devices)
      spdlog::warn("{} workers share {} GPUs (worker d runs on GPU d mod {})", devices, gpus, gpus);
    std::string const backend_name = args.backend;
    options.make_backend = [backend_name, gpus](int device) { return make_backend(backend_name, device % gpus); };
  }
  if (mpi) {
#ifdef GP_HAVE_MPI
    if (args.backend == "cuda") {
      RETURN_IF_ERROR(start_nccl(plan, sched, options, comm));
    } else {
      ASSIGN_OR_RETURN(
          comm, exec::make_mpi_communicator({static_cast<int>(plan.stages.size()), static_cast<int>(plan.edges.size()),
                                             sched.num_micro_batches}));
    }
    RETURN_IF_ERROR(exec::check_same_run(*comm, exec::run_fingerprint(plan, sched, config), options.worker.timeout_s));
    ASSIGN_OR_RETURN(runtime, exec::Runtime::create_rank(config, graph, plan, sched, *comm, options));
#endif
  } else {
    ASSIGN_OR_RETURN(runtime, exec::Runtime::create_threads(config, graph, plan, sched, options));
  }
  bool const resume =
      config.checkpoint.resume && !config.checkpoint.path.empty() && std::filesystem::exists(config.checkpoint.path);
  if (comm) {
#ifdef GP_HAVE_MPI
    // Every rank reads the checkpoint itself: all of them must see it, or none.
    ASSIGN_OR_RETURN(std::vector<uint64_t> seen,
                     exec::allgather_from_ranks(resume ? 1 : 0, options.worker.timeout_s, "the checkpoint check"));
    uint64_t n = 0;
    for (uint64_t v : seen) n += v;
    if (n > 0 && n < static_cast<uint64_t>(ranks))
      return invalid_argument("checkpoint '" + config.checkpoint.path + "' exists on " + std::to_string(int(n)) +
                              " of " + std::to_string(ranks) +
                              " ranks: put it where every rank reads it (a shared folder), or remove it");
#endif
  }
  if (resume) {
    ASSIGN_OR_RETURN(exec::CheckpointState state, exec::load_checkpoint(config.checkpoint.path));
    RETURN_IF_ERROR(runtime->restore(state, config.checkpoint.path));
    if (lead) spdlog::info("resumed from {} at step {}", config.checkpoint.path, runtime->steps_done());
  }
  if (lead)
    spdlog::info("training on {} {}: {} steps, batch {} in {} micro-batches, {} lr {}, loss {}", devices,
                 mpi ? "MPI ranks" : "worker threads", config.steps, config.batch, config.micro_batches,
                 exec::optimizer_kind_name(config.optimizer.kind), config.optimizer.lr,
                 exec::loss_kind_name(config.loss));
  auto save_checkpoint = [&]() -> Status {
    ASSIGN_OR_RETURN(exec::CheckpointState state, runtime->checkpoint_state());  // collective under MPI
    if (lead) RETURN_IF_ERROR(exec::save_checkpoint(config.checkpoint.path, state));
    return Status::ok();
  };
  // Steps in chunks of checkpoint.every (a checkpoint after each), or all at once.
  int64_t const chunk =
      config.checkpoint.path.empty() || config.checkpoint.every <= 0 ? config.steps : config.checkpoint.every;
  while (runtime->steps_done() < config.steps) {
    Status s = runtime->run(std::min(chunk, config.steps - runtime->steps_done()), rank == 0 ? &std::cerr : nullptr);
    if (!s.is_ok()) {
      if (runtime->has_stuck_workers()) {
        std::cerr << "graphpipe: error: " << s.message() << '\n';
        std::_Exit(1);  // a worker is stuck in compute: its thread cannot be joined
      }
      return s;
    }
    if (!config.checkpoint.path.empty() && runtime->steps_done() < config.steps) RETURN_IF_ERROR(save_checkpoint());
  }
  auto const ms = runtime->measurements();
  if (lead)
    spdlog::info(
        "done: {} steps, final loss {:.4f}; measured {:.1f} samples/s, predicted {:.1f} (simulated "
        "schedule, {} costs)",
        runtime->steps_done(), runtime->losses().empty() ? 0.0 : runtime->losses().back(), runtime->samples_per_s(),
        sim->samples_per_s, cost_name);
  for (auto const& m : ms)
    spdlog::info("  device {}: busy {:.0f}%, peak memory {} measured, {} predicted", m.device, 100 * m.busy_fraction,
                 mib(double(m.peak_bytes)), mib(double(m.predicted_peak_bytes)));
  if (!args.trace.empty()) {
    if (mpi) {
      std::string const path = args.trace + (ranks > 1 ? ".rank" + std::to_string(rank) : "");
      RETURN_IF_ERROR(
          schedule::write_text_file(schedule::timeline_to_chrome_trace(runtime->timeline(), "measured"), path));
      if (lead) spdlog::info("measured timeline of the last step: {}.rankN (one per rank)", args.trace);
    } else {
      RETURN_IF_ERROR(
          schedule::write_text_file(schedule::timeline_to_chrome_trace(runtime->timeline(), "measured"), args.trace));
      if (lead) spdlog::info("measured timeline of the last step: {}", args.trace);
    }
  }
  if (!config.checkpoint.path.empty()) {
    RETURN_IF_ERROR(save_checkpoint());
    if (lead) spdlog::info("checkpoint: {}", config.checkpoint.path);
  }
  if (!config.export_path.empty()) {
    ASSIGN_OR_RETURN(auto tensors, runtime->trained_tensors());
    if (rank == 0) RETURN_IF_ERROR(export_tensors(tensors, model_path, config.export_path));
  }
  return Status::ok();
}

// The ONNX file the run trains: the configured path, or the zoo model written to a temporary file
// (export rewrites that file's initializers).
Result<std::string> model_file(exec::ModelConfig const& m, uint64_t seed, std::string& temp) {
  if (!m.path.empty()) return m.path;
  ASSIGN_OR_RETURN(models::Size size, models::parse_size(m.size));
  RETURN_IF_ERROR(models::find_model(m.zoo).status());
  temp = (std::filesystem::temp_directory_path() /
          ("graphpipe_train_" + m.zoo + "_" + std::to_string(::getpid()) + ".onnx"))
             .string();
  models::ExportOptions options;
  options.build.seed = seed;
  RETURN_IF_ERROR(models::export_model(m.zoo, size, temp, options));
  return temp;
}

Status run_train(TrainArgs const& args) {
  ASSIGN_OR_RETURN(exec::TrainConfig config, exec::load_train_config(args.config));
  RETURN_IF_ERROR(check_backend_name(args.backend));
  if (args.devices < 0) return invalid_argument("--devices must be >= 1");
  if (args.launcher != "threads" && args.launcher != "mpi")
    return invalid_argument("--launcher " + args.launcher + ": must be threads or mpi");
  bool const pipeline = args.devices > 1 || args.launcher == "mpi" || !config.pipeline.plan.empty();
  if (args.steps >= 0) config.steps = args.steps;
  if (!args.export_onnx.empty()) config.export_path = args.export_onnx;

  std::string temp;
  auto path = model_file(config.model, config.seed, temp);
  struct Cleanup {
    std::string& path;
    ~Cleanup() {
      if (!path.empty()) std::filesystem::remove(path);
    }
  } cleanup{temp};
  if (!path.is_ok()) return path.status();
  ASSIGN_OR_RETURN(graph::ImportOptions import, import_options());
  ASSIGN_OR_RETURN(graph::OpGraph graph, graph::load_onnx(*path, import));
  if (import.max_memory_bytes > 0) {
    // Weights, gradients, optimizer state and one micro-batch's activations: what one device holding
    // the whole model needs. A pipeline splits it, so there the schedule's per-device limit decides.
    double const weights = static_cast<double>(graph.param_bytes());
    double const need = weights * (2 + exec::state_bytes_per_weight_byte(config.optimizer)) +
                        static_cast<double>(graph.activation_bytes_per_sample()) * config.micro_batch_size();
    if (!pipeline && need > static_cast<double>(import.max_memory_bytes))
      return infeasible("training " + *path + " at micro-batch " + std::to_string(config.micro_batch_size()) +
                        " needs about " + format_bytes(static_cast<int64_t>(need)) +
                        ", more than the memory limit of " + format_bytes(import.max_memory_bytes) +
                        " (--max-memory, by default the machine's available memory): lower batch or micro_batches, "
                        "or train a pipeline over more devices");
  }
  if (args.backend != "cpu") {
    RETURN_IF_ERROR(check_graph_supported(args.backend, graph));
    std::string why;
    if (gpu_count(&why) == 0) return unsupported(why);  // before any profiling or planning
  }
  if (pipeline) return run_pipeline(args, config, *path, graph);

  ASSIGN_OR_RETURN(std::unique_ptr<exec::Backend> owned_backend, make_backend(args.backend, 0));
  exec::Backend& backend = *owned_backend;
  ASSIGN_OR_RETURN(auto data, exec::make_data_source(config.data, graph, config.loss, config.seed));
  std::string const data_desc = data->describe();
  ASSIGN_OR_RETURN(auto trainer, exec::Trainer::create(config, graph, backend, std::move(data)));
  if (config.checkpoint.resume && !config.checkpoint.path.empty() && std::filesystem::exists(config.checkpoint.path)) {
    RETURN_IF_ERROR(trainer->load_checkpoint(config.checkpoint.path));
    spdlog::info("resumed from {} at step {}", config.checkpoint.path, trainer->steps_done());
  }
  spdlog::info("model {}: {}",
               config.model.path.empty() ? config.model.zoo + " (" + config.model.size + ")" : config.model.path,
               exec::describe(trainer->executor().plan(), graph));
  spdlog::info("training on {}: {} steps, batch {} in {} micro-batches, {} lr {}, loss {}, data {}", backend.name(),
               config.steps, config.batch, config.micro_batches, exec::optimizer_kind_name(config.optimizer.kind),
               config.optimizer.lr, exec::loss_kind_name(config.loss), data_desc);
  RETURN_IF_ERROR(trainer->run(&std::cerr));
  spdlog::info("done: {} steps, final loss {:.4f}, peak saved activations {:.2f} MiB per step", trainer->steps_done(),
               trainer->last_loss(), static_cast<double>(trainer->executor().peak_saved_bytes()) / (1 << 20));
  if (!config.checkpoint.path.empty()) spdlog::info("checkpoint: {}", config.checkpoint.path);
  if (!config.export_path.empty())
    RETURN_IF_ERROR(export_tensors(trainer->trained_tensors(), *path, config.export_path));
  return Status::ok();
}

}  // namespace

void add_train_command(CLI::App& root, CommandList& commands) {
  auto args = std::make_shared<TrainArgs>();
  auto* app = root.add_subcommand("train", "Train a model from a YAML config: one device, or a pipeline of N workers");
  app->add_option("--config", args->config, "Training config (YAML)")->required()->check(CLI::ExistingFile);
  app->add_option("--devices", args->devices,
                  "Devices (pipeline workers): 1 trains on one device; N > 1 partitions, schedules and trains on N "
                  "worker threads (default: 1, or the MPI ranks)");
  app->add_option("--launcher", args->launcher,
                  "threads (workers in this process) or mpi (one rank per device, "
                  "under mpirun)")
      ->default_val("threads");
  app->add_option("--backend", args->backend, kBackendHelp)->default_val("cpu");
  app->add_option("--trace", args->trace, "Write the measured timeline of the last step (Chrome trace JSON)");
  app->add_option("--timeout", args->timeout_s,
                  "Seconds any worker waits before the run fails (overrides "
                  "pipeline.timeout)");
  app->add_option("--inject-fault", args->fault,
                  "Testing: DEVICE:LINE:KIND (throw|nan|header|exit|stall) at a "
                  "schedule line")
      ->group("");
  app->add_option("--export-onnx", args->export_onnx, "Write the trained model here (overrides 'export')");
  app->add_option("--steps", args->steps, "Number of steps (overrides 'steps')");
  app->footer(R"(Example:
  graphpipe train --config examples/train_mlp.yaml --export-onnx mlp.trained.onnx
  graphpipe train --config examples/train_mmt_pipeline.yaml --devices 2 --trace measured.json
  mpirun -np 2 graphpipe train --config examples/train_mmt_pipeline.yaml --launcher mpi
  graphpipe train --config examples/train_mmt_pipeline.yaml --devices 2 --backend cuda
  mpirun -np 8 graphpipe train --config train.yaml --launcher mpi --backend cuda   # one rank per GPU

Config keys: model (path or {zoo, size}), loss (cross_entropy|mse), optimizer (sgd|adam|adamw), lr,
momentum, weight_decay, beta1, beta2, eps, batch, micro_batches, steps, data (synthetic or
{kind: npy, inputs, labels} or {kind: synthetic, samples}), seed, log_interval,
checkpoint {path, every, resume}, export, pipeline {planner, plan, policy, schedule, memory, cost
(profile|analytic|profile.json), replication, timeout, threads_per_worker} (see
examples/train_mmt_pipeline.yaml).)");
  commands.push_back({app, [args] { return run_train(*args); }});
}

}  // namespace gp::cli
