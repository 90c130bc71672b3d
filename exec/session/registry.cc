#include "exec/session/registry.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/units.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/train_config.h"
#ifdef GP_HAVE_CUDA
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/cuda_check.h"
#endif
#ifdef GP_HAVE_MPI
#include "exec/comm/mpi_communicator.h"
#endif
#ifdef GP_HAVE_NCCL
#include "exec/comm/nccl_communicator.h"
#include "schedule/p2p_order.h"
#endif

namespace gp::session {

namespace {
[[maybe_unused]] constexpr char const* kNoCudaBuild =
    "--backend cuda: this graphpipe was built without the CUDA backend (it needs the CUDA toolkit, cuDNN and NCCL "
    "under /usr/local/cuda and scripts/setup.sh; configure with -DGP_WITH_CUDA=ON to make that an error)";
[[maybe_unused]] constexpr char const* kNoMpiBuild =
    "--launcher mpi: this graphpipe was built without MPI (apt-get install libopenmpi-dev openmpi-bin, then rebuild)";
}  // namespace

Status check_backend_name(std::string const& name) {
  if (name == "cpu" || name == "cuda") return Status::ok();
  return invalid_argument("--backend " + name + ": must be cpu or cuda");
}

Status check_graph_supported(std::string const& backend, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(check_backend_name(backend));
#ifndef GP_HAVE_CUDA
  if (backend != "cpu") return unsupported(kNoCudaBuild);
#endif
  // Every op: whether a backend runs one depends on its dtypes and attributes, not its type alone
  // (the first Mul of floats, a later one of int8). Each op type refused is named once, by its
  // first node, with how many more of that type are refused.
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, int>> refused;  // op type -> (first message, more)
  exec::CpuBackend const cpu;
  for (graph::OpId id = 0; id < static_cast<graph::OpId>(graph.num_ops()); ++id) {
    graph::Op const& op = graph.op(id);
    Status s = Status::ok();
    if (backend == "cpu") {
      s = cpu.supports(op, graph);
    } else {
#ifdef GP_HAVE_CUDA
      s = exec::CudaBackend::supports_op(op, graph);
#endif
    }
    if (s) continue;
    auto [it, first] = refused.try_emplace(op.type, s.message(), 0);
    if (first)
      order.push_back(op.type);
    else
      ++it->second.second;
  }
  if (order.empty()) return Status::ok();
  std::string missing;
  for (std::string const& type : order) {
    auto const& [message, more] = refused.at(type);
    missing += (missing.empty() ? "" : "; ") + message;
    if (more > 0) missing += " (and " + std::to_string(more) + " more " + type + " node" + (more > 1 ? "s" : "") + ")";
  }
  return unsupported(graph.name() + " cannot run on the " + backend + " backend: " + missing +
                     (backend == "cuda" ? " (train it with --backend cpu)" : ""));
}

int gpu_count(std::string* why) {
#ifdef GP_HAVE_CUDA
  Status const s = exec::cuda::device_available();
  if (!s) {
    if (why) *why = s.message();
    return 0;
  }
  return exec::cuda::device_count();
#else
  if (why) *why = kNoCudaBuild;
  return 0;
#endif
}

Result<std::vector<int64_t>> gpu_memory_bytes() {
  std::vector<int64_t> out;
#ifdef GP_HAVE_CUDA
  int const n = gpu_count();
  for (int g = 0; g < n; ++g) {
    ASSIGN_OR_RETURN(int64_t bytes, exec::cuda::device_memory_bytes(g));
    out.push_back(bytes);
  }
#endif
  return out;
}

Status check_device_memory(std::string const& backend, std::vector<int64_t> const& gpus, int64_t need_bytes,
                           partition::Plan const* plan, int64_t limit_bytes) {
  if (backend == "cpu") return Status::ok();
  if (gpus.empty()) return unsupported("no GPU to check the run's memory against");
  if (!plan) {
    if (need_bytes > gpus[0])
      return infeasible("training on GPU 0 needs about " + format_bytes(need_bytes) +
                        " (weights, gradients, optimizer state and "
                        "one micro-batch's activations) but it has " +
                        format_bytes(gpus[0]) +
                        ": lower batch or raise micro_batches, or train a pipeline over more GPUs (--devices N)");
    return Status::ok();
  }
  int64_t const smallest = *std::min_element(gpus.begin(), gpus.end());
  if (limit_bytes > smallest)
    return infeasible("pipeline.memory " + format_bytes(limit_bytes) + " is more than a GPU here has (" +
                      format_bytes(smallest) +
                      "): the planner would fit stages into memory the device does not have; set pipeline.memory to "
                      "at most " +
                      format_bytes(smallest));
  for (auto const& stage : plan->stages)
    for (int d : stage.devices) {
      int const g = d % static_cast<int>(gpus.size());
      if (stage.peak_memory_bytes > gpus[g])
        return infeasible("stage " + std::to_string(stage.id) + " needs about " +
                          format_bytes(stage.peak_memory_bytes) + " on device " + std::to_string(d) + " but GPU " +
                          std::to_string(g) + " has " + format_bytes(gpus[g]) + ": plan with pipeline.memory at most " +
                          format_bytes(gpus[g]) + " or over more devices");
    }
  return Status::ok();
}

std::vector<std::string> cpu_op_types() { return exec::CpuBackend::op_types(); }

std::optional<std::vector<std::string>> cuda_op_types() {
#ifdef GP_HAVE_CUDA
  return exec::CudaBackend::op_types();
#else
  return std::nullopt;
#endif
}

BackendSettings backend_settings(exec::TrainConfig const& config) {
  return BackendSettings{config.tf32, config.deterministic};
}

Result<std::unique_ptr<exec::Backend>> make_backend(std::string const& name, int index,
                                                    BackendSettings const& settings) {
  RETURN_IF_ERROR(check_backend_name(name));
  if (name == "cpu") return std::unique_ptr<exec::Backend>(std::make_unique<exec::CpuBackend>());
#ifdef GP_HAVE_CUDA
  exec::CudaBackendOptions options;
  options.tf32_matmul = settings.tf32_matmul;
  options.deterministic = settings.deterministic;
  ASSIGN_OR_RETURN(auto backend, exec::CudaBackend::create(index, options));
  return std::unique_ptr<exec::Backend>(std::move(backend));
#else
  (void)index, (void)settings;
  return unsupported(kNoCudaBuild);
#endif
}

Result<RankInfo> start_mpi() {
#ifdef GP_HAVE_MPI
  static std::unique_ptr<exec::MpiSession> mpi;  // finalized at exit, after every communicator
  if (!mpi) {
    ASSIGN_OR_RETURN(LaunchEnvironment const env,
                     launch_environment([](char const* name) -> char const* { return std::getenv(name); }));
    ASSIGN_OR_RETURN(mpi, exec::MpiSession::start(nullptr, nullptr));
    RETURN_IF_ERROR(check_launch(env, RankInfo{mpi->rank(), mpi->size()}));
  }
  return RankInfo{mpi->rank(), mpi->size()};
#else
  return unsupported(kNoMpiBuild);
#endif
}

namespace {

// One launcher's variables: absent (nullopt) when its marker is not set.
Result<std::optional<LaunchEnvironment>> read_launcher(Getenv getenv_fn, char const* name, char const* marker,
                                                       char const* rank, char const* world, char const* local) {
  if (!getenv_fn(marker)) return std::optional<LaunchEnvironment>();
  LaunchEnvironment env;
  env.launcher = name;
  auto number = [&](char const* var, int& out, bool required) -> Status {
    char const* text = getenv_fn(var);
    if (!text) {
      if (!required) return Status::ok();
      return invalid_argument(std::string(name) + " started this process (" + marker + " is set) but " + var +
                              " is missing: start graphpipe directly under " + name +
                              ", not through a wrapper "
                              "that clears its variables");
    }
    char* end = nullptr;
    long const v = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < 0)
      return invalid_argument(std::string(var) + "='" + text + "' (set by " + name + ") is not a rank number");
    out = static_cast<int>(v);
    return Status::ok();
  };
  RETURN_IF_ERROR(number(rank, env.rank, true));
  RETURN_IF_ERROR(number(world, env.world, true));
  RETURN_IF_ERROR(number(local, env.local_rank, false));
  if (env.world < 1 || env.rank >= env.world)
    return invalid_argument(std::string(rank) + "=" + std::to_string(env.rank) + " is not below " + world + "=" +
                            std::to_string(env.world) + " (set by " + name + ")");
  return std::optional<LaunchEnvironment>(env);
}

}  // namespace

