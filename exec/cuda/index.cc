// The CUDA backend's index family, as the CPU's exec/cpu/index.cc computes it: OneHot (int64,
// int32 or float32 indices into float32, int64 or int32 values, kernels/hd/index.h's one_hot_at), Trilu (float32,
// int64, int32, bool; its gradient is the same mask on the output gradient; the mask is
// kernels/hd/index.h's trilu_keeps) and Tile of float32 (a broadcast of x seen as [1, d0, 1, d1, ...]
// to [r0, d0, r1, d1, ...]; its gradient sums back down), and Pad and Resize of float32: the CPU's
// per-axis maps (exec/separable_maps.h), one pass per axis and the adjoint passes in reverse order;
// Pad and Tile of int64, int32 and bool by the same maps' one-tap copies (ids and masks, never
// differentiated). GatherElements and GatherND (any dtype gathered, float32 differentiated),
// ScatterElements, Scatter and ScatterND (float32; reductions none, add, mul, max, min) by flat
// positions (below).
// GridSample of float32 on kernels/hd/index.h's per-element math. Resize of other dtypes runs on the CPU only (the CPU
// resizes float32 alone too).
#include <limits>

#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/ops_common.h"
#include "exec/index_positions.h"
#include "exec/op_shared.h"
#include "exec/separable_maps.h"
#include "graph/ops/index.h"
#include "kernels/cuda/math.h"
#include "kernels/cuda/move.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// `on` where the index matches the position along the depth axis, `off` elsewhere; float indices
// get a zero gradient (op_shared's one_hot_backward).
template <typename I>
Status one_hot_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::OneHotAttrs>(call.op);
  auto const shape = graph::ops::one_hot_output_shape(a, in[0].shape());
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  int64_t const inner = shape->inner;
  ASSIGN_OR_RETURN(Tensor y, empty(shape->out, call.graph.tensor(call.op.outputs.at(0)).dtype));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  I const* idx = in[0].data<I>();
  if (y.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(kc::one_hot(idx, y.numel(), a.depth, inner, static_cast<int64_t>(a.off), static_cast<int64_t>(a.on),
                              y.data<int64_t>(), stream));
  } else if (y.dtype() == DType::kInt32) {
    GP_CUDA_CHECK(kc::one_hot(idx, y.numel(), a.depth, inner, static_cast<int32_t>(a.off), static_cast<int32_t>(a.on),
                              y.data<int32_t>(), stream));
  } else {
    GP_CUDA_CHECK(kc::one_hot(idx, y.numel(), a.depth, inner, static_cast<float>(a.off), static_cast<float>(a.on),
                              y.data<float>(), stream));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

template <typename T>
Result<Tensor> trilu_mask(OpCall const& call, Tensor const& x) {
  auto const& a = *attrs_of<graph::TriluAttrs>(call.op);
  if (x.rank() < 2) return op_error(call, "input " + x.shape_string() + " has rank below 2");
  int64_t const r = x.rank();
  int64_t const rows = x.dim(static_cast<int>(r - 2)), cols = x.dim(static_cast<int>(r - 1));
  int64_t const mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::trilu(x.data<T>(), mats, rows, cols, a.k, a.upper, y.data<T>(), stream));
  return y;
}

template <typename T>
Status trilu_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(Tensor y, trilu_mask<T>(call, in[0]));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// Masks, ids and float64: the kept elements' bytes copied, the others zero bits (0 in every dtype).
Status trilu_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  return by_element_size(call, in[0].dtype(),
                         [&](auto element) { return trilu_forward<decltype(element)>(call, in, out, saved); });
}

Status trilu_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(Tensor dx, trilu_mask<float>(call, grad_or_zeros(call, gout, 0, in_shape)));
  return emit_grad(call, grads, 0, dx, accumulate);
}

Status trilu_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::TriluAttrs>(op, graph));
  if (graph.tensor(op.inputs.at(0)).shape.dims.size() < 2)
    return invalid_argument("input " + graph.tensor(op.inputs.at(0)).shape.to_string() + " has rank below 2");
  return Status::ok();
}

