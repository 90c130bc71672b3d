// The CUDA backend's view family: views that share storage (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, same-type Cast; any dtype), Cast between float32, float64, int64, int32, int8, uint8 and
// bool and between float32 and bfloat16/half (mixed precision; exec/cuda/low_precision.h), Dropout
// (the CPU's mask bit for bit) and the random ops (the CPU's draws). Same inputs, outputs and
// conventions as the CPU's exec/cpu/view.cc; kernels in kernels/cuda/math.h.
#include <algorithm>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/math.h"
#include <limits>

#include "exec/cuda/ops_shared.h"
#include "graph/ops/move.h"
#include "graph/ops/pool.h"
#include "graph/ops/view.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"
#include "exec/op_shared.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// The call's seed for a kernel (random ops: with their seed attribute's `mix`): its value, or the
// device slot a captured step's kernel reads it from when it runs (OpCall::rng_seed_slot).
hd::SeedSource seed_source(OpCall const& call, uint64_t mix = 0) {
  return {.seed = call.rng_seed ^ mix, .slot = call.rng_seed_slot, .salt = call.rng_salt, .mix = mix};
}

// ---- Dropout ----

float dropout_ratio(OpCall const& call) {
  auto const* a = attrs_of<graph::DropoutAttrs>(call.op);
  return a ? a->ratio : 0.5f;
}

template <typename T>
Status dropout_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  float const ratio = dropout_ratio(call);
  bool const active = call.training && ratio > 0.f;
  out.assign(call.op.outputs.size(), Tensor());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  Tensor mask;
  if (active || out.size() > 1) {
    ASSIGN_OR_RETURN(mask, empty(x.shape(), DType::kUInt8));  // kUInt8 holds ONNX's bool mask
  }
  if (active) {
    ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
    GP_CUDA_CHECK(kc::dropout_forward<T>(x.data<T>(), x.numel(), ratio, seed_source(call), y.data<T>(),
                                         mask.data<uint8_t>(), stream));
    out[0] = y;
  } else {
    out[0] = x;
    if (mask.defined() && mask.nbytes() > 0) GP_CUDA_CHECK(cudaMemsetAsync(mask.raw(), 1, mask.nbytes(), stream));
  }
  if (out.size() > 1) out[1] = mask;
  if (saved) {
    saved->tensors.clear();
    if (active) saved->tensors.push_back(mask);
  }
  return Status::ok();
}

template <typename T>
Status dropout_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  if (saved.tensors.empty()) return emit_grad(call, grads, 0, gout[0], accumulate);
  Tensor const& mask = saved.tensors[0];
  ASSIGN_OR_RETURN(Tensor dx, empty(gout[0].shape(), gout[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::dropout_backward<T>(gout[0].data<T>(), mask.data<uint8_t>(), dx.numel(), dropout_ratio(call),
                                        dx.data<T>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- views ----

Status reshape_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, graph::ops::view_output_shape(call.graph, call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = in[0].reshaped(shape);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status reshape_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  Tensor g = grad_or_zeros(call, gout, 0, in_shape);
  return emit_grad(call, grads, 0, g.reshaped(in_shape), accumulate);
}

// ---- Cast between float32, float64, int64, int32, int8, uint8 and bool (hd::cast_value, the CPU's
// conversion), and float32 <-> bfloat16/half (the same type is a view) ----

// Mixed precision's casts (graph::apply_precision): between float32 and a 16-bit float.
bool float_pair(DType from, DType to) {
  return (from == DType::kFloat32 && is_low_float(to)) || (is_low_float(from) && to == DType::kFloat32);
}

Status cast_convert_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::CastAttrs>(op, graph));
  DType const from = graph.tensor(op.inputs[0]).dtype, to = graph.tensor(op.outputs[0]).dtype;
  if (from == to || float_pair(from, to)) return Status::ok();
  if (!elementwise_cast_dtype(from) || !elementwise_cast_dtype(to))
    return unsupported("Cast from " + std::string(graph::dtype_name(from)) + " to " + graph::dtype_name(to) +
                       " (float32, float64, int64, int32, int8, uint8 and bool, and float32 <-> bfloat16/float16, "
                       "run on CUDA)");
  return Status::ok();
}

template <typename From>
Status cast_from(Tensor const& x, Tensor& y, cudaStream_t stream) {
  From const* src = x.data<From>();
  int64_t const n = x.numel();
  switch (y.dtype()) {
    case DType::kFloat32:
      GP_CUDA_CHECK(kc::cast(src, y.data<float>(), n, false, stream));
      break;
    case DType::kFloat64:
      GP_CUDA_CHECK(kc::cast(src, y.data<double>(), n, false, stream));
      break;
    case DType::kInt8:
      GP_CUDA_CHECK(kc::cast(src, y.data<int8_t>(), n, false, stream));
      break;
    case DType::kInt64:
      GP_CUDA_CHECK(kc::cast(src, y.data<int64_t>(), n, false, stream));
      break;
    case DType::kInt32:
      GP_CUDA_CHECK(kc::cast(src, y.data<int32_t>(), n, false, stream));
      break;
    default:  // bool (nonzero) and uint8 (the value)
      GP_CUDA_CHECK(kc::cast(src, y.data<uint8_t>(), n, y.dtype() == DType::kBool, stream));
      break;
  }
  return Status::ok();
}

Status cast_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  DType const to = call.graph.tensor(call.op.outputs[0]).dtype;
  if (x.dtype() == to) return reshape_forward(call, in, out, saved);
  out.assign(call.op.outputs.size(), Tensor());
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  if (float_pair(x.dtype(), to)) {
    ASSIGN_OR_RETURN(out[0], convert_float(x, to));
    return Status::ok();
  }
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), to));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  switch (x.dtype()) {
    case DType::kFloat32:
      RETURN_IF_ERROR(cast_from<float>(x, y, stream));
      break;
    case DType::kInt64:
      RETURN_IF_ERROR(cast_from<int64_t>(x, y, stream));
      break;
    case DType::kInt32:
      RETURN_IF_ERROR(cast_from<int32_t>(x, y, stream));
      break;
    case DType::kFloat64:
      RETURN_IF_ERROR(cast_from<double>(x, y, stream));
      break;
    case DType::kInt8:
      RETURN_IF_ERROR(cast_from<int8_t>(x, y, stream));
      break;
    default:  // bool and uint8
      RETURN_IF_ERROR(cast_from<uint8_t>(x, y, stream));
      break;
  }
  out[0] = y;
  return Status::ok();
}

