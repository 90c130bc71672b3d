// CPU kernels: Pad, Tile, Trilu, OneHot, GatherElements, GatherND, ScatterElements, ScatterND, Resize,
// GridSample, Col2Im.
//
// Pad, Tile and Resize are separable: along each axis an output position reads a few input
// positions with fixed weights. They share one pass per axis (forward) and its adjoint, applied in
// reverse order (backward), so every gradient is the exact transpose of its forward.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <span>

#include "exec/cpu/cpu_ops.h"
#include "exec/index_positions.h"
#include "exec/op_shared.h"
#include "exec/separable_maps.h"
#include "graph/ops/index.h"
#include "kernels/index.h"
#include "kernels/hd/index.h"

namespace gp::exec::cpu {
namespace {

using graph::ops::dims_string;

int64_t product(std::vector<int64_t> const& s, std::size_t from, std::size_t to) {
  int64_t p = 1;
  for (std::size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// The bytes of `value` in a dtype that Pad and Tile copy (copy_dtype_check).
std::vector<std::byte> element_bytes(DType dtype, float value) {
  std::vector<std::byte> b(graph::dtype_size(dtype));
  auto put = [&b](auto v) { std::memcpy(b.data(), &v, sizeof v); };
  if (dtype == DType::kInt64)
    put(static_cast<int64_t>(value));
  else if (dtype == DType::kInt32)
    put(static_cast<int32_t>(value));
  else if (dtype == DType::kBool)
    put(static_cast<uint8_t>(value != 0.f));
  else
    put(value);
  return b;
}

// A one-tap, unit-weight pass (Pad, Tile) on any dtype: whole rows of `inner` elements are copied.
void copy_axis(Tensor const& x, Tensor& y, std::size_t axis, AxisMap const& m, float fill) {
  std::vector<int64_t> const& shape = y.shape();
  int64_t const outer = product(shape, 0, axis), inner = product(shape, axis + 1, shape.size());
  std::size_t const row = static_cast<std::size_t>(inner) * graph::dtype_size(x.dtype());
  std::vector<std::byte> const f = element_bytes(x.dtype(), fill);
  auto const* src = static_cast<std::byte const*>(x.raw());
  auto* dst = static_cast<std::byte*>(y.raw());
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t o = 0; o < m.out; ++o) {
      std::byte* d = dst + static_cast<std::size_t>(b * m.out + o) * row;
      int64_t const idx = m.index[o];
      if (idx >= 0) {
        std::memcpy(d, src + static_cast<std::size_t>(b * m.in + idx) * row, row);
      } else {
        for (std::size_t i = 0; i < row; i += f.size()) std::memcpy(d + i, f.data(), f.size());
      }
    }
}

// x resampled along `axis` by m.
Tensor apply_axis(Tensor const& x, std::size_t axis, AxisMap const& m, float fill) {
  std::vector<int64_t> shape = x.shape();
  shape[axis] = m.out;
  Tensor y(shape, x.dtype());
  if (x.dtype() != DType::kFloat32) {
    copy_axis(x, y, axis, m, fill);
    return y;
  }
  int64_t const outer = product(shape, 0, axis), inner = product(shape, axis + 1, shape.size());
  float const* src = x.data<float>();
  float* dst = y.data<float>();
  for (int64_t b = 0; b < outer; ++b) {
    float const* sb = src + b * m.in * inner;
    for (int64_t o = 0; o < m.out; ++o) {
      float* d = dst + (b * m.out + o) * inner;
      int64_t const* idx = m.index.data() + o * m.taps;
      float const* w = m.weight.data() + o * m.taps;
      if (idx[0] < 0) {
        std::fill(d, d + inner, fill);
        continue;
      }
      float const* s0 = sb + idx[0] * inner;
      for (int64_t i = 0; i < inner; ++i) d[i] = w[0] * s0[i];
      for (int64_t t = 1; t < m.taps; ++t) {
        float const* s = sb + idx[t] * inner;
        for (int64_t i = 0; i < inner; ++i) d[i] += w[t] * s[i];
      }
    }
  }
  return y;
}

// gx (shape of the pass's input, zeroed) += the transpose of the pass applied to gy.
void adjoint_axis(Tensor const& gy, std::size_t axis, AxisMap const& m, Tensor& gx) {
  std::vector<int64_t> const& shape = gy.shape();
  int64_t const outer = product(shape, 0, axis), inner = product(shape, axis + 1, shape.size());
  float const* src = gy.data<float>();
  float* dst = gx.data<float>();
  for (int64_t b = 0; b < outer; ++b) {
    float* db = dst + b * m.in * inner;
    for (int64_t o = 0; o < m.out; ++o) {
      float const* s = src + (b * m.out + o) * inner;
      for (int64_t t = 0; t < m.taps; ++t) {
        int64_t const idx = m.index[o * m.taps + t];
        if (idx < 0) continue;
        float const w = m.weight[o * m.taps + t];
        float* d = db + idx * inner;
        for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
      }
    }
  }
}

Tensor resample(Tensor const& x, std::vector<AxisMap> const& maps, float fill) {
  Tensor y = x;
  for (std::size_t a = 0; a < maps.size(); ++a)
    if (!maps[a].identity()) y = apply_axis(y, a, maps[a], fill);
  return y;
}

Tensor resample_adjoint(Tensor const& gy, std::vector<AxisMap> const& maps) {
  Tensor g = gy;
  for (std::size_t a = maps.size(); a-- > 0;) {
    if (maps[a].identity()) continue;
    std::vector<int64_t> shape = g.shape();
    shape[a] = maps[a].in;
    Tensor gx = Tensor::zeros(shape);
    adjoint_axis(g, a, maps[a], gx);
    g = gx;
  }
  return g;
}

// The forward and backward of a separable op whose per-axis maps come from `Maps(call, in_shape)`.
template <MapsFn Maps>
Status separable_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<AxisMap> const maps, Maps(call, in[0].shape()));
  float const fill = separable_fill(call);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = resample(in[0], maps, fill);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

template <MapsFn Maps>
Status separable_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(std::vector<AxisMap> const maps, Maps(call, in_shape));
  ASSIGN_OR_RETURN(Tensor const g, separable_output_grad(call, gout, maps, in_shape));
  return emit_grad(call, grads, 0, resample_adjoint(g, maps), accumulate);
}

// Pad and Tile copy elements of any of these dtypes (token ids, masks); gradients flow for float32.
template <typename A>
Status copy_dtype_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<A>(op, graph));
  DType const d = graph.tensor(op.inputs.at(0)).dtype;
  if (d != DType::kFloat32 && d != DType::kInt64 && d != DType::kInt32 && d != DType::kBool)
    return unsupported("input 0 has dtype " + std::string(graph::dtype_name(d)) +
                       " (float32, int64, int32 or bool only)");
  return Status::ok();
}

