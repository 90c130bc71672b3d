// View family: views share the input's storage (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Cast to the same type; tensors are immutable once produced), Cast between types (masks and
// indices to numbers), Dropout and the random ops (kernels/view: the mask and the draws pure
// functions of seed and element index).
#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "exec/op_shared.h"
#include "graph/ops/view.h"
#include "kernels/bf16.h"
#include "kernels/hd/view.h"
#include "kernels/view.h"

namespace gp::exec::cpu {

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
  return emit_grad(call, grads, 0, grad_or_zeros(call, gout, 0, in_shape).reshaped(in_shape), accumulate);
}

Status dropout_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  auto const* attrs = attrs_of<graph::DropoutAttrs>(call.op);
  float const ratio = attrs ? attrs->ratio : 0.5f;
  out.assign(call.op.outputs.size(), Tensor());
  bool const active = call.training && ratio > 0.f;
  Tensor mask(x.shape(), DType::kUInt8);
  if (active) {
    Tensor y(x.shape());
    kernels::dropout_forward(x.data<float>(), x.numel(), ratio, call.rng_seed, y.data<float>(), mask.data<uint8_t>());
    out[0] = y;
  } else {
    std::memset(mask.raw(), 1, mask.nbytes());
    out[0] = x;
  }
  if (out.size() > 1) out[1] = mask.reshaped(x.shape());  // kUInt8 holds ONNX's bool mask
  if (saved) {
    saved->tensors.clear();
    if (active) saved->tensors.push_back(mask);
  }
  return Status::ok();
}

Status dropout_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  if (saved.tensors.empty()) return emit_grad(call, grads, 0, gout[0], accumulate);
  auto const* attrs = attrs_of<graph::DropoutAttrs>(call.op);
  Tensor dx(gout[0].shape());
  kernels::dropout_backward(gout[0].data<float>(), saved.tensors[0].data<uint8_t>(), dx.numel(),
                            attrs ? attrs->ratio : 0.5f, dx.data<float>());
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- Cast ----
namespace {

// bfloat16 through float32.
bool castable(DType d) { return elementwise_cast_dtype(d) || d == DType::kBFloat16; }

Status cast_convert_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::CastAttrs>(op, graph));
  DType const from = graph.tensor(op.inputs[0]).dtype;
  DType const to = graph.tensor(op.outputs[0]).dtype;
  if (!castable(from) || !castable(to))
    return unsupported("Cast from " + std::string(graph::dtype_name(from)) + " to " + graph::dtype_name(to) +
                       " (float32, bfloat16, float64, int64, int32, int8, uint8 and bool are supported)");
  return Status::ok();
}

// Truncation toward zero, as ONNX's Cast; out of range saturates and NaN becomes 0, where a plain
// C++ conversion is undefined (hd::cast_value, what the CUDA kernel computes too).
template <typename From, typename To>
void convert(Tensor const& x, Tensor& y) {
  From const* src = x.data<From>();
  To* dst = y.data<To>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) dst[i] = kernels::hd::cast_value<From, To>(src[i], false);
}

template <typename From>
void convert_from(Tensor const& x, Tensor& y) {
  switch (y.dtype()) {
    case DType::kFloat32:
      return convert<From, float>(x, y);
    case DType::kFloat64:
      return convert<From, double>(x, y);
    case DType::kInt64:
      return convert<From, int64_t>(x, y);
    case DType::kInt32:
      return convert<From, int32_t>(x, y);
    case DType::kInt8:
      return convert<From, int8_t>(x, y);
    case DType::kUInt8:
      return convert<From, uint8_t>(x, y);
    default:
      return convert<From, bool>(x, y);
  }
}

bool float_pair(DType a, DType b) {
  return (a == DType::kFloat32 && b == DType::kBFloat16) || (a == DType::kBFloat16 && b == DType::kFloat32);
}

