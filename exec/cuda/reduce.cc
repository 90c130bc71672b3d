// The CUDA backend's reduce family: Softmax (any axis), ReduceSum and ReduceMean. Same inputs,
// outputs and conventions as the CPU's exec/cpu/reduce.cc; kernels in kernels/cuda/math.h.
#include <algorithm>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/math.h"
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"

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
  hd::BinaryIndex index;
  if (!hd::make_binary_index(in_shape, keep, keep, index))
    return op_error(call, "the input's layout needs more than " + std::to_string(hd::kMaxBroadcastDims) +
                              " dimensions after merging");
  ASSIGN_OR_RETURN(Tensor g, empty(in_shape, gout[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::broadcast_scaled<T>(index, gout[0].data<T>(), scale, g.data<T>(), stream));
  return emit_grad(call, grads, 0, g, accumulate);
}

// noop_with_empty_axes=1 without axes (ReduceAttrs::noop) is the identity; the CUDA kernels reduce.
Status reduce_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ReduceAttrs>(op, graph));
  if (attrs_of<graph::ReduceAttrs>(op)->noop)
    return unsupported("noop_with_empty_axes=1 without axes is not implemented on CUDA yet (run with --backend cpu)");
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> reduce_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const reduce{reduce_forward<float>, reduce_backward<float>, reduce_backward<float>, reduce_check};
  std::vector<KernelEntry> t;
  t.push_back(
      {OpKind::kSoftmax, f32, {softmax_forward<float>, softmax_backward<float>, softmax_backward<float>, no_check}, 1});
  t.push_back({OpKind::kReduceMean, f32, reduce, 1});
  t.push_back({OpKind::kReduceSum, f32, reduce, 1});
  return t;
}

}  // namespace gp::exec::cuda
