// The CUDA backend's index family, as the CPU's exec/cpu/index.cc computes it: Trilu (float32,
// int64, int32, bool; its gradient is the same mask on the output gradient; the mask is
// kernels/hd/index.h's trilu_keeps) and Tile of float32 (a broadcast of x seen as [1, d0, 1, d1, ...]
// to [r0, d0, r1, d1, ...]; its gradient sums back down), and Pad and Resize of float32: the CPU's
// per-axis maps (exec/separable_maps.h), one pass per axis and the adjoint passes in reverse order.
// GatherElements, GatherND, Scatter, ScatterElements, and Pad, Tile and Resize of other dtypes run
// on the CPU only for now.
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/ops_common.h"
#include "exec/separable_maps.h"
#include "graph/ops/index.h"
#include "kernels/cuda/math.h"
#include "kernels/cuda/move.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;

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

}  // namespace

std::vector<KernelEntry> index_kernels() {
  std::vector<KernelEntry> t;
  t.push_back(
      {OpKind::kTrilu, DType::kFloat32, {trilu_forward<float>, trilu_backward, trilu_backward, trilu_check}, 1});
  // Masks and ids: never differentiated.
  t.push_back({OpKind::kTrilu, DType::kInt64, {trilu_forward<int64_t>, no_gradient, no_gradient, trilu_check}, 1});
  t.push_back({OpKind::kTrilu, DType::kInt32, {trilu_forward<int32_t>, no_gradient, no_gradient, trilu_check}, 1});
  t.push_back({OpKind::kTrilu, DType::kBool, {trilu_forward<uint8_t>, no_gradient, no_gradient, trilu_check}, 1});
  t.push_back({OpKind::kPad,
               DType::kFloat32,
               {separable_forward<pad_maps>, separable_backward<pad_maps>, separable_backward<pad_maps>,
                require_attrs<graph::PadAttrs>},
               1});
  t.push_back({OpKind::kResize,
               DType::kFloat32,
               {separable_forward<resize_maps>, separable_backward<resize_maps>, separable_backward<resize_maps>,
                require_attrs<graph::ResizeAttrs>},
               1});
  t.push_back({OpKind::kTile,
               DType::kFloat32,
               {tile_forward, tile_backward, tile_backward, require_attrs<graph::TileAttrs>},
               1});
  return t;
}

}  // namespace gp::exec::cuda
