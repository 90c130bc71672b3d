// The CUDA backend's reduce family: Softmax (any axis), ReduceSum and ReduceMean (sums down to the
// kept shape), and ReduceMax/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, LogSoftmax, Hardmax,
// CumSum, ArgMax, ArgMin and TopK (the CPU's per-row and per-line functions of kernels/hd/reduce.h, one
// thread per row or line). Same inputs, outputs, saved tensors and
// conventions as the CPU's exec/cpu/reduce.cc; kernels in kernels/cuda/math.h.
#include <algorithm>

#include "exec/cuda/ops_common.h"
#include "exec/op_shared.h"
#include "kernels/cuda/math.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move.h"
#include "kernels/hd/reduce.h"
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "graph/ops/reduce.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

int64_t numel_of(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- Softmax ----

struct AxisView {
  int64_t outer = 1, axis = 1, inner = 1;
};

Result<AxisView> softmax_view(OpCall const& call, std::vector<int64_t> const& shape) {
  auto const* a = attrs_of<graph::SoftmaxAttrs>(call.op);
  int64_t const rank = static_cast<int64_t>(shape.size());
  int64_t axis = a ? a->axis : -1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1))
    return op_error(call, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  AxisView v;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? v.outer : (i == axis ? v.axis : v.inner)) *= shape[i];
  return v;
}