// ---- Trilu ----
// Zeroes the masked elements' bytes: a mask for every dtype (zero bytes are 0, 0.0 and false).
Tensor trilu_mask(OpCall const& call, Tensor const& x) {
  auto const& a = *attrs_of<graph::TriluAttrs>(call.op);
  Tensor y = x.clone();
  int64_t const r = x.rank();
  int64_t const rows = x.dim(static_cast<int>(r - 2)), cols = x.dim(static_cast<int>(r - 1));
  int64_t const mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  std::size_t const size = graph::dtype_size(x.dtype());
  auto* p = static_cast<std::byte*>(y.raw());
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      std::byte* row = p + static_cast<std::size_t>((b * rows + i) * cols) * size;
      for (int64_t j = 0; j < cols; ++j)  // kernels/hd/index.h: what the CUDA kernel keeps too
        if (!kernels::hd::trilu_keeps(i, j, a.k, a.upper))
          std::fill(row + static_cast<std::size_t>(j) * size, row + static_cast<std::size_t>(j + 1) * size,
                    std::byte{0});
    }
  return y;
}

Status trilu_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::TriluAttrs>(op, graph));
  if (graph.tensor(op.inputs.at(0)).shape.dims.size() < 2)
    return invalid_argument("input " + graph.tensor(op.inputs.at(0)).shape.to_string() + " has rank below 2");
  return Status::ok();
}

