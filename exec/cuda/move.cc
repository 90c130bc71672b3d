// The CUDA backend's move family: Expand, Transpose, Concat, Split and Slice as strided copies, and
// Gather (checked indices). Same inputs, outputs and conventions as the CPU's exec/cpu/move.cc;
// kernels in kernels/cuda/move.h, their parameters in kernels/hd/move.h.
#include <limits>
#include <type_traits>

#include "exec/cuda/ops_common.h"
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

using graph::ops::dims_string;

// dst[idx · dst_strides] (+)= src[idx · src_strides] over `shape`, on the compute stream.
template <typename T>
Status copy_strided(OpCall const& call, T const* src, std::vector<int64_t> const& src_strides, T* dst,
                    std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape, bool accumulate) {
  if (hd::numel_of(shape) == 0) return Status::ok();
  hd::StridedParams p;
  if (!hd::make_strided(shape, src_strides, dst_strides, p))
    return unsupported(call.op.type + " '" + call.op.name + "': a copy over " + dims_string(shape) +
                       " keeps more than " + std::to_string(hd::kMaxRank) + " dims after merging contiguous ones");
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::strided_copy(src, dst, p, accumulate, s));
  return Status::ok();
}

// ---- Expand ----

Status expand_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                   graph::ops::expand_output_shape(call.graph, call.op, in[0].shape(), call.batch));
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  RETURN_IF_ERROR(copy_strided(call, in[0].data<float>(), hd::broadcast_strides(in[0].shape(), shape), y.data<float>(),
                               hd::row_major_strides(shape), shape, false));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// Masks and indices (a causal mask broadcast over the micro-batch, int64 ids): copied by element
// size, never differentiated.
Status expand_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                   graph::ops::expand_output_shape(call.graph, call.op, x.shape(), call.batch));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, x.dtype()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (y.numel() == 0) return Status::ok();
  hd::StridedParams p;
  if (!hd::make_strided(shape, hd::broadcast_strides(x.shape(), shape), hd::row_major_strides(shape), p))
    return unsupported(call.op.type + " '" + call.op.name + "': a copy over " + dims_string(shape) +
                       " keeps more than " + std::to_string(hd::kMaxRank) + " dims after merging contiguous ones");
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  return by_element_size(call, x.dtype(), [&](auto element) -> Status {
    using T = decltype(element);
    GP_CUDA_CHECK(kc::strided_copy(static_cast<T const*>(x.raw()), static_cast<T*>(y.raw()), p, false, s));
    return Status::ok();
  });
}

Status expand_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  hd::ReduceParams p;
  if (!hd::make_reduce(gout[0].shape(), in_shape, p))
    return unsupported(call.op.type + " '" + call.op.name + "': the gradient " + gout[0].shape_string() +
                       " keeps more than " + std::to_string(hd::kMaxRank) + " dims after merging contiguous ones");
  ASSIGN_OR_RETURN(Tensor * g, grad_slot(call, grads, 0, in_shape, accumulate, false));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::reduce_to(gout[0].data<float>(), g->data<float>(), p, g->numel(), accumulate, s));
  return Status::ok();
}

// ---- Transpose ----

// perm is checked (graph::ops::transpose_perm).
template <typename T>
Result<Tensor> permute_as(OpCall const& call, Tensor const& x, std::vector<int64_t> const& perm) {
  std::vector<int64_t> const in_strides = hd::row_major_strides(x.shape());
  std::vector<int64_t> shape(perm.size()), strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.dim(static_cast<int>(perm[i]));
    strides[i] = in_strides[perm[i]];
  }
  ASSIGN_OR_RETURN(Tensor y, empty(shape, x.dtype()));
  RETURN_IF_ERROR(copy_strided(call, x.data<T>(), strides, y.data<T>(), hd::row_major_strides(shape), shape, false));
  return y;
}