// Tile's shapes: x as [1, d0, 1, d1, ...] and the output as [r0, d0, r1, d1, ...].
struct TileView {
  std::vector<int64_t> in, out, in_interleaved, out_interleaved;
};

Result<TileView> tile_view(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& a = *attrs_of<graph::TileAttrs>(call.op);
  auto shape = graph::ops::tile_output_shape(a, in_shape, call.batch);
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  TileView v{in_shape, *shape, {}, {}};
  for (std::size_t d = 0; d < in_shape.size(); ++d) {
    int64_t const reps = in_shape[d] > 0 ? v.out[d] / in_shape[d] : 0;
    v.in_interleaved.insert(v.in_interleaved.end(), {1, in_shape[d]});
    v.out_interleaved.insert(v.out_interleaved.end(), {reps, in_shape[d]});
  }
  return v;
}

Status tile_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(TileView const v, tile_view(call, in[0].shape()));
  ASSIGN_OR_RETURN(Tensor const y, broadcast_to<float>(call, in[0], v.out_interleaved, 1.f, v.in_interleaved));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y.reshaped(v.out);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status tile_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  ASSIGN_OR_RETURN(TileView const v, tile_view(call, shape_of(saved.tensors.at(0))));
  ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, gout[0].reshaped(v.out_interleaved), v.in_interleaved, 1.f));
  return emit_grad(call, grads, 0, g.reshaped(v.in), accumulate);
}

// ---- Pad, Resize: separable passes ----

