// Mixed precision's wrappers around a kernel-table entry (graph/precision.h), shared by every
// backend: an op the policy runs in a 16-bit dtype (Conv, Gemm, MatMul) keeps its float32 weights
// float32 (the master weights), so its 16-bit kernel gets them rounded per call, as autocast's
// cast of a weight, and the gradients of float32 inputs are widened back and set or added in
// float32. Activations already have the op's dtype (the rewrite's Casts put them there).
// Device-agnostic: each backend passes its own conversion.
#pragma once

#include <optional>
#include <vector>

#include "exec/op_kernels.h"

namespace gp::exec {

// x converted to `to` (float32 <-> bfloat16 or half, rounded to nearest even); x itself when it has
// that dtype already. On the backend that owns x.
using ConvertFn = Result<Tensor> (*)(Tensor const& x, DType to);

// 16-bit float dtypes (mixed precision's activations).
inline bool is_low_float(DType d) { return d == DType::kBFloat16 || d == DType::kFloat16; }

inline bool is_float32(DType d) { return d == DType::kFloat32; }

// The dtype the op computes in: its first input's (the rewrite casts that one, never a weight).
inline DType compute_dtype(OpCall const& call) { return call.graph.tensor(call.op.inputs.at(0)).dtype; }

// `ts` with every defined tensor whose dtype `from` accepts converted to `to`; the others as they are.
template <ConvertFn C>
Result<std::vector<Tensor>> converted(std::vector<Tensor> const& ts, bool (*from)(DType), DType to) {
  std::vector<Tensor> out(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].defined() && from(ts[i].dtype())) {
      ASSIGN_OR_RETURN(out[i], C(ts[i], to));
    } else {
      out[i] = ts[i];
    }
  }
  return out;
}

// B's gradients computed fresh, each converted to its input's dtype (or, given `to`, to that
// dtype), then set or added.
template <BackwardFn B, ConvertFn C>
Status grads_in_input_dtypes(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                             std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate,
                             std::optional<DType> to = std::nullopt) {
  std::vector<Tensor> fresh;
  RETURN_IF_ERROR(B(call, saved, gout, wanted, fresh, false));
  for (std::size_t i = 0; i < fresh.size() && i < call.op.inputs.size(); ++i) {
    if (!wants(wanted, i) || !fresh[i].defined()) continue;
    ASSIGN_OR_RETURN(Tensor g, C(fresh[i], to.value_or(call.graph.tensor(call.op.inputs[i]).dtype)));
    RETURN_IF_ERROR(emit_grad(call, grads, i, std::move(g), accumulate));
  }
  return Status::ok();
}

// A kernel saves the inputs it was given, so a 16-bit kernel saves the rounded copy of each float32
// weight: a weight's worth of memory per micro-batch in flight, which the memory accounting (it
// counts activations) does not see. Each saved tensor that is such a copy (the same storage, dtype
// and shape) is replaced by its master (a static value: no activation memory), and its position
// noted for low_precision_backward, which rounds it again (weights change only at STEP, so to the
// same bits), once for both backward calls of a micro-batch.
inline void keep_masters(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor> const& cast,
                         Saved& saved) {
  for (std::size_t j = 0; j < saved.tensors.size(); ++j) {
    Tensor const& t = saved.tensors[j];
    if (!t.defined()) continue;
    for (std::size_t i = 0; i < in.size() && i < cast.size() && i < call.op.inputs.size(); ++i) {
      if (!in[i].defined() || !cast[i].defined() || cast[i].raw() == in[i].raw()) continue;  // not rounded
      if (t.raw() != cast[i].raw() || t.dtype() != cast[i].dtype() || t.shape() != cast[i].shape()) continue;
      graph::TensorRole const role = call.graph.tensor(call.op.inputs[i]).role;
      if (role != graph::TensorRole::kWeight && role != graph::TensorRole::kConstant) continue;
      saved.tensors[j] = in[i];
      saved.masters.push_back(j);
      break;
    }
  }
}

template <ForwardFn F, ConvertFn C>
Status low_precision_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                             Saved* saved) {
  DType const low = compute_dtype(call);
  if (low == DType::kFloat32) return F(call, in, out, saved);
  ASSIGN_OR_RETURN(std::vector<Tensor> const cast, converted<C>(in, is_float32, low));
  RETURN_IF_ERROR(F(call, cast, out, saved));
  if (saved) keep_masters(call, in, cast, *saved);
  return Status::ok();
}

