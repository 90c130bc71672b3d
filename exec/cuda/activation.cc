// The CUDA backend's activation family (the elementwise ops themselves: exec/cuda/activation.h),
// and here Clip, PRelu and the variadic Max/Min/Sum/Mean with numpy broadcasting, as the CPU's
// exec/cpu/activation.cc computes them (the per-element functions of kernels/hd/activation.h).
#include "exec/cuda/activation.h"
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"
#include "exec/op_shared.h"

namespace gp::exec::cuda {
namespace {

namespace hd = kernels::hd;

namespace kc = kernels::cuda;

// ---- Clip: static bounds (ClipAttrs) run as the Pointwise kClip; a bound computed at run time (a
// float32 scalar input) is read by the kernels on the device and differentiated, as on the CPU ----

// Clip's optional scalar bounds (inputs 1 and 2) as device pointers, nullptr where absent; float
// Clip and integer Clip read them alike.
template <typename T>
Status clip_bound_inputs(OpCall const& call, std::vector<Tensor> const& in, T const* (&bound)[2]) {
  for (std::size_t k = 1; k < 3 && k < in.size(); ++k) {
    if (!in[k].defined()) continue;
    if (in[k].numel() != 1) return op_error(call, "bound input " + std::to_string(k) + " is not a scalar");
    bound[k - 1] = in[k].data<T>();
  }
  return Status::ok();
}

bool runtime_bounds(OpCall const& call) { return has_input(call.op, 1) || has_input(call.op, 2); }

Status clip_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (!runtime_bounds(call)) return pointwise_forward<float>(call, in, out, saved);
  auto const* a = attrs_of<graph::ClipAttrs>(call.op);
  graph::ClipAttrs const defaults = a ? *a : graph::ClipAttrs{};
  float const* bound[2] = {nullptr, nullptr};
  RETURN_IF_ERROR(clip_bound_inputs(call, in, bound));
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(Tensor bounds, empty({2}, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::clip_bounds(bound[0], bound[1], defaults.min, defaults.max, bounds.data<float>(), stream));
  GP_CUDA_CHECK(kc::clip_forward(x.data<float>(), x.numel(), bounds.data<float>(), y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, bounds};
  return Status::ok();
}

Status clip_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (saved.tensors.size() < 2) return pointwise_backward<float>(call, saved, gout, wanted, grads, accumulate);
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors[0];
  Tensor const& bounds = saved.tensors[1];
  Tensor dx, full[2];
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(dx, empty(x.shape(), DType::kFloat32));
  }
  for (std::size_t k : {std::size_t{1}, std::size_t{2}}) {
    if (!wants(wanted, k) || !has_input(call.op, k)) continue;
    ASSIGN_OR_RETURN(full[k - 1], empty(x.shape(), DType::kFloat32));
  }
  auto ptr = [](Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::clip_backward(x.data<float>(), gout[0].data<float>(), x.numel(), bounds.data<float>(), ptr(dx),
                                  ptr(full[0]), ptr(full[1]), stream));
  for (std::size_t k : {std::size_t{1}, std::size_t{2}}) {
    if (!full[k - 1].defined()) continue;
    ASSIGN_OR_RETURN(Tensor g,
                     sum_down<float>(call, full[k - 1], call.graph.tensor(call.op.inputs[k]).shape.dims, 1.f));
    RETURN_IF_ERROR(emit_grad(call, grads, k, std::move(g), accumulate));
  }
  if (dx.defined()) return emit_grad(call, grads, 0, std::move(dx), accumulate);
  return Status::ok();
}

// ---- Neg, Abs and Sign of integers (hd::int_unary_at, the CPU's function); never differentiated ----

hd::IntUnaryKind int_unary_kind(OpKind k) {
  return k == OpKind::kNeg   ? hd::IntUnaryKind::kNeg
         : k == OpKind::kAbs ? hd::IntUnaryKind::kAbs
                             : hd::IntUnaryKind::kSign;
}

template <typename T>
Status int_unary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::int_unary<T>(int_unary_kind(call.op.kind()), x.data<T>(), x.numel(), y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

// ---- Clip of integers: the bounds stay inputs (graph/ops/activation.cc), read by the kernel on
// the device; never differentiated ----

template <typename T>
Status int_clip_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  T const* bound[2] = {nullptr, nullptr};
  RETURN_IF_ERROR(clip_bound_inputs(call, in, bound));
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::int_clip<T>(x.data<T>(), x.numel(), bound[0], bound[1], y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

// ---- PRelu: the slope (usually a weight) broadcasts to x ----

Status prelu_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& slope = in[1];
  std::vector<int64_t> shape;
  if (!hd::broadcast_shape(x.shape(), slope.shape(), shape) || shape != x.shape())
    return op_error(call, "slope " + slope.shape_string() + " does not broadcast to x " + x.shape_string());
  ASSIGN_OR_RETURN(Tensor const s, broadcast_to<float>(call, slope, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::prelu_forward(x.data<float>(), s.data<float>(), x.numel(), y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, slope};
  return Status::ok();
}

Status prelu_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined() || (!wants(wanted, 0) && !wants(wanted, 1))) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  Tensor const& slope = saved.tensors.at(1);
  ASSIGN_OR_RETURN(Tensor const s, broadcast_to<float>(call, slope, x.shape()));
  Tensor dx, dslope_full;
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(dx, empty(x.shape(), DType::kFloat32));
  }
  if (wants(wanted, 1)) {
    ASSIGN_OR_RETURN(dslope_full, empty(x.shape(), DType::kFloat32));
  }
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::prelu_backward(x.data<float>(), s.data<float>(), gout[0].data<float>(), x.numel(),
                                   dx.defined() ? dx.data<float>() : nullptr,
                                   dslope_full.defined() ? dslope_full.data<float>() : nullptr, stream));
  if (dslope_full.defined()) {
    ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, dslope_full, slope.shape(), 1.f));
    RETURN_IF_ERROR(emit_grad(call, grads, 1, g, accumulate));
  }
  if (dx.defined()) return emit_grad(call, grads, 0, dx, accumulate);
  return Status::ok();
}