// T: the graph's dtype of the input (the kernel table's key): float, or a 16-bit float that
// Transpose follows under mixed precision.
template <typename T>
Status transpose_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0], dtype_of<T>()));
  ASSIGN_OR_RETURN(std::vector<int64_t> const perm, graph::ops::transpose_perm(call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  ASSIGN_OR_RETURN(out[0], permute_as<T>(call, in[0], perm));
  if (saved) saved->tensors.clear();
  return Status::ok();
}

template <typename T>
Status transpose_backward(OpCall const& call, Saved const&, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  RETURN_IF_ERROR(need_float(call, gout[0], dtype_of<T>()));
  ASSIGN_OR_RETURN(std::vector<int64_t> const perm, graph::ops::transpose_perm(call.op, gout[0].shape(), "gradient"));
  std::vector<int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  ASSIGN_OR_RETURN(Tensor g, permute_as<T>(call, gout[0], inverse));
  return emit_grad(call, grads, 0, g, accumulate);
}

// ---- Concat, Split: a part copied into / out of the whole at an offset along the axis ----

// T: float, or a 16-bit float where the op follows a 16-bit input (Split under mixed precision).
template <typename T = float>
Status copy_part(OpCall const& call, Tensor const& whole_src, Tensor* whole_dst, std::vector<int64_t> const& whole,
                 Tensor const* part_src, Tensor* part_dst, std::vector<int64_t> const& part, int64_t axis,
                 int64_t offset, bool accumulate) {
  std::vector<int64_t> const ws = hd::row_major_strides(whole), ps = hd::row_major_strides(part);
  int64_t const at = offset * ws[axis];
  if (whole_dst != nullptr)
    return copy_strided(call, part_src->data<T>(), ps, whole_dst->data<T>() + at, ws, part, accumulate);
  return copy_strided(call, whole_src.data<T>() + at, ws, part_dst->data<T>(), ps, part, accumulate);
}

Status concat_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  std::vector<std::vector<int64_t>> shapes;
  for (Tensor const& t : in) {
    RETURN_IF_ERROR(need_float(call, t));
    shapes.push_back(t.shape());
  }
  ASSIGN_OR_RETURN(graph::ops::ConcatShape const c, graph::ops::concat_shape(call.op, shapes));
  int64_t const axis = c.axis;
  std::vector<int64_t> const& shape = c.out_shape;
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  int64_t off = 0;
  for (Tensor const& t : in) {
    RETURN_IF_ERROR(copy_part(call, Tensor(), &y, shape, &t, nullptr, t.shape(), axis, off, false));
    off += t.dim(static_cast<int>(axis));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    saved->tensors.clear();
    for (Tensor const& t : in) saved->tensors.push_back(shape_tensor(t.shape()));
  }
  return Status::ok();
}

// Integer and bool parts (index pairs, shapes and ids built per micro-batch: the dynamo exporter's
// HF GPT-2 for classification): copied by element size, never differentiated, as the CPU's
// concat_bytes_forward.
template <typename T>
Status concat_parts_as(OpCall const& call, std::vector<Tensor> const& in, Tensor& y, graph::ops::ConcatShape const& c) {
  std::vector<int64_t> const ws = hd::row_major_strides(c.out_shape);
  int64_t off = 0;
  for (Tensor const& t : in) {
    T* const at = static_cast<T*>(y.raw()) + off * ws[c.axis];
    RETURN_IF_ERROR(
        copy_strided(call, static_cast<T const*>(t.raw()), hd::row_major_strides(t.shape()), at, ws, t.shape(), false));
    off += t.dim(static_cast<int>(c.axis));
  }
  return Status::ok();
}

Status concat_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  std::vector<std::vector<int64_t>> shapes;
  for (Tensor const& t : in) {
    if (t.dtype() != in.at(0).dtype())
      return op_error(call, "parts of dtypes " + std::string(graph::dtype_name(in[0].dtype())) + " and " +
                                graph::dtype_name(t.dtype()));
    shapes.push_back(t.shape());
  }
  ASSIGN_OR_RETURN(graph::ops::ConcatShape const c, graph::ops::concat_shape(call.op, shapes));
  ASSIGN_OR_RETURN(Tensor y, empty(c.out_shape, in[0].dtype()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return by_element_size(call, y.dtype(),
                         [&](auto element) { return concat_parts_as<decltype(element)>(call, in, y, c); });
}

Status concat_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  int64_t const axis = graph::ops::normalised_axis(attrs_of<graph::ConcatAttrs>(call.op)->axis, gout[0].rank());
  int64_t off = 0;
  for (std::size_t i = 0; i < saved.tensors.size(); ++i) {
    std::vector<int64_t> const s = shape_of(saved.tensors[i]);
    if (wants(wanted, i)) {
      ASSIGN_OR_RETURN(Tensor * g, grad_slot(call, grads, i, s, accumulate, false));
      RETURN_IF_ERROR(copy_part(call, gout[0], nullptr, gout[0].shape(), nullptr, g, s, axis, off, accumulate));
    }
    off += s[axis];
  }
  return Status::ok();
}

