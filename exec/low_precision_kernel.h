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

// The entry's functions: forward, B and W (a backward_both, if any, is not wrapped: left null so
// the backend runs B and W).
template <ForwardFn F, BackwardFn B, BackwardFn W, ConvertFn C>
OpKernels low_precision_kernels(CheckFn check) {
  return {low_precision_forward<F, C>, low_precision_backward<B, C>, low_precision_backward<W, C>, check};
}

}  // namespace gp::exec