// ---- Min, Max, Sum, Mean over one or more inputs with numpy broadcasting ----

// Saved: {which input each element came from (Max/Min)}, then every input's shape.
Status variadic_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, variadic_shape(call, in));
  OpKind const t = call.op.kind();
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  std::vector<Tensor> keep;
  ASSIGN_OR_RETURN(Tensor y, broadcast_to<float>(call, in[0], shape));
  if (t == OpKind::kSum || t == OpKind::kMean) {
    for (std::size_t k = 1; k < in.size(); ++k) {
      hd::BinaryIndex index;
      if (!hd::make_binary_index(shape, shape, in[k].shape(), index))
        return op_error(call, "adding input " + std::to_string(k) + " needs more than " +
                                  std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
      ASSIGN_OR_RETURN(Tensor sum, empty(shape, DType::kFloat32));
      GP_CUDA_CHECK(kc::binary<float>(hd::BinaryKind::kAdd, index, y.data<float>(), in[k].data<float>(),
                                      sum.data<float>(), stream));
      y = sum;
    }
    if (t == OpKind::kMean && in.size() > 1) {
      ASSIGN_OR_RETURN(y, broadcast_to<float>(call, y, shape, 1.f / static_cast<float>(in.size())));
    }
  } else {
    ASSIGN_OR_RETURN(Tensor which, empty(shape, DType::kInt32));
    GP_CUDA_CHECK(kc::fill_value<int32_t>(which.data<int32_t>(), which.numel(), 0, stream));
    for (std::size_t k = 1; k < in.size(); ++k) {
      ASSIGN_OR_RETURN(Tensor const xk, broadcast_to<float>(call, in[k], shape));
      GP_CUDA_CHECK(kc::select_step(xk.data<float>(), y.numel(), t == OpKind::kMax, static_cast<int32_t>(k),
                                    y.data<float>(), which.data<int32_t>(), stream));
    }
    keep.push_back(which);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    for (Tensor const& x : in) keep.push_back(shape_tensor(x.shape()));
    saved->tensors = std::move(keep);
  }
  return Status::ok();
}

Status variadic_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& dy = gout[0];
  OpKind const t = call.op.kind();
  bool const select = t == OpKind::kMin || t == OpKind::kMax;
  std::size_t const n = saved.tensors.size() - (select ? 1 : 0);
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  float const scale = t == OpKind::kMean && n > 1 ? 1.f / static_cast<float>(n) : 1.f;
  for (std::size_t k = 0; k < n; ++k) {
    if (!wants(wanted, k)) continue;
    Tensor full = dy;
    if (select) {
      ASSIGN_OR_RETURN(full, empty(dy.shape(), DType::kFloat32));
      GP_CUDA_CHECK(kc::selected_grad(dy.data<float>(), saved.tensors[0].data<int32_t>(), static_cast<int32_t>(k),
                                      dy.numel(), full.data<float>(), stream));
    }
    std::vector<int64_t> const target = shape_of(saved.tensors[k + (select ? 1 : 0)]);
    ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, full, target, scale));
    RETURN_IF_ERROR(emit_grad(call, grads, k, g, accumulate));
  }
  return Status::ok();
}

}  // namespace

