// Shape and data-movement operators: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Cast
// to the same type), Expand, Transpose, Concat, Split, Slice, Gather, ReduceSum/ReduceMean.
#include <algorithm>
#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "kernels/gather.h"
#include "kernels/strided.h"

namespace gp::exec::cpu {
namespace {

int64_t numel(std::vector<int64_t> const& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

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
  return numel(out) == in.numel();
}

Status view_shape(OpCall const& call, Tensor const& in, std::vector<int64_t>& out) {
  std::string const& type = call.op.type;
  std::vector<int64_t> const& s = in.shape();
  if (type == "Identity" || type == "Cast" || type == "Dropout") {
    out = s;
  } else if (type == "Flatten") {
    int64_t axis = attrs_of<graph::FlattenAttrs>(call.op)->axis;
    if (axis < 0) axis += in.rank();
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
    for (auto& a : axes) a = a < 0 ? a + r : a;
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
  if (numel(out) != in.numel())
    return op_error(call, "cannot reshape " + in.shape_string() + " into " + dnnl_ctx::key_dims(out));
  return Status::ok();
}

}  // namespace

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

// Views share the input's storage: tensors are immutable once produced.
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
  return emit_grad(call, grads, 0, grad_or_zeros(gout, 0, in_shape).reshaped(in_shape), accumulate);
}

Status expand_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const* attrs = attrs_of<graph::ExpandAttrs>(call.op);
  std::vector<int64_t> shape;
  if (!kernels::broadcast_shapes(in[0].shape(), attrs->shape, shape))
    return op_error(call, "cannot broadcast " + in[0].shape_string() + " to " + dnnl_ctx::key_dims(attrs->shape));
  std::vector<int64_t> from_graph;
  if (graph_output_shape(call, in[0], from_graph)) {
    std::vector<int64_t> check;
    if (kernels::broadcast_shapes(in[0].shape(), from_graph, check) && check == from_graph) shape = from_graph;
  }
  Tensor y(shape);
  kernels::expand(in[0].data<float>(), in[0].shape(), y.data<float>(), shape);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status expand_backward(OpCall const&, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  Tensor& g = grad_slot(grads, 0, in_shape, accumulate);
  kernels::reduce_sum_to(gout[0].data<float>(), gout[0].shape(), g.data<float>(), in_shape, accumulate);
  return Status::ok();
}

namespace {
std::vector<int64_t> perm_of(OpCall const& call, int64_t rank) {
  std::vector<int64_t> perm = attrs_of<graph::TransposeAttrs>(call.op)->perm;
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

Tensor permute(Tensor const& x, std::vector<int64_t> const& perm) {
  std::vector<int64_t> const in_strides = kernels::contiguous_strides(x.shape());
  std::vector<int64_t> shape(perm.size()), strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.dim(static_cast<int>(perm[i]));
    strides[i] = in_strides[perm[i]];
  }
  Tensor y(shape);
  kernels::strided_copy(x.data<float>(), strides, y.data<float>(), kernels::contiguous_strides(shape), shape);
  return y;
}
}  // namespace

Status transpose_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  std::vector<int64_t> const perm = perm_of(call, in[0].rank());
  if (static_cast<int64_t>(perm.size()) != in[0].rank())
    return op_error(call, "perm has " + std::to_string(perm.size()) + " entries for input " + in[0].shape_string());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = permute(in[0], perm);
  if (saved) saved->tensors.clear();
  return Status::ok();
}

Status transpose_backward(OpCall const& call, Saved const&, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const perm = perm_of(call, gout[0].rank());
  std::vector<int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return emit_grad(call, grads, 0, permute(gout[0], inverse), accumulate);
}

namespace {
// Copies `part` (shape part_shape) into / out of `whole` at `offset` along `axis`.
void copy_along_axis(float* whole, std::vector<int64_t> const& whole_shape, float* part,
                     std::vector<int64_t> const& part_shape, int64_t axis, int64_t offset, bool into_whole,
                     bool accumulate = false) {
  std::vector<int64_t> const ws = kernels::contiguous_strides(whole_shape);
  std::vector<int64_t> const ps = kernels::contiguous_strides(part_shape);
  float* w = whole + offset * ws[axis];
  if (into_whole) {
    kernels::strided_copy(part, ps, w, ws, part_shape);
  } else if (accumulate) {
    kernels::strided_add(w, ws, part, ps, part_shape);
  } else {
    kernels::strided_copy(w, ws, part, ps, part_shape);
  }
}
}  // namespace

