// One pipeline worker: a device's instruction list from the schedule, run in order on one thread
// (sends never block and each RECV sits right before the compute that needs it, so list order
// keeps the schedule's three-stream semantics), with a StageRunner per stage replica it hosts.
//
//   F s m      gathers every stage input (graph inputs from the data, pieces from RECVs or from a
//              co-located producer without a copy), runs forward; the loss stage adds the loss.
//   B s m      sums each output's gradient over its consumer edges in edge-id order (the loss
//              first), runs backward (only the input part when the stage has W's on this device);
//              a stage the plan marks `recompute` reruns its forward first (StageExecutor).
//   W s m      the weight part.
//   SEND/RECV  one message per piece, keyed (step, edge, direction, micro-batch, devices); a sent
//              activation or gradient is released as soon as its last piece is out.
//   ALLREDUCE  sums the stage's gradients over its replicas, in replica order.
//   STEP       optimizer update of every hosted stage, then the leak check: nothing in flight,
//              nothing stored, no undelivered message.
// Every error names the device, the schedule line and the instruction; the worker then aborts the
// communicator so that every other worker stops too.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <tuple>
#include <vector>

#include "exec/backend.h"
#include "exec/comm/communicator.h"
#include "exec/data.h"
#include "exec/runtime/routing.h"
#include "exec/loss_scale.h"
#include "exec/stage_runner.h"
#include "exec/train_config.h"
#include "schedule/instruction.h"
#include "schedule/timeline.h"

namespace gp::exec {

// Faults the tests inject (graphpipe train --inject-fault DEVICE:LINE:KIND): throw an exception,
// a NaN loss, a message with a wrong header, a killed process (SIGKILL), a stall in compute of
// three times the timeout.
struct FaultInjection {
  // kOverflow: after the line's instruction in the first step that reaches it, the stage's weight
  // gradients are made non-finite (what an fp16 overflow does), for loss scaling to catch.
  enum class Kind { kNone, kThrow, kNaN, kHeader, kExit, kStall, kOverflow };
  int device = -1;
  int line = -1;
  Kind kind = Kind::kNone;
};
Result<FaultInjection> parse_fault(std::string const& text);  // "1:7:throw"

struct WorkerOptions {
  double timeout_s = 60;           // every blocking wait
  int64_t memory_limit_bytes = 0;  // 0: none
  FaultInjection fault;
};

class Worker {
 public:
  // Creates the runners of the device's stages; weights go to the calling thread's allocator.
  static Result<std::unique_ptr<Worker>> create(RuntimePlan const& plan, schedule::Schedule const& schedule, int device,
                                                TrainConfig const& config, Backend& backend, Communicator& comm,
                                                std::unique_ptr<DataSource> data, WorkerOptions const& options,
                                                Allocator const& memory);

  // Runs the device's list for `step` (intervals measured from `origin`), then all-reduces the
  // step's loss over every device. Errors carry "device d, line L (<instruction>)". With loss
  // scaling, STEP first reduces the found-inf flag over every device, and all skip or none does.
  Status run_step(int64_t step, Clock::time_point origin);

  int device() const { return device_; }
  double step_loss() const { return step_loss_; }  // the whole batch's loss of the last step
  LossScaler const& loss_scaler() const { return scaler_; }
  LossScaler& loss_scaler() { return scaler_; }
  std::vector<schedule::Interval> const& intervals() const { return intervals_; }
  void clear_intervals() { intervals_.clear(); }
  // The instruction index being run (-1 between steps), for stall reports.
  int current() const { return current_.load(); }
  // Stage replicas this device hosts, by stage id.
  std::map<int, std::unique_ptr<StageRunner>>& runners() { return runners_; }

 private:
  using Key = std::pair<int, int>;  // (stage or edge, micro-batch)
  struct Stored {
    TensorMap tensors;
    int pending = 0;  // pieces still to hand over
  };
  struct Received {
    std::vector<Tensor> tensors;
  };

