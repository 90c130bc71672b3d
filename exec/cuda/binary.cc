// The CUDA backend's binary family: broadcasting Add, Sub, Mul, Div (backward summed down to each
// input's shape; of int64 and int32 too, never differentiated) and Pow (a constant scalar exponent
// as an activation, a tensor exponent broadcast). Same inputs, outputs and conventions as the CPU's
// exec/cpu/binary.cc; kernels in kernels/cuda/math.h.
#include <algorithm>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/math.h"
#include "exec/cuda/activation.h"
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"
#include "exec/op_shared.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// ---- Add, Sub, Mul, Div ----

Status binary_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (graph::TensorId t : op.inputs)
    if (t == graph::kNoTensor || graph.tensor(t).dtype != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a non-float32 input (only float32 arithmetic is supported)");
  return Status::ok();
}

// Mixed precision's Add of two tensors of the entry's 16-bit dtype (graph/precision.h: an Add with
// a float32 operand runs in float32 behind casts).
Status same_low_dtype_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() != 2 || op.inputs[0] == graph::kNoTensor || op.inputs[1] == graph::kNoTensor ||
      graph.tensor(op.inputs[0]).dtype != graph.tensor(op.inputs[1]).dtype)
    return unsupported(op.type + " '" + op.name + "' mixes dtypes (16-bit arithmetic needs both inputs 16-bit)");
  return Status::ok();
}

// a ∘ b broadcast to `shape`.
template <typename T>
Result<Tensor> apply_binary(OpCall const& call, hd::BinaryKind kind, Tensor const& a, Tensor const& b,
                            std::vector<int64_t> const& shape) {
  hd::BinaryIndex index;
  if (!hd::make_binary_index(shape, a.shape(), b.shape(), index))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " need more than " +
                              std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
  ASSIGN_OR_RETURN(Tensor y, empty(shape, a.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::binary<T>(kind, index, a.data<T>(), b.data<T>(), y.data<T>(), stream));
  return y;
}

template <typename T>
Status binary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  std::vector<int64_t> shape;
  if (!hd::broadcast_shape(a.shape(), b.shape(), shape))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " do not broadcast");
  hd::BinaryKind const kind = binary_kind_of(call.op.kind());
  ASSIGN_OR_RETURN(Tensor y, apply_binary<T>(call, kind, a, b, shape));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    if (kind == hd::BinaryKind::kMul) {
      saved->tensors = {a, b};
    } else if (kind == hd::BinaryKind::kDiv) {
      saved->tensors = {shape_tensor(a.shape()), b, y};
    } else {
      saved->tensors = {shape_tensor(a.shape()), shape_tensor(b.shape())};
    }
  }
  return Status::ok();
}

template <typename T>
Status binary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined() || !(wants(wanted, 0) || wants(wanted, 1))) return Status::ok();
  Tensor const& dy = gout[0];
  std::vector<int64_t> const& shape = dy.shape();
  hd::BinaryKind const kind = binary_kind_of(call.op.kind());
  auto grad = [&](std::size_t i, Tensor const& full, std::vector<int64_t> const& target, float scale) -> Status {
    ASSIGN_OR_RETURN(Tensor g, sum_down<T>(call, full, target, scale));
    return emit_grad(call, grads, i, g, accumulate);
  };
  if (kind == hd::BinaryKind::kAdd || kind == hd::BinaryKind::kSub) {
    if (wants(wanted, 0)) RETURN_IF_ERROR(grad(0, dy, shape_of(saved.tensors.at(0)), 1.f));
    if (wants(wanted, 1))
      RETURN_IF_ERROR(grad(1, dy, shape_of(saved.tensors.at(1)), kind == hd::BinaryKind::kSub ? -1.f : 1.f));
  } else if (kind == hd::BinaryKind::kMul) {
    Tensor const& a = saved.tensors.at(0);
    Tensor const& b = saved.tensors.at(1);
    for (std::size_t i = 0; i < 2; ++i) {
      if (!wants(wanted, i)) continue;
      ASSIGN_OR_RETURN(Tensor full, apply_binary<T>(call, hd::BinaryKind::kMul, dy, i == 0 ? b : a, shape));
      RETURN_IF_ERROR(grad(i, full, (i == 0 ? a : b).shape(), 1.f));
    }
  } else {
    // y = a / b: da = dy / b, db = −(dy / b) · y
    Tensor const& b = saved.tensors.at(1);
    Tensor const& y = saved.tensors.at(2);
    ASSIGN_OR_RETURN(Tensor dy_b, apply_binary<T>(call, hd::BinaryKind::kDiv, dy, b, shape));
    if (wants(wanted, 0)) RETURN_IF_ERROR(grad(0, dy_b, shape_of(saved.tensors.at(0)), 1.f));
    if (wants(wanted, 1)) {
      ASSIGN_OR_RETURN(Tensor full, apply_binary<T>(call, hd::BinaryKind::kMul, dy_b, y, shape));
      RETURN_IF_ERROR(grad(1, full, b.shape(), -1.f));
    }
  }
  return Status::ok();
}