template <BackwardFn B, ConvertFn C>
Status low_precision_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                              std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (saved.masters.empty()) return grads_in_input_dtypes<B, C>(call, saved, gout, wanted, grads, accumulate);
  if (saved.rounded.empty()) {
    std::vector<Tensor> rounded = saved.tensors;
    for (std::size_t j : saved.masters) {
      ASSIGN_OR_RETURN(rounded.at(j), C(saved.tensors.at(j), compute_dtype(call)));
    }
    saved.rounded = std::move(rounded);
  }
  return grads_in_input_dtypes<B, C>(call, Saved{saved.rounded, {}, {}}, gout, wanted, grads, accumulate);
}

// The other direction, for an op that follows its 16-bit input (graph/precision.h) where a backend's
// best kernel is float32's (the CPU's batch normalisation): 16-bit inputs widened, the float32 kernel
// run, the outputs the graph gives a 16-bit dtype narrowed; backward likewise, the gradients of
// 16-bit inputs narrowed. Float32 inputs (scales, statistics) are passed as they are.
template <ForwardFn F, ConvertFn C>
Status widened_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<Tensor> const wide, converted<C>(in, is_low_float, DType::kFloat32));
  RETURN_IF_ERROR(F(call, wide, out, saved));
  for (std::size_t k = 0; k < out.size() && k < call.op.outputs.size(); ++k) {
    DType const d = call.graph.tensor(call.op.outputs[k]).dtype;
    if (out[k].defined() && is_low_float(d)) {
      ASSIGN_OR_RETURN(out[k], C(out[k], d));
    }
  }
  return Status::ok();
}

template <BackwardFn B, ConvertFn C>
Status widened_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  ASSIGN_OR_RETURN(std::vector<Tensor> const g, converted<C>(gout, is_low_float, DType::kFloat32));
  return grads_in_input_dtypes<B, C>(call, saved, g, wanted, grads, accumulate);
}

// A 16-bit kernel's backward emulated by the float32 one, inside low_precision_backward (a backend
// without 16-bit primitives): the 16-bit output gradients widened, B run, and every gradient rounded
// to the op's compute dtype, as the 16-bit kernel writes them (the wrapper around it then widens a
// weight's; the CPU's native bf16 Gemm alone leaves its bias gradient float32). The forward twin is
// widened_forward, whose float32 saved tensors B reads.
template <BackwardFn B, ConvertFn C>
Status emulated_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  ASSIGN_OR_RETURN(std::vector<Tensor> const g, converted<C>(gout, is_low_float, DType::kFloat32));
  return grads_in_input_dtypes<B, C>(call, saved, g, wanted, grads, accumulate, compute_dtype(call));
}

// BothFn's twin: input gradients set (narrowed to their inputs' dtypes), weight gradients (float32)
// added by the float32 kernel itself.
template <BothFn Both, ConvertFn C>
Status widened_both(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                    std::vector<Tensor>& weight_grads) {
  ASSIGN_OR_RETURN(std::vector<Tensor> const g, converted<C>(gout, is_low_float, DType::kFloat32));
  RETURN_IF_ERROR(Both(call, saved, g, needs_grad, grad_inputs, weight_grads));
  for (std::size_t i = 0; i < grad_inputs.size() && i < call.op.inputs.size(); ++i) {
    if (!grad_inputs[i].defined()) continue;
    ASSIGN_OR_RETURN(grad_inputs[i], C(grad_inputs[i], call.graph.tensor(call.op.inputs[i]).dtype));
  }
  return Status::ok();
}

// The entry's functions: forward, B and W (a backward_both, if any, is not wrapped: left null so
// the backend runs B and W).
template <ForwardFn F, BackwardFn B, BackwardFn W, ConvertFn C>
OpKernels low_precision_kernels(CheckFn check) {
  return {low_precision_forward<F, C>, low_precision_backward<B, C>, low_precision_backward<W, C>, check};
}

// The same for the widened wrappers (a BothFn, if any, is the caller's to wrap with widened_both).
template <ForwardFn F, BackwardFn B, BackwardFn W, ConvertFn C>
OpKernels widened_kernels(CheckFn check) {
  return {widened_forward<F, C>, widened_backward<B, C>, widened_backward<W, C>, check};
}

}  // namespace gp::exec
