// Data movement: the shape functions every backend shares (graph/ops/move.h), import-time inference
// (graph/ops/infer.h), constant folding (graph/ops/fold.h) and what Gather keeps for its backward.
#include "graph/ops/move.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {

Result<std::vector<int64_t>> transpose_perm(Op const& op, std::vector<int64_t> const& shape, std::string_view role) {
  std::vector<int64_t> perm = std::get<TransposeAttrs>(op.typed).perm;
  int64_t const rank = static_cast<int64_t>(shape.size());
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return op_error(
        op, "perm has " + std::to_string(perm.size()) + " entries for " + std::string(role) + " " + dims_string(shape));
  std::vector<bool> seen(perm.size(), false);
  for (int64_t a : perm) {
    if (a < 0 || a >= rank || seen[a])
      return op_error(op, "perm " + dims_string(perm) + " is not a permutation of the dims of " + dims_string(shape));
    seen[a] = true;
  }
  return perm;
}

Result<ConcatShape> concat_shape(Op const& op, std::vector<std::vector<int64_t>> const& input_shapes) {
  std::vector<int64_t> const& first = input_shapes.at(0);
  int64_t const rank = static_cast<int64_t>(first.size());
  ConcatShape c;
  c.axis = normalised_axis(std::get<ConcatAttrs>(op.typed).axis, rank);
  if (c.axis < 0 || c.axis >= rank) return op_error(op, "axis out of range for input " + dims_string(first));
  c.out_shape = first;
  c.out_shape[c.axis] = 0;
  for (std::vector<int64_t> const& s : input_shapes) {
    if (static_cast<int64_t>(s.size()) != rank) return op_error(op, "inputs have different ranks");
    c.out_shape[c.axis] += s[c.axis];
  }
  return c;
}

