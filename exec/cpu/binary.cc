// Binary family: Add, Sub, Mul, Div with numpy broadcasting through oneDNN binary (backward by
// reductions), their integer twins (index arithmetic: HF GPT-2's row · length + position, never
// differentiated), and Pow (a constant scalar exponent as activation.cc's eltwise, a tensor exponent
// as broadcast loops).
#include <cmath>
#include <string>
#include <type_traits>

#include "exec/cpu/cpu_broadcast.h"
#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/op_shared.h"
#include "kernels/bf16.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

using dnnl::algorithm;

algorithm binary_alg(OpKind type) {
  if (type == OpKind::kAdd) return algorithm::binary_add;
  if (type == OpKind::kSub) return algorithm::binary_sub;
  if (type == OpKind::kMul) return algorithm::binary_mul;
  return algorithm::binary_div;
}

bool scalar_exponent(graph::Op const& op, graph::OpGraph const& graph) {
  graph::TensorData const* e = constant_input(op, graph, 1);
  return e != nullptr && e->numel() == 1;
}
}  // namespace

Status pow_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() < 2 || op.inputs[1] == graph::kNoTensor) return unsupported("Pow needs an exponent");
  DType const d = graph.tensor(op.inputs[1]).dtype;
  if (!scalar_exponent(op, graph) && d != DType::kFloat32)
    return unsupported("Pow '" + op.name + "' has a " + graph::dtype_name(d) + " exponent tensor (float32 only)");
  return Status::ok();
}

Status binary_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (graph::TensorId t : op.inputs)
    if (t == graph::kNoTensor || graph.tensor(t).dtype != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a non-float32 input (only float32 arithmetic is supported)");
  return Status::ok();
}

Status binary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  std::vector<int64_t> shape;
  if (!kernels::broadcast_shapes(a.shape(), b.shape(), shape))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " do not broadcast");
  algorithm const alg = binary_alg(call.op.kind());
  bool const commutative = alg == algorithm::binary_add || alg == algorithm::binary_mul;
  Tensor y;
  if (a.shape() == shape || kernels::pad_shape(a.shape(), shape.size()) == shape) {
    y = binary_full(alg, a.reshaped(shape), b);
  } else if (commutative && kernels::pad_shape(b.shape(), shape.size()) == shape) {
    y = binary_full(alg, b.reshaped(shape), a);
  } else {
    y = binary_full(alg, expanded(a, shape), b);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    if (alg == algorithm::binary_mul) {
      saved->tensors = {a, b};
    } else if (alg == algorithm::binary_div) {
      saved->tensors = {shape_tensor(a.shape()), b, y};
    } else {
      saved->tensors = {shape_tensor(a.shape()), shape_tensor(b.shape())};
    }
  }
  return Status::ok();
}

Status binary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& dy = gout[0];
  algorithm const alg = binary_alg(call.op.kind());
  auto reduce_into = [&](std::size_t i, Tensor const& full, std::vector<int64_t> const& shape, float sign) {
    Tensor& g = grad_slot(grads, i, shape, accumulate);
    if (sign > 0) {
      kernels::reduce_sum_to(full.data<float>(), full.shape(), g.data<float>(), shape, accumulate);
    } else {
      Tensor r(shape);
      kernels::reduce_sum_to(full.data<float>(), full.shape(), r.data<float>(), shape, false);
      float* gp = g.data<float>();
      float const* rp = r.data<float>();
      for (int64_t k = 0; k < r.numel(); ++k) gp[k] = (accumulate ? gp[k] : 0.f) - rp[k];
    }
  };
  if (alg == algorithm::binary_add || alg == algorithm::binary_sub) {
    if (wants(wanted, 0)) reduce_into(0, dy, shape_of(saved.tensors.at(0)), 1.f);
    if (wants(wanted, 1)) reduce_into(1, dy, shape_of(saved.tensors.at(1)), alg == algorithm::binary_sub ? -1.f : 1.f);
  } else if (alg == algorithm::binary_mul) {
    Tensor const& a = saved.tensors.at(0);
    Tensor const& b = saved.tensors.at(1);
    if (wants(wanted, 0)) reduce_into(0, binary_full(algorithm::binary_mul, dy, b), a.shape(), 1.f);
    if (wants(wanted, 1)) reduce_into(1, binary_full(algorithm::binary_mul, dy, a), b.shape(), 1.f);
  } else {
    // y = a / b: da = dy / b, db = −(dy / b) · y
    Tensor const& b = saved.tensors.at(1);
    Tensor const& y = saved.tensors.at(2);
    Tensor const dy_b = binary_full(algorithm::binary_div, dy, b);
    if (wants(wanted, 0)) reduce_into(0, dy_b, shape_of(saved.tensors.at(0)), 1.f);
    if (wants(wanted, 1)) reduce_into(1, binary_full(algorithm::binary_mul, dy_b, y), b.shape(), -1.f);
  }
  return Status::ok();
}