template <typename T>
Status softmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(AxisView const v, softmax_view(call, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::softmax_forward<T>(x.data<T>(), v.outer, v.axis, v.inner, y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {y};
  return Status::ok();
}

template <typename T>
Status softmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(0);
  ASSIGN_OR_RETURN(AxisView const v, softmax_view(call, y.shape()));
  ASSIGN_OR_RETURN(Tensor dx, empty(y.shape(), y.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(
      kc::softmax_backward<T>(y.data<T>(), gout[0].data<T>(), v.outer, v.axis, v.inner, dx.data<T>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- ReduceSum, ReduceMean ----

bool reduce_listed(std::vector<int64_t> const& axes, int64_t i, int64_t rank) {
  return axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end() ||
         std::find(axes.begin(), axes.end(), i - rank) != axes.end();
}

// The input's shape with the reduced axes set to 1.
std::vector<int64_t> reduce_keep_shape(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& axes = attrs_of<graph::ReduceAttrs>(call.op)->axes;
  std::vector<int64_t> keep = in_shape;
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  for (int64_t i = 0; i < rank; ++i)
    if (reduce_listed(axes, i, rank)) keep[i] = 1;
  return keep;
}

template <typename T>
Status reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& attrs = *attrs_of<graph::ReduceAttrs>(call.op);
  Tensor const& x = in[0];
  std::vector<int64_t> const keep = reduce_keep_shape(call, x.shape());
  int64_t const kept = numel_of(keep);
  float const scale = call.op.kind() == OpKind::kReduceMean && kept > 0
                          ? static_cast<float>(static_cast<double>(kept) / static_cast<double>(x.numel()))
                          : 1.f;
  ASSIGN_OR_RETURN(Tensor y, sum_down<T>(call, x, keep, scale));
  if (!attrs.keepdims) {
    // Drop exactly the listed axes (a size-1 axis may or may not be listed).
    std::vector<int64_t> squeezed;
    int64_t const rank = x.rank();
    for (int64_t i = 0; i < rank; ++i)
      if (!reduce_listed(attrs.axes, i, rank)) squeezed.push_back(keep[i]);
    y = y.reshaped(squeezed);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

template <typename T>
Status reduce_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  std::vector<int64_t> const keep = reduce_keep_shape(call, in_shape);
  int64_t const n = numel_of(in_shape);
  float const scale = call.op.kind() == OpKind::kReduceMean && n > 0
                          ? static_cast<float>(static_cast<double>(numel_of(keep)) / static_cast<double>(n))
                          : 1.f;
  ASSIGN_OR_RETURN(Tensor g, broadcast_to<T>(call, gout[0], in_shape, scale, keep));
  return emit_grad(call, grads, 0, g, accumulate);
}

// ---- ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp ----

// A copy between the input's layout and [rows, cols] (the kept axes, then the reduced ones: the
// CPU's as_rows/from_rows); `to_rows` picks the direction. Views where the order is the identity.
Result<Tensor> rows_copy(OpCall const& call, Tensor const& src, graph::ops::ReduceShape const& s,
                         std::vector<int64_t> const& in_shape, bool to_rows) {
  bool identity = true;
  for (std::size_t i = 0; i < s.perm.size(); ++i) identity = identity && s.perm[i] == static_cast<int64_t>(i);
  if (identity) return to_rows ? src.reshaped({s.rows, s.cols}) : src.reshaped(in_shape);
  std::vector<int64_t> const in_strides = hd::row_major_strides(in_shape);
  std::vector<int64_t> shape, permuted_strides;  // the input's dims in the rows' order
  for (int64_t a : s.perm) {
    shape.push_back(in_shape[static_cast<std::size_t>(a)]);
    permuted_strides.push_back(in_strides[static_cast<std::size_t>(a)]);
  }
  std::vector<int64_t> const row_strides = hd::row_major_strides(shape);
  ASSIGN_OR_RETURN(Tensor dst, empty(to_rows ? std::vector<int64_t>{s.rows, s.cols} : in_shape, DType::kFloat32));
  if (hd::numel_of(shape) == 0) return dst;
  hd::StridedParams p;
  if (!hd::make_strided(shape, to_rows ? permuted_strides : row_strides, to_rows ? row_strides : permuted_strides, p))
    return op_error(call, "a copy over " + graph::ops::dims_string(shape) + " keeps more than " +
                              std::to_string(hd::kMaxRank) + " dims after merging contiguous ones");
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::strided_copy(src.data<float>(), dst.data<float>(), p, false, stream));
  return dst;
}

// Saved: {input shape, x as rows (when the gradient reads it), y (when it reads it), arg-extrema},
// as the CPU saves them.
Status rows_reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(graph::ops::ReduceShape const s, graph::ops::reduce_shape(call.op, in[0].shape()));
  ASSIGN_OR_RETURN(hd::Reduction const r, reduction_of(call));
  ASSIGN_OR_RETURN(Tensor const x, rows_copy(call, in[0], s, in[0].shape(), true));
  ASSIGN_OR_RETURN(Tensor y, empty(s.out_shape, DType::kFloat32));
  Tensor arg;
  if (hd::reduction_is_extremum(r)) {
    ASSIGN_OR_RETURN(arg, empty({s.rows}, DType::kInt64));
  }
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::reduce_rows(r, x.data<float>(), s.rows, s.cols, y.data<float>(),
                                arg.defined() ? arg.data<int64_t>() : nullptr, stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved)
    saved->tensors = {shape_tensor(in[0].shape()), hd::reduction_reads_x(r) ? x : Tensor(),
                      hd::reduction_reads_y(r) ? y : Tensor(), arg};
  return Status::ok();
}

Status rows_reduce_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(graph::ops::ReduceShape const s, graph::ops::reduce_shape(call.op, in_shape));
  ASSIGN_OR_RETURN(hd::Reduction const r, reduction_of(call));
  Tensor const& x = saved.tensors.at(1);
  Tensor const& y = saved.tensors.at(2);
  Tensor const& arg = saved.tensors.at(3);
  if ((hd::reduction_reads_x(r) && !x.defined()) || (hd::reduction_reads_y(r) && !y.defined()) ||
      (hd::reduction_is_extremum(r) && !arg.defined()))
    return op_error(call, "backward without the forward pass's saved tensors");
  ASSIGN_OR_RETURN(Tensor dm, empty({s.rows, s.cols}, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::reduce_rows_backward(
      r, x.defined() ? x.data<float>() : nullptr, y.defined() ? y.data<float>() : nullptr,
      arg.defined() ? arg.data<int64_t>() : nullptr, gout[0].data<float>(), s.rows, s.cols, dm.data<float>(), stream));
  ASSIGN_OR_RETURN(Tensor dx, rows_copy(call, dm, s, in_shape, false));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- ReduceSum, ReduceProd, ReduceMax, ReduceMin of integers (Max and Min of bool too):
// hd::int_reduce_at per output element, as on the CPU; never differentiated ----

template <typename T>
Status int_reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::ReduceShape const s, graph::ops::reduce_shape(call.op, x.shape()));
  out.assign(call.op.outputs.size(), Tensor());
  if (s.noop) {
    out[0] = x;
    return Status::ok();
  }
  ASSIGN_OR_RETURN(IntReducePlan const plan, int_reduce_plan(call, s, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(s.out_shape, x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::int_reduce<T>(plan.kind, x.data<T>(), y.data<T>(), plan.params, plan.out_numel, stream));
  out[0] = y;
  return Status::ok();
}

// ---- LogSoftmax, Hardmax, CumSum, ArgMax, ArgMin: along one axis ----

// y = x - max - log(sum(exp(x - max))); saved: y.
Status log_softmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::AxisSplit const s, softmax_axis_split(call, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::log_softmax(x.data<float>(), s.outer, s.dim, s.inner, y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {y};
  return Status::ok();
}

Status log_softmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(0);
  ASSIGN_OR_RETURN(graph::ops::AxisSplit const s, softmax_axis_split(call, y.shape()));
  ASSIGN_OR_RETURN(Tensor dx, empty(y.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::log_softmax_backward(y.data<float>(), gout[0].data<float>(), s.outer, s.dim, s.inner,
                                         dx.data<float>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// 1 at the first maximum along the axis, 0 elsewhere; piecewise constant, so a zero gradient.
Status hardmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::AxisSplit const s, softmax_axis_split(call, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(
      kc::arg_extremum(x.data<float>(), s.outer, s.dim, s.inner, true, false, nullptr, y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

Status hardmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  return emit_zero_grad(call, wanted, grads, 0, shape_of(saved.tensors.at(0)), accumulate);
}

// Running sums (floats, and int64/int32 position ids, wrapping); the gradient of a float CumSum is
// the running sum of the output gradient in the other direction.
template <typename T>
Status cumsum_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::CumSumAttrs>(call.op);
  ASSIGN_OR_RETURN(graph::ops::AxisSplit const s, graph::ops::axis_split(call.op, a.axis, in[0].shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(in[0].shape(), in[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::cumsum(in[0].data<T>(), s.outer, s.dim, s.inner, a.exclusive, a.reverse, y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors.clear();
  return Status::ok();
}

Status cumsum_backward(OpCall const& call, Saved const&, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  auto const& a = *attrs_of<graph::CumSumAttrs>(call.op);
  ASSIGN_OR_RETURN(graph::ops::AxisSplit const s, graph::ops::axis_split(call.op, a.axis, gout[0].shape()));
  ASSIGN_OR_RETURN(Tensor dx, empty(gout[0].shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(
      kc::cumsum(gout[0].data<float>(), s.outer, s.dim, s.inner, a.exclusive, !a.reverse, dx.data<float>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// int64 indices of each line's extremum (ties: the first, or the last with select_last_index).
template <typename T>
Status arg_reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::ArgReduceAttrs>(call.op);
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::AxisSplit const s, graph::ops::axis_split(call.op, a.axis, x.shape()));
  if (s.dim == 0 && s.outer * s.inner > 0)
    return op_error(call, "cannot take the index of an extremum along axis " + std::to_string(s.axis) +
                              " of size 0 (input " + x.shape_string() + ")");
  ASSIGN_OR_RETURN(Tensor y, empty(graph::ops::arg_reduce_shape(s, x.shape(), a.keepdims), DType::kInt64));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::arg_extremum(x.data<T>(), s.outer, s.dim, s.inner, call.op.kind() == OpKind::kArgMax,
                                 a.select_last_index, y.data<int64_t>(), nullptr, stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors.clear();
  return Status::ok();
}

// The k largest (or smallest) along the axis, in order, and their int64 indices, as on the CPU.
template <typename T>
Status topk_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::TopKShape const s, graph::ops::topk_shape(call.op, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(s.out_shape, x.dtype()));
  ASSIGN_OR_RETURN(Tensor idx, empty(s.out_shape, DType::kInt64));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::topk(x.data<T>(), s.split.outer, s.split.dim, s.split.inner, s.k,
                         attrs_of<graph::TopKAttrs>(call.op)->largest, y.data<T>(), idx.data<int64_t>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1) out[1] = idx;
  if (saved) saved->tensors = {idx, shape_tensor(x.shape())};
  return Status::ok();
}

// The values' gradient back at the positions they came from, zero elsewhere.
Status topk_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  Tensor const& idx = saved.tensors.at(0);
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(graph::ops::TopKShape const s, graph::ops::topk_shape(call.op, in_shape));
  ASSIGN_OR_RETURN(Tensor dx, zeros(in_shape));
  if (!gout.empty() && gout[0].defined()) {
    ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
    GP_CUDA_CHECK(kc::topk_backward(gout[0].data<float>(), idx.data<int64_t>(), s.split.outer, s.split.dim,
                                    s.split.inner, s.k, dx.data<float>(), stream));
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

// noop_with_empty_axes=1 without axes (ReduceAttrs::noop): the identity, as on the CPU (the
// output is the input, a view; the gradient passes through); every other Reduce* runs `Fwd`/`Bwd`.
template <ForwardFn Fwd>
Status or_identity_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (!attrs_of<graph::ReduceAttrs>(call.op)->noop) return Fwd(call, in, out, saved);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = in[0];
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

template <BackwardFn Bwd>
Status or_identity_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!attrs_of<graph::ReduceAttrs>(call.op)->noop) return Bwd(call, saved, gout, wanted, grads, accumulate);
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  return emit_grad(call, grads, 0, gout[0].reshaped(shape_of(saved.tensors.at(0))), accumulate);
}

}  // namespace

std::vector<KernelEntry> reduce_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const reduce{or_identity_forward<reduce_forward<float>>, or_identity_backward<reduce_backward<float>>,
                         or_identity_backward<reduce_backward<float>>, require_attrs<graph::ReduceAttrs>};
  std::vector<KernelEntry> t;
  t.push_back(
      {OpKind::kSoftmax, f32, {softmax_forward<float>, softmax_backward<float>, softmax_backward<float>, no_check}, 1});
  t.push_back({OpKind::kReduceMean, f32, reduce, 1});
  t.push_back({OpKind::kReduceSum, f32, reduce, 1});
  OpKernels const rows{or_identity_forward<rows_reduce_forward>, or_identity_backward<rows_reduce_backward>,
                       or_identity_backward<rows_reduce_backward>, require_attrs<graph::ReduceAttrs>};
  for (OpKind k : {OpKind::kReduceMax, OpKind::kReduceMin, OpKind::kReduceProd, OpKind::kReduceL1, OpKind::kReduceL2,
                   OpKind::kReduceSumSquare, OpKind::kReduceLogSum, OpKind::kReduceLogSumExp})
    t.push_back({k, f32, rows, 1});
  auto const int_reduce = [&t](OpKind k, DType dt, ForwardFn forward) {
    t.push_back({k, dt, {forward, no_gradient, no_gradient, require_attrs<graph::ReduceAttrs>}, 1});
  };
  for (OpKind k : {OpKind::kReduceSum, OpKind::kReduceProd, OpKind::kReduceMax, OpKind::kReduceMin}) {
    int_reduce(k, DType::kInt64, int_reduce_forward<int64_t>);
    int_reduce(k, DType::kInt32, int_reduce_forward<int32_t>);
    int_reduce(k, DType::kInt8, int_reduce_forward<int8_t>);
    int_reduce(k, DType::kUInt8, int_reduce_forward<uint8_t>);
    if (k == OpKind::kReduceMax || k == OpKind::kReduceMin) int_reduce(k, DType::kBool, int_reduce_forward<uint8_t>);
  }
  using graph::ArgReduceAttrs, graph::CumSumAttrs, graph::SoftmaxAttrs;
  t.push_back({OpKind::kLogSoftmax,
               f32,
               {log_softmax_forward, log_softmax_backward, log_softmax_backward, require_attrs<SoftmaxAttrs>},
               1});
  t.push_back(
      {OpKind::kHardmax, f32, {hardmax_forward, hardmax_backward, hardmax_backward, require_attrs<SoftmaxAttrs>}, 1});
  t.push_back(
      {OpKind::kCumSum, f32, {cumsum_forward<float>, cumsum_backward, cumsum_backward, require_attrs<CumSumAttrs>}, 1});
  // Integers (position ids) and the indices of ArgMax/ArgMin are never differentiated.
  t.push_back({OpKind::kCumSum,
               DType::kInt64,
               {cumsum_forward<int64_t>, no_gradient, no_gradient, require_attrs<CumSumAttrs>},
               1});
  t.push_back({OpKind::kCumSum,
               DType::kInt32,
               {cumsum_forward<int32_t>, no_gradient, no_gradient, require_attrs<CumSumAttrs>},
               1});
  for (OpKind k : {OpKind::kArgMax, OpKind::kArgMin}) {
    t.push_back({k, f32, {arg_reduce_forward<float>, no_gradient, no_gradient, require_attrs<ArgReduceAttrs>}, 1});
    t.push_back(
        {k, DType::kInt64, {arg_reduce_forward<int64_t>, no_gradient, no_gradient, require_attrs<ArgReduceAttrs>}, 1});
    t.push_back(
        {k, DType::kInt32, {arg_reduce_forward<int32_t>, no_gradient, no_gradient, require_attrs<ArgReduceAttrs>}, 1});
  }
  using graph::TopKAttrs;
  t.push_back({OpKind::kTopK, f32, {topk_forward<float>, topk_backward, topk_backward, require_attrs<TopKAttrs>}, 1});
  t.push_back(
      {OpKind::kTopK, DType::kInt64, {topk_forward<int64_t>, no_gradient, no_gradient, require_attrs<TopKAttrs>}, 1});
  t.push_back(
      {OpKind::kTopK, DType::kInt32, {topk_forward<int32_t>, no_gradient, no_gradient, require_attrs<TopKAttrs>}, 1});
  return t;
}

}  // namespace gp::exec::cuda