int64_t product(std::vector<int64_t> const& s, std::size_t from, std::size_t to) {
  int64_t p = 1;
  for (std::size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// A host vector's copy on the device (a pageable copy: it returns once the bytes are staged).
template <typename T>
Result<Tensor> on_device(std::vector<T> const& v, DType dtype) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  if (ctx->capturing)
    return unsupported("Pad and Resize copy their index maps from host memory, which captured work cannot replay");
  ASSIGN_OR_RETURN(Tensor t, empty({static_cast<int64_t>(v.size())}, dtype));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (!v.empty())
    GP_CUDA_CHECK(cudaMemcpyAsync(t.raw(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  return t;
}

// x resampled along `axis` by m (forward), or gy through its adjoint (backward).
Result<Tensor> pass(Tensor const& x, std::size_t axis, AxisMap const& m, float fill, bool adjoint) {
  std::vector<int64_t> shape = x.shape();
  shape[axis] = adjoint ? m.in : m.out;
  int64_t const outer = product(shape, 0, axis), inner = product(shape, axis + 1, shape.size());
  ASSIGN_OR_RETURN(Tensor const idx, on_device(m.index, DType::kInt64));
  ASSIGN_OR_RETURN(Tensor const w, on_device(m.weight, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (adjoint)
    GP_CUDA_CHECK(kc::separable_axis_adjoint(x.data<float>(), outer, m.in, m.out, inner, m.taps, idx.data<int64_t>(),
                                             w.data<float>(), y.data<float>(), stream));
  else
    GP_CUDA_CHECK(kc::separable_axis(x.data<float>(), outer, m.in, m.out, inner, m.taps, idx.data<int64_t>(),
                                     w.data<float>(), fill, y.data<float>(), stream));
  return y;
}

template <MapsFn Maps>
Status separable_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<AxisMap> const maps, Maps(call, in[0].shape()));
  float const fill = separable_fill(call);
  Tensor y = in[0];
  for (std::size_t a = 0; a < maps.size(); ++a) {
    if (maps[a].identity()) continue;
    ASSIGN_OR_RETURN(y, pass(y, a, maps[a], fill, false));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

template <MapsFn Maps>
Status separable_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(std::vector<AxisMap> const maps, Maps(call, in_shape));
  ASSIGN_OR_RETURN(Tensor g, separable_output_grad(call, gout, maps, in_shape));
  for (std::size_t a = maps.size(); a-- > 0;) {
    if (maps[a].identity()) continue;
    ASSIGN_OR_RETURN(g, pass(g, a, maps[a], 0.f, true));
  }
  return emit_grad(call, grads, 0, g, accumulate);
}

// Pad and Tile of ids and masks (int64, int32, bool: T of its element size): the maps' one-tap
// copies, pass by pass as the float passes, never differentiated (the CPU's copy_axis).
template <typename T>
Result<Tensor> copy_pass(Tensor const& x, std::size_t axis, AxisMap const& m, T fill) {
  if (m.taps != 1) return internal_error("a copying pass over a map of " + std::to_string(m.taps) + " taps");
  std::vector<int64_t> shape = x.shape();
  shape[axis] = m.out;
  int64_t const outer = product(shape, 0, axis), inner = product(shape, axis + 1, shape.size());
  ASSIGN_OR_RETURN(Tensor const idx, on_device(m.index, DType::kInt64));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::copy_axis(static_cast<T const*>(x.raw()), outer, m.in, m.out, inner, idx.data<int64_t>(), fill,
                              static_cast<T*>(y.raw()), stream));
  return y;
}

template <typename T, MapsFn Maps>
Status copy_forward_as(OpCall const& call, Tensor const& x, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(std::vector<AxisMap> const maps, Maps(call, x.shape()));
  T const fill = separable_fill_as<T>(separable_fill(call));
  Tensor y = x;
  for (std::size_t a = 0; a < maps.size(); ++a) {
    if (maps[a].identity()) continue;
    ASSIGN_OR_RETURN(y, copy_pass<T>(y, a, maps[a], fill));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

template <MapsFn Maps>
Status copy_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  return by_element_size(call, in[0].dtype(),
                         [&](auto element) { return copy_forward_as<decltype(element), Maps>(call, in[0], out); });
}

// ---- GatherElements, GatherND, ScatterElements (and Scatter): flat positions into data from the
// indices (kernels/hd/index.h), then gathers by position, or combines in ascending j per position
// after a stable sort by position (kernels/cuda/scatter.cu): the CPU's results in the CPU's order. ----

// indices on this device (a host constant is copied once per call).
Result<Tensor> device_indices(Tensor const& idx) {
  if (idx.device().kind == DeviceKind::kCuda) return idx;
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  return idx.clone_to(*ctx->allocator);
}

// The position in data of every element of idx; with `check`, an out-of-range index is an error
// (one host round trip: forward only, backward reuses what forward checked).
Result<Tensor> element_positions(OpCall const& call, std::vector<int64_t> const& data_shape, Tensor const& idx,
                                 int64_t axis, bool check) {
  ASSIGN_OR_RETURN(kernels::hd::ElementIndex const p, element_index(call, data_shape, idx.shape(), axis));
  ASSIGN_OR_RETURN(Tensor pos, empty(idx.shape(), DType::kInt64));
  Tensor flag;
  if (check) {
    ASSIGN_OR_RETURN(flag, index_flag());
  }
  auto* bad = check ? static_cast<unsigned long long*>(flag.raw()) : nullptr;
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  if (idx.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(kc::element_positions(p, idx.data<int64_t>(), idx.numel(), pos.data<int64_t>(), bad, s));
  } else {
    GP_CUDA_CHECK(kc::element_positions(p, idx.data<int32_t>(), idx.numel(), pos.data<int64_t>(), bad, s));
  }
  if (check)
    RETURN_IF_ERROR(
        check_index_flag(call, idx, flag, 1, "axis " + std::to_string(axis) + " of size " + std::to_string(p.dim)));
  return pos;
}

// GatherND (batch_dims 0): the position of every output element (tuples x slice).
Result<Tensor> nd_positions(OpCall const& call, std::vector<int64_t> const& data_shape, Tensor const& idx, bool check) {
  ASSIGN_OR_RETURN(kernels::hd::NdIndex const p, nd_index(call, data_shape, idx.shape()));
  int64_t const k = p.k;
  int64_t const tuples = idx.numel() / k;
  ASSIGN_OR_RETURN(Tensor pos, empty({tuples * p.slice}, DType::kInt64));
  Tensor flag;
  if (check) {
    ASSIGN_OR_RETURN(flag, index_flag());
  }
  auto* bad = check ? static_cast<unsigned long long*>(flag.raw()) : nullptr;
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  if (idx.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(kc::nd_positions(p, idx.data<int64_t>(), tuples, pos.data<int64_t>(), bad, s));
  } else {
    GP_CUDA_CHECK(kc::nd_positions(p, idx.data<int32_t>(), tuples, pos.data<int64_t>(), bad, s));
  }
  if (check) RETURN_IF_ERROR(check_index_flag(call, idx, flag, k, "data " + dims_string(data_shape)));
  return pos;
}

// y[j] = x[pos[j]], any dtype (bytes).
Result<Tensor> gather_by_position(Tensor const& x, Tensor const& pos, std::vector<int64_t> const& shape) {
  ASSIGN_OR_RETURN(Tensor y, empty(shape, x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::gather_positions(x.raw(), pos.data<int64_t>(), pos.numel(),
                                     static_cast<int>(graph::dtype_size(x.dtype())), y.raw(), s));
  return y;
}

struct SortedPositions {
  Tensor sorted, order;
};

Result<SortedPositions> sort_by_position(OpCall const& call, Tensor const& pos, int64_t limit) {
  int64_t const n = pos.numel();
  if (n >= std::numeric_limits<int32_t>::max())
    return unsupported(call.op.type + " '" + call.op.name + "': " + std::to_string(n) +
                       " positions (the sort takes fewer than 2^31)");
  std::size_t bytes = 0;
  GP_CUDA_CHECK(kc::sort_positions_workspace(n, limit, &bytes));
  ASSIGN_OR_RETURN(Tensor ws, empty({static_cast<int64_t>(bytes)}, DType::kUInt8));
  SortedPositions r;
  ASSIGN_OR_RETURN(r.sorted, empty({n}, DType::kInt64));
  ASSIGN_OR_RETURN(r.order, empty({n}, DType::kInt32));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::sort_positions(pos.data<int64_t>(), n, limit, r.sorted.data<int64_t>(), r.order.data<int32_t>(),
                                   ws.raw(), bytes, s));
  return r;
}

// gx = zeros(data_shape) with g's values summed at their positions (ascending j), then emitted.
Status scatter_add_grad(OpCall const& call, Tensor const& pos, Tensor const& g, std::vector<int64_t> const& data_shape,
                        std::vector<Tensor>& grads, bool accumulate) {
  ASSIGN_OR_RETURN(Tensor gx, zeros(data_shape));
  if (g.defined() && pos.numel() > 0) {
    ASSIGN_OR_RETURN(SortedPositions const sp, sort_by_position(call, pos, gx.numel()));
    ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
    GP_CUDA_CHECK(kc::combine_at_positions(kc::Combine::kAdd, sp.sorted.data<int64_t>(), sp.order.data<int32_t>(),
                                           pos.numel(), g.data<float>(), nullptr, gx.data<float>(), s));
  }
  return emit_grad(call, grads, 0, gx, accumulate);
}

Status gather_elements_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                               Saved* saved) {
  int64_t const axis = attrs_of<graph::GatherElementsAttrs>(call.op)->axis;
  ASSIGN_OR_RETURN(Tensor const idx, device_indices(in[1]));
  ASSIGN_OR_RETURN(Tensor const pos, element_positions(call, in[0].shape(), idx, axis, true));
  ASSIGN_OR_RETURN(Tensor y, gather_by_position(in[0], pos, idx.shape()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {idx, shape_tensor(in[0].shape())};
  return Status::ok();
}

Status gather_elements_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                                std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  int64_t const axis = attrs_of<graph::GatherElementsAttrs>(call.op)->axis;
  ASSIGN_OR_RETURN(Tensor const pos, element_positions(call, data_shape, saved.tensors.at(0), axis, false));
  return scatter_add_grad(call, pos, gout.empty() ? Tensor() : gout[0], data_shape, grads, accumulate);
}

Status gather_nd_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, graph::ops::gather_nd_output_shape(in[0].shape(), in[1].shape()));
  ASSIGN_OR_RETURN(Tensor const idx, device_indices(in[1]));
  ASSIGN_OR_RETURN(Tensor const pos, nd_positions(call, in[0].shape(), idx, true));
  ASSIGN_OR_RETURN(Tensor y, gather_by_position(in[0], pos, shape));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {idx, shape_tensor(in[0].shape())};
  return Status::ok();
}

// The output gradient's slices added into zeros of data's shape, in index order (a tuple given
// twice adds twice), as the CPU.
Status gather_nd_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(Tensor const pos, nd_positions(call, data_shape, saved.tensors.at(0), false));
  return scatter_add_grad(call, pos, gout.empty() ? Tensor() : gout[0], data_shape, grads, accumulate);
}

kc::Combine combine_of(graph::ScatterReduction r) {
  return r == graph::ScatterReduction::kAdd   ? kc::Combine::kAdd
         : r == graph::ScatterReduction::kMul ? kc::Combine::kMul
         : r == graph::ScatterReduction::kMax ? kc::Combine::kMax
         : r == graph::ScatterReduction::kMin ? kc::Combine::kMin
                                              : kc::Combine::kLast;
}

// ScatterElements and ScatterND: data with updates[j] combined in at position pos[j], in ascending
// j per position, as the CPU.
Result<Tensor> scatter_at(OpCall const& call, Tensor const& data, Tensor const& updates, Tensor const& pos,
                          graph::ScatterReduction r) {
  ASSIGN_OR_RETURN(Tensor y, copy_of(data));
  if (pos.numel() > 0) {
    ASSIGN_OR_RETURN(SortedPositions const sp, sort_by_position(call, pos, y.numel()));
    ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
    GP_CUDA_CHECK(kc::combine_at_positions(combine_of(r), sp.sorted.data<int64_t>(), sp.order.data<int32_t>(),
                                           pos.numel(), updates.data<float>(), data.data<float>(), y.data<float>(), s));
  }
  return y;
}

Status scatter_elements_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                                Saved* saved) {
  auto const& a = *attrs_of<graph::ScatterElementsAttrs>(call.op);
  RETURN_IF_ERROR(scatter_elements_updates_check(call, in[1].shape(), in[2].shape()));
  ASSIGN_OR_RETURN(Tensor const idx, device_indices(in[1]));
  ASSIGN_OR_RETURN(Tensor const pos, element_positions(call, in[0].shape(), idx, a.axis, true));
  ASSIGN_OR_RETURN(Tensor y, scatter_at(call, in[0], in[2], pos, a.reduction));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  save_scatter(idx, in, a.reduction, saved);
  return Status::ok();
}

// The gradients of scatter_at into data (slot 0) and the updates (slot 2, of `upd_shape`), as the CPU's.
Status scatter_backward(OpCall const& call, Saved const& saved, Tensor const& pos,
                        std::vector<int64_t> const& upd_shape, graph::ScatterReduction r,
                        std::vector<Tensor> const& gout, std::vector<bool> const& wanted, std::vector<Tensor>& grads,
                        bool accumulate) {
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  Tensor const g = grad_or_zeros(call, gout, 0, data_shape);
  ASSIGN_OR_RETURN(Tensor gdata, copy_of(g));
  Tensor gupd;
  if (r == graph::ScatterReduction::kAdd) {
    ASSIGN_OR_RETURN(gupd, gather_by_position(g, pos, upd_shape));
  } else {
    ASSIGN_OR_RETURN(gupd, empty(upd_shape));
    if (pos.numel() > 0) {
      ASSIGN_OR_RETURN(SortedPositions const sp, sort_by_position(call, pos, g.numel()));
      ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
      if (r == graph::ScatterReduction::kMul) {
        GP_CUDA_CHECK(kc::scatter_mul_backward(sp.sorted.data<int64_t>(), sp.order.data<int32_t>(), pos.numel(),
                                               saved.tensors.at(2).data<float>(), saved.tensors.at(3).data<float>(),
                                               g.data<float>(), gdata.data<float>(), gupd.data<float>(), s));
      } else if (r == graph::ScatterReduction::kMax || r == graph::ScatterReduction::kMin) {
        GP_CUDA_CHECK(kc::scatter_extremum_backward(
            sp.sorted.data<int64_t>(), sp.order.data<int32_t>(), pos.numel(), saved.tensors.at(2).data<float>(),
            saved.tensors.at(3).data<float>(), g.data<float>(), r == graph::ScatterReduction::kMax, gdata.data<float>(),
            gupd.data<float>(), s));
      } else {
        GP_CUDA_CHECK(kc::scatter_assign_backward(sp.sorted.data<int64_t>(), sp.order.data<int32_t>(), pos.numel(),
                                                  g.data<float>(), gdata.data<float>(), gupd.data<float>(), s));
      }
    }
  }
  if (wants(wanted, 0)) RETURN_IF_ERROR(emit_grad(call, grads, 0, gdata, accumulate));
  if (wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, gupd, accumulate));
  return Status::ok();
}

