// Inside the CUDA backend: the activation family's ops (elementwise unary math on our kernels,
// kernels/cuda/math.h), in a header because Pow (binary.cc) runs a constant scalar exponent
// through them. Same conventions as the CPU's exec/cpu/activation.cc.
#pragma once

#include <optional>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/math.h"

namespace gp::exec::cuda {

// ---- activations (and Pow with a constant scalar exponent) ----

struct UnarySpec {
  kernels::hd::UnaryKind kind = kernels::hd::UnaryKind::kRelu;
  float alpha = 0.f;
};

inline Result<UnarySpec> unary_spec(OpCall const& call) {
  OpKind const t = call.op.kind();
  if (t == OpKind::kRelu) return UnarySpec{kernels::hd::UnaryKind::kRelu};
  if (t == OpKind::kLeakyRelu) {
    auto const* a = attrs_of<graph::LeakyReluAttrs>(call.op);
    return UnarySpec{kernels::hd::UnaryKind::kLeakyRelu, a ? a->alpha : 0.01f};
  }
  if (t == OpKind::kSigmoid) return UnarySpec{kernels::hd::UnaryKind::kSigmoid};
  if (t == OpKind::kTanh) return UnarySpec{kernels::hd::UnaryKind::kTanh};
  if (t == OpKind::kGelu) {
    auto const* a = attrs_of<graph::GeluAttrs>(call.op);
    return UnarySpec{a && a->tanh_approx ? kernels::hd::UnaryKind::kGeluTanh : kernels::hd::UnaryKind::kGeluErf};
  }
  if (t == OpKind::kSqrt) return UnarySpec{kernels::hd::UnaryKind::kSqrt};
  if (t == OpKind::kErf) return UnarySpec{kernels::hd::UnaryKind::kErf};
  if (t == OpKind::kExp) return UnarySpec{kernels::hd::UnaryKind::kExp};
  if (t == OpKind::kLog) return UnarySpec{kernels::hd::UnaryKind::kLog};
  if (t == OpKind::kAbs) return UnarySpec{kernels::hd::UnaryKind::kAbs};
  if (t == OpKind::kNeg) return UnarySpec{kernels::hd::UnaryKind::kNeg};
  if (t == OpKind::kPow) {
    graph::TensorData const* e = constant_input(call.op, call.graph, 1);
    if (e == nullptr || e->numel() != 1) return op_error(call, "the exponent must be a constant scalar");
    return UnarySpec{kernels::hd::UnaryKind::kPow, static_cast<float>(e->to_doubles().at(0))};
  }
  return op_error(call, "not an elementwise activation");
}

template <typename T>
Status unary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(UnarySpec const s, unary_spec(call));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kernels::cuda::unary_forward<T>(s.kind, s.alpha, x.data<T>(), y.data<T>(), x.numel(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {kernels::hd::unary_backward_uses_output(s.kind) ? y : x};
  return Status::ok();
}

template <typename T>
Status unary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& kept = saved.tensors.at(0);
  ASSIGN_OR_RETURN(UnarySpec const s, unary_spec(call));
  ASSIGN_OR_RETURN(Tensor dx, empty(kept.shape(), kept.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kernels::cuda::unary_backward<T>(s.kind, s.alpha, kept.data<T>(), gout[0].data<T>(), dx.data<T>(),
                                                 kept.numel(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- the other activations and math (hd::Pointwise: the CPU's formulas, shared) ----

struct PointwiseSpec {
  kernels::hd::Pointwise f = kernels::hd::Pointwise::kErf;
  kernels::hd::PointwiseParams p{};
};

// The Pointwise function of an op kind, if it has one.
std::optional<kernels::hd::Pointwise> pointwise_of(OpKind kind);

inline Result<PointwiseSpec> pointwise_spec(OpCall const& call) {
  auto const f = pointwise_of(call.op.kind());
  if (!f) return op_error(call, "not a pointwise activation");
  PointwiseSpec s{*f, {}};
  if (*f == kernels::hd::Pointwise::kClip) {
    auto const* c = attrs_of<graph::ClipAttrs>(call.op);
    graph::ClipAttrs const bounds = c ? *c : graph::ClipAttrs{};
    s.p = {bounds.min, bounds.max, 0.f};
  } else if (auto const* a = attrs_of<graph::ActivationAttrs>(call.op)) {
    s.p = {a->alpha, a->beta, a->gamma};
  }
  return s;
}

template <typename T>
Status pointwise_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(PointwiseSpec const s, pointwise_spec(call));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kernels::cuda::pointwise_forward<T>(s.f, s.p, x.data<T>(), y.data<T>(), x.numel(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x};
  return Status::ok();
}

template <typename T>
Status pointwise_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  ASSIGN_OR_RETURN(PointwiseSpec const s, pointwise_spec(call));
  ASSIGN_OR_RETURN(Tensor dx, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(
      kernels::cuda::pointwise_backward<T>(s.f, s.p, x.data<T>(), gout[0].data<T>(), dx.data<T>(), x.numel(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace gp::exec::cuda
