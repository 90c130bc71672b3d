// Move family: Expand, Transpose, Concat, Split, Slice, Gather (strided copies of kernels/strided,
// Gather through kernels/gather).
#include <algorithm>
#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "graph/ops/move.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

// y's elements, row-major, each read from x's element offset + sum(pos[d] * strides[d]) and copied
// by its size: Expand's and Slice's path for masks and indices (any dtype, never differentiated).
void copy_elements(Tensor const& x, int64_t offset, std::vector<int64_t> const& strides, Tensor& y) {
  std::size_t const es = graph::dtype_size(x.dtype());
  std::vector<int64_t> const& shape = y.shape();
  auto const* src = static_cast<char const*>(x.raw());
  auto* dst = static_cast<char*>(y.raw());
  std::vector<int64_t> pos(shape.size(), 0);
  for (int64_t k = 0, n = y.numel(); k < n; ++k) {
    int64_t off = offset;
    for (std::size_t d = 0; d < shape.size(); ++d) off += pos[d] * strides[d];
    std::memcpy(dst + static_cast<std::size_t>(k) * es, src + static_cast<std::size_t>(off) * es, es);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
}

}  // namespace

Status expand_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                   graph::ops::expand_output_shape(call.graph, call.op, in[0].shape(), call.batch));
  Tensor y(shape, in[0].dtype());
  if (in[0].dtype() == DType::kFloat32) {
    kernels::expand(in[0].data<float>(), in[0].shape(), y.data<float>(), shape);
  } else {  // masks and indices (bool, int64): copied element by element, never differentiated
    std::vector<int64_t> const padded = kernels::pad_shape(in[0].shape(), shape.size());
    std::vector<int64_t> st = kernels::contiguous_strides(padded);
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (padded[d] != shape[d]) st[d] = 0;
    copy_elements(in[0], 0, st, y);
  }
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
Tensor permute(Tensor const& x, std::vector<int64_t> const& perm) {
  std::vector<int64_t> const in_strides = kernels::contiguous_strides(x.shape());
  std::vector<int64_t> shape(perm.size()), strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.dim(static_cast<int>(perm[i]));
    strides[i] = in_strides[perm[i]];
  }
  Tensor y(shape, x.dtype());
  if (x.dtype() == DType::kBFloat16)  // mixed precision: bf16 moved as its bits
    kernels::strided_copy(x.data<uint16_t>(), strides, y.data<uint16_t>(), kernels::contiguous_strides(shape), shape);
  else if (x.dtype() == DType::kFloat32)
    kernels::strided_copy(x.data<float>(), strides, y.data<float>(), kernels::contiguous_strides(shape), shape);
  else  // ids and masks (XLNet's [T, N] ids): copied by element size, never differentiated
    copy_elements(x, 0, strides, y);
  return y;
}
}  // namespace

Status transpose_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const perm, graph::ops::transpose_perm(call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = permute(in[0], perm);
  if (saved) saved->tensors.clear();
  return Status::ok();
}

Status transpose_backward(OpCall const& call, Saved const&, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  ASSIGN_OR_RETURN(std::vector<int64_t> const perm, graph::ops::transpose_perm(call.op, gout[0].shape(), "gradient"));
  std::vector<int64_t> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return emit_grad(call, grads, 0, permute(gout[0], inverse), accumulate);
}

