// The CUDA backend's shape, data-movement and pooling operators, with the CPU backend's semantics
// (exec/cpu/cpu_ops_shape.cc, cpu_ops_pool.cc): views share storage (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, same-type Cast); Expand, Transpose, Concat, Split and Slice are strided
// copies; Gather checks its indices; pooling keeps its arg-max for backward. Kernels:
// kernels/cuda/move.h; their parameters: kernels/hd/move_geometry.h.
#include <algorithm>
#include <limits>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move_geometry.h"

namespace gp::exec::cuda {
namespace {

namespace hd = kernels::hd;
namespace kc = kernels::cuda;

std::string dims_string(std::vector<int64_t> const& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

Status need_float(OpCall const& call, Tensor const& t) {
  if (t.dtype() != DType::kFloat32)
    return unsupported(call.op.type + " '" + call.op.name + "' on cuda runs float32 data, got " +
                       graph::dtype_name(t.dtype()));
  return Status::ok();
}

// The gradient slot of input i written in place: the existing accumulator, or a new tensor (zeroed
// where the kernel does not write every element).
Result<Tensor*> grad_slot(OpCall const& call, std::vector<Tensor>& grads, std::size_t i,
                          std::vector<int64_t> const& shape, bool accumulate, bool zeroed) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (accumulate) {
    if (!grads[i].defined() || grads[i].numel() != hd::numel_of(shape))
      return op_error(call, "gradient accumulator for input " + std::to_string(i) + " has shape " +
                                grads[i].shape_string() + ", expected " + dims_string(shape));
    return &grads[i];
  }
  if (zeroed) {
    ASSIGN_OR_RETURN(grads[i], zeros(shape));
  } else {
    ASSIGN_OR_RETURN(grads[i], empty(shape));
  }
  return &grads[i];
}

// dst[idx · dst_strides] (+)= src[idx · src_strides] over `shape`, on the compute stream.
Status copy_strided(OpCall const& call, float const* src, std::vector<int64_t> const& src_strides, float* dst,
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

int64_t normalised_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// ---- views ----

// The output shape recorded in the graph with its batch dimension made concrete from the input
// (the importer folds shape inputs with the export-time batch; the graph knows the symbolic one).
bool graph_output_shape(OpCall const& call, Tensor const& in, std::vector<int64_t>& out) {
  graph::TensorInfo const& in_info = call.graph.tensor(call.op.inputs[0]);
  graph::TensorInfo const& out_info = call.graph.tensor(call.op.outputs[0]);
  int const ib = in_info.shape.batch_axis();
  if (ib < 0 || !out_info.shape.has_batch() || ib >= in.rank()) return false;
  for (int64_t d : out_info.shape.dims)
    if (d < 0 && d != graph::kBatch) return false;
  out = out_info.shape.concrete(in.dim(ib));
  return hd::numel_of(out) == in.numel();
}

Status view_shape(OpCall const& call, Tensor const& in, std::vector<int64_t>& out) {
  std::string const& type = call.op.type;
  std::vector<int64_t> const& s = in.shape();
  if (type == "Identity" || type == "Cast") {
    out = s;
  } else if (type == "Flatten") {
    int64_t const axis = normalised_axis(attrs_of<graph::FlattenAttrs>(call.op)->axis, in.rank());
    if (axis < 0 || axis > in.rank()) return op_error(call, "axis out of range for input " + in.shape_string());
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < in.rank(); ++i) (i < axis ? a : b) *= s[i];
    out = {a, b};
  } else if (type == "Squeeze") {
    auto const& axes = attrs_of<graph::SqueezeAttrs>(call.op)->axes;
    out.clear();
    for (int64_t i = 0; i < in.rank(); ++i) {
      bool const listed = std::find(axes.begin(), axes.end(), i) != axes.end() ||
                          std::find(axes.begin(), axes.end(), i - in.rank()) != axes.end();
      if (listed && s[i] != 1)
        return op_error(call, "cannot squeeze axis " + std::to_string(i) + " of " + in.shape_string());
      if (!(listed || (axes.empty() && s[i] == 1))) out.push_back(s[i]);
    }
  } else if (type == "Unsqueeze") {
    auto axes = attrs_of<graph::UnsqueezeAttrs>(call.op)->axes;
    int64_t const r = in.rank() + static_cast<int64_t>(axes.size());
    for (auto& a : axes) a = normalised_axis(a, r);
    out.clear();
    std::size_t k = 0;
    for (int64_t i = 0; i < r; ++i) {
      if (std::find(axes.begin(), axes.end(), i) != axes.end()) {
        out.push_back(1);
      } else {
        if (k >= s.size()) return op_error(call, "bad axes for input " + in.shape_string());
        out.push_back(s[k++]);
      }
    }
  } else {  // Reshape
    if (graph_output_shape(call, in, out)) return Status::ok();
    auto const& attrs = *attrs_of<graph::ReshapeAttrs>(call.op);
    out = attrs.shape;
    int infer = -1;
    int64_t known = 1;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0 && !attrs.allowzero) {
        if (i >= s.size()) return op_error(call, "shape copies a dimension the input lacks");
        out[i] = s[i];
      }
      if (out[i] == -1) {
        if (infer >= 0) return op_error(call, "shape has two -1 entries");
        infer = static_cast<int>(i);
      } else {
        known *= out[i];
      }
    }
    if (infer >= 0) out[infer] = known == 0 ? 0 : in.numel() / known;
  }
  if (hd::numel_of(out) != in.numel())
    return op_error(call, "cannot reshape " + in.shape_string() + " into " + dims_string(out));
  return Status::ok();
}