Result<SplitShape> split_shape(Op const& op, std::vector<int64_t> const& input_shape) {
  auto const& attrs = std::get<SplitAttrs>(op.typed);
  int64_t const rank = static_cast<int64_t>(input_shape.size());
  SplitShape sp;
  sp.axis = normalised_axis(attrs.axis, rank);
  if (sp.axis < 0 || sp.axis >= rank) return op_error(op, "axis out of range for input " + dims_string(input_shape));
  int64_t const dim = input_shape[sp.axis];
  sp.sizes = attrs.sizes;
  if (sp.sizes.empty()) {
    int64_t const n = static_cast<int64_t>(op.outputs.size());
    int64_t const chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sp.sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  int64_t total = 0;
  for (int64_t s : sp.sizes) total += s;
  if (total != dim || sp.sizes.size() != op.outputs.size())
    return op_error(
        op, "split sizes do not add up to dimension " + std::to_string(sp.axis) + " of " + dims_string(input_shape));
  return sp;
}

Result<SliceGeometry> slice_geometry(Op const& op, std::vector<int64_t> const& input_shape) {
  auto const& a = std::get<SliceAttrs>(op.typed);
  std::vector<int64_t> const& in_shape = input_shape;
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  std::string const for_input = " for input " + dims_string(in_shape);
  std::vector<int64_t> start(in_shape.size(), 0), step(in_shape.size(), 1);
  SliceGeometry g;
  g.out_shape = in_shape;
  for (std::size_t k = 0; k < a.starts.size(); ++k) {
    int64_t const axis = normalised_axis(k < a.axes.size() ? a.axes[k] : static_cast<int64_t>(k), rank);
    if (axis < 0 || axis >= rank)
      return op_error(op, "slice axis " + std::to_string(axis) + " out of range" + for_input);
    int64_t const dim = in_shape[axis];
    int64_t const st = k < a.steps.size() ? a.steps[k] : 1;
    if (st == 0) return op_error(op, "slice step is 0" + for_input);
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
  g.src_strides.assign(in_shape.size(), 0);
  int64_t stride = 1;
  for (std::size_t i = in_shape.size(); i-- > 0;) {
    g.src_strides[i] = stride * step[i];
    if (g.out_shape[i] > 0) g.offset += start[i] * stride;
    stride *= in_shape[i];
  }
  return g;
}

Result<GatherShape> gather_shape(Op const& op, std::vector<int64_t> const& data_shape,
                                 std::vector<int64_t> const& indices_shape) {
  int64_t const rank = static_cast<int64_t>(data_shape.size());
  GatherShape g;
  g.axis = normalised_axis(std::get<GatherAttrs>(op.typed).axis, rank);
  if (g.axis < 0 || g.axis >= rank) return op_error(op, "axis out of range for data " + dims_string(data_shape));
  for (int64_t i = 0; i < g.axis; ++i) g.outer *= data_shape[i];
  for (int64_t i = g.axis + 1; i < rank; ++i) g.inner *= data_shape[i];
  g.axis_dim = data_shape[g.axis];
  g.out_shape.assign(data_shape.begin(), data_shape.begin() + g.axis);
  g.out_shape.insert(g.out_shape.end(), indices_shape.begin(), indices_shape.end());
  g.out_shape.insert(g.out_shape.end(), data_shape.begin() + g.axis + 1, data_shape.end());
  return g;
}

Result<std::vector<int64_t>> expand_output_shape(OpGraph const& graph, Op const& op,
                                                 std::vector<int64_t> const& input_shape, int64_t batch) {
  RETURN_IF_ERROR(require_typed<ExpandAttrs>(op));
  std::vector<int64_t> const& target = std::get<ExpandAttrs>(op.typed).shape;
  int64_t const from_input = batch_of(graph.tensor(op.inputs[0]).shape.dims, input_shape);
  auto concrete = concrete_shape(target, from_input > 0 ? from_input : batch);
  if (!concrete)
    return op_error(op,
                    "expands to the batch, but the micro-batch size is unknown here (a stage whose inputs carry "
                    "no batch); put this op in a stage with a batched input");
  Result<std::vector<int64_t>> out = broadcast_dims(input_shape, *concrete);
  if (!out.is_ok())
    return op_error(op, "cannot broadcast " + dims_string(input_shape) + " to " + dims_string(*concrete));
  return out;
}

// ---- import-time inference ----
namespace {

Result<Inferred> infer_transpose(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  Dims perm(static_cast<std::size_t>(r0));
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto p = c.attr_ints("perm")) perm = *p;
  if (static_cast<int64_t>(perm.size()) != r0) return invalid_argument("perm does not match the input rank");
  Dims out;
  for (int64_t& p : perm) {
    ASSIGN_OR_RETURN(p, checked_axis(p, r0));
  }
  for (int64_t p : perm) out.push_back(c.dims(0)[static_cast<std::size_t>(p)]);
  k.typed = TransposeAttrs{perm};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_concat(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), r0));
  Dims out = c.dims(0);
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.has(i)) continue;
    Dims const& d = c.dims(i);
    if (d.size() != out.size()) return invalid_argument("inputs have different ranks");
    if (d[axis] < 0) return unsupported("concatenation along the batch dimension");
    for (std::size_t j = 0; j < d.size(); ++j)
      if (static_cast<int64_t>(j) != axis && d[j] != out[j])
        return invalid_argument("input " + std::to_string(i) + " has shape " + dims_str(d) + ", not matching " +
                                dims_str(out));
    if (i > 0) out[axis] += d[axis];
  }
  k.typed = ConcatAttrs{axis};
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_split(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), r0));
  Dims sizes;
  if (c.opset >= 13) {
    ASSIGN_OR_RETURN(sizes, c.static_ints(1, "split sizes"));
  } else {
    sizes = c.attr_ints("split").value_or(Dims{});
  }
  int64_t const d = c.dims(0)[axis];
  if (d < 0) return unsupported("splitting the batch dimension");
  if (auto const n = c.attr_int("num_outputs", 0); sizes.empty() && n > 0) {
    // Opset 18: n chunks of ceil(d / n), the last one smaller when d does not divide.
    if (n != static_cast<int64_t>(c.outputs.size()))
      return invalid_argument("num_outputs is " + std::to_string(n) + " but the node has " +
                              std::to_string(c.outputs.size()) + " outputs");
    if (n > d) return invalid_argument("dimension " + std::to_string(d) + " does not split into " + std::to_string(n));
    int64_t const chunk = (d + n - 1) / n;
    sizes.assign(static_cast<std::size_t>(n), chunk);
    sizes.back() = d - chunk * (n - 1);
    if (sizes.back() <= 0) return invalid_argument("dimension " + std::to_string(d) + " leaves an empty last chunk");
  }
  if (sizes.empty()) {
    int64_t const parts = static_cast<int64_t>(c.outputs.size());
    if (d % parts)
      return invalid_argument("dimension " + std::to_string(d) + " does not split into " + std::to_string(parts) +
                              " equal parts");
    sizes.assign(static_cast<std::size_t>(parts), d / parts);
  }
  if (sizes.size() != c.outputs.size() || std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != d)
    return invalid_argument("split sizes do not add up to dimension " + std::to_string(d));
  k.typed = SplitAttrs{axis, sizes};
  k.data_inputs = {0};
  for (int64_t s : sizes) {
    Dims out = c.dims(0);
    out[axis] = s;
    k.outs.push_back({c.dtype(0), out});
  }
  return k;
}