namespace {
// Copies `part` (shape part_shape) into / out of `whole` at `offset` along `axis` (out of it:
// adds to `part` with `accumulate`, float32 only): float32, or bf16 moved as its bits (uint16_t;
// Split follows a bf16 input under mixed precision).
template <typename T>
void copy_along_axis(T* whole, std::vector<int64_t> const& whole_shape, T* part, std::vector<int64_t> const& part_shape,
                     int64_t axis, int64_t offset, bool into_whole) {
  std::vector<int64_t> const ws = kernels::contiguous_strides(whole_shape);
  std::vector<int64_t> const ps = kernels::contiguous_strides(part_shape);
  T* w = whole + offset * ws[axis];
  if (into_whole)
    kernels::strided_copy(part, ps, w, ws, part_shape);
  else
    kernels::strided_copy(w, ws, part, ps, part_shape);
}

void copy_along_axis(float* whole, std::vector<int64_t> const& whole_shape, float* part,
                     std::vector<int64_t> const& part_shape, int64_t axis, int64_t offset, bool into_whole,
                     bool accumulate) {
  if (!accumulate || into_whole)
    return copy_along_axis<float>(whole, whole_shape, part, part_shape, axis, offset, into_whole);
  std::vector<int64_t> const ws = kernels::contiguous_strides(whole_shape);
  kernels::strided_add(whole + offset * ws[axis], ws, part, kernels::contiguous_strides(part_shape), part_shape);
}
}  // namespace