  Worker(RuntimePlan const& plan, schedule::Schedule const& schedule, int device, TrainConfig const& config,
         Backend& backend, Communicator& comm, std::unique_ptr<DataSource> data, WorkerOptions const& options,
         Allocator const& memory);
  Status execute(schedule::Instruction const& in, int64_t step);
  Status forward(int stage, int mb, int64_t step, int line);
  Status backward(int stage, int mb, bool split);
  // After a non-finite loss on `stage`: the first non-finite weight of this device's stages, else
  // the first non-finite input or activation of the stage's forward of `mb`, rerun from `inputs`.
  std::string non_finite_cause(int stage, TensorMap const* inputs, int mb, int64_t step);
  // This replica's share of edge e's tensors (activations arriving at the consumer, or gradients
  // arriving back at the producer), assembled from every piece: received or co-located.
  Result<std::vector<Tensor>> gather_edge(int e, int mb, bool gradient);
  Status send(schedule::Instruction const& in, int64_t step, int line);
  Status recv(schedule::Instruction const& in, int64_t step);
  Status post(schedule::Instruction const& in, int64_t step);
  Result<std::vector<TensorMeta>> expected_for(schedule::Instruction const& in) const;
  Status finish_step(int64_t step);
  // STEP's part with deferred reads: the deferred op checks, every loss of the step (the first
  // non-finite one is an error naming its micro-batch), and the step's loss over every device.
  Status read_step_losses(int64_t step);
  // The gradients of the tied weights this device's stages hold, summed with the other stages'
  // copies (RuntimePlan::tied_weights), before any update.
  Status sum_tied_gradients(int64_t step);
  // `value` summed over every device (a step-wide collective: the loss, loss scaling's found-inf flag).
  Result<double> sum_over_devices(CollectiveKey const& key, double value);
  Result<Batch const*> micro_batch_data(int64_t step, int mb);
  void release_data(int mb);
  // Replica pieces through the backend's device operations.
  // What a piece of edge `e` carries of tensor `id` from the sender's whole `t`: the chunks both
  // replicas hold, an unbatched tensor whole, or zeros for an unbatched gradient that does not go
  // from consumer replica `consumer` to producer replica `producer` (RuntimePlan::unbatched_gradient_goes).
  Result<Tensor> piece_of(int e, bool gradient, Tensor const& t, graph::TensorId id, int producer, int consumer,
                          std::vector<int> const& chunks);
  Result<Tensor> take_chunks(Tensor const& t, int axis, int64_t chunk_extent, std::vector<int> const& positions);
  Status put_chunks(Tensor const& piece, int axis, int64_t chunk_extent, std::vector<int> const& positions,
                    Tensor& dst);
  Result<Tensor> on_device(Tensor const& host);  // an edge copy (data in), none when already there
  std::vector<TensorMeta> piece_metas(int edge, bool gradient, int n_chunks) const;
  int pieces_out(int stage, bool gradient) const;  // pieces this replica hands over per micro-batch
  MessageKey key_of(schedule::Instruction const& in, int64_t step) const;

  RuntimePlan const& plan_;
  schedule::Schedule const& schedule_;
  int device_;
  TrainConfig const& config_;
  Backend& backend_;
  Communicator& comm_;
  std::unique_ptr<DataSource> data_;
  WorkerOptions options_;
  Allocator const& memory_;
  std::map<int, std::unique_ptr<StageRunner>> runners_;
  std::vector<bool> split_;  // by stage: backward split into B and W on this device
  int64_t rows_per_sample_ = 1;
  int data_users_ = 0;  // hosted stages that read the data (graph inputs or labels)

  std::map<Key, Stored> outputs_, input_grads_;
  std::map<Key, Tensor> loss_grads_;
  std::map<std::tuple<int, int, int, bool>, Received> received_;  // (edge, mb, peer, gradient)
  std::map<int, std::pair<Batch, int>> data_cache_;               // mb -> (batch, uses left)
  double loss_sum_ = 0, step_loss_ = 0;
  // Where host reads wait (a GPU: Backend::defers_host_reads), the loss stage's losses stay on the
  // device until STEP reads them all, and the step's loss is summed over the devices before any
  // update, so that a non-finite one stops every device before it; elsewhere each micro-batch's
  // loss is read and checked at once (and its forward rerun to name the first non-finite tensor).
  bool deferred_reads_ = false;
  Backend::StepLosses step_losses_;
  std::map<int, int> loss_lines_;   // micro-batch -> the line of its loss-stage forward (deferred)
  std::set<int> injected_nan_;      // FaultInjection::kNaN on a deferred loss: applied when read
  bool loss_reduced_ = false;       // the step's loss was summed over the devices at STEP
  LossScaler scaler_;               // the same on every device: they see the same found-inf flags
  bool overflow_injected_ = false;  // FaultInjection::kOverflow fires once
  std::vector<schedule::Interval> intervals_;
  std::atomic<int> current_{-1};
};

}  // namespace gp::exec