Status trilu_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (in[0].rank() < 2) return op_error(call, "input " + in[0].shape_string() + " has rank below 2");
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = trilu_mask(call, in[0]);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status trilu_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  return emit_grad(call, grads, 0, trilu_mask(call, grad_or_zeros(call, gout, 0, in_shape)), accumulate);
}

// ---- OneHot ----
// `on` where the index matches the position along the depth axis, `off` elsewhere
// (kernels/hd/index.h's one_hot_at, which the CUDA kernel runs too); float indices get a zero gradient.
template <typename T, typename I>
void one_hot_fill(Tensor const& idx, graph::OneHotAttrs const& a, int64_t inner, Tensor& y) {
  T const on = static_cast<T>(a.on), off = static_cast<T>(a.off);
  for (int64_t e = 0; e < y.numel(); ++e)
    y.data<T>()[e] = kernels::hd::one_hot_at(idx.data<I>(), e, a.depth, inner) ? on : off;
}

template <typename T>
void one_hot_of(Tensor const& idx, graph::OneHotAttrs const& a, int64_t inner, Tensor& y) {
  if (idx.dtype() == DType::kInt64)
    one_hot_fill<T, int64_t>(idx, a, inner, y);
  else if (idx.dtype() == DType::kInt32)
    one_hot_fill<T, int32_t>(idx, a, inner, y);
  else
    one_hot_fill<T, float>(idx, a, inner, y);
}

Status one_hot_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::OneHotAttrs>(call.op);
  auto const shape = graph::ops::one_hot_output_shape(a, in[0].shape());
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  Tensor y(shape->out, call.graph.tensor(call.op.outputs.at(0)).dtype);
  if (y.dtype() == DType::kInt64)
    one_hot_of<int64_t>(in[0], a, shape->inner, y);
  else if (y.dtype() == DType::kInt32)
    one_hot_of<int32_t>(in[0], a, shape->inner, y);
  else
    one_hot_of<float>(in[0], a, shape->inner, y);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// ---- GatherElements, ScatterElements ----
// For every element of `indices` (row-major), the flat position in data it addresses: its own
// coordinates with the one along `axis` replaced by the index (negative: from the end).
Result<std::vector<int64_t>> element_positions(OpCall const& call, std::vector<int64_t> const& data_shape,
                                               Tensor const& indices, int64_t axis) {
  // The per-element math is kernels/hd/index.h's, which the CUDA kernels run too.
  ASSIGN_OR_RETURN(kernels::hd::ElementIndex const p, element_index(call, data_shape, indices.shape(), axis));
  int64_t const n = indices.numel();
  std::vector<int64_t> pos(static_cast<std::size_t>(n));
  bool const i64 = indices.dtype() == DType::kInt64;
  for (int64_t j = 0; j < n; ++j) {
    int64_t const v = i64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
    if (!kernels::hd::element_position(p, j, v, pos[static_cast<std::size_t>(j)]))
      return op_error(call, "index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
                                " of size " + std::to_string(p.dim));
  }
  return pos;
}

// ---- GatherND (batch_dims 0) ----
// For every index tuple (indices [..., K] row-major), the offset in data of the slice it addresses
// (data's axes from K on, `slice` elements); each index may be negative (from the end).
struct NdSlices {
  std::vector<int64_t> offsets;
  int64_t slice = 1;
};

template <typename I>
Result<NdSlices> nd_slices_of(OpCall const& call, std::vector<int64_t> const& data_shape, I const* idx,
                              kernels::hd::NdIndex const& p, int64_t tuples) {
  NdSlices r;
  r.slice = p.slice;
  r.offsets.resize(static_cast<std::size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    if (kernels::hd::nd_offset(p, idx, t, r.offsets[static_cast<std::size_t>(t)])) continue;
    for (int64_t d = 0; d < p.k; ++d) {
      int64_t const v = idx[t * p.k + d];
      if (v < -data_shape[d] || v >= data_shape[d])
        return op_error(call, "index " + std::to_string(v) + " is out of range for axis " + std::to_string(d) +
                                  " of size " + std::to_string(data_shape[d]));
    }
  }
  return r;
}