Status concat_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  std::vector<std::vector<int64_t>> shapes;
  bool any_empty = false;
  for (Tensor const& t : in) {
    shapes.push_back(t.shape());
    any_empty = any_empty || t.numel() == 0;
  }
  ASSIGN_OR_RETURN(graph::ops::ConcatShape const c, graph::ops::concat_shape(call.op, shapes));
  int64_t const axis = c.axis;
  std::vector<int64_t> const& shape = c.out_shape;
  Tensor y(shape);
  if (!any_empty && y.numel() > 0) {
    IntKey k = dnnl_ctx::key("concat", axis);
    std::vector<dnnl::memory::desc> mds;
    for (Tensor const& t : in) {
      k.add_list(t.shape());
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
  int64_t const axis = graph::ops::normalised_axis(attrs_of<graph::ConcatAttrs>(call.op)->axis, gout[0].rank());
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

// Concat of integers and masks (HF GPT-2's (row, position) index pairs): the same layout copied byte
// by byte; never differentiated.
Status concat_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  std::vector<std::vector<int64_t>> shapes;
  for (Tensor const& t : in) shapes.push_back(t.shape());
  ASSIGN_OR_RETURN(graph::ops::ConcatShape const c, graph::ops::concat_shape(call.op, shapes));
  Tensor y(c.out_shape, in.at(0).dtype());
  std::size_t const es = graph::dtype_size(y.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < c.axis; ++d) outer *= c.out_shape[d];
  for (std::size_t d = static_cast<std::size_t>(c.axis) + 1; d < c.out_shape.size(); ++d) inner *= c.out_shape[d];
  std::size_t const row = static_cast<std::size_t>(c.out_shape[c.axis] * inner) * es;
  std::size_t off = 0;
  for (Tensor const& t : in) {
    std::size_t const chunk = static_cast<std::size_t>(t.dim(static_cast<int>(c.axis)) * inner) * es;
    for (int64_t o = 0; o < outer && chunk > 0; ++o)
      std::memcpy(static_cast<char*>(y.raw()) + o * row + off, static_cast<char const*>(t.raw()) + o * chunk, chunk);
    off += chunk;
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

namespace {
template <typename T>
void split_parts(Tensor const& x, graph::ops::SplitShape const& sp, std::vector<Tensor>& out) {
  int64_t off = 0;
  for (std::size_t i = 0; i < sp.sizes.size(); ++i) {
    std::vector<int64_t> s = x.shape();
    s[sp.axis] = sp.sizes[i];
    out[i] = Tensor(s, x.dtype());
    copy_along_axis(const_cast<T*>(x.data<T>()), x.shape(), out[i].data<T>(), s, sp.axis, off, false);
    off += sp.sizes[i];
  }
}

template <typename T>
void join_parts(std::vector<Tensor> const& parts, graph::ops::SplitShape const& sp, Tensor& whole) {
  int64_t off = 0;
  for (std::size_t i = 0; i < sp.sizes.size(); ++i) {
    if (i < parts.size() && parts[i].defined())
      copy_along_axis(whole.data<T>(), whole.shape(), const_cast<T*>(parts[i].data<T>()), parts[i].shape(), sp.axis,
                      off, true);
    off += sp.sizes[i];
  }
}
}  // namespace

Status split_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(graph::ops::SplitShape const sp, graph::ops::split_shape(call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  if (in[0].dtype() == DType::kBFloat16)
    split_parts<uint16_t>(in[0], sp, out);
  else
    split_parts<float>(in[0], sp, out);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status split_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(graph::ops::SplitShape const sp, graph::ops::split_shape(call.op, in_shape));
  // The gradient has the input's dtype (the graph's, as every part's gradient may be missing).
  DType const dtype = call.graph.tensor(call.op.inputs[0]).dtype;
  Tensor g = Tensor::zeros(in_shape, dtype);
  if (dtype == DType::kBFloat16)
    join_parts<uint16_t>(gout, sp, g);
  else
    join_parts<float>(gout, sp, g);
  return emit_grad(call, grads, 0, g, accumulate);
}

Status slice_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(graph::ops::SliceGeometry const g, graph::ops::slice_geometry(call.op, in[0].shape()));
  Tensor y(g.out_shape);
  kernels::strided_copy(in[0].data<float>() + g.offset, g.src_strides, y.data<float>(),
                        kernels::contiguous_strides(g.out_shape), g.out_shape);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// Index arithmetic (int64, int32, bool and byte tensors: the dynamo exporter slices MaxPool's
// indices): copied element by element, never differentiated.
Status slice_bytes_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  ASSIGN_OR_RETURN(graph::ops::SliceGeometry const g, graph::ops::slice_geometry(call.op, in[0].shape()));
  Tensor y(g.out_shape, in[0].dtype());
  copy_elements(in[0], g.offset, g.src_strides, y);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

Status slice_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(graph::ops::SliceGeometry const g, graph::ops::slice_geometry(call.op, in_shape));
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
}  // namespace

// Float32 data, or masks and indices (int64, int32, bool, uint8: HF's causal mask gathered from
// a flattened one by computed positions), copied by element size and never differentiated.
Status gather_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& data = in[0];
  Tensor const& idx_t = in[1];
  if (idx_t.dtype() != DType::kInt64 && idx_t.dtype() != DType::kInt32)
    return op_error(call, "indices must be int64 or int32");
  ASSIGN_OR_RETURN(graph::ops::GatherShape const gs, graph::ops::gather_shape(call.op, data.shape(), idx_t.shape()));
  std::vector<int64_t> const idx = indices_of(idx_t);
  Tensor y(gs.out_shape, data.dtype());
  int64_t bad = 0;
  if (!kernels::gather_bytes(data.raw(), graph::dtype_size(data.dtype()), gs.outer, gs.axis_dim, gs.inner, idx.data(),
                             static_cast<int64_t>(idx.size()), y.raw(), &bad))  // named as the CUDA backend does
    return op_error(call, "index " + std::to_string(idx[static_cast<std::size_t>(bad)]) + " (position " +
                              std::to_string(bad) + ") is out of range for axis " + std::to_string(gs.axis) + " of " +
                              data.shape_string());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved && data.dtype() == DType::kFloat32) saved->tensors = {idx_t, shape_tensor(data.shape())};
  return Status::ok();
}

Status gather_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(graph::ops::GatherShape const gs,
                   graph::ops::gather_shape(call.op, data_shape, saved.tensors.at(0).shape()));
  std::vector<int64_t> const idx = indices_of(saved.tensors.at(0));
  Tensor& g = grad_slot(grads, 0, data_shape, accumulate);
  if (!accumulate) g.fill(0.f);
  if (!gout.at(0).defined()) return Status::ok();
  if (!kernels::gather_backward(gout[0].data<float>(), gs.outer, gs.axis_dim, gs.inner, idx.data(),
                                static_cast<int64_t>(idx.size()), g.data<float>()))
    return op_error(call, "an index is out of range");
  return Status::ok();
}

}  // namespace gp::exec::cpu