// ---- Pow ----

// A constant scalar exponent runs as an activation (UnaryKind::kPow); any other exponent (a
// tensor, a weight, a constant of several elements) broadcasts with the base like the binary
// operators, as on the CPU (exec/cpu/binary.cc).
bool scalar_exponent(graph::Op const& op, graph::OpGraph const& graph) {
  graph::TensorData const* e = constant_input(op, graph, 1);
  return e != nullptr && e->numel() == 1;
}

Status pow_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() < 2 || op.inputs[1] == graph::kNoTensor) return unsupported("Pow needs an exponent");
  DType const d = graph.tensor(op.inputs[1]).dtype;
  if (!scalar_exponent(op, graph) && d != DType::kFloat32)
    return unsupported("Pow '" + op.name + "' has a " + graph::dtype_name(d) + " exponent tensor (float32 only)");
  return Status::ok();
}

Result<hd::BinaryIndex> pow_index(OpCall const& call, std::vector<int64_t> const& shape, Tensor const& a,
                                  Tensor const& b) {
  hd::BinaryIndex index;
  if (!hd::make_binary_index(shape, a.shape(), b.shape(), index))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " need more than " +
                              std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
  return index;
}

template <typename T>
Status pow_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (scalar_exponent(call.op, call.graph)) return unary_forward<T>(call, in, out, saved);
  if (in.size() < 2 || !in[1].defined()) return op_error(call, "the exponent input is missing");
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  std::vector<int64_t> shape;
  if (!hd::broadcast_shape(a.shape(), b.shape(), shape))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " do not broadcast");
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, pow_index(call, shape, a, b));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, a.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::pow_forward<T>(index, a.data<T>(), b.data<T>(), y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {a, b, y};
  return Status::ok();
}

// da = Σ dy·b·a^(b−1) and db = Σ dy·a^b·ln a, each summed down to its operand's shape.
template <typename T>
Status pow_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (scalar_exponent(call.op, call.graph)) return unary_backward<T>(call, saved, gout, wanted, grads, accumulate);
  if (!gout.at(0).defined() || !(wants(wanted, 0) || wants(wanted, 1))) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Tensor const& y = saved.tensors.at(2);
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, pow_index(call, y.shape(), a, b));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  for (std::size_t i = 0; i < 2; ++i) {
    if (!wants(wanted, i)) continue;
    hd::PowOperand const wrt = i == 0 ? hd::PowOperand::kBase : hd::PowOperand::kExponent;
    ASSIGN_OR_RETURN(Tensor full, empty(y.shape(), y.dtype()));
    GP_CUDA_CHECK(kc::pow_backward<T>(wrt, index, a.data<T>(), b.data<T>(), y.data<T>(), gout[0].data<T>(),
                                      full.data<T>(), stream));
    Tensor const& operand = i == 0 ? a : b;
    Tensor g;
    if (operand.numel() == full.numel()) {
      g = full.reshaped(operand.shape());  // not broadcast: nothing to sum
    } else {
      ASSIGN_OR_RETURN(g, sum_down<T>(call, full, operand.shape(), 1.f));
    }
    RETURN_IF_ERROR(emit_grad(call, grads, i, g, accumulate));
  }
  return Status::ok();
}

