// Reduce family: ReduceSum and ReduceMean (kernels/strided's sums down to a shape), Softmax (oneDNN),
// and plain loops for the other Reduce*, LogSoftmax, Hardmax, CumSum, ArgMax, ArgMin, TopK: a reduction
// sees its input as [rows, cols] (the reduced axes permuted last, copied only when they are not
// already trailing); the ops along one axis see it as [outer, dim, inner] and run over `inner`
// contiguously.
#include <algorithm>
#include <type_traits>
#include <cmath>
#include <limits>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/op_shared.h"
#include "graph/ops/reduce.h"
#include "kernels/hd/reduce.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

using graph::ops::AxisSplit;
using graph::ops::ReduceShape;

// The per-row math is kernels/hd/reduce.h's, which the CUDA kernels run too.
using kernels::hd::Reduction;

// The shape and strides of the input's dims in the order `perm`.
struct Permuted {
  std::vector<int64_t> shape, strides;
  bool identity = true;
};
Permuted permuted(std::vector<int64_t> const& in_shape, std::vector<int64_t> const& perm) {
  std::vector<int64_t> const strides = kernels::contiguous_strides(in_shape);
  Permuted p;
  for (std::size_t i = 0; i < perm.size(); ++i) {
    p.shape.push_back(in_shape[perm[i]]);
    p.strides.push_back(strides[perm[i]]);
    p.identity = p.identity && perm[i] == static_cast<int64_t>(i);
  }
  return p;
}

// x as a contiguous [rows, cols] matrix.
Tensor as_rows(Tensor const& x, ReduceShape const& s) {
  Permuted const p = permuted(x.shape(), s.perm);
  if (p.identity) return x.reshaped({s.rows, s.cols});
  Tensor m({s.rows, s.cols});
  kernels::strided_copy(x.data<float>(), p.strides, m.data<float>(), kernels::contiguous_strides(p.shape), p.shape);
  return m;
}

// A [rows, cols] gradient back in the input's layout.
Tensor from_rows(Tensor const& m, ReduceShape const& s, std::vector<int64_t> const& in_shape) {
  Permuted const p = permuted(in_shape, s.perm);
  if (p.identity) return m.reshaped(in_shape);
  Tensor dx(in_shape);
  kernels::strided_copy(m.data<float>(), kernels::contiguous_strides(p.shape), dx.data<float>(), p.strides, p.shape);
  return dx;
}

bool reads_x(Reduction r) { return kernels::hd::reduction_reads_x(r); }
bool reads_y(Reduction r) { return kernels::hd::reduction_reads_y(r); }
bool is_extremum(Reduction r) { return kernels::hd::reduction_is_extremum(r); }

// Saved: {input shape, x as rows (when the gradient reads it), y (when it reads it), arg-extrema}.
Status reduce_forward_any(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(ReduceShape const s, graph::ops::reduce_shape(call.op, in[0].shape()));
  ASSIGN_OR_RETURN(Reduction const r, reduction_of(call));
  out.assign(call.op.outputs.size(), Tensor());
  if (s.noop) {
    out[0] = in[0];
    if (saved) saved->tensors = {shape_tensor(in[0].shape())};
    return Status::ok();
  }
  Tensor const x = as_rows(in[0], s);
  Tensor y(s.out_shape);
  Tensor arg = is_extremum(r) ? Tensor({s.rows}, DType::kInt64) : Tensor();
  for (int64_t i = 0; i < s.rows; ++i) {
    int64_t a = -1;
    y.data<float>()[i] = static_cast<float>(kernels::hd::reduce_row(r, x.data<float>() + i * s.cols, s.cols, a));
    if (arg.defined()) arg.data<int64_t>()[i] = a;
  }
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape()), reads_x(r) ? x : Tensor(), reads_y(r) ? y : Tensor(), arg};
  return Status::ok();
}

Status reduce_backward_any(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                           std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(ReduceShape const s, graph::ops::reduce_shape(call.op, in_shape));
  ASSIGN_OR_RETURN(Reduction const r, reduction_of(call));
  if (s.noop) return emit_grad(call, grads, 0, gout[0].reshaped(in_shape), accumulate);
  Tensor const& x = saved.tensors.at(1);
  Tensor const& y = saved.tensors.at(2);
  Tensor const& arg = saved.tensors.at(3);
  if ((reads_x(r) && !x.defined()) || (reads_y(r) && !y.defined()) || (is_extremum(r) && !arg.defined()))
    return op_error(call, "backward without the forward pass's saved tensors");
  Tensor dm({s.rows, s.cols});
  float const* g = gout[0].data<float>();
  for (int64_t i = 0; i < s.rows; ++i)
    kernels::hd::reduce_row_backward(
        r, x.defined() ? x.data<float>() + i * s.cols : nullptr, y.defined() ? y.data<float>()[i] : 0.0,
        arg.defined() ? arg.data<int64_t>()[i] : -1, g[i], s.cols, dm.data<float>() + i * s.cols);
  return emit_grad(call, grads, 0, from_rows(dm, s, in_shape), accumulate);
}

