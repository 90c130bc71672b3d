// One training run for 1 or N devices: the model read once, checked against the backend, planned
// and scheduled in memory (exec/session/planning.h), trained by the pipeline Runtime (N devices:
// worker threads, or one MPI rank per device) or by the single-device Trainer, with one loop for
// checkpoints, one restore and one export path. The CLI's `train`, `compare --train` and the
// benches run it; none of them assembles the flow itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/runtime/runtime.h"
#include "exec/session/model_file.h"
#include "exec/session/planning.h"
#include "exec/tensor.h"
#include "exec/trainer.h"
#include "exec/train_config.h"
#include "graph/onnx_import.h"
#include "graph/op_graph.h"
#include "graph/precision.h"
#include "schedule/timeline.h"

namespace gp::session {

struct TrainOptions {
  int devices = 0;                   // 0: 1, or the given plan's devices, or the MPI ranks
  std::string launcher = "threads";  // threads | mpi
  std::string backend = "cpu";       // cpu | cuda
  double timeout_s = 0;              // overrides config.pipeline.timeout_s when > 0
  std::string fault;                 // testing: DEVICE:LINE:KIND (exec/runtime/worker.h)
  graph::ImportOptions import;       // how the model is loaded (its memory limit)
  // A plan made elsewhere (graphpipe compare --train): trained as given, its devices the run's.
  std::optional<partition::Plan> plan;
  // A model already read and loaded with its weights (config.model is then not read again).
  std::optional<ModelFile> model;
  std::shared_ptr<graph::OpGraph const> graph;
  std::ostream* progress = nullptr;  // progress lines (the reporting process only); null: none
};

class TrainingSession {
 public:
  // Reads and checks the model, plans and builds the workers; resumes from the configured
  // checkpoint when it exists and resume is on. Nothing has trained yet.
  static Result<std::unique_ptr<TrainingSession>> create(exec::TrainConfig config, TrainOptions options);
  ~TrainingSession();

  // Trains until config.steps are done (or `steps` more, when >= 0), saving a checkpoint every
  // checkpoint.every steps and where it stops (without `checkpoint_at_stop`: only at multiples of
  // checkpoint.every and after the last step, for a caller that trains in chunks). Under MPI an
  // error here is sent to every rank.
  Status run(int64_t steps = -1, bool checkpoint_at_stop = true);
  // Saves a checkpoint now (nothing without checkpoint.path).
  Status checkpoint();
  // Writes the trained model to `path`; under MPI every rank must call it. `weights` (default:
  // config.export_weights) bf16 or fp16 stores the low ops' weights in that format
  // (low_precision_weights), fp32 every weight as its float32 master.
  Status export_onnx(std::string const& path, std::optional<graph::Precision> weights = std::nullopt);
  // Writes the measured timeline of the last step as a Chrome trace (pipelines; ranks: one file
  // each, "<path>.rankN").
  Status write_trace(std::string const& path);

  exec::TrainConfig const& config() const { return config_; }
  ModelFile const& model() const { return model_; }
  graph::OpGraph const& graph() const { return *graph_; }
  bool pipeline() const { return static_cast<bool>(runtime_); }
  int devices() const { return devices_; }
  bool is_lead() const { return rank_ == 0; }  // the process that reports
  // The plan, schedule and simulation of a pipeline (null for one device).
  TrainingPlan const* plan() const { return planned_ ? &*planned_ : nullptr; }
  std::string describe() const;  // one line: what trains where

  int64_t steps_done() const;
  std::vector<double> const& losses() const;
  double samples_per_s() const;  // over the steps of the last run() after the first
  // This process's devices: busy fraction and peak memory (one device: its peak host memory).
  std::vector<exec::DeviceMeasurement> measurements() const;
  int64_t peak_saved_bytes() const;  // one device: the saved activations' peak
  // One device: where the host's time went, summed over the steps (exec::Trainer::PhaseTimes).
  std::optional<exec::Trainer::PhaseTimes> phase_times() const;
  // One device with cuda_graphs: what was captured and replayed, or why capturing stopped; else "".
  std::string cuda_graphs_summary() const;
  // True when a worker did not stop after an error (stuck in compute): the process must exit.
  bool has_stuck_workers() const { return runtime_ && runtime_->has_stuck_workers(); }
  // Weights and BatchNorm statistics by initializer name (under MPI every rank must call it).
  Result<std::map<std::string, exec::Tensor>> trained_tensors();

 private:
  TrainingSession() = default;
  Status start(TrainOptions const& options);
  Status start_pipeline(TrainOptions const& options);
  Status start_single(TrainOptions const& options);
  Status resume();
  Status run_steps(int64_t steps);
  Status save_checkpoint();
  Status on_rank_error(Status s);

  exec::TrainConfig config_;
  ModelFile model_;
  std::shared_ptr<graph::OpGraph const> graph_;
  std::string backend_name_ = "cpu";
  bool mpi_ = false;
  int rank_ = 0, ranks_ = 1, devices_ = 1;
  std::ostream* progress_ = nullptr;
  std::optional<TrainingPlan> planned_;
  // One device: the host memory it allocates (its measured peak), its backend and the Trainer
  // (declared in this order: the trainer goes first).
  std::unique_ptr<exec::CountingAllocator> memory_;
  std::unique_ptr<exec::Backend> backend_;
  std::unique_ptr<exec::Trainer> trainer_;
  // Pipelines: the runtime outlives the communicator, which may hold tensors of the runtime's CUDA
  // allocator when it is destroyed after an error.
  std::unique_ptr<exec::Runtime> runtime_;
  std::unique_ptr<exec::Communicator> comm_;
};

}  // namespace gp::session
