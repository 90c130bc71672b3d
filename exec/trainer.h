// The single-device training loop: per step, the batch is split into micro-batches; each runs
// forward, the loss (attached to the model's first output) and backward, weight gradients
// accumulate, then the optimizer updates once. With the loss scaled by 1/batch this is exactly one
// big-batch step (synchronous semantics, the property the pipeline runtime must keep).
//
// CUDA graphs (TrainConfig::cuda_graphs, a backend that captures work): from the second step a
// trainer runs on, each micro-batch's forward, loss and backward is captured the first time it
// comes (per micro-batch index and input buffer, at most 2 x micro_batches captures) and replayed
// as one launch from then on; the optimizer update stays outside (one launch already). What a
// replay repeats must not change between steps: the inputs and labels are copied into the same
// two buffers, the losses into the same slots, and what does change is written every step into
// device memory the captured kernels read: each micro-batch's seed for Dropout and the random ops
// (OpCall::rng_seed_slot), and a dynamic loss scale (Backend::scale_by). A micro-batch the backend cannot capture (an
// op that waits for the device or reads host memory; Backend::end_capture says which) runs as it always has, and so
// does the rest of the run; cuda_graphs_summary() says why.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/checkpoint.h"
#include "exec/data.h"
#include "exec/loss_scale.h"
#include "exec/optimizer.h"
#include "exec/seeds.h"
#include "exec/stage_executor.h"
#include "exec/stage_runner.h"
#include "exec/train_config.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

class Trainer {
 public:
  // The graph and backend must outlive the trainer.
  static Result<std::unique_ptr<Trainer>> create(TrainConfig const& config, graph::OpGraph const& graph,
                                                 Backend& backend, std::unique_ptr<DataSource> data);
  ~Trainer();
  Trainer(Trainer const&) = delete;
  Trainer& operator=(Trainer const&) = delete;

  // One optimizer step over config.batch samples in config.micro_batches micro-batches. A NaN/Inf
  // loss stops before the update with an error naming the step and the first non-finite tensor
  // (exec/non_finite.h).
  Status step();
  // Steps until config.steps are done (or `max_steps` more, when >= 0), printing a progress line
  // every log_interval steps to `progress` (may be null). Checkpoints are the caller's (the
  // training session writes them between runs).
  Status run(std::ostream* progress, int64_t max_steps = -1);

  int64_t steps_done() const { return step_; }
  double last_loss() const { return losses_.empty() ? 0.0 : losses_.back(); }
  double samples_per_s() const { return samples_per_s_; }  // over the steps of the last run() after the first
  std::vector<double> const& losses() const { return losses_; }
  LossScaler const& loss_scaler() const { return scaler_; }
  // Where the host's time went, summed over the steps of the last run() after its first (the first
  // builds plans and caches): reading the data and copying it to the device, the forward with the
  // loss (whose value is read back, so it waits for the device), the backward and the optimizer
  // update (on a GPU these two only enqueue work, which the device may still run when the next
  // step starts; a replayed micro-batch counts as backward). Seconds.
  struct PhaseTimes {
    double data = 0, forward_loss = 0, backward = 0, update = 0;
    int64_t steps = 0;
  };
  PhaseTimes const& phase_times() const { return phases_; }
  StageExecutor& executor() { return runner_->executor(); }
  Optimizer& optimizer() { return runner_->optimizer(); }
  TrainConfig const& config() const { return config_; }

  // Weights and BatchNorm running statistics by initializer name (what export writes).
  std::map<std::string, Tensor> trained_tensors() const;

  // Ok when a trainer can use CUDA graphs on `backend`; else why not, with the fix (--backend cuda).
  static Status check_capturable(Backend const& backend);
  // With cuda_graphs: how many micro-batch graphs were captured and how often they were replayed,
  // or why capturing stopped (training went on without graphs); empty without cuda_graphs.
  std::string cuda_graphs_summary() const;
  int64_t graph_replays() const { return graph_replays_; }
  std::size_t graphs_captured() const { return graphs_.size(); }