// ReduceSum, ReduceProd, ReduceMax and ReduceMin of integers, Max and Min of bool (XLM's sequence
// lengths: the ReduceSum of an int64 non-padding mask): kernels/hd/index.h's int_reduce_at per
// output element, as the CUDA kernel runs it. Never differentiated.
Status int_reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(ReduceShape const s, graph::ops::reduce_shape(call.op, x.shape()));
  out.assign(call.op.outputs.size(), Tensor());
  if (s.noop) {
    out[0] = x;
    return Status::ok();
  }
  ASSIGN_OR_RETURN(IntReducePlan const plan, int_reduce_plan(call, s, x.shape()));
  Tensor y(s.out_shape, x.dtype());
  DType const bytes = x.dtype() == DType::kBool ? DType::kUInt8 : x.dtype();  // bool: its 0/1 bytes
  RETURN_IF_ERROR(with_int_dtype(call, bytes, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < plan.out_numel; ++i)
      kernels::hd::int_reduce_at(plan.kind, x.data<T>(), y.data<T>(), plan.params, i);
    return Status::ok();
  }));
  out[0] = y;
  return Status::ok();
}

// ReduceSum/ReduceMean keep their kernels (move.cc) except for the noop case.
Status sum_mean_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(ReduceShape const s, graph::ops::reduce_shape(call.op, in[0].shape()));
  if (s.noop) return reduce_forward_any(call, in, out, saved);
  return reduce_forward(call, in, out, saved);
}

Status sum_mean_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  auto const* a = attrs_of<graph::ReduceAttrs>(call.op);
  if (a != nullptr && a->noop) return reduce_backward_any(call, saved, gout, wanted, grads, accumulate);
  return reduce_backward(call, saved, gout, wanted, grads, accumulate);
}

// The lines of an [outer, dim, inner] view: f(offset of element 0 of the line) for each.
template <typename F>
void for_each_line(AxisSplit const& s, F&& f) {
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j) f(o * s.dim * s.inner + j);
}

// y = x - max - log(sum(exp(x - max))) along the axis (kernels/hd/reduce.h); saved: y.
Status log_softmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(AxisSplit const s, softmax_axis_split(call, x.shape()));
  Tensor y(x.shape());
  for_each_line(
      s, [&](int64_t e) { kernels::hd::log_softmax_line(x.data<float>() + e, s.dim, s.inner, y.data<float>() + e); });
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {y};
  return Status::ok();
}

// dx = g - softmax(x) * sum(g) along the axis.
Status log_softmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(0);
  ASSIGN_OR_RETURN(AxisSplit const s, softmax_axis_split(call, y.shape()));
  Tensor dx(y.shape());
  for_each_line(s, [&](int64_t e) {
    kernels::hd::log_softmax_line_backward(y.data<float>() + e, gout[0].data<float>() + e, s.dim, s.inner,
                                           dx.data<float>() + e);
  });
  return emit_grad(call, grads, 0, dx, accumulate);
}

// The index along the axis of each [outer, inner] position's extremum; ties: the first (or last).
template <typename T>
void arg_extremum_of(Tensor const& x, AxisSplit const& s, bool max, bool last, int64_t* idx) {
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j)
      idx[o * s.inner + j] =
          kernels::hd::arg_extremum_line(x.data<T>() + o * s.dim * s.inner + j, s.dim, s.inner, max, last);
}

// Float data, or integers (HF GPT-2's last non-padding position: ArgMax over position · mask).
void arg_extremum(Tensor const& x, AxisSplit const& s, bool max, bool last, int64_t* idx) {
  if (x.dtype() == DType::kInt64)
    arg_extremum_of<int64_t>(x, s, max, last, idx);
  else if (x.dtype() == DType::kInt32)
    arg_extremum_of<int32_t>(x, s, max, last, idx);
  else
    arg_extremum_of<float>(x, s, max, last, idx);
}