std::optional<hd::Pointwise> pointwise_of(OpKind kind) {
  using P = hd::Pointwise;
  switch (kind) {
    case OpKind::kSelu:
      return P::kSelu;
    case OpKind::kCelu:
      return P::kCelu;
    case OpKind::kSoftsign:
      return P::kSoftsign;
    case OpKind::kHardSigmoid:
      return P::kHardSigmoid;
    case OpKind::kThresholdedRelu:
      return P::kThresholdedRelu;
    case OpKind::kShrink:
      return P::kShrink;
    case OpKind::kSin:
      return P::kSin;
    case OpKind::kCos:
      return P::kCos;
    case OpKind::kTan:
      return P::kTan;
    case OpKind::kAsin:
      return P::kAsin;
    case OpKind::kAcos:
      return P::kAcos;
    case OpKind::kAtan:
      return P::kAtan;
    case OpKind::kSinh:
      return P::kSinh;
    case OpKind::kCosh:
      return P::kCosh;
    case OpKind::kAsinh:
      return P::kAsinh;
    case OpKind::kAcosh:
      return P::kAcosh;
    case OpKind::kAtanh:
      return P::kAtanh;
    case OpKind::kSign:
      return P::kSign;
    case OpKind::kFloor:
      return P::kFloor;
    case OpKind::kCeil:
      return P::kCeil;
    case OpKind::kRound:
      return P::kRound;
    case OpKind::kClip:
      return P::kClip;
    case OpKind::kHardSwish:
      return P::kHardSwish;
    case OpKind::kSoftplus:
      return P::kSoftplus;
    case OpKind::kReciprocal:
      return P::kReciprocal;
    case OpKind::kElu:
      return P::kElu;
    default:
      return std::nullopt;
  }
}

std::vector<KernelEntry> activation_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const unary{unary_forward<float>, unary_backward<float>, unary_backward<float>, no_check};
  std::vector<KernelEntry> t;
  for (OpKind u : {OpKind::kRelu, OpKind::kLeakyRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kGelu, OpKind::kSqrt,
                   OpKind::kErf, OpKind::kExp, OpKind::kLog, OpKind::kAbs, OpKind::kNeg})
    t.push_back({u, f32, unary, 1});
  OpKernels const pointwise{pointwise_forward<float>, pointwise_backward<float>, pointwise_backward<float>, no_check};
  for (OpKind p :
       {OpKind::kSelu,      OpKind::kCelu,     OpKind::kSoftsign,   OpKind::kHardSigmoid, OpKind::kThresholdedRelu,
        OpKind::kSin,       OpKind::kCos,      OpKind::kTan,        OpKind::kAsin,        OpKind::kAcos,
        OpKind::kAtan,      OpKind::kSinh,     OpKind::kCosh,       OpKind::kAsinh,       OpKind::kAcosh,
        OpKind::kAtanh,     OpKind::kSign,     OpKind::kFloor,      OpKind::kCeil,        OpKind::kRound,
        OpKind::kHardSwish, OpKind::kSoftplus, OpKind::kReciprocal, OpKind::kElu,         OpKind::kShrink})
    t.push_back({p, f32, pointwise, 1});
  t.push_back({OpKind::kClip, f32, {clip_forward, clip_backward, clip_backward, clip_check}, 1});
  for (OpKind u : {OpKind::kNeg, OpKind::kAbs, OpKind::kSign}) {
    t.push_back({u, DType::kInt64, {int_unary_forward<int64_t>, no_gradient, no_gradient, no_check}, 1});
    t.push_back({u, DType::kInt32, {int_unary_forward<int32_t>, no_gradient, no_gradient, no_check}, 1});
    t.push_back({u, DType::kInt8, {int_unary_forward<int8_t>, no_gradient, no_gradient, no_check}, 1});
    if (u != OpKind::kNeg)  // ONNX's Neg takes signed types only
      t.push_back({u, DType::kUInt8, {int_unary_forward<uint8_t>, no_gradient, no_gradient, no_check}, 1});
  }
  t.push_back({OpKind::kClip, DType::kInt64, {int_clip_forward<int64_t>, no_gradient, no_gradient, int_clip_check}, 1});
  t.push_back({OpKind::kClip, DType::kInt32, {int_clip_forward<int32_t>, no_gradient, no_gradient, int_clip_check}, 1});
  t.push_back({OpKind::kClip, DType::kInt8, {int_clip_forward<int8_t>, no_gradient, no_gradient, int_clip_check}, 1});
  t.push_back({OpKind::kClip, DType::kUInt8, {int_clip_forward<uint8_t>, no_gradient, no_gradient, int_clip_check}, 1});
  t.push_back({OpKind::kPRelu, f32, {prelu_forward, prelu_backward, prelu_backward, no_check}, 2});
  OpKernels const variadic{variadic_forward, variadic_backward, variadic_backward, variadic_check};
  for (OpKind v : {OpKind::kMin, OpKind::kMax, OpKind::kSum, OpKind::kMean}) t.push_back({v, f32, variadic, 1});
  // Mixed precision: Relu and Gelu follow their 16-bit input (graph/precision.h's policy); the
  // per-element math is float32.
  for (OpKind u : {OpKind::kRelu, OpKind::kGelu}) {
    t.push_back({u,
                 DType::kBFloat16,
                 {unary_forward<__nv_bfloat16>, unary_backward<__nv_bfloat16>, unary_backward<__nv_bfloat16>, no_check},
                 1});
    t.push_back(
        {u, DType::kFloat16, {unary_forward<__half>, unary_backward<__half>, unary_backward<__half>, no_check}, 1});
  }
  return t;
}

}  // namespace gp::exec::cuda
