// Mixed precision's wrapper around a kernel-table entry (graph/precision.h), shared by every
// backend: an op the policy runs in a 16-bit dtype (Conv, Gemm, MatMul) keeps its float32 weights
// float32 (the master weights), so its 16-bit kernel gets them rounded per call, as autocast's
// cast of a weight, and the gradients of float32 inputs are widened back and set or added in
// float32. Activations already have the op's dtype (the rewrite's Casts put them there).
// Device-agnostic: each backend passes its own conversion.
#pragma once

#include <vector>

#include "exec/op_kernels.h"

namespace gp::exec {

// x converted to `to` (float32 <-> bfloat16 or half, rounded to nearest even); x itself when it has
// that dtype already. On the backend that owns x.
using ConvertFn = Result<Tensor> (*)(Tensor const& x, DType to);

// The dtype the op computes in: its first input's (the rewrite casts that one, never a weight).
inline DType compute_dtype(OpCall const& call) { return call.graph.tensor(call.op.inputs.at(0)).dtype; }

template <ForwardFn F, ConvertFn C>
Status low_precision_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                             Saved* saved) {
  DType const low = compute_dtype(call);
  std::vector<Tensor> cast(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i].defined() && in[i].dtype() == DType::kFloat32 && low != DType::kFloat32) {
      ASSIGN_OR_RETURN(cast[i], C(in[i], low));
    } else {
      cast[i] = in[i];
    }
  }
  return F(call, cast, out, saved);
}

template <BackwardFn B, ConvertFn C>
Status low_precision_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                              std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  std::vector<Tensor> low;
  RETURN_IF_ERROR(B(call, saved, gout, wanted, low, false));
  for (std::size_t i = 0; i < low.size() && i < call.op.inputs.size(); ++i) {
    if (!wants(wanted, i) || !low[i].defined()) continue;
    ASSIGN_OR_RETURN(Tensor g, C(low[i], call.graph.tensor(call.op.inputs[i]).dtype));
    RETURN_IF_ERROR(emit_grad(call, grads, i, std::move(g), accumulate));
  }
  return Status::ok();
}

// 16-bit float dtypes (mixed precision's activations).
inline bool is_low_float(DType d) { return d == DType::kBFloat16 || d == DType::kFloat16; }

// The other direction, for an op that follows its 16-bit input (graph/precision.h) where a backend's
// best kernel is float32's (the CPU's batch normalisation): 16-bit inputs widened, the float32 kernel
// run, the outputs the graph gives a 16-bit dtype narrowed; backward likewise, the gradients of
// 16-bit inputs narrowed. Float32 inputs (scales, statistics) are passed as they are.
template <ForwardFn F, ConvertFn C>
Status widened_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  std::vector<Tensor> wide(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i].defined() && is_low_float(in[i].dtype())) {
      ASSIGN_OR_RETURN(wide[i], C(in[i], DType::kFloat32));
    } else {
      wide[i] = in[i];
    }
  }
  RETURN_IF_ERROR(F(call, wide, out, saved));
  for (std::size_t k = 0; k < out.size() && k < call.op.outputs.size(); ++k) {
    DType const d = call.graph.tensor(call.op.outputs[k]).dtype;
    if (out[k].defined() && is_low_float(d)) {
      ASSIGN_OR_RETURN(out[k], C(out[k], d));
    }
  }
  return Status::ok();
}

// The output gradients widened to float32 (those of 16-bit outputs).
template <ConvertFn C>
Result<std::vector<Tensor>> widened_grads(std::vector<Tensor> const& gout) {
  std::vector<Tensor> g(gout.size());
  for (std::size_t k = 0; k < gout.size(); ++k) {
    if (gout[k].defined() && is_low_float(gout[k].dtype())) {
      ASSIGN_OR_RETURN(g[k], C(gout[k], DType::kFloat32));
    } else {
      g[k] = gout[k];
    }
  }
  return g;
}

template <BackwardFn B, ConvertFn C>
Status widened_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  ASSIGN_OR_RETURN(std::vector<Tensor> const g, widened_grads<C>(gout));
  std::vector<Tensor> fresh;
  RETURN_IF_ERROR(B(call, saved, g, wanted, fresh, false));
  for (std::size_t i = 0; i < fresh.size() && i < call.op.inputs.size(); ++i) {
    if (!wants(wanted, i) || !fresh[i].defined()) continue;
    ASSIGN_OR_RETURN(Tensor gi, C(fresh[i], call.graph.tensor(call.op.inputs[i]).dtype));
    RETURN_IF_ERROR(emit_grad(call, grads, i, std::move(gi), accumulate));
  }
  return Status::ok();
}

// BothFn's twin: input gradients set (narrowed to their inputs' dtypes), weight gradients (float32)
// added by the float32 kernel itself.
template <BothFn Both, ConvertFn C>
Status widened_both(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                    std::vector<Tensor>& weight_grads) {
  ASSIGN_OR_RETURN(std::vector<Tensor> const g, widened_grads<C>(gout));
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

}  // namespace gp::exec