// Between types a cast is a step (to or from an integer): zero gradient for a float32 input that
// asks, as on the CPU; the same type is a view; between float types the gradient is cast back.
Status cast_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  DType const from = call.graph.tensor(call.op.inputs[0]).dtype, to = call.graph.tensor(call.op.outputs[0]).dtype;
  if (from == to) return reshape_backward(call, saved, gout, wanted, grads, accumulate);
  if (float_pair(from, to)) {
    if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
    ASSIGN_OR_RETURN(Tensor g, convert_float(gout[0], from));
    return emit_grad(call, grads, 0, std::move(g), accumulate);
  }
  return emit_zero_grad(call, wanted, grads, 0, shape_of(saved.tensors.at(0)), accumulate);
}

// ---- RandomUniformLike, RandomNormalLike, Bernoulli: the CPU's draws ----

Status random_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::RandomAttrs>(call.op);
  Tensor const& x = in[0];
  DType const to = call.graph.tensor(call.op.outputs[0]).dtype;
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), to));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  hd::SeedSource const seed = seed_source(call, random_seed_mix(a));
  if (a.kind == graph::RandomKind::kBernoulli) {
    if (to == DType::kFloat32)
      GP_CUDA_CHECK(kc::bernoulli(seed, x.data<float>(), y.data<float>(), y.numel(), stream));
    else
      GP_CUDA_CHECK(kc::bernoulli(seed, x.data<float>(), y.data<uint8_t>(), y.numel(), stream));
  } else {
    GP_CUDA_CHECK(
        kc::random_fill(a.kind == graph::RandomKind::kNormal, seed, a.a, a.b, y.data<float>(), y.numel(), stream));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

// A draw does not depend on its input's values: zero gradient for a float32 input that asks.
Status random_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  return emit_zero_grad(call, wanted, grads, 0, shape_of(saved.tensors.at(0)), accumulate);
}

}  // namespace

Result<Tensor> convert_float(Tensor const& x, DType to) {
  if (x.dtype() == to) return x;
  if (!float_pair(x.dtype(), to))
    return internal_error(std::string("convert_float from ") + graph::dtype_name(x.dtype()) + " to " +
                          graph::dtype_name(to));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), to));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  int64_t const n = x.numel();
  if (to == DType::kBFloat16) {
    GP_CUDA_CHECK(kc::cast(x.data<float>(), y.data<__nv_bfloat16>(), n, false, stream));
  } else if (to == DType::kFloat16) {
    GP_CUDA_CHECK(kc::cast(x.data<float>(), y.data<__half>(), n, false, stream));
  } else if (x.dtype() == DType::kBFloat16) {
    GP_CUDA_CHECK(kc::cast(x.data<__nv_bfloat16>(), y.data<float>(), n, false, stream));
  } else {
    GP_CUDA_CHECK(kc::cast(x.data<__half>(), y.data<float>(), n, false, stream));
  }
  return y;
}

std::vector<KernelEntry> view_kernels() {
  constexpr DType f32 = DType::kFloat32;
  std::vector<KernelEntry> t;
  t.push_back(
      {OpKind::kDropout, f32, {dropout_forward<float>, dropout_backward<float>, dropout_backward<float>, no_check}, 1});
  OpKernels const view{reshape_forward, reshape_backward, reshape_backward, graph::ops::view_check};
  OpKernels const cast{cast_forward, cast_backward, cast_backward, cast_convert_check};
  // Views only reinterpret the bytes: masks and ids too (an int64 target unsqueezed for a loss), and
  // mixed precision's 16-bit activations.
  for (DType d : {f32, DType::kBFloat16, DType::kFloat16, DType::kFloat64, DType::kInt64, DType::kInt32, DType::kInt8,
                  DType::kBool, DType::kUInt8}) {
    for (OpKind v : {OpKind::kReshape, OpKind::kFlatten, OpKind::kSqueeze, OpKind::kUnsqueeze, OpKind::kIdentity})
      t.push_back({v, d, view, 1});
    t.push_back({OpKind::kCast, d, cast, 1});
  }
  OpKernels const random{random_forward, random_backward, random_backward, graph::ops::random_check};
  for (OpKind r : {OpKind::kRandomUniformLike, OpKind::kRandomNormalLike, OpKind::kBernoulli})
    for (DType d : {f32, DType::kFloat64, DType::kInt64, DType::kInt32, DType::kInt8, DType::kBool, DType::kUInt8})
      if (r != OpKind::kBernoulli || d == f32) t.push_back({r, d, random, 1});
  return t;
}

}  // namespace gp::exec::cuda