// The per-tuple math is kernels/hd/index.h's, which the CUDA kernels run too.
Result<NdSlices> nd_slices(OpCall const& call, std::vector<int64_t> const& data_shape, Tensor const& indices) {
  ASSIGN_OR_RETURN(kernels::hd::NdIndex const p, nd_index(call, data_shape, indices.shape()));
  int64_t const tuples = indices.numel() / p.k;
  if (indices.dtype() == DType::kInt64) return nd_slices_of(call, data_shape, indices.data<int64_t>(), p, tuples);
  return nd_slices_of(call, data_shape, indices.data<int32_t>(), p, tuples);
}

// Any data dtype is copied (bytes); float32 data is differentiated.
Status gather_nd_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, graph::ops::gather_nd_output_shape(in[0].shape(), in[1].shape()));
  ASSIGN_OR_RETURN(NdSlices const sl, nd_slices(call, in[0].shape(), in[1]));
  Tensor y(shape, in[0].dtype());
  std::size_t const es = graph::dtype_size(y.dtype());
  std::size_t const bytes = static_cast<std::size_t>(sl.slice) * es;
  for (std::size_t t = 0; t < sl.offsets.size(); ++t)
    std::memcpy(static_cast<char*>(y.raw()) + t * bytes,
                static_cast<char const*>(in[0].raw()) + static_cast<std::size_t>(sl.offsets[t]) * es, bytes);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[1], shape_tensor(in[0].shape())};
  return Status::ok();
}

// The output gradient's slices added into zeros of data's shape, in index order (an index tuple
// given twice adds twice, as torch's index backward does).
Status gather_nd_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(NdSlices const sl, nd_slices(call, data_shape, saved.tensors.at(0)));
  Tensor gx = Tensor::zeros(data_shape);
  if (!gout.empty() && gout[0].defined()) {
    float const* g = gout[0].data<float>();
    float* dst = gx.data<float>();
    for (std::size_t t = 0; t < sl.offsets.size(); ++t)
      for (int64_t e = 0; e < sl.slice; ++e) dst[sl.offsets[t] + e] += g[static_cast<int64_t>(t) * sl.slice + e];
  }
  return emit_grad(call, grads, 0, gx, accumulate);
}

Status gather_elements_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                               Saved* saved) {
  int64_t const axis = attrs_of<graph::GatherElementsAttrs>(call.op)->axis;
  ASSIGN_OR_RETURN(std::vector<int64_t> const pos, element_positions(call, in[0].shape(), in[1], axis));
  Tensor y(in[1].shape(), in[0].dtype());
  std::size_t const es = graph::dtype_size(y.dtype());
  auto const* x = static_cast<char const*>(in[0].raw());
  auto* p = static_cast<char*>(y.raw());
  for (std::size_t j = 0; j < pos.size(); ++j) std::memcpy(p + j * es, x + static_cast<std::size_t>(pos[j]) * es, es);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[1], shape_tensor(in[0].shape())};
  return Status::ok();
}

Status gather_elements_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                                std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  Tensor const& indices = saved.tensors.at(0);
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  int64_t const axis = attrs_of<graph::GatherElementsAttrs>(call.op)->axis;
  ASSIGN_OR_RETURN(std::vector<int64_t> const pos, element_positions(call, data_shape, indices, axis));
  Tensor gx = Tensor::zeros(data_shape);
  if (gout.size() > 0 && gout[0].defined()) {
    float const* g = gout[0].data<float>();
    float* d = gx.data<float>();
    for (std::size_t j = 0; j < pos.size(); ++j) d[pos[j]] += g[j];
  }
  return emit_grad(call, grads, 0, gx, accumulate);
}

// ScatterElements and ScatterND: data with updates[j] combined in at position pos[j], in ascending
// j (the last of duplicates wins under reduction none).
Tensor scatter_at(Tensor const& data, Tensor const& updates, std::vector<int64_t> const& pos,
                  graph::ScatterReduction r) {
  Tensor y = data.clone();
  float* p = y.data<float>();
  float const* u = updates.data<float>();
  for (std::size_t j = 0; j < pos.size(); ++j) {
    if (r == graph::ScatterReduction::kAdd)
      p[pos[j]] += u[j];
    else if (r == graph::ScatterReduction::kMul)
      p[pos[j]] *= u[j];
    else if (r == graph::ScatterReduction::kMax || r == graph::ScatterReduction::kMin)
      p[pos[j]] = kernels::hd::extremum_of(p[pos[j]], u[j], r == graph::ScatterReduction::kMax);
    else
      p[pos[j]] = u[j];
  }
  return y;
}