Status reshape_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.type == "Flatten") return require_attrs<graph::FlattenAttrs>(op, graph);
  if (op.type == "Squeeze") return require_attrs<graph::SqueezeAttrs>(op, graph);
  if (op.type == "Unsqueeze") return require_attrs<graph::UnsqueezeAttrs>(op, graph);
  if (op.type == "Reshape") return require_attrs<graph::ReshapeAttrs>(op, graph);
  return Status::ok();
}

Status cast_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::CastAttrs>(op, graph));
  DType const from = graph.tensor(op.inputs[0]).dtype;
  int32_t const to = attrs_of<graph::CastAttrs>(op)->to;
  if (from != DType::kFloat32 || to != 1)
    return unsupported("only float32 → float32 casts are supported (got " + std::string(graph::dtype_name(from)) +
                       " → ONNX type " + std::to_string(to) + ")");
  return Status::ok();
}

Status reshape_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  std::vector<int64_t> shape;
  RETURN_IF_ERROR(view_shape(call, in[0], shape));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = in[0].reshaped(shape);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status reshape_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(Tensor g, grad_or_zeros(gout, 0, in_shape));
  return emit_grad(call, grads, 0, g.reshaped(in_shape), accumulate);
}

// ---- Expand ----

Status expand_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  auto const* attrs = attrs_of<graph::ExpandAttrs>(call.op);
  std::vector<int64_t> shape;
  if (!hd::broadcast_shapes(in[0].shape(), attrs->shape, shape))
    return op_error(call, "cannot broadcast " + in[0].shape_string() + " to " + dims_string(attrs->shape));
  std::vector<int64_t> from_graph;
  if (graph_output_shape(call, in[0], from_graph)) {
    std::vector<int64_t> check;
    if (hd::broadcast_shapes(in[0].shape(), from_graph, check) && check == from_graph) shape = from_graph;
  }
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  RETURN_IF_ERROR(copy_strided(call, in[0].data<float>(), hd::broadcast_strides(in[0].shape(), shape), y.data<float>(),
                               hd::row_major_strides(shape), shape, false));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
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

std::vector<int64_t> perm_of(OpCall const& call, int64_t rank) {
  std::vector<int64_t> perm = attrs_of<graph::TransposeAttrs>(call.op)->perm;
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

Result<Tensor> permute(OpCall const& call, Tensor const& x, std::vector<int64_t> const& perm) {
  std::vector<bool> seen(perm.size(), false);
  for (int64_t a : perm) {
    if (a < 0 || a >= static_cast<int64_t>(perm.size()) || seen[a])
      return op_error(call, "perm " + dims_string(perm) + " is not a permutation of the dims of " + x.shape_string());
    seen[a] = true;
  }
  std::vector<int64_t> const in_strides = hd::row_major_strides(x.shape());
  std::vector<int64_t> shape(perm.size()), strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.dim(static_cast<int>(perm[i]));
    strides[i] = in_strides[perm[i]];
  }
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  RETURN_IF_ERROR(
      copy_strided(call, x.data<float>(), strides, y.data<float>(), hd::row_major_strides(shape), shape, false));
  return y;
}

Status transpose_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  std::vector<int64_t> const perm = perm_of(call, in[0].rank());
  if (static_cast<int64_t>(perm.size()) != in[0].rank())
    return op_error(call, "perm has " + std::to_string(perm.size()) + " entries for input " + in[0].shape_string());
  out.assign(call.op.outputs.size(), Tensor());
  ASSIGN_OR_RETURN(out[0], permute(call, in[0], perm));
  if (saved) saved->tensors.clear();
  return Status::ok();
}