// 1 at the first maximum along the axis, 0 elsewhere.
Status hardmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(AxisSplit const s, softmax_axis_split(call, x.shape()));
  Tensor y = Tensor::zeros(x.shape());
  if (s.dim > 0) {
    std::vector<int64_t> idx(static_cast<std::size_t>(s.outer * s.inner));
    arg_extremum(x, s, true, false, idx.data());
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < s.inner; ++j) y.data<float>()[(o * s.dim + idx[o * s.inner + j]) * s.inner + j] = 1.f;
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

// Hardmax is piecewise constant: its gradient is zero wherever it is defined.
Status hardmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  if (accumulate) return Status::ok();
  return emit_grad(call, grads, 0, Tensor::zeros(shape_of(saved.tensors.at(0))), false);
}

// Running sums along the axis (kernels/hd/reduce.h): floats, and integers (HF RoBERTa's position
// ids: the cumulative sum of the non-padding mask), wrapping on overflow.
void cumsum(Tensor const& x, Tensor& y, AxisSplit const& s, bool exclusive, bool reverse) {
  for_each_line(s, [&](int64_t e) {
    if (x.dtype() == DType::kInt64)
      kernels::hd::cumsum_line_int<int64_t, uint64_t>(x.data<int64_t>() + e, s.dim, s.inner, exclusive, reverse,
                                                      y.data<int64_t>() + e);
    else if (x.dtype() == DType::kInt32)
      kernels::hd::cumsum_line_int<int32_t, uint32_t>(x.data<int32_t>() + e, s.dim, s.inner, exclusive, reverse,
                                                      y.data<int32_t>() + e);
    else
      kernels::hd::cumsum_line(x.data<float>() + e, s.dim, s.inner, exclusive, reverse, y.data<float>() + e);
  });
}

Status cumsum_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::CumSumAttrs>(call.op);
  ASSIGN_OR_RETURN(AxisSplit const s, graph::ops::axis_split(call.op, a.axis, in[0].shape()));
  Tensor y(in[0].shape(), in[0].dtype());
  cumsum(in[0], y, s, a.exclusive, a.reverse);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors.clear();
  return Status::ok();
}

// The adjoint of a running sum is the running sum in the other direction.
Status cumsum_backward(OpCall const& call, Saved const&, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  auto const& a = *attrs_of<graph::CumSumAttrs>(call.op);
  ASSIGN_OR_RETURN(AxisSplit const s, graph::ops::axis_split(call.op, a.axis, gout[0].shape()));
  Tensor dx(gout[0].shape());
  cumsum(gout[0], dx, s, a.exclusive, !a.reverse);
  return emit_grad(call, grads, 0, dx, accumulate);
}

Status arg_reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::ArgReduceAttrs>(call.op);
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(AxisSplit const s, graph::ops::axis_split(call.op, a.axis, x.shape()));
  if (s.dim == 0 && s.outer * s.inner > 0)
    return op_error(call, "cannot take the index of an extremum along axis " + std::to_string(s.axis) +
                              " of size 0 (input " + x.shape_string() + ")");
  Tensor y(graph::ops::arg_reduce_shape(s, x.shape(), a.keepdims), DType::kInt64);
  arg_extremum(x, s, call.op.kind() == OpKind::kArgMax, a.select_last_index, y.data<int64_t>());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors.clear();
  return Status::ok();
}

// Never called by autodiff (the output is int64, so nothing asks for its gradient).
Status arg_reduce_backward(OpCall const& call, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                           std::vector<Tensor>&, bool) {
  return op_error(call, "has no gradient (its output is int64 indices)");
}

}  // namespace

namespace {
std::vector<int64_t> reduce_keep_shape(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& axes = attrs_of<graph::ReduceAttrs>(call.op)->axes;
  std::vector<int64_t> keep = in_shape;
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  for (int64_t i = 0; i < rank; ++i) {
    bool const listed = axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end() ||
                        std::find(axes.begin(), axes.end(), i - rank) != axes.end();
    if (listed) keep[i] = 1;
  }
  return keep;
}
}  // namespace