Status scatter_elements_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                                Saved* saved) {
  auto const& a = *attrs_of<graph::ScatterElementsAttrs>(call.op);
  RETURN_IF_ERROR(scatter_elements_updates_check(call, in[1].shape(), in[2].shape()));
  ASSIGN_OR_RETURN(std::vector<int64_t> const pos, element_positions(call, in[0].shape(), in[1], a.axis));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = scatter_at(in[0], in[2], pos, a.reduction);
  save_scatter(in[1], in, a.reduction, saved);
  return Status::ok();
}

// Calls run(p, js) once per distinct position p, ascending, with js the updates j whose pos[j] == p
// in ascending j (the order the forward combined them in).
template <typename Run>
void for_each_position_run(std::vector<int64_t> const& pos, Run run) {
  std::vector<std::size_t> order(pos.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t l, std::size_t r) { return pos[l] < pos[r]; });
  for (std::size_t s = 0; s < order.size();) {
    std::size_t e = s;
    int64_t const p = pos[order[s]];
    while (e < order.size() && pos[order[e]] == p) ++e;
    run(p, std::span<std::size_t const>(order.data() + s, e - s));
    s = e;
  }
}

// reduction mul: out[p] = data[p] * prod of the updates at p. Each gradient is the product of the
// other factors (prefix and suffix products per position: no division, exact with zeros).
void scatter_mul_grads(std::vector<int64_t> const& pos, Tensor const& data, Tensor const& upd, Tensor const& g,
                       Tensor* gdata, Tensor* gupd) {
  float const* x = data.data<float>();
  float const* u = upd.data<float>();
  float const* gy = g.data<float>();
  if (gdata) std::copy(gy, gy + g.numel(), gdata->data<float>());
  std::vector<float> prefix;
  for_each_position_run(pos, [&](int64_t p, std::span<std::size_t const> js) {
    prefix.assign(js.size() + 1, 1.f);
    for (std::size_t k = 0; k < js.size(); ++k) prefix[k + 1] = prefix[k] * u[js[k]];
    if (gdata) gdata->data<float>()[p] = gy[p] * prefix[js.size()];
    if (gupd) {
      float suffix = 1.f;
      for (std::size_t k = js.size(); k-- > 0;) {
        gupd->data<float>()[js[k]] = gy[p] * x[p] * prefix[k] * suffix;
        suffix *= u[js[k]];
      }
    }
  });
}

// reduction max or min: out[p] = the extremum r of data[p] and the updates at p; its gradient is
// shared evenly by the values equal to r (data[p] among them), as torch's scatter_reduce amax and
// amin share it.
void scatter_extremum_grads(std::vector<int64_t> const& pos, Tensor const& data, Tensor const& upd, Tensor const& g,
                            bool max, Tensor* gdata, Tensor* gupd) {
  float const* x = data.data<float>();
  float const* u = upd.data<float>();
  float const* gy = g.data<float>();
  std::copy(gy, gy + g.numel(), gdata->data<float>());
  for_each_position_run(pos, [&](int64_t p, std::span<std::size_t const> js) {
    float r = x[p];
    for (std::size_t j : js) r = kernels::hd::extremum_of(r, u[j], max);
    int64_t ties = kernels::hd::extremum_ties(x[p], r);  // at least 1: r is one of them
    for (std::size_t j : js) ties += kernels::hd::extremum_ties(u[j], r);
    float const share = gy[p] / static_cast<float>(ties);
    gdata->data<float>()[p] = kernels::hd::extremum_ties(x[p], r) ? share : 0.f;
    for (std::size_t j : js) gupd->data<float>()[j] = kernels::hd::extremum_ties(u[j], r) ? share : 0.f;
  });
}