Status transpose_backward(OpCall const& call, Saved const&, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const perm = perm_of(call, gout[0].rank());
  if (static_cast<int64_t>(perm.size()) != gout[0].rank())
    return op_error(call,
                    "perm has " + std::to_string(perm.size()) + " entries for gradient " + gout[0].shape_string());
  std::vector<int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] >= 0 && perm[i] < static_cast<int64_t>(perm.size())) inverse[perm[i]] = static_cast<int64_t>(i);
  ASSIGN_OR_RETURN(Tensor g, permute(call, gout[0], inverse));
  return emit_grad(call, grads, 0, g, accumulate);
}

// ---- Concat, Split: a part copied into / out of the whole at an offset along the axis ----

Status copy_part(OpCall const& call, Tensor const& whole_src, Tensor* whole_dst, std::vector<int64_t> const& whole,
                 Tensor const* part_src, Tensor* part_dst, std::vector<int64_t> const& part, int64_t axis,
                 int64_t offset, bool accumulate) {
  std::vector<int64_t> const ws = hd::row_major_strides(whole), ps = hd::row_major_strides(part);
  int64_t const at = offset * ws[axis];
  if (whole_dst != nullptr)
    return copy_strided(call, part_src->data<float>(), ps, whole_dst->data<float>() + at, ws, part, accumulate);
  return copy_strided(call, whole_src.data<float>() + at, ws, part_dst->data<float>(), ps, part, accumulate);
}

Status concat_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  int64_t const axis = normalised_axis(attrs_of<graph::ConcatAttrs>(call.op)->axis, in[0].rank());
  if (axis < 0 || axis >= in[0].rank()) return op_error(call, "axis out of range for input " + in[0].shape_string());
  std::vector<int64_t> shape = in[0].shape();
  shape[axis] = 0;
  for (Tensor const& t : in) {
    RETURN_IF_ERROR(need_float(call, t));
    if (t.rank() != in[0].rank()) return op_error(call, "inputs have different ranks");
    shape[axis] += t.dim(static_cast<int>(axis));
  }
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

Status concat_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  int64_t const axis = normalised_axis(attrs_of<graph::ConcatAttrs>(call.op)->axis, gout[0].rank());
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

std::vector<int64_t> split_sizes(OpCall const& call, int64_t dim) {
  std::vector<int64_t> sizes = attrs_of<graph::SplitAttrs>(call.op)->sizes;
  if (sizes.empty()) {
    int64_t const n = static_cast<int64_t>(call.op.outputs.size());
    int64_t const chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  return sizes;
}

Status split_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  int64_t const axis = normalised_axis(attrs_of<graph::SplitAttrs>(call.op)->axis, in[0].rank());
  if (axis < 0 || axis >= in[0].rank()) return op_error(call, "axis out of range for input " + in[0].shape_string());
  std::vector<int64_t> const sizes = split_sizes(call, in[0].dim(static_cast<int>(axis)));
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != in[0].dim(static_cast<int>(axis)) || sizes.size() != call.op.outputs.size())
    return op_error(call,
                    "split sizes do not add up to dimension " + std::to_string(axis) + " of " + in[0].shape_string());
  out.assign(call.op.outputs.size(), Tensor());
  int64_t off = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> s = in[0].shape();
    s[axis] = sizes[i];
    ASSIGN_OR_RETURN(out[i], empty(s));
    RETURN_IF_ERROR(copy_part(call, in[0], nullptr, in[0].shape(), nullptr, &out[i], s, axis, off, false));
    off += sizes[i];
  }
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status split_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  int64_t const axis =
      normalised_axis(attrs_of<graph::SplitAttrs>(call.op)->axis, static_cast<int64_t>(in_shape.size()));
  std::vector<int64_t> const sizes = split_sizes(call, in_shape[axis]);
  ASSIGN_OR_RETURN(Tensor * g, grad_slot(call, grads, 0, in_shape, accumulate, true));
  int64_t off = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i < gout.size() && gout[i].defined())
      RETURN_IF_ERROR(
          copy_part(call, Tensor(), g, in_shape, &gout[i], nullptr, gout[i].shape(), axis, off, accumulate));
    off += sizes[i];
  }
  return Status::ok();
}

// ---- Slice ----

Status slice_geometry(OpCall const& call, std::vector<int64_t> const& in_shape, hd::SliceGeometry& g) {
  auto const& a = *attrs_of<graph::SliceAttrs>(call.op);
  std::string const error = hd::slice_geometry(in_shape, a.starts, a.ends, a.axes, a.steps, g);
  if (!error.empty()) return op_error(call, error + " for input " + dims_string(in_shape));
  return Status::ok();
}

