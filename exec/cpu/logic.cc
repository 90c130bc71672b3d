// CPU kernels: comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), boolean ops (Not,
// And, Or, Xor), the bitwise ops of integers, Where and Mod, as plain loops over numpy-broadcast
// inputs. Bool tensors hold one byte per element (0 or 1; a nonzero byte reads as true).
// Gradients: Where to x and y, Mod to both operands (float32 only); comparisons are steps, whose
// gradient is zero.
#include <array>
#include <cmath>
#include <functional>
#include <type_traits>

#include "exec/cpu/cpu_ops.h"
#include "exec/op_shared.h"
#include "graph/ops/common.h"
#include "graph/ops/logic.h"
#include "kernels/hd/binary.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

using graph::ops::is_boolean;

bool is_comparison(OpKind t) {
  return t == OpKind::kEqual || t == OpKind::kLess || t == OpKind::kGreater || t == OpKind::kLessOrEqual ||
         t == OpKind::kGreaterOrEqual;
}

// Strides (in elements) that read `in` at every index of `out` (zero along broadcast axes).
std::vector<int64_t> read_strides(std::vector<int64_t> const& in, std::vector<int64_t> const& out) {
  std::vector<int64_t> const padded = kernels::pad_shape(in, out.size());
  std::vector<int64_t> st = kernels::contiguous_strides(padded);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (padded[i] != out[i]) st[i] = 0;
  return st;
}

// f(k, offsets) for every element k of `out`, offsets[j] being input j's element at that index.
template <std::size_t K, typename F>
void broadcast_each(std::vector<int64_t> const& out, std::array<std::vector<int64_t>, K> const& in_shapes, F&& f) {
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  if (n == 0) return;
  std::array<std::vector<int64_t>, K> st;
  for (std::size_t j = 0; j < K; ++j) st[j] = read_strides(in_shapes[j], out);
  std::vector<int64_t> idx(out.size(), 0);
  std::array<int64_t, K> off{};
  for (int64_t k = 0; k < n; ++k) {
    f(k, off);
    for (std::size_t d = out.size(); d-- > 0;) {
      ++idx[d];
      for (std::size_t j = 0; j < K; ++j) off[j] += st[j][d];
      if (idx[d] < out[d]) break;
      for (std::size_t j = 0; j < K; ++j) off[j] -= st[j][d] * out[d];
      idx[d] = 0;
    }
  }
}

Result<std::vector<int64_t>> out_shape(OpCall const& call, std::vector<Tensor> const& in, std::size_t arity) {
  std::vector<int64_t> shape;
  for (std::size_t i = 0; i < arity; ++i) {
    std::vector<int64_t> next;
    if (!kernels::broadcast_shapes(shape, in[i].shape(), next))
      return op_error(call, "input " + std::to_string(i) + " of shape " + in[i].shape_string() +
                                " does not broadcast to " + graph::ops::dims_string(shape));
    shape = std::move(next);
  }
  return shape;
}

bool supported_data(DType d) {
  return d == DType::kFloat32 || d == DType::kInt64 || d == DType::kInt32 || d == DType::kInt8 || d == DType::kUInt8 ||
         d == DType::kBool;
}

DType dtype_of(graph::Op const& op, graph::OpGraph const& graph, std::size_t i) {
  return graph.tensor(op.inputs[i]).dtype;
}

Status dtype_error(graph::Op const& op, graph::OpGraph const& graph, std::size_t i, std::string const& allowed) {
  return unsupported("input " + std::to_string(i) + " has dtype " + graph::dtype_name(dtype_of(op, graph, i)) + " (" +
                     allowed + ")");
}

Status logic_check(graph::Op const& op, graph::OpGraph const& graph) {
  OpKind const t = op.kind();
  std::size_t const arity = t == OpKind::kNot ? 1 : t == OpKind::kWhere ? 3 : 2;
  if (op.inputs.size() != arity)
    return unsupported("has " + std::to_string(op.inputs.size()) + " inputs, takes " + std::to_string(arity));
  if (t == OpKind::kNot || t == OpKind::kAnd || t == OpKind::kOr || t == OpKind::kXor) {
    for (std::size_t i = 0; i < arity; ++i)
      if (!is_boolean(dtype_of(op, graph, i))) return dtype_error(op, graph, i, "bool only");
    return Status::ok();
  }
  std::size_t const first = t == OpKind::kWhere ? 1 : 0;
  if (t == OpKind::kWhere && !is_boolean(dtype_of(op, graph, 0)))
    return dtype_error(op, graph, 0, "the condition is bool");
  DType const d = dtype_of(op, graph, first);
  bool const ok = supported_data(d) && (d != DType::kBool || t == OpKind::kEqual || t == OpKind::kWhere);
  if (!ok) return dtype_error(op, graph, first, "float32, int64, int32, int8 or uint8; float64 is not supported");
  if (dtype_of(op, graph, first + 1) != d)
    return unsupported("inputs " + std::to_string(first) + " and " + std::to_string(first + 1) + " have dtypes " +
                       graph::dtype_name(d) + " and " + graph::dtype_name(dtype_of(op, graph, first + 1)) +
                       " (they must match)");
  if (t == OpKind::kMod) return require_attrs<graph::ModAttrs>(op, graph);
  return Status::ok();
}