Result<Inferred> infer_slice(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  SliceAttrs a;
  Dims starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts").value_or(Dims{});
    ends = c.attr_ints("ends").value_or(Dims{});
    axes = c.attr_ints("axes").value_or(Dims{});
  } else {
    ASSIGN_OR_RETURN(starts, c.static_ints(1, "starts"));
    ASSIGN_OR_RETURN(ends, c.static_ints(2, "ends"));
    ASSIGN_OR_RETURN(axes, c.static_ints(3, "axes"));
    ASSIGN_OR_RETURN(steps, c.static_ints(4, "steps"));
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_argument("starts, ends, axes and steps differ in length");
  Dims out = c.dims(0);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t const ax, checked_axis(axes[i], r0));
    int64_t const d = out.at(static_cast<std::size_t>(ax));
    int64_t s = starts[i], e = ends[i], st = steps[i];
    if (st == 0) return invalid_argument("a step is 0");
    if (d < 0) {
      if (s == 0 && st == 1 && e >= std::numeric_limits<int32_t>::max()) {
        a.starts.push_back(0);
        a.ends.push_back(std::numeric_limits<int64_t>::max());
        a.axes.push_back(ax);
        a.steps.push_back(1);
        continue;
      }
      return unsupported("slicing the batch dimension");
    }
    if (s < 0) s += d;
    if (e < 0) e += d;
    int64_t len;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      len = std::max<int64_t>(0, (e - s + st - 1) / st);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      len = std::max<int64_t>(0, (s - e - st - 1) / (-st));
    }
    out[static_cast<std::size_t>(ax)] = len;
    a.starts.push_back(s);
    // A negative step that runs through index 0 ends at -1, "before the first element": stored
    // as -1, the run-time geometry (slice_geometry, which counts negative ends from the back
    // again) read it as the last element and the slice came out empty (torch.flip from dynamo).
    a.ends.push_back(st < 0 && e < 0 ? std::numeric_limits<int64_t>::min() : e);
    a.axes.push_back(ax);
    a.steps.push_back(st);
  }
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_gather(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), r0));
  Dims const& x = c.dims(0);
  Dims const& i = c.dims(1);
  // Along the batch only with indices computed per micro-batch (they carry the batch themselves:
  // HF GPT-2's row · length + last position into logits flattened to [T·N, C]); indices fixed at
  // import would address other rows once the batch is split into micro-batches.
  bool const indices_batched = std::any_of(i.begin(), i.end(), [](int64_t d) { return d < 0; });
  if (x.at(static_cast<std::size_t>(axis)) < 0 && !indices_batched)
    return unsupported("gathering along the batch dimension with indices that do not follow the micro-batch");
  Dims out(x.begin(), x.begin() + axis);
  out.insert(out.end(), i.begin(), i.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  if (std::count_if(out.begin(), out.end(), [](int64_t d) { return d < 0; }) > 1)
    return unsupported("the gathered shape " + dims_str(out) + " would hold the batch size in two dimensions");
  k.typed = GatherAttrs{axis};
  k.data_inputs = {0, 1};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_expand(InferContext const& c) {
  Inferred k;
  ASSIGN_OR_RETURN(StaticValue const* s, c.static_input(1, "shape"));
  if (!s) return invalid_argument("the shape input is missing");
  Dims shape;
  for (std::size_t i = 0; i < s->i.size(); ++i) {
    int64_t const b = s->has_batch() ? s->b[i] : 0;
    if (b != 0 && s->i[i] != 0) return unsupported("an Expand dimension is the batch size plus a number");
    shape.push_back(b != 0 ? -b : s->i[i]);
  }
  // A model exported with a fixed batch size B spells the batch as the number B where x holds it
  // (HF's repeat_kv expands [B, kv, 1, T, d] to [B, kv, n_rep, T, d]): the batch, as in Reshape.
  Dims const& x = c.dims(0);
  int64_t const offset = static_cast<int64_t>(shape.size()) - static_cast<int64_t>(x.size());  // right-aligned
  for (int64_t k = std::max<int64_t>(0, -offset); k < static_cast<int64_t>(x.size()); ++k) {
    int64_t& d = shape[static_cast<std::size_t>(offset + k)];
    if (x[static_cast<std::size_t>(k)] < 0 && c.fixed_batch > 1 && d == c.fixed_batch)
      d = x[static_cast<std::size_t>(k)];
  }
  ASSIGN_OR_RETURN(Dims out, broadcast_dims(c.dims(0), shape));
  k.typed = ExpandAttrs{out};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

// ---- folding ----

Result<Folded> fold_gather(FoldContext const& c) {
  SymArray const& data = *c.in(0);
  ASSIGN_OR_RETURN(auto indices, plain_ints(c.in(1), "Gather indices"));
  int64_t const r = static_cast<int64_t>(data.dims.size());
  int64_t const axis = normalised_axis(c.attr_int("axis", 0), r);
  if (axis < 0 || axis >= r) return invalid_argument(c.where() + ": axis out of range");
  int64_t const outer = fold_numel({data.dims.begin(), data.dims.begin() + axis});
  int64_t const inner = fold_numel({data.dims.begin() + axis + 1, data.dims.end()});
  int64_t const len = data.dims[axis];
  Dims dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), c.in(1)->dims.begin(), c.in(1)->dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  Dims idx;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g : indices) {
      int64_t const gi = g < 0 ? g + len : g;
      if (gi < 0 || gi >= len) return invalid_argument(c.where() + ": index out of range");
      for (int64_t k = 0; k < inner; ++k) idx.push_back((o * len + gi) * inner + k);
    }
  return folded_one(take(data, dims, idx));
}