Status slice_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  hd::SliceGeometry g;
  RETURN_IF_ERROR(slice_geometry(call, in[0].shape(), g));
  ASSIGN_OR_RETURN(Tensor y, empty(g.out_shape));
  RETURN_IF_ERROR(copy_strided(call, in[0].data<float>() + g.offset, g.src_strides, y.data<float>(),
                               hd::row_major_strides(g.out_shape), g.out_shape, false));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// The slice's positions in the input are distinct, so adding into them is race-free.
Status slice_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  hd::SliceGeometry g;
  RETURN_IF_ERROR(slice_geometry(call, in_shape, g));
  ASSIGN_OR_RETURN(Tensor * dx, grad_slot(call, grads, 0, in_shape, accumulate, true));
  if (!gout.at(0).defined()) return Status::ok();
  return copy_strided(call, gout[0].data<float>(), hd::row_major_strides(g.out_shape), dx->data<float>() + g.offset,
                      g.src_strides, g.out_shape, true);
}

// ---- Gather ----

void gather_dims(std::vector<int64_t> const& data_shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data_shape[i];
  for (std::size_t i = axis + 1; i < data_shape.size(); ++i) inner *= data_shape[i];
}

// Out-of-range indices are an error, as on the CPU: the kernel flags the first one in device
// memory (reading nothing outside the data) and this reads the flag back, the one synchronising
// step of the op (8 bytes; 8 more for the message when an index is bad).
Status gather_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  Tensor const& data = in[0];
  Tensor idx = in[1];
  if (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32)
    return op_error(call, "indices must be int64 or int32");
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  if (idx.device().kind != DeviceKind::kCuda) idx = idx.clone_to(*ctx->allocator);
  int64_t const axis = normalised_axis(attrs_of<graph::GatherAttrs>(call.op)->axis, data.rank());
  if (axis < 0 || axis >= data.rank()) return op_error(call, "axis out of range for data " + data.shape_string());
  std::vector<int64_t> shape(data.shape().begin(), data.shape().begin() + axis);
  shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
  shape.insert(shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  int64_t outer = 1, inner = 1;
  gather_dims(data.shape(), axis, outer, inner);
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  ASSIGN_OR_RETURN(Tensor flag, empty({1}, DType::kInt64));
  auto* bad = static_cast<unsigned long long*>(flag.raw());
  int64_t const axis_dim = data.dim(static_cast<int>(axis));
  cudaStream_t const s = ctx->compute;
  if (idx.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(kc::gather(data.data<float>(), outer, axis_dim, inner, idx.data<int64_t>(), idx.numel(),
                             y.data<float>(), bad, s));
  } else {
    GP_CUDA_CHECK(kc::gather(data.data<float>(), outer, axis_dim, inner, idx.data<int32_t>(), idx.numel(),
                             y.data<float>(), bad, s));
  }
  unsigned long long first_bad = 0;
  GP_CUDA_CHECK(cudaMemcpyAsync(&first_bad, bad, sizeof first_bad, cudaMemcpyDeviceToHost, s));
  GP_CUDA_CHECK(cudaStreamSynchronize(s));
  if (first_bad != std::numeric_limits<unsigned long long>::max()) {
    int64_t value = 0;
    std::size_t const width = graph::dtype_size(idx.dtype());
    int32_t value32 = 0;
    void* host = width == sizeof value ? static_cast<void*>(&value) : static_cast<void*>(&value32);
    GP_CUDA_CHECK(cudaMemcpyAsync(host, static_cast<char const*>(idx.raw()) + first_bad * width, width,
                                  cudaMemcpyDeviceToHost, s));
    GP_CUDA_CHECK(cudaStreamSynchronize(s));
    if (width != sizeof value) value = value32;
    return op_error(call, "index " + std::to_string(value) + " (position " + std::to_string(first_bad) +
                              ") is out of range for axis " + std::to_string(axis) + " of " + data.shape_string());
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {idx, shape_tensor(data.shape())};
  return Status::ok();
}

Status gather_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  Tensor const& idx = saved.tensors.at(0);
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  int64_t const axis =
      normalised_axis(attrs_of<graph::GatherAttrs>(call.op)->axis, static_cast<int64_t>(data_shape.size()));
  int64_t outer = 1, inner = 1;
  gather_dims(data_shape, axis, outer, inner);
  int64_t const axis_dim = data_shape[axis];
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

// ---- MaxPool, AveragePool, GlobalAveragePool ----

Status pool_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::PoolAttrs>(op, graph));
  int64_t const rank = graph.tensor(op.inputs.at(0)).shape.rank();
  if (rank < 3 || rank > 5)
    return unsupported(op.type + " '" + op.name + "' has " + std::to_string(rank - 2) +
                       " spatial dims (1 to 3 supported)");
  if (op.type == "MaxPool") {
    auto it = op.attrs.find("dilations");
    if (it != op.attrs.end())
      for (int64_t d : std::get<std::vector<int64_t>>(it->second))
        if (d != 1) return unsupported("MaxPool '" + op.name + "' with dilations is not supported");
    if (op.outputs.size() > 1) return unsupported("MaxPool '" + op.name + "' with an Indices output is not supported");
  }
  return Status::ok();
}