Status scatter_elements_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                                 std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) && !wants(wanted, 2)) return Status::ok();
  auto const& a = *attrs_of<graph::ScatterElementsAttrs>(call.op);
  Tensor const& idx = saved.tensors.at(0);
  ASSIGN_OR_RETURN(Tensor const pos, element_positions(call, shape_of(saved.tensors.at(1)), idx, a.axis, false));
  return scatter_backward(call, saved, pos, idx.shape(), a.reduction, gout, wanted, grads, accumulate);
}

// ScatterND: update element j lands where GatherND's output element j reads (nd_positions).
Status scatter_nd_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::ScatterNDAttrs>(call.op);
  RETURN_IF_ERROR(scatter_nd_updates_check(call, in[0].shape(), in[1].shape(), in[2].shape()));
  ASSIGN_OR_RETURN(Tensor const idx, device_indices(in[1]));
  ASSIGN_OR_RETURN(Tensor const pos, nd_positions(call, in[0].shape(), idx, true));
  ASSIGN_OR_RETURN(Tensor y, scatter_at(call, in[0], in[2], pos, a.reduction));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  save_scatter(idx, in, a.reduction, saved);
  return Status::ok();
}

Status scatter_nd_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                           std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) && !wants(wanted, 2)) return Status::ok();
  auto const& a = *attrs_of<graph::ScatterNDAttrs>(call.op);
  Tensor const& idx = saved.tensors.at(0);
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> const upd_shape, graph::ops::gather_nd_output_shape(data_shape, idx.shape()));
  ASSIGN_OR_RETURN(Tensor const pos, nd_positions(call, data_shape, idx, false));
  return scatter_backward(call, saved, pos, upd_shape, a.reduction, gout, wanted, grads, accumulate);
}

