// The shape of one backend's kernel-table entry: the per-op functions every backend (CPU, CUDA)
// lists in its own explicit table. Device-agnostic: no vendor header.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "exec/backend.h"
#include "graph/ops/common.h"

namespace gp::exec {

using graph::ops::OpKind;

using ForwardFn = Status (*)(OpCall const& call, std::vector<Tensor> const& inputs, std::vector<Tensor>& outputs,
                             Saved* saved);
// Gradients for the inputs i with wanted[i]. accumulate == false: grads[i] is set to a new tensor.
// accumulate == true: the gradient is added into the existing grads[i].
using BackwardFn = Status (*)(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                              std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate);
// B and W in one call (Backend::backward): input gradients set in grad_inputs, weight gradients
// added into the accumulators weight_grads[i] that are defined.
using BothFn = Status (*)(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                          std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                          std::vector<Tensor>& weight_grads);
// Op-specific checks beyond "the type is in the table" (attributes, constant inputs, ranks).
using CheckFn = Status (*)(graph::Op const& op, graph::OpGraph const& graph);

struct OpKernels {
  ForwardFn forward = nullptr;
  BackwardFn backward_input = nullptr;
  BackwardFn backward_weight = nullptr;
  CheckFn check = nullptr;
  // Set where B and W share work (a normalisation's one pass, a conv's reordered output
  // gradient): an unsplit backward calls it instead of backward_input and backward_weight.
  BothFn backward_both = nullptr;
};

// ---- helpers every backend's per-op functions share (exec/op_kernels.cc) ----
Status op_error(OpCall const& call, std::string const& what);  // "<type> '<name>': what" (kInvalidArgument)
bool wants(std::vector<bool> const& wanted, std::size_t i);
// The constant data of input i (a folded constant or initializer), or null.
graph::TensorData const* constant_input(graph::Op const& op, graph::OpGraph const& graph, std::size_t i);

// `call` as the kernel of `backend` sees it (OpCall::backend set): what a backend passes to its
// kernel-table functions.
inline OpCall bound_to(OpCall call, Backend& backend) {
  call.backend = &backend;
  return call;
}
// Stores gradient g into grads[i], or adds it into the existing grads[i] (through the call's
// backend) when accumulating.
Status emit_grad(OpCall const& call, std::vector<Tensor>& grads, std::size_t i, Tensor g, bool accumulate);
// The gradient of a step (a comparison, a cast between types, a random draw) for input i of
// `shape`: zeros on the call's backend when wanted; nothing to add when accumulating.
Status emit_zero_grad(OpCall const& call, std::vector<bool> const& wanted, std::vector<Tensor>& grads, std::size_t i,
                      std::vector<int64_t> const& shape, bool accumulate);
// Backend::backward of a kernel that computes every gradient in one pass (a normalisation, an RNN
// through time), from its BackwardFn: every gradient asked for computed fresh, the input gradients
// set, the weights' added into their accumulators (through the call's backend, emit_grad).
template <BackwardFn F>
Status fresh_then_add(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                      std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                      std::vector<Tensor>& weight_grads) {
  std::size_t const n = call.op.inputs.size();
  std::vector<bool> wanted(n, false);
  for (std::size_t i = 0; i < n; ++i)
    wanted[i] = wants(needs_grad, i) || (i < weight_grads.size() && weight_grads[i].defined());
  grad_inputs.assign(n, Tensor());
  RETURN_IF_ERROR(F(call, saved, grad_outputs, wanted, grad_inputs, false));
  for (std::size_t i = 0; i < n; ++i) {
    if (i >= weight_grads.size() || !weight_grads[i].defined() || !grad_inputs[i].defined()) continue;
    RETURN_IF_ERROR(emit_grad(call, weight_grads, i, std::move(grad_inputs[i]), true));
    grad_inputs[i] = Tensor();
  }
  return Status::ok();
}
// The seed of a random op's draws: the call's (step, micro-batch, op), with the node's seed
// attribute mixed in when it has one.
uint64_t random_seed(OpCall const& call, graph::RandomAttrs const& attrs);
// What the op's seed attribute mixes into the call's seed (random_seed = rng_seed ^ mix; 0 without one).
uint64_t random_seed_mix(graph::RandomAttrs const& attrs);
// Small host int64 tensors that carry shapes through Saved (metadata, never read by a kernel).
// grad_outputs[i], or zeros of `shape` on the call's backend when no gradient flowed into that output.
Tensor grad_or_zeros(OpCall const& call, std::vector<Tensor> const& grad_outputs, std::size_t i,
                     std::vector<int64_t> const& shape);
Tensor shape_tensor(std::vector<int64_t> const& shape, Allocator& alloc = cpu_allocator());
std::vector<int64_t> shape_of(Tensor const& t);

template <typename A>
A const* attrs_of(graph::Op const& op) {
  return std::get_if<A>(&op.typed);
}
template <typename A>
Status require_attrs(graph::Op const& op, graph::OpGraph const&) {
  return graph::ops::require_typed<A>(op);
}
inline Status no_check(graph::Op const&, graph::OpGraph const&) { return Status::ok(); }
// The backward of an op whose inputs have no gradient (integers, masks, no data inputs at all).
inline Status no_gradient(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                          std::vector<Tensor>&, bool) {
  return Status::ok();
}

}  // namespace gp::exec