Status concat_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  int64_t axis = attrs_of<graph::ConcatAttrs>(call.op)->axis;
  if (axis < 0) axis += in[0].rank();
  std::vector<int64_t> shape = in[0].shape();
  shape[axis] = 0;
  bool any_empty = false;
  for (Tensor const& t : in) {
    if (t.rank() != in[0].rank()) return op_error(call, "inputs have different ranks");
    shape[axis] += t.dim(static_cast<int>(axis));
    any_empty = any_empty || t.numel() == 0;
  }
  Tensor y(shape);
  if (!any_empty && y.numel() > 0) {
    std::string k = dnnl_ctx::key("concat", axis);
    std::vector<dnnl::memory::desc> mds;
    for (Tensor const& t : in) {
      k += dnnl_ctx::key_dims(t.shape());
      mds.push_back(dnnl_ctx::plain_md(t.shape()));
    }
    struct Entry {
      dnnl::concat::primitive_desc pd;
      dnnl::concat prim;
    };
    auto e = dnnl_ctx::cached<Entry>(k, [&] {
      dnnl::concat::primitive_desc pd(dnnl_ctx::plain_md(shape), static_cast<int>(axis), mds, dnnl_ctx::engine());
      return Entry{pd, dnnl::concat(pd)};
    });
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DST, dnnl_ctx::mem(y)}};
    for (std::size_t i = 0; i < in.size(); ++i)
      args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), dnnl_ctx::mem(in[i]));
    dnnl_ctx::run(e->prim, args);
  } else {
    int64_t off = 0;
    for (Tensor const& t : in) {
      copy_along_axis(y.data<float>(), shape, const_cast<float*>(t.data<float>()), t.shape(), axis, off, true);
      off += t.dim(static_cast<int>(axis));
    }
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
  int64_t axis = attrs_of<graph::ConcatAttrs>(call.op)->axis;
  if (axis < 0) axis += gout[0].rank();
  int64_t off = 0;
  for (std::size_t i = 0; i < saved.tensors.size(); ++i) {
    std::vector<int64_t> const s = shape_of(saved.tensors[i]);
    if (wants(wanted, i)) {
      Tensor& g = grad_slot(grads, i, s, accumulate);
      copy_along_axis(const_cast<float*>(gout[0].data<float>()), gout[0].shape(), g.data<float>(), s, axis, off, false,
                      accumulate);
    }
    off += s[axis];
  }
  return Status::ok();
}

namespace {
std::vector<int64_t> split_sizes(OpCall const& call, int64_t dim) {
  std::vector<int64_t> sizes = attrs_of<graph::SplitAttrs>(call.op)->sizes;
  if (sizes.empty()) {
    int64_t const n = static_cast<int64_t>(call.op.outputs.size());
    int64_t const chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  return sizes;
}
}  // namespace

Status split_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  int64_t axis = attrs_of<graph::SplitAttrs>(call.op)->axis;
  if (axis < 0) axis += in[0].rank();
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
    out[i] = Tensor(s);
    copy_along_axis(const_cast<float*>(in[0].data<float>()), in[0].shape(), out[i].data<float>(), s, axis, off, false);
    off += sizes[i];
  }
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status split_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  int64_t axis = attrs_of<graph::SplitAttrs>(call.op)->axis;
  if (axis < 0) axis += static_cast<int64_t>(in_shape.size());
  std::vector<int64_t> const sizes = split_sizes(call, in_shape[axis]);
  Tensor g = Tensor::zeros(in_shape);
  int64_t off = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i < gout.size() && gout[i].defined())
      copy_along_axis(g.data<float>(), in_shape, const_cast<float*>(gout[i].data<float>()), gout[i].shape(), axis, off,
                      true);
    off += sizes[i];
  }
  return emit_grad(call, grads, 0, g, accumulate);
}

namespace {
struct SliceGeometry {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> src_strides;  // input strides times steps
  int64_t offset = 0;                // of the first element, in the input
};

Status slice_geometry(OpCall const& call, std::vector<int64_t> const& in_shape, SliceGeometry& g) {
  auto const& a = *attrs_of<graph::SliceAttrs>(call.op);
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  std::vector<int64_t> start(rank, 0), step(rank, 1);
  g.out_shape = in_shape;
  for (std::size_t k = 0; k < a.starts.size(); ++k) {
    int64_t axis = k < a.axes.size() ? a.axes[k] : static_cast<int64_t>(k);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return op_error(call, "slice axis out of range for " + dnnl_ctx::key_dims(in_shape));
    int64_t const dim = in_shape[axis];
    int64_t const st = k < a.steps.size() ? a.steps[k] : 1;
    if (st == 0) return op_error(call, "slice step is 0");
    int64_t s = a.starts[k], e = k < a.ends.size() ? a.ends[k] : dim;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count = 0;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    start[axis] = s;
    step[axis] = st;
    g.out_shape[axis] = count;
  }
  std::vector<int64_t> const strides = kernels::contiguous_strides(in_shape);
  g.src_strides.resize(rank);
  g.offset = 0;
  for (int64_t i = 0; i < rank; ++i) {
    g.src_strides[i] = strides[i] * step[i];
    if (g.out_shape[i] > 0) g.offset += start[i] * strides[i];
  }
  return Status::ok();
}
}  // namespace

