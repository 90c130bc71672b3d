// The backends and transports this build has: the one place that knows which optional parts
// (CUDA, MPI, NCCL) were compiled in. Asking for a missing one is a clear error naming the fix.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/backend.h"
#include "exec/comm/communicator.h"
#include "exec/runtime/runtime.h"
#include "graph/op_graph.h"
#include "partition/plan.h"
#include "schedule/instruction.h"

namespace gp::exec {
struct TrainConfig;
}  // namespace gp::exec

namespace gp::session {

inline constexpr char const* kBackendHelp = "cpu (oneDNN, default) or cuda (NVIDIA GPUs: cuDNN, cuBLASLt, NCCL)";

// Ok for "cpu" and "cuda"; kInvalidArgument otherwise, naming both.
Status check_backend_name(std::string const& name);
// Every op of `graph` is in the backend's kernel table (the CUDA table is static: no GPU needed),
// else kUnsupported naming each op type missing and why.
Status check_graph_supported(std::string const& backend, graph::OpGraph const& graph);
// Usable GPUs here (0 without the CUDA backend or without a GPU); `why` gets the reason for 0.
int gpu_count(std::string* why = nullptr);
// The memory of each usable GPU here, in bytes (empty without the CUDA backend or a GPU).
Result<std::vector<int64_t>> gpu_memory_bytes();
// A run on `backend` against the memory its devices have, before anything is allocated (cpu:
// nothing to check; its limits are --max-memory and pipeline.memory). One device: `need_bytes`
// (weights, gradients, optimizer state, one micro-batch's activations) against GPU 0. A pipeline
// (`plan` given): pipeline.memory (`limit_bytes`, what the planner fitted every stage to) and each
// stage's predicted peak against the GPU each of its devices runs on (device d on GPU d mod the
// GPU count, as worker threads are placed). `gpus` is gpu_memory_bytes()'s answer.
Status check_device_memory(std::string const& backend, std::vector<int64_t> const& gpus, int64_t need_bytes,
                           partition::Plan const* plan, int64_t limit_bytes);

// The op types the CPU backend's kernel table holds (the reference every backend is compared with).
std::vector<std::string> cpu_op_types();
// The op types the CUDA backend's kernel table holds (static: no GPU needed); nullopt in a build
// without the CUDA backend.
std::optional<std::vector<std::string>> cuda_op_types();
// How a backend computes, beyond its kind: the training config's `tf32` and `deterministic`
// (exec::TrainConfig).
struct BackendSettings {
  bool tf32_matmul = false;    // cuda: TF32 tensor cores for float32 Gemm/MatMul; cpu: no TF32, ignored
  bool deterministic = false;  // cuda: cuDNN engines without atomics; cpu: deterministic anyway
};
// The settings a training config asks for.
BackendSettings backend_settings(exec::TrainConfig const& config);
// The backend of device `index` (for cuda: GPU `index`).
Result<std::unique_ptr<exec::Backend>> make_backend(std::string const& name, int index,
                                                    BackendSettings const& settings = {});

// ---- MPI ranks ----
// This process's place among the ranks mpirun started.
struct RankInfo {
  int rank = 0;
  int ranks = 1;
};
// Starts MPI once per process (finalized at exit, after every communicator), then checks it against
// the launcher's variables (launch_environment): a process that mpirun, srun or torchrun started
// as one of N must be one of N MPI ranks. kUnsupported in a build without MPI.
Result<RankInfo> start_mpi();

// Which launcher started this process, from the variables each one sets: Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), SLURM's srun (SLURM_STEP_ID with SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID) and torchrun (RANK, WORLD_SIZE, LOCAL_RANK). Two launchers that
// disagree on the rank or the world size are an error naming both and the fix.
struct LaunchEnvironment {
  std::string launcher;  // "mpirun", "srun", "torchrun", or "" (none: a single process)
  int rank = 0;
  int world = 1;
  int local_rank = 0;
};
using Getenv = char const* (*)(char const*);
Result<LaunchEnvironment> launch_environment(Getenv getenv_fn);
// Ok when MPI's `ranks` agree with what the launcher started; else why not and how to launch.
Status check_launch(LaunchEnvironment const& env, RankInfo const& mpi);
// Rank 0's `bytes` on every rank (ranks agreeing before any communicator exists).
Result<std::string> broadcast_from_rank0(std::string const& bytes, double timeout_s);
// Every rank's `value`, in rank order.
Result<std::vector<uint64_t>> allgather_from_ranks(uint64_t value, double timeout_s, char const* what);
// This rank's endpoint for `plan` and `schedule`: MPI for the cpu backend; NCCL for cuda, whose
// CUDA backend on this rank's GPU is handed to the runtime through options.make_backend (NCCL is
// ordered per device pair, so the schedule must pass check_ordered_transport). Then every rank
// checks that all of them run the same plan, schedule and config (`fingerprint`). `tied_groups`:
// the device groups of the tied weights' all-reduces (exec::RuntimePlan::tied_groups), which NCCL
// needs up front beside the replicated stages' groups.
Result<std::unique_ptr<exec::Communicator>> make_rank_communicator(
    std::string const& backend, partition::Plan const& plan, schedule::Schedule const& schedule, uint64_t fingerprint,
    exec::RuntimeOptions& options, BackendSettings const& settings = {},
    std::vector<std::vector<int>> const& tied_groups = {});

}  // namespace gp::session