Result<Folded> fold_concat(FoldContext const& c) {
  std::vector<SymArray const*> parts;
  for (auto const* x : c.ins)
    if (x) parts.push_back(x);
  if (parts.empty()) return invalid_argument(c.where() + " has no inputs");
  int64_t const r = static_cast<int64_t>(parts[0]->dims.size());
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), r));
  SymArray out;
  out.dtype = parts[0]->dtype;
  out.dims = parts[0]->dims;
  out.dims[axis] = 0;
  bool anyb = false;
  for (auto const* p : parts) {
    // A malformed file may give parts of other ranks, shapes, kinds or element counts.
    bool fits = p->dims.size() == out.dims.size() && p->is_float() == out.is_float() &&
                fold_numel(p->dims) == static_cast<int64_t>(p->is_float() ? p->f.size() : p->i.size()) &&
                (!p->has_batch() || p->b.size() == p->i.size());
    for (std::size_t d = 0; fits && d < out.dims.size(); ++d)
      fits = static_cast<int64_t>(d) == axis || p->dims[d] == out.dims[d];
    if (!fits)
      return invalid_argument(c.where() + ": inputs " + dims_str(parts[0]->dims) + " and " + dims_str(p->dims) +
                              " cannot be concatenated along axis " + std::to_string(axis));
    out.dims[axis] += p->dims[axis];
    anyb |= p->has_batch();
  }
  int64_t const outer = fold_numel({out.dims.begin(), out.dims.begin() + axis});
  for (int64_t o = 0; o < outer; ++o)
    for (auto const* p : parts) {
      int64_t const chunk = fold_numel({p->dims.begin() + axis, p->dims.end()});
      for (int64_t k = o * chunk; k < (o + 1) * chunk; ++k) {
        if (out.is_float())
          out.f.push_back(p->is_float() ? p->f[k] : static_cast<double>(p->i[k]));
        else
          out.i.push_back(p->i[k]);
        if (anyb) out.b.push_back(p->has_batch() ? p->b[k] : 0);
      }
    }
  return folded_one(std::move(out));
}