// ---- comparisons and boolean ops ----

Status predicate_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  OpKind const t = call.op.kind();
  std::size_t const arity = t == OpKind::kNot ? 1 : 2;
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, out_shape(call, in, arity));
  Tensor y(shape, DType::kBool);
  uint8_t* yp = y.data<uint8_t>();
  if (t == OpKind::kNot) {
    uint8_t const* a = in[0].data<uint8_t>();
    for (int64_t k = 0; k < y.numel(); ++k) yp[k] = a[k] == 0;
  } else if (is_comparison(t)) {
    RETURN_IF_ERROR(with_dtype(call, in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      T const* a = in[0].data<T>();
      T const* b = in[1].data<T>();
      auto run = [&](auto cmp) {
        broadcast_each<2>(shape, {in[0].shape(), in[1].shape()},
                          [&](int64_t k, std::array<int64_t, 2> const& o) { yp[k] = cmp(a[o[0]], b[o[1]]); });
      };
      if (t == OpKind::kEqual) run(std::equal_to<T>());
      if (t == OpKind::kLess) run(std::less<T>());
      if (t == OpKind::kGreater) run(std::greater<T>());
      if (t == OpKind::kLessOrEqual) run(std::less_equal<T>());
      if (t == OpKind::kGreaterOrEqual) run(std::greater_equal<T>());
      return Status::ok();
    }));
  } else {
    uint8_t const* a = in[0].data<uint8_t>();
    uint8_t const* b = in[1].data<uint8_t>();
    int const op = t == OpKind::kAnd ? 0 : t == OpKind::kOr ? 1 : 2;
    broadcast_each<2>(shape, {in[0].shape(), in[1].shape()}, [&](int64_t k, std::array<int64_t, 2> const& o) {
      bool const x = a[o[0]] != 0, z = b[o[1]] != 0;
      yp[k] = op == 0 ? (x && z) : op == 1 ? (x || z) : (x != z);
    });
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved && is_comparison(t)) saved->tensors = {shape_tensor(in[0].shape()), shape_tensor(in[1].shape())};
  return Status::ok();
}

// A comparison is a step in each float input: zero gradient (almost everywhere).
Status predicate_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    if (!wants(wanted, i)) continue;
    if (i >= saved.tensors.size())
      return op_error(call, "input " + std::to_string(i) + " is not float: it has no gradient");
    if (!accumulate) RETURN_IF_ERROR(emit_grad(call, grads, i, Tensor::zeros(shape_of(saved.tensors[i])), false));
  }
  return Status::ok();
}

// ---- Where ----

Status where_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, out_shape(call, in, 3));
  if (in[1].dtype() != in[2].dtype())
    return op_error(call, "x and y have dtypes " + std::string(graph::dtype_name(in[1].dtype())) + " and " +
                              graph::dtype_name(in[2].dtype()));
  Tensor y(shape, in[1].dtype());
  uint8_t const* cond = in[0].data<uint8_t>();
  RETURN_IF_ERROR(with_dtype(call, in[1].dtype(), [&](auto tag) {
    using T = decltype(tag);
    T const* a = in[1].data<T>();
    T const* b = in[2].data<T>();
    T* yp = y.data<T>();
    broadcast_each<3>(shape, {in[0].shape(), in[1].shape(), in[2].shape()},
                      [&](int64_t k, std::array<int64_t, 3> const& o) { yp[k] = cond[o[0]] ? a[o[1]] : b[o[2]]; });
    return Status::ok();
  }));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], shape_tensor(in[1].shape()), shape_tensor(in[2].shape())};
  return Status::ok();
}