Status slice_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  SliceGeometry g;
  RETURN_IF_ERROR(slice_geometry(call, in[0].shape(), g));
  Tensor y(g.out_shape);
  kernels::strided_copy(in[0].data<float>() + g.offset, g.src_strides, y.data<float>(),
                        kernels::contiguous_strides(g.out_shape), g.out_shape);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status slice_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  SliceGeometry g;
  RETURN_IF_ERROR(slice_geometry(call, in_shape, g));
  Tensor& dx = grad_slot(grads, 0, in_shape, accumulate);
  if (!accumulate) dx.fill(0.f);
  if (gout.at(0).defined())
    kernels::strided_add(gout[0].data<float>(), kernels::contiguous_strides(g.out_shape), dx.data<float>() + g.offset,
                         g.src_strides, g.out_shape);
  return Status::ok();
}

namespace {
std::vector<int64_t> indices_of(Tensor const& t) {
  std::vector<int64_t> idx(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::kInt64) {
    std::memcpy(idx.data(), t.raw(), idx.size() * sizeof(int64_t));
  } else {
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = t.data<int32_t>()[i];
  }
  return idx;
}

void gather_dims(std::vector<int64_t> const& data_shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data_shape[i];
  for (std::size_t i = axis + 1; i < data_shape.size(); ++i) inner *= data_shape[i];
}
}  // namespace

Status gather_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& data = in[0];
  Tensor const& idx_t = in[1];
  if (idx_t.dtype() != DType::kInt64 && idx_t.dtype() != DType::kInt32)
    return op_error(call, "indices must be int64 or int32");
  int64_t axis = attrs_of<graph::GatherAttrs>(call.op)->axis;
  if (axis < 0) axis += data.rank();
  std::vector<int64_t> shape(data.shape().begin(), data.shape().begin() + axis);
  shape.insert(shape.end(), idx_t.shape().begin(), idx_t.shape().end());
  shape.insert(shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  std::vector<int64_t> const idx = indices_of(idx_t);
  int64_t outer = 1, inner = 1;
  gather_dims(data.shape(), axis, outer, inner);
  Tensor y(shape);
  if (!kernels::gather(data.data<float>(), outer, data.dim(static_cast<int>(axis)), inner, idx.data(),
                       static_cast<int64_t>(idx.size()), y.data<float>()))
    return op_error(call, "an index is out of range for axis " + std::to_string(axis) + " of " + data.shape_string());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {idx_t, shape_tensor(data.shape())};
  return Status::ok();
}

Status gather_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  int64_t axis = attrs_of<graph::GatherAttrs>(call.op)->axis;
  if (axis < 0) axis += static_cast<int64_t>(data_shape.size());
  std::vector<int64_t> const idx = indices_of(saved.tensors.at(0));
  int64_t outer = 1, inner = 1;
  gather_dims(data_shape, axis, outer, inner);
  Tensor& g = grad_slot(grads, 0, data_shape, accumulate);
  if (!accumulate) g.fill(0.f);
  if (!gout.at(0).defined()) return Status::ok();
  if (!kernels::gather_backward(gout[0].data<float>(), outer, data_shape[axis], inner, idx.data(),
                                static_cast<int64_t>(idx.size()), g.data<float>()))
    return op_error(call, "an index is out of range");
  return Status::ok();
}

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
  if (call.op.type == "ReduceMean" && y.numel() > 0) {
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
  if (call.op.type == "ReduceMean" && g.numel() > 0) {
    int64_t kept = 1;
    for (int64_t d : keep) kept *= d;
    float const scale = static_cast<float>(static_cast<double>(kept) / static_cast<double>(g.numel()));
    float* p = g.data<float>();
    for (int64_t i = 0; i < g.numel(); ++i) p[i] *= scale;
  }
  return emit_grad(call, grads, 0, g, accumulate);
}

}  // namespace gp::exec::cpu