// The gradients of scatter_at into data (slot 0) and the updates (slot 2, of `upd_shape`).
Status scatter_backward(OpCall const& call, Saved const& saved, std::vector<int64_t> const& pos,
                        std::vector<int64_t> const& upd_shape, graph::ScatterReduction r,
                        std::vector<Tensor> const& gout, std::vector<bool> const& wanted, std::vector<Tensor>& grads,
                        bool accumulate) {
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  Tensor const g = grad_or_zeros(call, gout, 0, data_shape);
  float const* gy = g.data<float>();
  Tensor gdata = Tensor(data_shape), gupd = Tensor(upd_shape);
  if (r == graph::ScatterReduction::kMul) {
    scatter_mul_grads(pos, saved.tensors.at(2), saved.tensors.at(3), g, &gdata, &gupd);
  } else if (r == graph::ScatterReduction::kMax || r == graph::ScatterReduction::kMin) {
    scatter_extremum_grads(pos, saved.tensors.at(2), saved.tensors.at(3), g, r == graph::ScatterReduction::kMax, &gdata,
                           &gupd);
  } else {
    std::copy(gy, gy + g.numel(), gdata.data<float>());
    float* gu = gupd.data<float>();
    for (std::size_t j = 0; j < pos.size(); ++j) gu[j] = gy[pos[j]];
    if (r == graph::ScatterReduction::kNone) {
      // The last update written to a position wins: only it receives that position's gradient,
      // and data's element there was overwritten.
      std::vector<int64_t> winner(static_cast<std::size_t>(g.numel()), -1);
      for (std::size_t j = 0; j < pos.size(); ++j) winner[pos[j]] = static_cast<int64_t>(j);
      for (std::size_t j = 0; j < pos.size(); ++j)
        if (winner[pos[j]] != static_cast<int64_t>(j)) gu[j] = 0.f;
      for (int64_t p : pos) gdata.data<float>()[p] = 0.f;
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
  Tensor const& indices = saved.tensors.at(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> const pos,
                   element_positions(call, shape_of(saved.tensors.at(1)), indices, a.axis));
  return scatter_backward(call, saved, pos, indices.shape(), a.reduction, gout, wanted, grads, accumulate);
}

// ScatterND: update element j (tuple t = j / slice, e = j % slice) lands at the tuple's slice
// offset plus e: GatherND's positions, in the updates' row-major order.
Result<std::vector<int64_t>> nd_positions(OpCall const& call, std::vector<int64_t> const& data_shape,
                                          Tensor const& indices) {
  ASSIGN_OR_RETURN(NdSlices const sl, nd_slices(call, data_shape, indices));
  std::vector<int64_t> pos;
  pos.reserve(sl.offsets.size() * static_cast<std::size_t>(sl.slice));
  for (int64_t o : sl.offsets)
    for (int64_t e = 0; e < sl.slice; ++e) pos.push_back(o + e);
  return pos;
}

Status scatter_nd_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::ScatterNDAttrs>(call.op);
  RETURN_IF_ERROR(scatter_nd_updates_check(call, in[0].shape(), in[1].shape(), in[2].shape()));
  ASSIGN_OR_RETURN(std::vector<int64_t> const pos, nd_positions(call, in[0].shape(), in[1]));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = scatter_at(in[0], in[2], pos, a.reduction);
  save_scatter(in[1], in, a.reduction, saved);
  return Status::ok();
}

Status scatter_nd_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                           std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) && !wants(wanted, 2)) return Status::ok();
  auto const& a = *attrs_of<graph::ScatterNDAttrs>(call.op);
  Tensor const& indices = saved.tensors.at(0);
  std::vector<int64_t> const data_shape = shape_of(saved.tensors.at(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> const upd_shape,
                   graph::ops::gather_nd_output_shape(data_shape, indices.shape()));
  ASSIGN_OR_RETURN(std::vector<int64_t> const pos, nd_positions(call, data_shape, indices));
  return scatter_backward(call, saved, pos, upd_shape, a.reduction, gout, wanted, grads, accumulate);
}

// ---- GridSample (kernels/index.h on kernels/hd/index.h's math): saves x and the grid ----