// dx = Σ dy where the condition holds, dy = Σ dy where it does not (summed over broadcast axes).
Status where_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (wants(wanted, 0)) return op_error(call, "the condition is bool: it has no gradient");
  if (gout.empty() || !gout[0].defined()) return Status::ok();
  Tensor const& dy = gout[0];
  Tensor const& cond = saved.tensors.at(0);
  for (std::size_t i = 1; i <= 2; ++i) {
    if (!wants(wanted, i)) continue;
    Tensor full(dy.shape());
    float* fp = full.data<float>();
    float const* g = dy.data<float>();
    uint8_t const* c = cond.data<uint8_t>();
    bool const take = i == 1;
    broadcast_each<1>(dy.shape(), {cond.shape()},
                      [&](int64_t k, std::array<int64_t, 1> const& o) { fp[k] = (c[o[0]] != 0) == take ? g[k] : 0.f; });
    std::vector<int64_t> const target = shape_of(saved.tensors.at(i));
    Tensor& slot = grad_slot(grads, i, target, accumulate);
    kernels::reduce_sum_to(fp, dy.shape(), slot.data<float>(), target, accumulate);
  }
  return Status::ok();
}

// ---- Mod ----

// fmod: the remainder of truncated division (the sign of a); else of floored division (the sign of b).
template <typename T>
T remainder(T a, T b, bool fmod) {
  if constexpr (std::is_same_v<T, float>) {
    return kernels::hd::mod_value(a, b, fmod);  // what the CUDA kernel computes too
  } else if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (!fmod && r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
  } else {
    return kernels::hd::int_mod_value(a, b, fmod);  // what the CUDA kernel computes too
  }
}

Status mod_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, out_shape(call, in, 2));
  bool const fmod = attrs_of<graph::ModAttrs>(call.op)->fmod;
  Tensor y(shape, in[0].dtype());
  int64_t zero_at = -1;
  RETURN_IF_ERROR(with_dtype(call, in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    T const* a = in[0].data<T>();
    T const* b = in[1].data<T>();
    T* yp = y.data<T>();
    broadcast_each<2>(shape, {in[0].shape(), in[1].shape()}, [&](int64_t k, std::array<int64_t, 2> const& o) {
      if constexpr (!std::is_floating_point_v<T>) {
        if (b[o[1]] == 0) {
          if (zero_at < 0) zero_at = k;
          yp[k] = 0;
          return;
        }
      }
      yp[k] = remainder(a[o[0]], b[o[1]], fmod);
    });
    return Status::ok();
  }));
  if (zero_at >= 0) return op_error(call, "integer division by zero at output element " + std::to_string(zero_at));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved && in[0].dtype() == DType::kFloat32) saved->tensors = {in[0], in[1]};
  return Status::ok();
}

// r = a - b·q with q = trunc(a / b) (fmod) or floor(a / b): dr/da = 1, dr/db = -q.
Status mod_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) && !wants(wanted, 1)) return Status::ok();
  if (saved.tensors.size() < 2) return op_error(call, "integer Mod has no gradient");
  if (gout.empty() || !gout[0].defined()) return Status::ok();
  bool const fmod = attrs_of<graph::ModAttrs>(call.op)->fmod;
  Tensor const& a = saved.tensors[0];
  Tensor const& b = saved.tensors[1];
  Tensor const& dy = gout[0];
  if (wants(wanted, 0)) {
    Tensor& slot = grad_slot(grads, 0, a.shape(), accumulate);
    kernels::reduce_sum_to(dy.data<float>(), dy.shape(), slot.data<float>(), a.shape(), accumulate);
  }
  if (wants(wanted, 1)) {
    Tensor full(dy.shape());
    float* fp = full.data<float>();
    float const* g = dy.data<float>();
    float const* ap = a.data<float>();
    float const* bp = b.data<float>();
    broadcast_each<2>(dy.shape(), {a.shape(), b.shape()}, [&](int64_t k, std::array<int64_t, 2> const& o) {
      fp[k] = kernels::hd::mod_b_grad(ap[o[0]], bp[o[1]], g[k], fmod);
    });
    Tensor& slot = grad_slot(grads, 1, b.shape(), accumulate);
    kernels::reduce_sum_to(fp, dy.shape(), slot.data<float>(), b.shape(), accumulate);
  }
  return Status::ok();
}

// ---- the bitwise family (BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, BitShift) ----

// Integers of one dtype, broadcast (BitwiseNot: one input), through hd::bitwise_value, the CUDA
// kernel's function; never differentiated.
Status bitwise_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  std::size_t const arity = call.op.kind() == OpKind::kBitwiseNot ? 1 : 2;
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, out_shape(call, in, arity));
  kernels::hd::BitwiseKind const kind = bitwise_kind_of(call.op);
  Tensor y(shape, in[0].dtype());
  RETURN_IF_ERROR(with_int_dtype(call, in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    T const* a = in[0].data<T>();
    T* yp = y.data<T>();
    if (arity == 1) {
      for (int64_t k = 0; k < y.numel(); ++k) yp[k] = kernels::hd::bitwise_value(kind, a[k], a[k]);
      return Status::ok();
    }
    T const* b = in[1].data<T>();
    broadcast_each<2>(shape, {in[0].shape(), in[1].shape()}, [&](int64_t k, std::array<int64_t, 2> const& o) {
      yp[k] = kernels::hd::bitwise_value(kind, a[o[0]], b[o[1]]);
    });
    return Status::ok();
  }));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