Result<Folded> fold_transpose(FoldContext const& c) {
  SymArray const& a = *c.in(0);
  int64_t const r = static_cast<int64_t>(a.dims.size());
  Dims perm(r);
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto p = c.attr_ints("perm")) perm = *p;
  Dims dims(r);
  for (int64_t k = 0; k < r; ++k) dims[k] = a.dims[perm[k]];
  Dims const src_strides = row_major_strides(a.dims);
  Dims idx;
  Dims pos(r, 0);
  for (int64_t e = 0; e < a.numel(); ++e) {
    int64_t flat = 0;
    for (int64_t k = 0; k < r; ++k) flat += pos[k] * src_strides[perm[k]];
    idx.push_back(flat);
    for (int64_t k = r - 1; k >= 0; --k) {
      if (++pos[k] < dims[k]) break;
      pos[k] = 0;
    }
  }
  return folded_one(take(a, dims, idx));
}

Result<Folded> fold_expand(FoldContext const& c) {
  if (c.in(1) && c.in(1)->has_batch()) return Folded{};  // kept: expands to the batch at run time
  ASSIGN_OR_RETURN(auto shape, plain_ints(c.in(1), "Expand shape"));
  ASSIGN_OR_RETURN(auto dims, broadcast_dims(c.in(0)->dims, shape));
  if (fold_numel(dims) > kMaxFoldElements) return Folded{};
  return folded_one(take(*c.in(0), dims, broadcast_index(c.in(0)->dims, dims)));
}

