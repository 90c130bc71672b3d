// A backend runs operators on one device: forward, and backward split into the input-gradient
// part (B) and the weight-gradient part (W). The CPU backend (oneDNN + kernels/) always exists and
// is the reference; a CUDA backend implements the same interface. Kernel tables are explicit, one
// per backend (no static self-registration); a miss names the op, dtype and backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/tensor.h"
#include "exec/train_kinds.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

// Whatever forward keeps for backward (inputs, outputs, masks, statistics, ...). Its bytes are
// what the liveness analysis reports as saved activation memory.
struct Saved {
  std::vector<Tensor> tensors;
  // Positions in `tensors` that hold a float32 master weight where a 16-bit kernel saved the copy
  // rounded for its call: exec/low_precision_kernel.h keeps the master (a weight, not activation
  // memory) and rounds it again for the backward, to the same bits.
  std::vector<std::size_t> masters;
  // `tensors` with those masters rounded, made by the first backward call (B) and reused by the
  // second (W) of the same micro-batch; empty until then.
  mutable std::vector<Tensor> rounded;
  int64_t bytes() const;
};

class Backend;

// A backend's kernel-table entry for one op, found once by Backend::resolve (a StageExecutor
// resolves every op of its stage when it is built) and carried by each OpCall of that op, so that
// dispatch does not search the table on every call. Only the backend that resolved it reads
// `entry`; any other backend (or an empty handle) looks the op up itself.
struct ResolvedKernel {
  Backend const* backend = nullptr;
  void const* entry = nullptr;
};

struct OpCall {
  graph::Op const& op;
  graph::OpGraph const& graph;
  bool training = true;   // Dropout/BatchNorm behave as in training
  uint64_t rng_seed = 0;  // per (step, micro-batch, op): Dropout masks are reproducible
  int64_t batch = 0;      // samples in this micro-batch (0: unknown); ops that expand to the batch need it
  // The backend running the op: set by the backend when it calls a kernel-table function, so that
  // the backward glue every backend shares (exec/op_kernels.h) uses its device operations.
  Backend* backend = nullptr;
  ResolvedKernel kernel{};  // from Backend::resolve; empty: the backend looks the op up
  // Captured work (CUDA graphs): the micro-batch's seed in device memory, which the trainer
  // rewrites every step, and this op's salt; a device's Dropout then draws from
  // salted_seed(*rng_seed_slot, rng_salt) (exec/seeds.h), which equals rng_seed, read when the kernel runs
  // instead of when it was recorded. Null: rng_seed as given (the CPU always uses it).
  uint64_t const* rng_seed_slot = nullptr;
  uint64_t rng_salt = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  virtual DeviceRef device() const = 0;
  virtual Allocator& allocator() = 0;

  // Ok, or kUnsupported naming the op type, node name, dtype and this backend.
  virtual Status supports(graph::Op const& op, graph::OpGraph const& graph) const = 0;
  // The kernel this backend runs `op` with (its table entry for the op's definition and dtype),
  // after the checks of supports(): an error exactly when supports() gives one.
  virtual Result<ResolvedKernel> resolve(graph::Op const& op, graph::OpGraph const& graph) const = 0;