Result<LaunchEnvironment> launch_environment(Getenv getenv_fn) {
  std::vector<LaunchEnvironment> found;
  for (auto const& [name, marker, rank, world, local] :
       {std::array<char const*, 5>{"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK"},
        std::array<char const*, 5>{"srun", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
        std::array<char const*, 5>{"torchrun", "WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK"}}) {
    ASSIGN_OR_RETURN(auto env, read_launcher(getenv_fn, name, marker, rank, world, local));
    if (env) found.push_back(*env);
  }
  if (found.empty()) return LaunchEnvironment{};
  // mpirun inside a SLURM allocation is how jobs run there: its own variables win over the
  // allocation's. torchrun's are checked against whichever started the process.
  if (found.size() > 1 && found[0].launcher == "mpirun" && found[1].launcher == "srun") found.erase(found.begin() + 1);
  for (auto const& other : found) {
    if (other.rank != found[0].rank || other.world != found[0].world)
      return invalid_argument("started by both " + found[0].launcher + " (rank " + std::to_string(found[0].rank) +
                              " of " + std::to_string(found[0].world) + ") and " + other.launcher + " (rank " +
                              std::to_string(other.rank) + " of " + std::to_string(other.world) +
                              "): launch graphpipe with one of them (mpirun -np N graphpipe train ... --launcher "
                              "mpi, or srun --mpi=pmix -n N ...), not one inside the other");
  }
  return found[0];
}

Status check_launch(LaunchEnvironment const& env, RankInfo const& mpi) {
  if (env.launcher.empty() || (env.rank == mpi.rank && env.world == mpi.ranks)) return Status::ok();
  std::string const n = std::to_string(env.world);
  std::string fix = "start the ranks with mpirun -np " + n + " graphpipe train ... --launcher mpi";
  if (env.launcher == "srun") fix += ", or srun --mpi=pmix -n " + n + " (SLURM with PMIx, so MPI sees srun's tasks)";
  if (env.launcher == "torchrun")
    fix =
        "torchrun's processes are not ranks of one MPI job, and graphpipe's ranks communicate over MPI (NCCL "
        "bootstraps over it): " +
        fix + " (or srun --mpi=pmix -n " + n + " under SLURM)";
  return invalid_argument(env.launcher + " started this process as rank " + std::to_string(env.rank) + " of " + n +
                          " but MPI sees rank " + std::to_string(mpi.rank) + " of " + std::to_string(mpi.ranks) + ": " +
                          fix);
}

Result<std::string> broadcast_from_rank0(std::string const& bytes, double timeout_s) {
#ifdef GP_HAVE_MPI
  return exec::broadcast_from_rank0(bytes, timeout_s);
#else
  (void)bytes, (void)timeout_s;
  return unsupported(kNoMpiBuild);
#endif
}

Result<std::vector<uint64_t>> allgather_from_ranks(uint64_t value, double timeout_s, char const* what) {
#ifdef GP_HAVE_MPI
  return exec::allgather_from_ranks(value, timeout_s, what);
#else
  (void)value, (void)timeout_s, (void)what;
  return unsupported(kNoMpiBuild);
#endif
}

namespace {

#ifdef GP_HAVE_MPI
Result<std::unique_ptr<exec::Communicator>> nccl_communicator(partition::Plan const& plan,
                                                              schedule::Schedule const& schedule,
                                                              exec::RuntimeOptions& options,
                                                              BackendSettings const& settings,
                                                              std::vector<std::vector<int>> const& tied_groups) {
#ifdef GP_HAVE_NCCL
  RETURN_IF_ERROR(schedule::check_ordered_transport(schedule).with_context("the NCCL transport (--backend cuda)"));
  double const timeout = options.worker.timeout_s;
  ASSIGN_OR_RETURN(int gpu, exec::select_local_gpu(timeout));
  exec::CudaBackendOptions backend_options;
  backend_options.tf32_matmul = settings.tf32_matmul;
  backend_options.deterministic = settings.deterministic;
  ASSIGN_OR_RETURN(std::unique_ptr<exec::CudaBackend> backend, exec::CudaBackend::create(gpu, backend_options));
  exec::NcclOptions nccl;
  for (auto const& stage : plan.stages)
    if (stage.devices.size() > 1) nccl.groups.push_back(stage.devices);
  nccl.groups.insert(nccl.groups.end(), tied_groups.begin(), tied_groups.end());
  nccl.init_timeout_s = timeout;
  nccl.compute_stream = backend->stream(exec::Backend::StreamKind::kCompute);
  nccl.memory = &backend->allocator();
  ASSIGN_OR_RETURN(std::unique_ptr<exec::Communicator> comm, exec::make_nccl_communicator(nccl));
  auto owned = std::make_shared<std::unique_ptr<exec::Backend>>(std::move(backend));
  options.make_backend = [owned](int) -> Result<std::unique_ptr<exec::Backend>> {
    if (!*owned) return internal_error("the rank's CUDA backend was handed out twice");
    return std::move(*owned);
  };
  return comm;
#else
  (void)plan, (void)schedule, (void)options, (void)settings, (void)tied_groups;
  return unsupported(
      "--launcher mpi --backend cuda: this graphpipe was built without the NCCL communicator (it needs the "
      "CUDA backend, NCCL and MPI)");
#endif
}
#endif

}  // namespace

Result<std::unique_ptr<exec::Communicator>> make_rank_communicator(
    std::string const& backend, partition::Plan const& plan, schedule::Schedule const& schedule, uint64_t fingerprint,
    exec::RuntimeOptions& options, BackendSettings const& settings, std::vector<std::vector<int>> const& tied_groups) {
#ifdef GP_HAVE_MPI
  std::unique_ptr<exec::Communicator> comm;
  if (backend == "cuda") {
    ASSIGN_OR_RETURN(comm, nccl_communicator(plan, schedule, options, settings, tied_groups));
  } else {
    ASSIGN_OR_RETURN(
        comm, exec::make_mpi_communicator({static_cast<int>(plan.stages.size()), static_cast<int>(plan.edges.size()),
                                           schedule.num_micro_batches}));
  }
  Status const same = exec::check_same_run(*comm, fingerprint, options.worker.timeout_s);
  if (!same) {
    if (same.code() != StatusCode::kAborted) comm->abort(same);
    return same;
  }
  return comm;
#else
  (void)backend, (void)plan, (void)schedule, (void)fingerprint, (void)options, (void)settings, (void)tied_groups;
  return unsupported(kNoMpiBuild);
#endif
}

}  // namespace gp::session