// ---- ConstantOfShape with the batch in its shape: filled per micro-batch (OpCall::batch) ----

Status constant_of_shape_forward(OpCall const& call, std::vector<Tensor> const&, std::vector<Tensor>& out, Saved*) {
  auto const* a = attrs_of<graph::ConstantOfShapeAttrs>(call.op);
  if (a == nullptr) return op_error(call, "has no typed attributes");
  auto const shape = graph::ops::constant_of_shape_output_shape(*a, call.batch);
  if (!shape) return op_error(call, shape.status().message());
  DType const dtype = call.graph.tensor(call.op.outputs[0]).dtype;
  Tensor y(*shape, dtype);
  for (int64_t i = 0; i < y.numel(); ++i) {
    switch (dtype) {
      case DType::kFloat32:
        y.data<float>()[i] = static_cast<float>(a->value);
        break;
      case DType::kInt64:
        y.data<int64_t>()[i] = static_cast<int64_t>(a->value);
        break;
      case DType::kInt32:
        y.data<int32_t>()[i] = static_cast<int32_t>(a->value);
        break;
      default:
        y.data<uint8_t>()[i] = a->value != 0;
        break;
    }
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = std::move(y);
  return Status::ok();
}

// ---- Range over the batch size: filled per micro-batch (OpCall::batch) ----

Status range_forward(OpCall const& call, std::vector<Tensor> const&, std::vector<Tensor>& out, Saved*) {
  auto const* a = attrs_of<graph::RangeAttrs>(call.op);
  if (a == nullptr) return op_error(call, "has no typed attributes");
  auto const shape = graph::ops::range_output_shape(*a, call.batch);
  if (!shape) return op_error(call, shape.status().message());
  DType const dtype = call.graph.tensor(call.op.outputs[0]).dtype;
  Tensor y(*shape, dtype);
  for (int64_t k = 0; k < y.numel(); ++k) {
    double const v = a->start + static_cast<double>(k) * a->delta;
    if (dtype == DType::kInt32)
      y.data<int32_t>()[k] = static_cast<int32_t>(v);
    else
      y.data<int64_t>()[k] = static_cast<int64_t>(v);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = std::move(y);
  return Status::ok();
}

CpuKernelFamily logic_kernels() {
  CpuKernelEntry const predicate{{predicate_forward, predicate_backward, predicate_backward, logic_check}, 2, false};
  CpuKernelFamily f;
  for (OpKind t : {OpKind::kEqual, OpKind::kLess, OpKind::kGreater, OpKind::kLessOrEqual, OpKind::kGreaterOrEqual,
                   OpKind::kAnd, OpKind::kOr, OpKind::kXor})
    f.emplace_back(t, predicate);
  f.emplace_back(OpKind::kNot,
                 CpuKernelEntry{{predicate_forward, predicate_backward, predicate_backward, logic_check}, 1, false});
  f.emplace_back(OpKind::kWhere,
                 CpuKernelEntry{{where_forward, where_backward, where_backward, logic_check}, 3, false});
  f.emplace_back(OpKind::kMod, CpuKernelEntry{{mod_forward, mod_backward, mod_backward, logic_check}, 2, false});
  for (OpKind t : {OpKind::kBitwiseAnd, OpKind::kBitwiseOr, OpKind::kBitwiseXor, OpKind::kBitShift})
    f.emplace_back(t,
                   CpuKernelEntry{{bitwise_forward, no_gradient, no_gradient, bitwise_check}, 2, false, 0, kIntDTypes});
  f.emplace_back(OpKind::kBitwiseNot,
                 CpuKernelEntry{{bitwise_forward, no_gradient, no_gradient, bitwise_check}, 1, false, 0, kIntDTypes});
  f.emplace_back(
      OpKind::kConstantOfShape,
      CpuKernelEntry{
          {constant_of_shape_forward, no_gradient, no_gradient, require_attrs<graph::ConstantOfShapeAttrs>}, 0, false});
  f.emplace_back(OpKind::kRange,
                 CpuKernelEntry{{range_forward, no_gradient, no_gradient, require_attrs<graph::RangeAttrs>}, 0, false});
  return f;
}

}  // namespace gp::exec::cpu
