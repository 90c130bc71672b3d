// Runs forward and backward of a (sub)graph on one backend for micro-batches keyed by id, so a
// pipeline worker can keep several in flight (1F1B, zero-bubble). Per micro-batch it keeps only
// what backward needs (the ops' Saved state, nothing else); backward can run whole (B and W per
// op) or split into an input-gradient pass (B) and a later weight-gradient pass (W). Weight
// gradients accumulate over micro-batches until zero_grads().
//
// Recompute mode (activation checkpointing, a per-stage choice of the plan): a training forward
// keeps only the micro-batch's stage inputs (references, not copies), its rng seed and batch; the
// ops' Saved state is dropped as soon as each op has run. B (or the whole backward) first reruns the
// forward on those inputs with the same seed, so Dropout masks are identical, and without updating
// BatchNorm's running statistics a second time, then proceeds as usual: gradients are bitwise those
// of the normal mode, for one extra forward.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/autodiff.h"
#include "exec/backend.h"
#include "exec/tensor.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

using TensorMap = std::unordered_map<graph::TensorId, Tensor>;

// BatchNorm running statistics (mean, variance) read by `ops` (empty: the whole graph) and given
// as initializers: the buffers training updates, which checkpoints and export carry.
std::vector<graph::TensorId> running_stat_tensors(graph::OpGraph const& graph, std::vector<graph::OpId> const& ops);

class StageExecutor {
 public:
  // Checks that the backend supports every op and loads weights and constants from the graph.
  // `ops` empty: the whole graph. The graph and backend must outlive the executor.
  static Result<std::unique_ptr<StageExecutor>> create(graph::OpGraph const& graph, Backend& backend,
                                                       std::vector<graph::OpId> const& ops = {});

  AutodiffPlan const& plan() const { return plan_; }
  graph::OpGraph const& graph() const { return graph_; }
  Backend& backend() const { return backend_; }

  // Forwards from now on run in recompute mode (or not); micro-batches already in flight keep the
  // mode their forward ran in.
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  // Forward of micro-batch `mb`: `inputs` holds every stage input (plan().stage_inputs), `outputs`
  // gets every stage output. training=false keeps nothing for backward (and Dropout is identity).
  // rng_seed makes Dropout masks reproducible: pass a value derived from (step, mb).
  // rng_seed_slot: where the device reads rng_seed from (OpCall::rng_seed_slot; null: it does not).
  Status forward(int64_t mb, TensorMap const& inputs, TensorMap& outputs, bool training = true, uint64_t rng_seed = 0,
                 uint64_t const* rng_seed_slot = nullptr);
  // Whole backward of `mb`: `output_grads` for the stage outputs that get gradients (missing ones
  // count as zero); `input_grads` gets plan().input_grads. Weight grads accumulate; `mb` is freed.
  Status backward(int64_t mb, TensorMap const& output_grads, TensorMap& input_grads);
  // Zero-bubble split: B computes input gradients and keeps what W needs; W accumulates weight
  // gradients and frees `mb`.
  Status backward_input(int64_t mb, TensorMap const& output_grads, TensorMap& input_grads);
  Status backward_weight(int64_t mb);
  void discard(int64_t mb);  // drops a micro-batch's state (e.g. after an error)

  int64_t in_flight() const { return static_cast<int64_t>(micro_batches_.size()); }
  // Bytes the in-flight micro-batches keep for backward (tensors shared by ops counted once): in
  // recompute mode, between forward and backward, the stashed stage inputs.
  int64_t saved_bytes(int64_t mb) const;
  int64_t saved_bytes() const;
  int64_t peak_saved_bytes() const { return peak_saved_bytes_; }

  // Trainable weights of this stage and their accumulated gradients, by tensor name.
  std::map<std::string, Tensor>& parameters() { return params_; }
  std::map<std::string, Tensor> const& gradients() const { return grads_; }
  Status zero_grads();  // on the backend's device
  // BatchNorm running statistics (updated by training forwards), by tensor name.
  std::map<std::string, Tensor>& buffers() { return buffers_; }
  // Copies values into a parameter or buffer (shape checked).
  Status set_parameter(std::string const& name, Tensor const& value);

  // Diagnostics after a non-finite loss, never on the normal path (exec/non_finite.cc). The first
  // trainable weight, in forward order, holding inf/NaN ("" when none).
  std::string first_non_finite_weight() const;
  // Reruns the training forward of one micro-batch (the same inputs and seed) op by op, keeping
  // nothing and leaving BatchNorm's statistics alone, and describes the first stage input or op
  // output holding inf/NaN and the op that produced it ("" when every one is finite).
  Result<std::string> first_non_finite_activation(TensorMap const& inputs, uint64_t rng_seed);

 private:
  struct MicroBatch {
    std::unordered_map<graph::OpId, Saved> saved;
    std::unordered_map<graph::OpId, std::vector<Tensor>> w_grad_outputs;  // kept between B and W
    std::unordered_map<graph::OpId, std::vector<Tensor>> w_computed;      // weight grads B made, W adds
    TensorMap stash;       // recompute mode: the stage inputs, until backward has rebuilt `saved`
    bool stashed = false;  // `saved` is still to be rebuilt from `stash`
    uint64_t rng_seed = 0;
    uint64_t const* rng_seed_slot = nullptr;
    int64_t batch = 0;  // samples, from the stage inputs (0 when none carries the batch)
    bool b_done = false;
  };

  StageExecutor(graph::OpGraph const& graph, Backend& backend, AutodiffPlan plan);
  // The call of op `id` for micro-batch `state`: its seed (and the device's seed slot), batch and kernel.
  OpCall op_call(graph::OpId id, MicroBatch const& state, bool training) const;
  // Runs the stage's ops on `values` (the stage inputs). keep_saved: the ops' Saved state goes into
  // state.saved, else it is dropped after each op. update_stats: BatchNorm running statistics are
  // written back (the first training forward of a micro-batch, never its recomputation).
  // after_op (diagnostics): called with each op's outputs; returning true stops the forward there.
  using AfterOp = std::function<bool(graph::Op const&, std::vector<Tensor> const&)>;
  Status run_forward(TensorMap values, MicroBatch& state, bool training, bool keep_saved, bool update_stats,
                     TensorMap* outputs, AfterOp const* after_op = nullptr);
  // Recompute mode: rebuilds state.saved from the stash before B, then drops the stash.
  Status rebuild_saved(MicroBatch& state);
  Status run_b(int64_t mb, MicroBatch& state, TensorMap const& output_grads, TensorMap& input_grads, bool split);
  Status run_w(graph::OpId id, MicroBatch& state, std::vector<Tensor> const& grad_outputs);
  std::vector<Tensor> weight_grad_slots(graph::Op const& op) const;  // accumulators of op's trainable inputs
  void note_saved();
  Status update_running_stats(graph::Op const& op, std::vector<Tensor> const& outs);
  // Every output a kernel wrote has the dtype the graph gives its tensor (the next op's kernel
  // is chosen by that dtype): an internal error naming the op otherwise.
  Status check_output_dtypes(graph::Op const& op, std::vector<Tensor> const& outs) const;

  graph::OpGraph const& graph_;
  Backend& backend_;
  AutodiffPlan plan_;
  std::vector<ResolvedKernel> kernels_;  // per OpId: the backend's kernel for each op of the stage
  std::vector<Tensor> static_values_;    // by tensor id: weights and constants
  std::map<std::string, Tensor> params_, grads_, buffers_;
  std::map<int64_t, MicroBatch> micro_batches_;
  int64_t peak_saved_bytes_ = 0;
  bool recompute_ = false;
};

}  // namespace gp::exec