Status reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& attrs = *attrs_of<graph::ReduceAttrs>(call.op);
  std::vector<int64_t> const keep = reduce_keep_shape(call, in[0].shape());
  Tensor y(keep);
  kernels::reduce_sum_to(in[0].data<float>(), in[0].shape(), y.data<float>(), keep, false);
  if (call.op.kind() == OpKind::kReduceMean && y.numel() > 0) {
    float const scale = static_cast<float>(static_cast<double>(y.numel()) / static_cast<double>(in[0].numel()));
    float* p = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] *= scale;
  }
  if (!attrs.keepdims) {
    // Drop exactly the listed axes (a size-1 axis may or may not be listed).
    std::vector<int64_t> squeezed;
    auto const& axes = attrs.axes;
    int64_t const rank = in[0].rank();
    for (int64_t i = 0; i < rank; ++i) {
      bool const listed = axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end() ||
                          std::find(axes.begin(), axes.end(), i - rank) != axes.end();
      if (!listed) squeezed.push_back(keep[i]);
    }
    y = y.reshaped(squeezed);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status reduce_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  std::vector<int64_t> const keep = reduce_keep_shape(call, in_shape);
  Tensor g(in_shape);
  kernels::expand(gout[0].data<float>(), keep, g.data<float>(), in_shape);
  if (call.op.kind() == OpKind::kReduceMean && g.numel() > 0) {
    int64_t kept = 1;
    for (int64_t d : keep) kept *= d;
    float const scale = static_cast<float>(static_cast<double>(kept) / static_cast<double>(g.numel()));
    float* p = g.data<float>();
    for (int64_t i = 0; i < g.numel(); ++i) p[i] *= scale;
  }
  return emit_grad(call, grads, 0, g, accumulate);
}

// ---- Softmax through oneDNN ----

namespace {
struct SoftmaxFwd {
  dnnl::softmax_forward::primitive_desc pd;
  dnnl::softmax_forward prim;
};
struct SoftmaxBwd {
  dnnl::softmax_backward::primitive_desc pd;
  dnnl::softmax_backward prim;
};

std::shared_ptr<SoftmaxFwd const> softmax_fwd_prim(std::vector<int64_t> const& shape, int axis) {
  return dnnl_ctx::cached<SoftmaxFwd>(dnnl_ctx::key("softmax_fwd", shape, axis), [&] {
    dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_training, dnnl_ctx::plain_md(shape), axis);
    dnnl::softmax_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return SoftmaxFwd{pd, dnnl::softmax_forward(pd)};
  });
}

int softmax_axis(OpCall const& call, int64_t rank) {
  auto const* a = attrs_of<graph::SoftmaxAttrs>(call.op);
  int64_t axis = a ? a->axis : -1;
  if (axis < 0) axis += rank;
  return static_cast<int>(axis);
}
// The k largest (or smallest) elements along the axis, in order, and their int64 indices
// (kernels/hd/reduce.h's topk_line, which the CUDA kernel runs too); float32, int64 or int32 data.
template <typename T>
void topk_lines(Tensor const& x, graph::ops::TopKShape const& s, bool largest, Tensor& y, Tensor& idx) {
  AxisSplit const& a = s.split;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j = 0; j < a.inner; ++j)
      kernels::hd::topk_line(x.data<T>() + o * a.dim * a.inner + j, a.dim, a.inner, s.k, largest,
                             y.data<T>() + o * s.k * a.inner + j, idx.data<int64_t>() + o * s.k * a.inner + j, a.inner);
}

Status topk_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::TopKShape const s, graph::ops::topk_shape(call.op, x.shape()));
  bool const largest = attrs_of<graph::TopKAttrs>(call.op)->largest;
  Tensor y(s.out_shape, x.dtype());
  Tensor idx(s.out_shape, DType::kInt64);
  if (x.dtype() == DType::kInt64)
    topk_lines<int64_t>(x, s, largest, y, idx);
  else if (x.dtype() == DType::kInt32)
    topk_lines<int32_t>(x, s, largest, y, idx);
  else
    topk_lines<float>(x, s, largest, y, idx);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1) out[1] = idx;
  if (saved) saved->tensors = {idx, shape_tensor(x.shape())};
  return Status::ok();
}

// The values' gradient goes back to the positions they came from (distinct within a line), zero
// elsewhere; the indices have none.
Status topk_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  Tensor const& idx = saved.tensors.at(0);
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(graph::ops::TopKShape const s, graph::ops::topk_shape(call.op, in_shape));
  Tensor dx = Tensor::zeros(in_shape);
  if (!gout.empty() && gout[0].defined()) {
    float const* g = gout[0].data<float>();
    int64_t const* i = idx.data<int64_t>();
    for (int64_t e = 0; e < idx.numel(); ++e)
      dx.data<float>()[kernels::hd::topk_source(e, s.k, s.split.dim, s.split.inner, i[e])] = g[e];
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace

Status softmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  int const axis = softmax_axis(call, x.rank());
  if (axis < 0 || axis >= std::max<int64_t>(x.rank(), 1))
    return op_error(call, "axis out of range for " + x.shape_string());
  Tensor y(x.shape());
  if (x.numel() > 0) {
    auto e = softmax_fwd_prim(x.shape(), axis);
    dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(x)}, {DNNL_ARG_DST, dnnl_ctx::mem(y)}});
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {y};
  return Status::ok();
}