// T: the graph's dtype of the input (the kernel table's key): float, or a 16-bit float that Split
// follows under mixed precision.
template <typename T>
Status split_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0], dtype_of<T>()));
  ASSIGN_OR_RETURN(graph::ops::SplitShape const sp, graph::ops::split_shape(call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  int64_t off = 0;
  for (std::size_t i = 0; i < sp.sizes.size(); ++i) {
    std::vector<int64_t> s = in[0].shape();
    s[sp.axis] = sp.sizes[i];
    ASSIGN_OR_RETURN(out[i], empty(s, dtype_of<T>()));
    RETURN_IF_ERROR(copy_part<T>(call, in[0], nullptr, in[0].shape(), nullptr, &out[i], s, sp.axis, off, false));
    off += sp.sizes[i];
  }
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

template <typename T>
Status split_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(graph::ops::SplitShape const sp, graph::ops::split_shape(call.op, in_shape));
  ASSIGN_OR_RETURN(Tensor * g, grad_slot(call, grads, 0, in_shape, accumulate, true, dtype_of<T>()));
  int64_t off = 0;
  for (std::size_t i = 0; i < sp.sizes.size(); ++i) {
    if (i < gout.size() && gout[i].defined())
      RETURN_IF_ERROR(
          copy_part<T>(call, Tensor(), g, in_shape, &gout[i], nullptr, gout[i].shape(), sp.axis, off, accumulate));
    off += sp.sizes[i];
  }
  return Status::ok();
}

// ---- Slice ----

Status slice_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  ASSIGN_OR_RETURN(graph::ops::SliceGeometry const g, graph::ops::slice_geometry(call.op, in[0].shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(g.out_shape));
  RETURN_IF_ERROR(copy_strided(call, in[0].data<float>() + g.offset, g.src_strides, y.data<float>(),
                               hd::row_major_strides(g.out_shape), g.out_shape, false));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// Index arithmetic (int64, int32, bool and byte tensors: the dynamo exporter slices MaxPool's
// indices): copied by element size, never differentiated.
Status slice_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::SliceGeometry const g, graph::ops::slice_geometry(call.op, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(g.out_shape, x.dtype()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return by_element_size(call, x.dtype(), [&](auto element) -> Status {
    using T = decltype(element);
    return copy_strided(call, static_cast<T const*>(x.raw()) + g.offset, g.src_strides, static_cast<T*>(y.raw()),
                        hd::row_major_strides(g.out_shape), g.out_shape, false);
  });
}

// The slice's positions in the input are distinct, so adding into them is race-free.
Status slice_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(graph::ops::SliceGeometry const g, graph::ops::slice_geometry(call.op, in_shape));
  ASSIGN_OR_RETURN(Tensor * dx, grad_slot(call, grads, 0, in_shape, accumulate, true));
  if (!gout.at(0).defined()) return Status::ok();
  return copy_strided(call, gout[0].data<float>(), hd::row_major_strides(g.out_shape), dx->data<float>() + g.offset,
                      g.src_strides, g.out_shape, true);
}

// ---- Gather ----

// Out-of-range indices are an error, as on the CPU: the kernel flags the first one in device
// memory (reading nothing outside the data: a bad index's row is zeros, and backward skips it)
// and this reads the flag back (16 bytes: the first bad position and the index there), at once
// or, while the backend defers checks (a training step), at the step's end.
// T: float, or (masks and indices: HF's causal mask gathered by computed positions) an integer of
// the data's element size, copied and never differentiated.
template <typename T>
Status gather_as(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& data = in[0];
  Tensor idx = in[1];
  if (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32)
    return op_error(call, "indices must be int64 or int32");
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  if (idx.device().kind != DeviceKind::kCuda) idx = idx.clone_to(*ctx->allocator);
  ASSIGN_OR_RETURN(graph::ops::GatherShape const gs, graph::ops::gather_shape(call.op, data.shape(), idx.shape()));
  int64_t const axis = gs.axis, outer = gs.outer, inner = gs.inner, axis_dim = gs.axis_dim;
  ASSIGN_OR_RETURN(Tensor y, empty(gs.out_shape, data.dtype()));
  ASSIGN_OR_RETURN(Tensor flag, index_flag());
  auto* bad = static_cast<unsigned long long*>(flag.raw());
  cudaStream_t const s = ctx->compute;
  auto const* src = static_cast<T const*>(data.raw());
  auto* dst = static_cast<T*>(y.raw());
  if (idx.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(kc::gather(src, outer, axis_dim, inner, idx.data<int64_t>(), idx.numel(), dst, bad, s));
  } else {
    GP_CUDA_CHECK(kc::gather(src, outer, axis_dim, inner, idx.data<int32_t>(), idx.numel(), dst, bad, s));
  }
  RETURN_IF_ERROR(check_index_flag(call, idx, flag, 1, "axis " + std::to_string(axis) + " of " + data.shape_string(),
                                   /*deferrable=*/true));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved && std::is_same_v<T, float>) saved->tensors = {idx, shape_tensor(data.shape())};
  return Status::ok();
}

Status gather_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  return gather_as<float>(call, in, out, saved);
}

Status gather_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  return by_element_size(call, in[0].dtype(),
                         [&](auto element) -> Status { return gather_as<decltype(element)>(call, in, out, nullptr); });
}