// ---- Col2Im (kernels/hd/index.h, as the CPU's exec/cpu/index.cc): saves x's shape ----

Status col2im_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(hd::Col2ImParams const p, col2im_params(call, in[0].shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(col2im_y_shape(call, p), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::col2im(in[0].data<float>(), p, y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status col2im_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  ASSIGN_OR_RETURN(hd::Col2ImParams const p, col2im_backward_params(call, saved, gout));
  ASSIGN_OR_RETURN(Tensor * dx,
                   grad_slot(call, grads, 0, shape_of(saved.tensors[0]), accumulate, false, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::im2col(gout[0].data<float>(), p, dx->data<float>(), accumulate, stream));
  return Status::ok();
}

// ---- GridSample (kernels/hd/index.h, as the CPU's exec/cpu/index.cc): saves x and the grid ----

Status grid_sample_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(hd::GridSampleParams const p, grid_sample_params(call, in[0].shape(), in[1].shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(grid_sample_y_shape(p), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::grid_sample_forward(in[0].data<float>(), in[1].data<float>(), p, y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1]};
  return Status::ok();
}

Status grid_sample_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) && !wants(wanted, 1)) return Status::ok();
  ASSIGN_OR_RETURN(hd::GridSampleParams const p, grid_sample_backward_params(call, saved, gout));
  Tensor const &x = saved.tensors[0], &grid = saved.tensors[1];
  Tensor dx, dgrid;
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(dx, empty(x.shape(), DType::kFloat32));
  }
  if (wants(wanted, 1)) {
    ASSIGN_OR_RETURN(dgrid, empty(grid.shape(), DType::kFloat32));
  }
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::grid_sample_backward(x.data<float>(), grid.data<float>(), gout[0].data<float>(), p,
                                         dx.defined() ? dx.data<float>() : nullptr,
                                         dgrid.defined() ? dgrid.data<float>() : nullptr, stream));
  if (dx.defined()) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  if (dgrid.defined()) RETURN_IF_ERROR(emit_grad(call, grads, 1, dgrid, accumulate));
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> index_kernels() {
  std::vector<KernelEntry> t;
  t.push_back(
      {OpKind::kTrilu, DType::kFloat32, {trilu_forward<float>, trilu_backward, trilu_backward, trilu_check}, 1});
  // Masks, ids and float64: never differentiated.
  for (DType d : {DType::kInt64, DType::kInt32, DType::kInt8, DType::kUInt8, DType::kBool, DType::kFloat64})
    t.push_back({OpKind::kTrilu, d, {trilu_bytes_forward, no_gradient, no_gradient, trilu_check}, 1});
  t.push_back({OpKind::kOneHot, DType::kInt64, {one_hot_forward<int64_t>, no_gradient, no_gradient, one_hot_check}, 1});
  t.push_back({OpKind::kOneHot, DType::kInt32, {one_hot_forward<int32_t>, no_gradient, no_gradient, one_hot_check}, 1});
  t.push_back({OpKind::kOneHot,
               DType::kFloat32,
               {one_hot_forward<float>, one_hot_backward, one_hot_backward, one_hot_check},
               1});
  t.push_back({OpKind::kPad,
               DType::kFloat32,
               {separable_forward<pad_maps>, separable_backward<pad_maps>, separable_backward<pad_maps>,
                require_attrs<graph::PadAttrs>},
               1});
  t.push_back({OpKind::kCol2Im,
               DType::kFloat32,
               {col2im_forward, col2im_backward, col2im_backward, require_attrs<graph::Col2ImAttrs>},
               1});
  t.push_back({OpKind::kGridSample,
               DType::kFloat32,
               {grid_sample_forward, grid_sample_backward, grid_sample_backward, require_attrs<graph::GridSampleAttrs>},
               2});
  t.push_back({OpKind::kResize,
               DType::kFloat32,
               {separable_forward<resize_maps>, separable_backward<resize_maps>, separable_backward<resize_maps>,
                require_attrs<graph::ResizeAttrs>},
               1});
  t.push_back({OpKind::kTile,
               DType::kFloat32,
               {tile_forward, tile_backward, tile_backward, require_attrs<graph::TileAttrs>},
               1});
  // Ids and masks padded or tiled (token ids, attention masks): copied, never differentiated.
  for (DType d : {DType::kInt64, DType::kInt32, DType::kBool}) {
    t.push_back(
        {OpKind::kPad, d, {copy_forward<pad_maps>, no_gradient, no_gradient, require_attrs<graph::PadAttrs>}, 1});
    t.push_back(
        {OpKind::kTile, d, {copy_forward<tile_maps>, no_gradient, no_gradient, require_attrs<graph::TileAttrs>}, 1});
  }
  t.push_back({OpKind::kGatherElements,
               DType::kFloat32,
               {gather_elements_forward, gather_elements_backward, gather_elements_backward, gather_elements_check},
               2});
  t.push_back({OpKind::kGatherND,
               DType::kFloat32,
               {gather_nd_forward, gather_nd_backward, gather_nd_backward, gather_nd_check},
               2});
  // Ids, masks and float64 are gathered as bytes, never differentiated (HF RoBERTa's token_type_ids
  // buffer).
  for (DType d : {DType::kInt64, DType::kInt32, DType::kInt8, DType::kUInt8, DType::kBool, DType::kFloat64}) {
    t.push_back(
        {OpKind::kGatherElements, d, {gather_elements_forward, no_gradient, no_gradient, gather_elements_check}, 2});
    t.push_back({OpKind::kGatherND, d, {gather_nd_forward, no_gradient, no_gradient, gather_nd_check}, 2});
  }
  OpKernels const scatter{scatter_elements_forward, scatter_elements_backward, scatter_elements_backward,
                          scatter_elements_check};
  t.push_back({OpKind::kScatterElements, DType::kFloat32, scatter, 3});
  t.push_back({OpKind::kScatter, DType::kFloat32, scatter, 3});
  t.push_back({OpKind::kScatterND,
               DType::kFloat32,
               {scatter_nd_forward, scatter_nd_backward, scatter_nd_backward, scatter_nd_check},
               3});
  return t;
}

}  // namespace gp::exec::cuda