Status softmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(0);
  int const axis = softmax_axis(call, y.rank());
  Tensor dx(y.shape());
  if (y.numel() > 0) {
    auto f = softmax_fwd_prim(y.shape(), axis);
    auto e = dnnl_ctx::cached<SoftmaxBwd>(dnnl_ctx::key("softmax_bwd", y.shape(), axis), [&] {
      dnnl::softmax_backward::desc d(dnnl_ctx::plain_md(y.shape()), dnnl_ctx::plain_md(y.shape()), axis);
      dnnl::softmax_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
      return SoftmaxBwd{pd, dnnl::softmax_backward(pd)};
    });
    dnnl_ctx::run(e->prim, {{DNNL_ARG_DST, dnnl_ctx::mem(y)},
                            {DNNL_ARG_DIFF_DST, dnnl_ctx::mem(gout[0])},
                            {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(dx)}});
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

CpuKernelFamily reduce_kernels() {
  using graph::ArgReduceAttrs, graph::CumSumAttrs, graph::ReduceAttrs, graph::SoftmaxAttrs;
  OpKernels const sum_mean{sum_mean_forward, sum_mean_backward, sum_mean_backward, require_attrs<ReduceAttrs>};
  OpKernels const reduce{reduce_forward_any, reduce_backward_any, reduce_backward_any, require_attrs<ReduceAttrs>};
  OpKernels const arg{arg_reduce_forward, arg_reduce_backward, arg_reduce_backward, require_attrs<ArgReduceAttrs>};
  CpuKernelFamily f;
  f.push_back({OpKind::kReduceMean, {sum_mean, 1}});
  f.push_back({OpKind::kReduceSum, {sum_mean, 1}});
  for (OpKind r : {OpKind::kReduceMax, OpKind::kReduceMin, OpKind::kReduceProd, OpKind::kReduceL1, OpKind::kReduceL2,
                   OpKind::kReduceSumSquare, OpKind::kReduceLogSum, OpKind::kReduceLogSumExp})
    f.push_back({r, {reduce, 1}});
  // Integers (and bool for Max and Min: any, all), never differentiated.
  OpKernels const int_reduce{int_reduce_forward, no_gradient, no_gradient, require_attrs<ReduceAttrs>};
  for (OpKind r : {OpKind::kReduceSum, OpKind::kReduceProd, OpKind::kReduceMax, OpKind::kReduceMin}) {
    std::vector<DType> dtypes = kIntDTypes;
    if (r == OpKind::kReduceMax || r == OpKind::kReduceMin) dtypes.push_back(DType::kBool);
    f.push_back({r, {int_reduce, 1, false, 0, dtypes}});
  }
  f.push_back({OpKind::kLogSoftmax,
               {{log_softmax_forward, log_softmax_backward, log_softmax_backward, require_attrs<SoftmaxAttrs>}, 1}});
  f.push_back(
      {OpKind::kHardmax, {{hardmax_forward, hardmax_backward, hardmax_backward, require_attrs<SoftmaxAttrs>}, 1}});
  // Integers too (position ids), never differentiated.
  f.push_back({OpKind::kCumSum,
               {{cumsum_forward, cumsum_backward, cumsum_backward, require_attrs<CumSumAttrs>},
                1,
                false,
                0,
                {DType::kFloat32, DType::kInt64, DType::kInt32}}});
  CpuKernelEntry const arg_any{arg, 1, false, 0, {DType::kFloat32, DType::kInt64, DType::kInt32}};
  f.push_back({OpKind::kArgMax, arg_any});
  f.push_back({OpKind::kArgMin, arg_any});
  // Integer data's values and every index output are never differentiated.
  f.push_back({OpKind::kTopK,
               {{topk_forward, topk_backward, topk_backward, require_attrs<graph::TopKAttrs>},
                1,
                false,
                0,
                {DType::kFloat32, DType::kInt64, DType::kInt32}}});
  return f;
}

}  // namespace gp::exec::cpu