// ---- integer Add, Sub, Mul, Div, Max, Min (int64, int32): ids and positions computed per micro-batch ----

// RoBERTa's position ids (cumsum of the padding mask times the mask, plus the padding index) and
// the index arithmetic torch's dynamo exporter leaves in Swin's, ConvNeXt's and MaxViT's graphs: the
// CPU's per-element function (hd::int_binary_op) over the inputs folded pairwise in the CPU's order
// (Max and Min take one or more; one is copied), never differentiated. A zero divisor is the CPU's
// error; its check is read with the step's others while the backend defers checks.
template <typename T>
Status int_binary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  DType const want = sizeof(T) == 8 ? DType::kInt64 : DType::kInt32;
  for (std::size_t k = std::min<std::size_t>(1, in.size() - 1); k < in.size(); ++k)
    if (in[k].dtype() != in[0].dtype() || in[0].dtype() != want)
      return op_error(call, "inputs have dtypes " + std::string(graph::dtype_name(in[0].dtype())) + " and " +
                                graph::dtype_name(in[k].dtype()) + ", the kernel " + graph::dtype_name(want));
  hd::BinaryKind const kind = binary_kind_of(call.op.kind());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  Tensor y = in.at(0);
  if (in.size() == 1) {
    ASSIGN_OR_RETURN(y, copy_of(in[0]));
  }
  for (std::size_t k = 1; k < in.size(); ++k) {
    std::vector<int64_t> shape;
    if (!hd::broadcast_shape(y.shape(), in[k].shape(), shape))
      return op_error(call, "shapes " + y.shape_string() + " and " + in[k].shape_string() + " do not broadcast");
    hd::BinaryIndex index;
    if (!hd::make_binary_index(shape, y.shape(), in[k].shape(), index))
      return op_error(call, "shapes " + y.shape_string() + " and " + in[k].shape_string() + " need more than " +
                                std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
    ASSIGN_OR_RETURN(Tensor next, empty(shape, y.dtype()));
    Tensor flag;  // Div: the first zero divisor's position
    if (kind == hd::BinaryKind::kDiv) {
      ASSIGN_OR_RETURN(flag, index_flag());
    }
    GP_CUDA_CHECK(kc::int_binary<T>(kind, index, y.data<T>(), in[k].data<T>(), next.data<T>(),
                                    static_cast<unsigned long long*>(flag.defined() ? flag.raw() : nullptr), stream));
    if (flag.defined())
      RETURN_IF_ERROR(check_position_flag(
          flag, [op = &call.op](uint64_t) { return graph::ops::op_error(*op, kIntegerDivisionByZero); }));
    y = next;
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> binary_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const binary{binary_forward<float>, binary_backward<float>, binary_backward<float>, binary_check};
  std::vector<KernelEntry> t;
  t.push_back({OpKind::kPow, f32, {pow_forward<float>, pow_backward<float>, pow_backward<float>, pow_check}, 1});
  for (OpKind b : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    t.push_back({b, f32, binary, 2});
    t.push_back({b, DType::kInt64, {int_binary_forward<int64_t>, no_gradient, no_gradient, int_binary_check}, 2});
    t.push_back({b, DType::kInt32, {int_binary_forward<int32_t>, no_gradient, no_gradient, int_binary_check}, 2});
  }
  for (OpKind b : {OpKind::kMax, OpKind::kMin}) {
    t.push_back({b, DType::kInt64, {int_binary_forward<int64_t>, no_gradient, no_gradient, int_extremum_check}, 1});
    t.push_back({b, DType::kInt32, {int_binary_forward<int32_t>, no_gradient, no_gradient, int_extremum_check}, 1});
  }
  t.push_back({OpKind::kAdd,
               DType::kBFloat16,
               {binary_forward<__nv_bfloat16>, binary_backward<__nv_bfloat16>, binary_backward<__nv_bfloat16>,
                same_low_dtype_check},
               2});
  t.push_back({OpKind::kAdd,
               DType::kFloat16,
               {binary_forward<__half>, binary_backward<__half>, binary_backward<__half>, same_low_dtype_check},
               2});
  return t;
}

}  // namespace gp::exec::cuda