Result<Folded> fold_slice(FoldContext const& c) {
  SymArray const& a = *c.in(0);
  int64_t const r = static_cast<int64_t>(a.dims.size());
  Dims starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts").value_or(Dims{});
    ends = c.attr_ints("ends").value_or(Dims{});
    axes = c.attr_ints("axes").value_or(Dims{});
  } else {
    ASSIGN_OR_RETURN(starts, plain_ints(c.in(1), "Slice starts"));
    ASSIGN_OR_RETURN(ends, plain_ints(c.in(2), "Slice ends"));
    if (c.in(3)) {
      ASSIGN_OR_RETURN(axes, plain_ints(c.in(3), "Slice axes"));
    }
    if (c.in(4)) {
      ASSIGN_OR_RETURN(steps, plain_ints(c.in(4), "Slice steps"));
    }
  }
  if (axes.empty())
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  Dims lo(r, 0), step(r, 1), dims = a.dims;
  if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
    return invalid_argument("starts, ends, axes and steps differ in length");
  for (std::size_t k = 0; k < axes.size(); ++k) {
    ASSIGN_OR_RETURN(int64_t const ax, checked_axis(axes[k], r));
    int64_t const d = a.dims[ax];
    int64_t s = starts[k], e = ends[k];
    int64_t const st = steps[k];
    if (st == 0) return invalid_argument(c.where() + " has step 0");
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      dims[ax] = std::max<int64_t>(0, (e - s + st - 1) / st);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      dims[ax] = std::max<int64_t>(0, (s - e + (-st) - 1) / (-st));
    }
    lo[ax] = s;
    step[ax] = st;
  }
  Dims const src_strides = row_major_strides(a.dims);
  Dims idx;
  Dims pos(r, 0);
  int64_t const count = fold_numel(dims);
  for (int64_t e = 0; e < count; ++e) {
    int64_t flat = 0;
    for (int64_t k = 0; k < r; ++k) flat += (lo[k] + pos[k] * step[k]) * src_strides[k];
    idx.push_back(flat);
    for (int64_t k = r - 1; k >= 0; --k) {
      if (++pos[k] < dims[k]) break;
      pos[k] = 0;
    }
  }
  return folded_one(take(a, dims, idx));
}

// ---- run shapes ----

Result<std::vector<Dims>> transpose_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(Dims const perm, transpose_perm(op, in.at(0)));
  Dims out;
  for (int64_t p : perm) out.push_back(in[0][static_cast<std::size_t>(p)]);
  return std::vector<Dims>{out};
}

Result<std::vector<Dims>> concat_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(ConcatShape s, concat_shape(op, in));
  return std::vector<Dims>{std::move(s.out_shape)};
}

Result<std::vector<Dims>> split_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(SplitShape const s, split_shape(op, in.at(0)));
  std::vector<Dims> outs;
  for (int64_t size : s.sizes) {
    outs.push_back(in[0]);
    outs.back()[static_cast<std::size_t>(s.axis)] = size;
  }
  return outs;
}

Result<std::vector<Dims>> slice_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(SliceGeometry s, slice_geometry(op, in.at(0)));
  return std::vector<Dims>{std::move(s.out_shape)};
}

Result<std::vector<Dims>> gather_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(GatherShape s, gather_shape(op, in.at(0), in.at(1)));
  return std::vector<Dims>{std::move(s.out_shape)};
}

Result<std::vector<Dims>> expand_run_shape(OpGraph const& graph, Op const& op, std::vector<Dims> const& in,
                                           int64_t batch) {
  ASSIGN_OR_RETURN(Dims out, expand_output_shape(graph, op, in.at(0), batch));
  return std::vector<Dims>{std::move(out)};
}

// Gather's backward scatters into the data's shape at the saved indices.
void gather_saved(CostContext const& c, SavedForBackward& s) { c.save(s, c.input(1)); }

}  // namespace

void register_move_ops(OpTable& t) {
  define(t, "Transpose", {.infer = infer_transpose, .fold = fold_transpose, .run_shape = transpose_run_shape});
  define(t, "Concat", {.infer = infer_concat, .fold = fold_concat, .run_shape = concat_run_shape});
  // Split's sizes, Slice's starts/ends/axes/steps, Gather's indices and Expand's shape get no gradient.
  define(t, "Split", {.infer = infer_split, .run_shape = split_run_shape, .grad_free = inputs_after_first()});
  define(t, "Slice",
         {.infer = infer_slice, .fold = fold_slice, .run_shape = slice_run_shape, .grad_free = inputs_after_first()});
  define(t, "Gather",
         {.infer = infer_gather,
          .fold = fold_gather,
          .saved = gather_saved,
          .run_shape = gather_run_shape,
          .grad_free = inputs_after_first()});
  define(
      t, "Expand",
      {.infer = infer_expand, .fold = fold_expand, .run_shape = expand_run_shape, .grad_free = inputs_after_first()});
}

}  // namespace gp::graph::ops