  CheckpointState checkpoint_state() const;
  Status save_checkpoint(std::string const& path) const;
  Status restore(CheckpointState const& state, std::string const& source);
  Status load_checkpoint(std::string const& path);

 private:
  Result<TensorMap> device_inputs(Batch const& batch);
  // On a device that overlaps copies (Backend::overlaps_copies): a micro-batch's inputs copied on
  // the copy stream into one of two device buffers while the one before computes. stage() starts
  // the copies of samples [first, first + count); take() hands them to the compute stream (which
  // waits for the copies there, not on the host); release() marks the buffer free once the
  // compute stream has passed the micro-batch's backward; drop_staged() abandons a staged batch.
  struct Staged {
    int64_t first = -1, count = 0;
    Batch host;        // its pinned memory must live until the compute stream waits for the copy
    TensorMap inputs;  // views of the buffer's tensors
    Tensor labels;     // the buffer's labels
    Backend::Event copied;
    int buffer = 0;
  };
  Status stage(int64_t first, int64_t count);
  Result<Staged> take(int64_t first, int64_t count);
  void release(int buffer);
  void drop_staged();
  Status non_finite_loss(int64_t micro_batch, double value);
  // Micro-batch m's forward, loss (into slot m) and backward; the seconds until the loss is
  // queued go to *forward_s when given.
  Status micro_batch(int64_t m, TensorMap const& inputs, Tensor const& labels, Backend::StepLosses& losses,
                     double* forward_s);
  // With CUDA graphs: this step's micro-batch seeds and loss scale into the device memory the
  // captured kernels read (queued before the step's first micro-batch); nothing without them.
  Status write_step_values();
  uint64_t const* seed_slot(int64_t m) const;
  // micro_batch, or with CUDA graphs its capture (the first time) and replay; `buffer` is the
  // input buffer the micro-batch reads (-1: none, not captured).
  Status run_micro_batch(int64_t m, int buffer, TensorMap const& inputs, Tensor const& labels,
                         Backend::StepLosses& losses, double* forward_s);
  Status capture(int64_t m, int buffer, TensorMap const& inputs, Tensor const& labels, Backend::StepLosses& losses);
  Trainer(TrainConfig config, graph::OpGraph const& graph, std::unique_ptr<DataSource> data,
          std::unique_ptr<StageRunner> runner);

  TrainConfig config_;
  graph::OpGraph const& graph_;
  std::unique_ptr<DataSource> data_;
  std::unique_ptr<StageRunner> runner_;
  int64_t rows_per_sample_ = 1;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double samples_per_s_ = 0;
  PhaseTimes phases_;
  LossScaler scaler_;
  std::optional<Staged> staged_;
  TensorMap buffers_[2];                          // device input buffers, alternating by micro-batch
  Tensor label_buffers_[2];                       // and their labels
  std::optional<Backend::Event> buffer_free_[2];  // recorded after the compute stream's last use
  int next_buffer_ = 0;
  std::optional<Backend::StepLosses> losses_slots_;  // the same slots every step (replays write them)
  struct DeviceValues {                              // rewritten every step: pinned host, device
    Tensor host, device;
  };
  bool device_seeds_ = false;   // cuda_graphs and the graph draws random numbers (Dropout, random ops)
  bool device_scale_ = false;   // cuda_graphs and a dynamic loss scale
  DeviceValues seeds_;          // int64 [micro_batches]: each micro-batch's seed
  DeviceValues scale_;          // float32 [1]: the step's loss scale
  int64_t steps_run_ = 0;       // by this trainer: captures start after the first
  bool graphs_on_ = false;      // cuda_graphs asked, and no capture failed
  std::string graphs_stopped_;  // why capturing stopped
  std::map<std::pair<int64_t, int>, std::unique_ptr<Backend::CapturedWork>> graphs_;  // by (micro-batch, buffer)
  int64_t graph_replays_ = 0;
};

}  // namespace gp::exec