Status pool_params(OpCall const& call, std::vector<int64_t> const& x, hd::PoolParams& p, std::vector<int64_t>& y) {
  auto const& a = *attrs_of<graph::PoolAttrs>(call.op);
  bool const global = a.kind == graph::PoolKind::kGlobalAverage;
  hd::PoolMode const mode = a.kind == graph::PoolKind::kMax    ? hd::PoolMode::kMax
                            : (a.count_include_pad && !global) ? hd::PoolMode::kAverageIncludePad
                                                               : hd::PoolMode::kAverageExcludePad;
  std::string const error = hd::pool_params(x, mode, global, a.kernel, a.strides, a.pads, a.ceil_mode, p, y);
  if (!error.empty()) return op_error(call, error + " (input " + dims_string(x) + ")");
  if (mode == hd::PoolMode::kMax && hd::pool_in_plane(p) > std::numeric_limits<int32_t>::max())
    return unsupported(call.op.type + " '" + call.op.name + "': the arg-max is int32, the input plane of " +
                       dims_string(x) + " is larger");
  return Status::ok();
}

Status pool_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0]));
  hd::PoolParams p;
  std::vector<int64_t> shape;
  RETURN_IF_ERROR(pool_params(call, in[0].shape(), p, shape));
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  Tensor argmax;
  if (p.mode == hd::PoolMode::kMax) {
    ASSIGN_OR_RETURN(argmax, empty(shape, DType::kInt32));
  }
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::pool_forward(in[0].data<float>(), y.data<float>(),
                                 argmax.defined() ? argmax.data<int32_t>() : nullptr, p, s));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape()), argmax};
  return Status::ok();
}

Status pool_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const x_shape = shape_of(saved.tensors.at(0));
  hd::PoolParams p;
  std::vector<int64_t> shape;
  RETURN_IF_ERROR(pool_params(call, x_shape, p, shape));
  Tensor const& argmax = saved.tensors.at(1);
  if (p.mode == hd::PoolMode::kMax && !argmax.defined()) return internal_error("MaxPool backward without its arg-max");
  ASSIGN_OR_RETURN(Tensor * dx, grad_slot(call, grads, 0, x_shape, accumulate, false));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::pool_backward(gout[0].data<float>(), argmax.defined() ? argmax.data<int32_t>() : nullptr,
                                  dx->data<float>(), p, accumulate, s));
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> move_kernels() {
  std::vector<KernelEntry> t;
  auto const add = [&t](char const* type, OpKernels const& k, std::size_t min_inputs = 1) {
    t.push_back({type, DType::kFloat32, k, min_inputs});
  };
  OpKernels const view{reshape_forward, reshape_backward, reshape_backward, reshape_check};
  for (char const* v : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) add(v, view);
  add("Cast", {reshape_forward, reshape_backward, reshape_backward, cast_check});
  add("Expand", {expand_forward, expand_backward, expand_backward, require_attrs<graph::ExpandAttrs>});
  add("Transpose", {transpose_forward, transpose_backward, transpose_backward, require_attrs<graph::TransposeAttrs>});
  add("Concat", {concat_forward, concat_backward, concat_backward, require_attrs<graph::ConcatAttrs>});
  add("Split", {split_forward, split_backward, split_backward, require_attrs<graph::SplitAttrs>});
  add("Slice", {slice_forward, slice_backward, slice_backward, require_attrs<graph::SliceAttrs>});
  add("Gather", {gather_forward, gather_backward, gather_backward, require_attrs<graph::GatherAttrs>}, 2);
  OpKernels const pool{pool_forward, pool_backward, pool_backward, pool_check};
  for (char const* p : {"MaxPool", "AveragePool", "GlobalAveragePool"}) add(p, pool);
  return t;
}

}  // namespace gp::exec::cuda