  // inputs[i] matches op.inputs[i] (an undefined Tensor for an omitted optional input).
  // Fills outputs (one per op.outputs) and, when `saved` is non-null, what backward needs.
  virtual Status forward(OpCall const& call, std::vector<Tensor> const& inputs, std::vector<Tensor>& outputs,
                         Saved* saved) = 0;
  // Gradients w.r.t. the op's non-weight inputs. grad_outputs[i] matches op.outputs[i] (undefined
  // if no gradient flows into that output). grad_inputs gets one entry per op.inputs (undefined
  // where no gradient is needed: needs_grad[i] == false).
  virtual Status backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs) = 0;
  // Gradients w.r.t. the op's weight inputs (Conv/Gemm/MatMul weights and biases, norm scale/bias,
  // embedding tables), ACCUMULATED into weight_grads[i] (defined only for trainable weight inputs).
  virtual Status backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                 std::vector<Tensor>& weight_grads) = 0;
  // Both parts at once (no B/W split): what backward_input and then backward_weight compute. The
  // default makes those two calls; a backend overrides it where one pass yields both (the
  // normalisations), which the two calls would run twice.
  virtual Status backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                          std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                          std::vector<Tensor>& weight_grads);

  // ---- Device operations: everything outside the op kernels that touches tensor memory. Code
  // around a backend (executor, optimizer, loss, pipeline worker) goes through these, so it runs
  // unchanged on any device; host copies happen only at the edges (data in, checkpoints, export).

  // Host memory this device copies from without staging or waiting (pinned memory on a GPU), for
  // the data path to fill batches in; null where any host memory will do (the CPU). Tensors made
  // from it must be freed before the backend is destroyed.
  virtual Allocator* pinned_host_allocator() { return nullptr; }

  // New tensors in this device's memory (on CPU: the calling thread's allocator).
  virtual Tensor empty(std::vector<int64_t> shape, DType dtype = DType::kFloat32) = 0;
  virtual Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32) = 0;
  virtual Status fill(Tensor& t, float value) = 0;  // float32
  // dst <- src, same dtype and element count; either side may be host memory (an edge copy).
  virtual Status copy(Tensor const& src, Tensor& dst) = 0;
  // `t` itself when it lives on this device, else a copy here: the edge copy of host data.
  Result<Tensor> to_device(Tensor const& t) {
    if (t.device() == device()) return t;
    return clone(t);
  }
  // A new tensor on this device with src's values.
  Result<Tensor> clone(Tensor const& src) {
    Tensor out = empty(src.shape(), src.dtype());
    RETURN_IF_ERROR(copy(src, out));
    return out;
  }
  // dst += src (float32, same element count).
  virtual Status add_into(Tensor& dst, Tensor const& src) = 0;
  // Loss scaling (exec/loss_scale.h). t *= factor (float32), and whether no element of `tensors`
  // (float32) is inf or NaN. The defaults go through host copies: correct on any device, one
  // round trip per call; a backend overrides them with its own loops.
  virtual Status scale(Tensor& t, double factor);
  // t *= factor[0], `factor` a float32 tensor of one element on this device, read when the work
  // runs: a captured step's loss scale, which the trainer rewrites every step.
  virtual Status scale_by(Tensor& t, Tensor const& factor);
  virtual Result<bool> all_finite(std::vector<Tensor> const& tensors);
  // Block copy along one axis: the tensor seen as [outer, extent, inner] with the axis cut into
  // chunks of `chunk` rows; chunk src_chunks[i] of src goes to chunk dst_chunks[i] of dst. What
  // the pipeline runtime slices and assembles replica pieces with.
  virtual Status copy_chunks(Tensor const& src, std::vector<int> const& src_chunks, Tensor& dst,
                             std::vector<int> const& dst_chunks, int axis, int64_t chunk) = 0;
  // ---- Losses. A step's micro-batch losses stay where the backend computed them (on a GPU:
  // device memory) until read_losses reads them together: one synchronisation a step, not one a
  // micro-batch (the issue-23 profile: a host read after every loss stalled the launch queue).
  struct StepLosses {
    Tensor values;  // float64 [slots]: each micro-batch's share of the step's mean loss
    // int64 [slots, 2]: the first row whose label is out of range (-1 if none) and that label,
    // noted where the loss is computed (a device: right after its kernel, while the labels' buffer
    // still holds this micro-batch's; a later one may refill it before the step's read).
    Tensor bad;
    std::vector<int64_t> classes;
    std::vector<bool> written;
    int slots() const { return static_cast<int>(written.size()); }
    bool any_written() const;
  };
  StepLosses step_losses(int slots);
  // A cross-entropy label outside [0, classes): every backend's error for it.
  static Status label_out_of_range(int64_t label, int64_t row, int64_t classes);
  // The loss of one micro-batch into `losses` slot `slot`: fills `grad` (same shape as `output`)
  // with d(total loss)/d(output), the total being the mean over `total_rows` rows of the whole
  // batch, and the slot with the micro-batch's share of that mean. A label out of range is an
  // error here or, on a backend whose host reads wait (defers_host_reads), from read_losses.
  virtual Status loss_into(LossKind kind, Tensor const& output, Tensor const& labels, int64_t total_rows, Tensor& grad,
                           StepLosses& losses, int slot) = 0;
  // Every written slot's value (NaN for the others), read at once; the first slot with a bad label
  // is an error naming the label and its row. The default copies both tensors to the host (a
  // synchronisation each on a device; the CUDA backend's one for both).
  virtual Result<std::vector<double>> read_losses(StepLosses const& losses);
  // read_losses' result from the two tensors' bytes, read to the host (null when no slot is written).
  static Result<std::vector<double>> losses_read(StepLosses const& losses, double const* values, int64_t const* bad);
  // One micro-batch's loss, read at once (a synchronisation on a device): loss_into a slot of its
  // own, then read_losses.
  Result<double> loss(LossKind kind, Tensor const& output, Tensor const& labels, int64_t total_rows, Tensor& grad);
  // Whether reading a device value on the host waits for queued work (a GPU: yes; the CPU: no,
  // the value is there). Callers that can, read once a step where it waits, at once where it does
  // not (the pipeline worker keeps the CPU's per-micro-batch checks and diagnostics).
  virtual bool defers_host_reads() const { return false; }
  // Checks an op kernel would read back at once (CUDA: an index out of range in Gather or a loss
  // op's targets), with `on`, are queued instead, where the kernel is safe to run on the bad value
  // (it reads and writes nothing outside its tensors), and reported by deferred_checks: the first
  // failed check's error, as the op would have reported it. A trainer turns them on for a step and
  // calls deferred_checks before the update. Default: nothing is deferred.
  virtual void defer_checks(bool on) { (void)on; }
  virtual Status deferred_checks() { return Status::ok(); }

  // One optimizer update of one parameter (PyTorch's rules). `state` holds the moments the
  // optimizer keeps for it (SGD with momentum: 1, Adam/AdamW: 2), created zeroed by the caller;
  // `step` counts from 1.
  virtual Status optimizer_update(OptimizerConfig const& config, int64_t step, Tensor& param, Tensor const& grad,
                                  std::vector<Tensor*> const& state) = 0;
  // The update of every parameter of a step (Optimizer::step): what optimizer_update does to each,
  // in order. The default makes one call per parameter; a device overrides it with one launch for
  // all of them (CUDA: a multi-tensor kernel, where a stage's 160 small parameters were 160
  // launches).
  struct ParamUpdate {
    Tensor* param = nullptr;
    Tensor const* grad = nullptr;
    std::vector<Tensor*> state;
  };
  virtual Status optimizer_update_all(OptimizerConfig const& config, int64_t step,
                                      std::vector<ParamUpdate> const& updates);

  // ---- Streams and events. Each worker orders its work on a compute stream and a communication
  // stream, and a device has a copy stream for host data (the trainer's inputs); an event recorded
  // on one stream and waited for on another orders them (an event is waited for once). The CPU
  // backend runs everything in order at once, so its events are complete when recorded.
  enum class StreamKind { kCompute, kCommunication, kCopy };
  struct Event {
    uint64_t id = 0;  // 0: already complete
  };
  virtual Event record(StreamKind stream) {
    (void)stream;
    return {};
  }
  virtual Status wait(StreamKind stream, Event event) {
    (void)stream;
    (void)event;
    return Status::ok();
  }
  // A host-waitable point at the end of what is queued on `stream` now (exec/tensor.h's HostFence):
  // what a worker hands along with tensors another thread will copy, so that the copy waits for
  // the kernels that wrote them and nothing later. Default (the CPU): none, the work is done.
  virtual HostFence fence(StreamKind stream) {
    (void)stream;
    return {};
  }
  // dst <- src queued on `stream`, as copy() does on the compute stream. With kCopy and a device
  // that overlaps copies (overlaps_copies()), a host-to-device copy from its pinned host memory
  // (pinned_host_allocator()) runs beside the compute stream, and the caller orders it: the copy
  // stream waits for an event recorded after the compute stream's last use of dst, the compute
  // stream for one recorded on the copy stream after the copy before it reads dst, and src lives
  // until that wait is queued. Default (and every other copy): copy().
  virtual Status copy_on(StreamKind stream, Tensor const& src, Tensor& dst) {
    (void)stream;
    return copy(src, dst);
  }
  virtual bool overlaps_copies() const { return false; }
  // Completion of queued work (CPU: no-op; CUDA: stream sync).
  virtual Status synchronize() = 0;

  // ---- Captured work (CUDA graphs: the training config's `cuda_graphs`). Between begin_capture
  // and end_capture, what the calls enqueue on the compute stream is recorded, not run; replay()
  // runs the recording on the same memory, each time it is called (captured work first runs at
  // its first replay). Host values the calls read while they were recorded (kernel arguments,
  // sizes, addresses) are every replay's too, so only work that repeats exactly is captured
  // (exec/trainer.cc says which). end_capture always ends the capture, and fails, naming why,
  // where the recording could not be replayed as the calls ran (an operation that waits for the
  // device or reads host memory, a tensor made inside that outlives it). Default: nothing is
  // captured.
  class CapturedWork {
   public:
    virtual ~CapturedWork() = default;
  };
  virtual bool captures_work() const { return false; }
  virtual Status begin_capture();
  virtual Result<std::unique_ptr<CapturedWork>> end_capture();
  virtual Status replay(CapturedWork& work);
};

// Backend::defer_checks for a scope (a training step): on at construction, off at exit, error
// paths included (checks left unresolved belong to a step that failed anyway).
class DeferChecks {
 public:
  DeferChecks(Backend& backend, bool on) : backend_(backend) { backend_.defer_checks(on); }
  ~DeferChecks() { backend_.defer_checks(false); }
  DeferChecks(DeferChecks const&) = delete;
  DeferChecks& operator=(DeferChecks const&) = delete;

 private:
  Backend& backend_;
};

}  // namespace gp::exec
