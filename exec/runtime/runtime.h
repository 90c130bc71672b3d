// The pipeline runtime: trains a partitioned model on many workers, one per device, each running
// its instruction list from the schedule (exec/runtime/worker.h). Two ways to run:
//   - threads: every device of the plan is a thread of this process, over the in-process
//     communicator; each worker gets its own thread budget (oneDNN/OpenMP teams) and, when the
//     cores allow, its own cores;
//   - ranks: this process is one device (an MPI rank) over a given communicator.
// Synchronous semantics: a step over the plan's micro-batches gives the update one device makes
// on the whole batch (tests/exec/test_runtime.cc). Every wait has a deadline; the first error stops
// every worker and is reported once, with the device, schedule line and instruction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "exec/checkpoint.h"
#include "exec/comm/communicator.h"
#include "exec/runtime/routing.h"
#include "exec/runtime/worker.h"
#include "exec/train_config.h"
#include "partition/plan.h"
#include "schedule/instruction.h"
#include "schedule/timeline.h"

namespace gp::exec {

struct RuntimeOptions {
  WorkerOptions worker;
  // The backend of each device's worker (e.g. CudaBackend::create on GPU d); required.
  std::function<Result<std::unique_ptr<Backend>>(int device)> make_backend;
  int threads_per_worker = 0;  // oneDNN/OpenMP threads per worker; 0: cores / workers in this process
  bool pin_cores = true;       // threads mode: workers on disjoint cores when they fit
};

struct DeviceMeasurement {
  int device = 0;
  double busy_fraction = 0;          // compute time / wall time of the measured steps
  int64_t peak_bytes = 0;            // measured: weights, gradients, optimizer state, activations
  int64_t predicted_peak_bytes = 0;  // the schedule's memory accounting
};

class Runtime {
 public:
  // Checks plan, schedule and config against each other and the model before anything runs.
  static Result<std::unique_ptr<Runtime>> create_threads(TrainConfig const& config, graph::OpGraph const& graph,
                                                         partition::Plan const& plan,
                                                         schedule::Schedule const& schedule,
                                                         RuntimeOptions const& options);
  static Result<std::unique_ptr<Runtime>> create_rank(TrainConfig const& config, graph::OpGraph const& graph,
                                                      partition::Plan const& plan, schedule::Schedule const& schedule,
                                                      Communicator& comm, RuntimeOptions const& options);
  ~Runtime();

  // Runs `steps` steps (config.steps - done when < 0), printing a progress line every
  // log_interval steps to `progress` (device 0 only; may be null). The first error anywhere stops
  // every worker; its cause comes back once, secondary "aborted" errors dropped.
  Status run(int64_t steps, std::ostream* progress);
  // True when a worker did not stop after an error (stuck in compute): the process must exit.
  bool has_stuck_workers() const { return stuck_; }

  int64_t steps_done() const { return step_; }
  std::vector<double> const& losses() const { return losses_; }
  // Loss scaling's state, the same on every worker (null without workers).
  LossScaler const* loss_scaler() const { return workers_.empty() ? nullptr : &workers_.front()->loss_scaler(); }
  double samples_per_s() const;                         // over the steps of the last run() after the first
  std::vector<DeviceMeasurement> measurements() const;  // this process's devices
  schedule::Timeline timeline() const;                  // measured intervals of the last step, this process's devices

  // Weights and BatchNorm statistics of the whole model (replica 0 of each stage), copied into
  // the caller's allocator (they outlive the runtime). Ranks: every rank must call it; device 0
  // gets the whole map, the others their own stages.
  Result<std::map<std::string, Tensor>> trained_tensors();
  // A checkpoint in the single-device format (interchangeable with it), copied into the caller's
  // allocator. Ranks: every rank must call it; device 0 gets the whole state.
  Result<CheckpointState> checkpoint_state();
  // Every device restores its own stages (ranks: each reads the same checkpoint file).
  Status restore(CheckpointState const& state, std::string const& source);

 private:
  Runtime() = default;
  Status prepare(TrainConfig const& config, graph::OpGraph const& graph, partition::Plan const& plan,
                 schedule::Schedule const& schedule, RuntimeOptions const& options);
  Status build_worker(int device, Communicator& comm);
  Status run_threads(int64_t steps, std::ostream* progress);
  Status run_rank(int64_t steps, std::ostream* progress);
  void after_step(int64_t step, double loss, std::ostream* progress);
  Status first_cause(std::vector<Status> const& statuses) const;
  // Ranks: device 0 receives, for every stage it does not own, the tensors `names_of(s)` lists
  // from the stage's replica 0 (gather number `gather` * stages + s).
  Status gather_stages(int gather, std::map<std::string, Tensor>& out,
                       std::function<std::vector<std::pair<std::string, TensorMeta>>(int)> const& names_of);
  std::vector<std::string> moment_suffixes() const;
  std::string stall_report() const;

  TrainConfig config_;
  graph::OpGraph const* graph_ = nullptr;
  partition::Plan plan_;
  schedule::Schedule schedule_;
  RuntimeOptions options_;
  std::unique_ptr<RuntimePlan> rplan_;
  std::vector<int64_t> predicted_peak_;
  // Declared first, destroyed last: every tensor below was allocated by one of these.
  std::vector<std::unique_ptr<CountingAllocator>> memory_;  // each worker thread's host memory
  // What each worker's device holds: its host CountingAllocator on CPU, its backend's allocator on
  // a GPU (the memory limit, the measured peak).
  std::vector<Allocator*> device_memory_;
  std::unique_ptr<class InProcessHub> hub_;
  std::vector<std::unique_ptr<Communicator>> endpoints_;
  Communicator* rank_comm_ = nullptr;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double timed_s_ = 0;
  int64_t timed_steps_ = 0;
  std::vector<double> busy_start_;
  bool stuck_ = false;
  std::string stall_snapshot_;
};

// A hash of what every rank must agree on (plan, schedule, config), for the MPI start check.
uint64_t run_fingerprint(partition::Plan const& plan, schedule::Schedule const& schedule, TrainConfig const& config);

}  // namespace gp::exec