Status gather_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  Tensor const& idx = saved.tensors.at(0);
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(graph::ops::GatherShape const gs, graph::ops::gather_shape(call.op, data_shape, idx.shape()));
  int64_t const outer = gs.outer, inner = gs.inner, axis_dim = gs.axis_dim;
  if (idx.numel() >= std::numeric_limits<int32_t>::max() || axis_dim >= std::numeric_limits<int32_t>::max())
    return unsupported(call.op.type + " '" + call.op.name + "': backward sorts int32 keys; " +
                       std::to_string(idx.numel()) + " indices into an axis of " + std::to_string(axis_dim));
  ASSIGN_OR_RETURN(Tensor * g, grad_slot(call, grads, 0, data_shape, accumulate, true));
  if (!gout.at(0).defined()) return Status::ok();
  std::size_t bytes = 0;
  GP_CUDA_CHECK(kc::gather_backward_workspace(idx.numel(), axis_dim, &bytes));
  ASSIGN_OR_RETURN(Tensor ws, empty({static_cast<int64_t>(bytes)}, DType::kUInt8));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  if (idx.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(kc::gather_backward(gout[0].data<float>(), outer, axis_dim, inner, idx.data<int64_t>(), idx.numel(),
                                      g->data<float>(), ws.raw(), bytes, s));
  } else {
    GP_CUDA_CHECK(kc::gather_backward(gout[0].data<float>(), outer, axis_dim, inner, idx.data<int32_t>(), idx.numel(),
                                      g->data<float>(), ws.raw(), bytes, s));
  }
  return Status::ok();
}

// Ids and masks (XLNet transposes its ids to [T, N]): copied by element size, never differentiated.
Status transpose_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const perm, graph::ops::transpose_perm(call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  return by_element_size(call, in[0].dtype(), [&](auto element) -> Status {
    ASSIGN_OR_RETURN(out[0], permute_as<decltype(element)>(call, in[0], perm));
    return Status::ok();
  });
}

// The kernel table's entry of Transpose or Split for dtype T.
template <typename T>
KernelEntry moves_as(OpKind kind) {
  if (kind == OpKind::kTranspose)
    return {kind,
            dtype_of<T>(),
            {transpose_forward<T>, transpose_backward<T>, transpose_backward<T>, require_attrs<graph::TransposeAttrs>},
            1};
  return {kind,
          dtype_of<T>(),
          {split_forward<T>, split_backward<T>, split_backward<T>, require_attrs<graph::SplitAttrs>},
          1};
}

}  // namespace

std::vector<KernelEntry> move_kernels() {
  std::vector<KernelEntry> t;
  auto const add = [&t](OpKind type, OpKernels const& k, std::size_t min_inputs = 1) {
    t.push_back({type, DType::kFloat32, k, min_inputs});
  };
  add(OpKind::kExpand, {expand_forward, expand_backward, expand_backward, require_attrs<graph::ExpandAttrs>});
  for (DType d : {DType::kInt64, DType::kInt32, DType::kInt8, DType::kBool, DType::kUInt8, DType::kFloat64})
    t.push_back(
        {OpKind::kExpand, d, {expand_bytes_forward, no_gradient, no_gradient, require_attrs<graph::ExpandAttrs>}, 1});
  // Transpose and Split: float32, and the 16-bit dtypes they follow under mixed precision.
  for (KernelEntry const& e : {moves_as<float>(OpKind::kTranspose), moves_as<__nv_bfloat16>(OpKind::kTranspose),
                               moves_as<__half>(OpKind::kTranspose), moves_as<float>(OpKind::kSplit),
                               moves_as<__nv_bfloat16>(OpKind::kSplit), moves_as<__half>(OpKind::kSplit)})
    t.push_back(e);
  add(OpKind::kConcat, {concat_forward, concat_backward, concat_backward, require_attrs<graph::ConcatAttrs>});
  for (DType d : {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8})
    t.push_back({OpKind::kConcat, d, {concat_bytes_forward, no_gradient, no_gradient, concat_bytes_check}, 1});
  add(OpKind::kSlice, {slice_forward, slice_backward, slice_backward, require_attrs<graph::SliceAttrs>});
  for (DType d : {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8})
    t.push_back(
        {OpKind::kSlice, d, {slice_bytes_forward, no_gradient, no_gradient, require_attrs<graph::SliceAttrs>}, 1});
  add(OpKind::kGather, {gather_forward, gather_backward, gather_backward, require_attrs<graph::GatherAttrs>}, 2);
  for (DType d : {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8}) {
    t.push_back(
        {OpKind::kGather, d, {gather_bytes_forward, no_gradient, no_gradient, require_attrs<graph::GatherAttrs>}, 2});
    t.push_back({OpKind::kTranspose,
                 d,
                 {transpose_bytes_forward, no_gradient, no_gradient, require_attrs<graph::TransposeAttrs>},
                 1});
  }
  return t;
}

}  // namespace gp::exec::cuda