Status grid_sample_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(kernels::hd::GridSampleParams const p, grid_sample_params(call, in[0].shape(), in[1].shape()));
  Tensor y(grid_sample_y_shape(p));
  kernels::grid_sample_forward(in[0].data<float>(), in[1].data<float>(), p, y.data<float>());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1]};
  return Status::ok();
}

Status grid_sample_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) && !wants(wanted, 1)) return Status::ok();
  ASSIGN_OR_RETURN(kernels::hd::GridSampleParams const p, grid_sample_backward_params(call, saved, gout));
  Tensor const &x = saved.tensors[0], &grid = saved.tensors[1];
  Tensor dx = wants(wanted, 0) ? Tensor(x.shape()) : Tensor(),
         dgrid = wants(wanted, 1) ? Tensor(grid.shape()) : Tensor();
  kernels::grid_sample_backward(x.data<float>(), grid.data<float>(), gout[0].data<float>(), p,
                                dx.defined() ? dx.data<float>() : nullptr,
                                dgrid.defined() ? dgrid.data<float>() : nullptr);
  if (dx.defined()) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  if (dgrid.defined()) RETURN_IF_ERROR(emit_grad(call, grads, 1, dgrid, accumulate));
  return Status::ok();
}

// ---- Col2Im (kernels/index.h on kernels/hd/index.h's math): saves x's shape ----

Status col2im_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(kernels::hd::Col2ImParams const p, col2im_params(call, in[0].shape()));
  Tensor y(col2im_y_shape(call, p));
  kernels::col2im(in[0].data<float>(), p, y.data<float>());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status col2im_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  ASSIGN_OR_RETURN(kernels::hd::Col2ImParams const p, col2im_backward_params(call, saved, gout));
  Tensor dx(shape_of(saved.tensors[0]));
  kernels::im2col(gout[0].data<float>(), p, dx.data<float>(), false);
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace

CpuKernelFamily index_kernels() {
  OpKernels const pad{separable_forward<pad_maps>, separable_backward<pad_maps>, separable_backward<pad_maps>,
                      copy_dtype_check<graph::PadAttrs>};
  OpKernels const tile{separable_forward<tile_maps>, separable_backward<tile_maps>, separable_backward<tile_maps>,
                       copy_dtype_check<graph::TileAttrs>};
  OpKernels const resize{separable_forward<resize_maps>, separable_backward<resize_maps>,
                         separable_backward<resize_maps>, require_attrs<graph::ResizeAttrs>};
  OpKernels const scatter{scatter_elements_forward, scatter_elements_backward, scatter_elements_backward,
                          scatter_elements_check};
  OpKernels const scatter_nd{scatter_nd_forward, scatter_nd_backward, scatter_nd_backward, scatter_nd_check};
  return {
      {OpKind::kPad, {pad, 1, false}},
      {OpKind::kTile, {tile, 1, false}},
      {OpKind::kResize, {resize, 1}},
      {OpKind::kGridSample,
       {{grid_sample_forward, grid_sample_backward, grid_sample_backward, require_attrs<graph::GridSampleAttrs>}, 2}},
      {OpKind::kCol2Im, {{col2im_forward, col2im_backward, col2im_backward, require_attrs<graph::Col2ImAttrs>}, 1}},
      // Trilu masks any dtype (ONNX's tests use int64); gradients flow for float32.
      {OpKind::kTrilu, {{trilu_forward, trilu_backward, trilu_backward, trilu_check}, 1, false}},
      // Indices of int64, int32 or float32 (truncated; their gradient is zero).
      {OpKind::kOneHot,
       {{one_hot_forward, one_hot_backward, one_hot_backward, one_hot_check},
        1,
        false,
        0,
        {DType::kInt64, DType::kInt32, DType::kFloat32}}},
      {OpKind::kGatherElements,
       {{gather_elements_forward, gather_elements_backward, gather_elements_backward, gather_elements_check},
        2,
        false}},
      {OpKind::kGatherND, {{gather_nd_forward, gather_nd_backward, gather_nd_backward, gather_nd_check}, 2, false}},
      {OpKind::kScatterElements, {scatter, 3, false}},
      {OpKind::kScatter, {scatter, 3, false}},
      {OpKind::kScatterND, {scatter_nd, 3, false}},
  };
}

}  // namespace gp::exec::cpu
