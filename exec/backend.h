// A backend runs operators on one device: forward, and backward split into the input-gradient
// part (B) and the weight-gradient part (W). The CPU backend (oneDNN + kernels/) always exists and
// is the reference; a CUDA backend implements the same interface. Kernel tables are explicit, one
// per backend (no static self-registration); a miss names the op, dtype and backend.
#pragma once

#include <string>
#include <vector>

#include "exec/tensor.h"
#include "graph/op_graph.h"
#include "graph/status.h"

namespace gp::exec {

// Whatever forward keeps for backward (inputs, outputs, masks, statistics, ...). Its bytes are
// what the liveness analysis reports as saved activation memory.
struct Saved {
  std::vector<Tensor> tensors;
  int64_t bytes() const;
};

struct OpCall {
  graph::Op const& op;
  graph::OpGraph const& graph;
  bool training = true;      // Dropout/BatchNorm behave as in training
  uint64_t rng_seed = 0;     // per (step, micro-batch, op): Dropout masks are reproducible
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  virtual DeviceRef device() const = 0;
  virtual Allocator& allocator() = 0;

  // Ok, or kUnsupported naming the op type, node name, dtype and this backend.
  virtual Status supports(graph::Op const& op, graph::OpGraph const& graph) const = 0;

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

  // Completion of queued work (CPU: no-op; CUDA: stream sync).
  virtual Status synchronize() = 0;
};

}  // namespace gp::exec