// Pow with a constant scalar exponent is a oneDNN eltwise; with a tensor exponent it broadcasts
// like the binary operators and runs as plain loops.
Status pow_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (scalar_exponent(call.op, call.graph)) return unary_forward(call, in, out, saved);
  if (in.size() < 2 || !in[1].defined()) return op_error(call, "the exponent input is missing");
  std::vector<int64_t> shape;
  if (!kernels::broadcast_shapes(in[0].shape(), in[1].shape(), shape))
    return op_error(call, "shapes " + in[0].shape_string() + " and " + in[1].shape_string() + " do not broadcast");
  Tensor const a = expanded(in[0], shape), b = expanded(in[1], shape);
  Tensor y(shape);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::pow(a.data<float>()[i], b.data<float>()[i]);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1], y};
  return Status::ok();
}

Status pow_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (scalar_exponent(call.op, call.graph)) return unary_backward(call, saved, gout, wanted, grads, accumulate);
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(2);
  Tensor const a = expanded(saved.tensors.at(0), y.shape()), b = expanded(saved.tensors.at(1), y.shape());
  float const* dy = gout[0].data<float>();
  for (std::size_t i = 0; i < 2; ++i) {
    if (!wants(wanted, i)) continue;
    Tensor full(y.shape());
    for (int64_t k = 0; k < y.numel(); ++k) {
      float const av = a.data<float>()[k], bv = b.data<float>()[k];
      // d(a^b)/da = b·a^(b−1); d(a^b)/db = a^b·ln a
      full.data<float>()[k] = dy[k] * (i == 0 ? bv * std::pow(av, bv - 1.f) : y.data<float>()[k] * std::log(av));
    }
    std::vector<int64_t> const target = saved.tensors[i].shape();
    Tensor& g = grad_slot(grads, i, target, accumulate);
    kernels::reduce_sum_to(full.data<float>(), full.shape(), g.data<float>(), target, accumulate);
  }
  return Status::ok();
}