// `x` converted to `to` (neither bfloat16).
Tensor convert_any(Tensor const& x, DType to) {
  Tensor y(x.shape(), to);
  switch (x.dtype()) {
    case DType::kFloat32:
      convert_from<float>(x, y);
      break;
    case DType::kFloat64:
      convert_from<double>(x, y);
      break;
    case DType::kInt64:
      convert_from<int64_t>(x, y);
      break;
    case DType::kInt32:
      convert_from<int32_t>(x, y);
      break;
    case DType::kInt8:
      convert_from<int8_t>(x, y);
      break;
    case DType::kUInt8:
      convert_from<uint8_t>(x, y);
      break;
    default: {  // bool: a nonzero byte reads as 1
      Tensor bytes(x.shape(), DType::kUInt8);
      for (int64_t i = 0; i < x.numel(); ++i) bytes.data<uint8_t>()[i] = x.data<uint8_t>()[i] != 0 ? 1 : 0;
      convert_from<uint8_t>(bytes, y);
      break;
    }
  }
  return y;
}

Status cast_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  DType const to = call.graph.tensor(call.op.outputs[0]).dtype;
  if (in[0].dtype() == to) return reshape_forward(call, in, out, saved);
  // bfloat16 to or from anything but float32 goes through float32.
  Tensor x = in[0].dtype() == DType::kBFloat16 ? convert_float(in[0], DType::kFloat32) : in[0];
  if (to == DType::kBFloat16 && x.dtype() != DType::kFloat32) x = convert_any(x, DType::kFloat32);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = x.dtype() == to ? x : float_pair(x.dtype(), to) ? convert_float(x, to) : convert_any(x, to);
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

// A cast between types is a step for the gradient (to or from an integer) or not differentiated
// (float64): zero for a float32 input that asks. The same type is a view.
Status cast_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  DType const from = call.graph.tensor(call.op.inputs[0]).dtype;
  DType const to = call.graph.tensor(call.op.outputs[0]).dtype;
  if (from == to) return reshape_backward(call, saved, gout, wanted, grads, accumulate);
  // Mixed precision's casts: the gradient is cast back to the input's dtype.
  if (float_pair(from, to)) {
    if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
    return emit_grad(call, grads, 0, convert_float(gout[0], from), accumulate);
  }
  return emit_zero_grad(call, wanted, grads, 0, shape_of(saved.tensors.at(0)), accumulate);
}

// ---- RandomUniformLike, RandomNormalLike, Bernoulli ----

Status random_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::RandomAttrs>(call.op);
  Tensor const& x = in[0];
  DType const to = call.graph.tensor(call.op.outputs[0]).dtype;
  Tensor y(x.shape(), to);
  uint64_t const seed = random_seed(call, a);
  switch (a.kind) {
    case graph::RandomKind::kUniform:
      kernels::random_uniform(seed, y.numel(), a.a, a.b, y.data<float>());
      break;
    case graph::RandomKind::kNormal:
      kernels::random_normal(seed, y.numel(), a.a, a.b, y.data<float>());
      break;
    case graph::RandomKind::kBernoulli:
      kernels::bernoulli(seed, x.data<float>(), y.numel(), to == DType::kFloat32 ? y.data<float>() : nullptr,
                         to == DType::kFloat32 ? nullptr : y.data<uint8_t>());
      break;
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

// A draw does not depend on its input's values (Bernoulli's on its probabilities only through a
// step): zero gradient for a float32 input that asks.
Status random_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  return emit_zero_grad(call, wanted, grads, 0, shape_of(saved.tensors.at(0)), accumulate);
}

}  // namespace

CpuKernelFamily view_kernels() {
  CpuKernelEntry const random{{random_forward, random_backward, random_backward, graph::ops::random_check}, 1, false};
  return {
      {OpKind::kCast, {{cast_forward, cast_backward, cast_backward, cast_convert_check}, 1, false}},
      {OpKind::kRandomUniformLike, random},
      {OpKind::kRandomNormalLike, random},
      {OpKind::kBernoulli, random},
  };
}

}  // namespace gp::exec::cpu