// ---- integer Add, Sub, Mul, Div, Max, Min ----
namespace {

template <typename T>
Status int_binary(OpCall const& call, Tensor const& a, Tensor const& b, std::vector<int64_t> const& shape, Tensor& y) {
  std::size_t const r = shape.size();
  std::vector<int64_t> const pa = kernels::pad_shape(a.shape(), r), pb = kernels::pad_shape(b.shape(), r);
  std::vector<int64_t> sa = kernels::contiguous_strides(pa), sb = kernels::contiguous_strides(pb);
  for (std::size_t d = 0; d < r; ++d) {
    if (pa[d] != shape[d]) sa[d] = 0;
    if (pb[d] != shape[d]) sb[d] = 0;
  }
  kernels::hd::BinaryKind const kind = binary_kind_of(call.op.kind());
  T const* av = a.data<T>();
  T const* bv = b.data<T>();
  T* yv = y.data<T>();
  std::vector<int64_t> pos(r, 0);
  for (int64_t k = 0, n = y.numel(); k < n; ++k) {
    int64_t ia = 0, ib = 0;
    for (std::size_t d = 0; d < r; ++d) {
      ia += pos[d] * sa[d];
      ib += pos[d] * sb[d];
    }
    if (kind == kernels::hd::BinaryKind::kDiv && bv[ib] == 0) return op_error(call, kIntegerDivisionByZero);
    yv[k] = kernels::hd::int_binary_op(kind, av[ia], bv[ib]);  // wraps on overflow, as the CUDA kernel
    for (std::size_t d = r; d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
  return Status::ok();
}

// Integer Add, Sub, Mul, Div (two inputs) and Max, Min (one or more: the dynamo exporter's index
// arithmetic, MaxViT's Max has one): the inputs folded pairwise, each pair broadcast, one input
// copied; never differentiated.
Status int_binary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor y = in.size() == 1 ? in.at(0).clone() : in.at(0);
  for (std::size_t k = 1; k < in.size(); ++k) {
    std::vector<int64_t> shape;
    if (!kernels::broadcast_shapes(y.shape(), in[k].shape(), shape))
      return op_error(call, "shapes " + y.shape_string() + " and " + in[k].shape_string() + " do not broadcast");
    Tensor next(shape, y.dtype());
    if (y.dtype() == DType::kInt64) {
      RETURN_IF_ERROR(int_binary<int64_t>(call, y, in[k], shape, next));
    } else {
      RETURN_IF_ERROR(int_binary<int32_t>(call, y, in[k], shape, next));
    }
    y = next;
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

}  // namespace

namespace {

// Add under mixed precision: two bfloat16 tensors (a residual connection after bfloat16
// convolutions). Equal shapes add in one pass, each float32 sum rounded once, and the gradient
// passes through unchanged; broadcasting runs the float32 kernel on widened copies.
Status add_bf16_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (graph::TensorId t : op.inputs)
    if (t == graph::kNoTensor || graph.tensor(t).dtype != DType::kBFloat16)
      return unsupported(op.type + " '" + op.name +
                         "' mixes bfloat16 with another dtype (mixed precision casts both "
                         "inputs to one dtype first)");
  return Status::ok();
}

Status add_bf16_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  if (a.shape() == b.shape()) {
    Tensor y(a.shape(), DType::kBFloat16);
    kernels::add_bf16(a.data<uint16_t>(), b.data<uint16_t>(), y.numel(), y.data<uint16_t>());
    out.assign(call.op.outputs.size(), Tensor());
    out[0] = y;
    if (saved) saved->tensors = {shape_tensor(a.shape()), shape_tensor(b.shape())};
    return Status::ok();
  }
  RETURN_IF_ERROR(
      binary_forward(call, {convert_float(a, DType::kFloat32), convert_float(b, DType::kFloat32)}, out, saved));
  out[0] = convert_float(out[0], DType::kBFloat16);
  return Status::ok();
}

Status add_bf16_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  std::vector<Tensor> wide;
  for (std::size_t i = 0; i < 2; ++i) {
    if (!wants(wanted, i)) continue;
    if (shape_of(saved.tensors.at(i)) == gout[0].shape()) {
      RETURN_IF_ERROR(emit_grad(call, grads, i, gout[0], accumulate));
      continue;
    }
    if (wide.empty()) {
      std::vector<bool> only(2, false);
      for (std::size_t k = 0; k < 2; ++k)
        only[k] = wants(wanted, k) && shape_of(saved.tensors.at(k)) != gout[0].shape();
      RETURN_IF_ERROR(binary_backward(call, saved, {convert_float(gout[0], DType::kFloat32)}, only, wide, false));
    }
    RETURN_IF_ERROR(emit_grad(call, grads, i, convert_float(wide.at(i), DType::kBFloat16), accumulate));
  }
  return Status::ok();
}

}  // namespace

CpuKernelFamily binary_int_kernels() {
  CpuKernelEntry const e{{int_binary_forward, no_gradient, no_gradient, int_binary_check}, 2, false, 0, kIndexDTypes};
  CpuKernelFamily f;
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) f.emplace_back(k, e);
  CpuKernelEntry const extremum{
      {int_binary_forward, no_gradient, no_gradient, int_extremum_check}, 1, false, 0, kIndexDTypes};
  for (OpKind k : {OpKind::kMax, OpKind::kMin}) f.emplace_back(k, extremum);
  f.emplace_back(
      OpKind::kAdd,
      CpuKernelEntry{
          {add_bf16_forward, add_bf16_backward, add_bf16_backward, add_bf16_check}, 2, false, 0, {DType::kBFloat16}});
  return f;
}

}  // namespace gp::exec::cpu
