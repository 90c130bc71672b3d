// Reductions, the softmax family, CumSum, ArgMax/ArgMin, TopK: import-time inference (graph/ops/infer.h),
// the shape functions the backends share (graph/ops/reduce.h) and cost (graph/ops/cost.h).
#include "graph/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/ops/fold.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {

Result<ReduceShape> reduce_shape(Op const& op, std::vector<int64_t> const& input_shape) {
  RETURN_IF_ERROR(require_typed<ReduceAttrs>(op));
  auto const& a = std::get<ReduceAttrs>(op.typed);
  int64_t const rank = static_cast<int64_t>(input_shape.size());
  ReduceShape s;
  if (a.noop) {
    s.noop = true;
    s.perm.resize(static_cast<std::size_t>(rank));
    std::iota(s.perm.begin(), s.perm.end(), 0);
    s.out_shape = input_shape;
    s.rows = numel_of(input_shape);
    return s;
  }
  // No axes (a hand-built op): every axis, as ONNX's default.
  std::vector<bool> reduced(static_cast<std::size_t>(rank), a.axes.empty());
  for (int64_t ax : a.axes) {
    int64_t const n = normalised_axis(ax, rank);
    if (n < 0 || n >= rank)
      return op_error(op, "axis " + std::to_string(ax) + " is out of range for input " + dims_string(input_shape));
    reduced[n] = true;
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[i]) {
      if (a.keepdims) s.out_shape.push_back(1);
      continue;
    }
    s.perm.push_back(i);
    s.rows *= input_shape[i];
    s.out_shape.push_back(input_shape[i]);
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) continue;
    s.perm.push_back(i);
    s.axes.push_back(i);
    s.cols *= input_shape[i];
  }
  return s;
}

Result<AxisSplit> axis_split(Op const& op, int64_t axis, std::vector<int64_t> const& input_shape) {
  int64_t const rank = static_cast<int64_t>(input_shape.size());
  AxisSplit s;
  s.axis = normalised_axis(axis, rank);
  if (s.axis < 0 || s.axis >= rank)
    return op_error(op, "axis " + std::to_string(axis) + " is out of range for input " + dims_string(input_shape));
  for (int64_t i = 0; i < s.axis; ++i) s.outer *= input_shape[i];
  s.dim = input_shape[s.axis];
  for (int64_t i = s.axis + 1; i < rank; ++i) s.inner *= input_shape[i];
  return s;
}

std::vector<int64_t> arg_reduce_shape(AxisSplit const& s, std::vector<int64_t> const& input_shape, bool keepdims) {
  std::vector<int64_t> out = input_shape;
  if (keepdims)
    out[s.axis] = 1;
  else
    out.erase(out.begin() + s.axis);
  return out;
}

Result<TopKShape> topk_shape(Op const& op, std::vector<int64_t> const& input_shape) {
  RETURN_IF_ERROR(require_typed<TopKAttrs>(op));
  auto const& a = std::get<TopKAttrs>(op.typed);
  TopKShape s;
  ASSIGN_OR_RETURN(s.split, axis_split(op, a.axis, input_shape));
  if (a.k < 0 || a.k > s.split.dim)
    return op_error(op, "k = " + std::to_string(a.k) + " is outside [0, " + std::to_string(s.split.dim) +
                            "], the size of axis " + std::to_string(s.split.axis) + " of input " +
                            dims_string(input_shape));
  s.k = a.k;
  s.out_shape = input_shape;
  s.out_shape[static_cast<std::size_t>(s.split.axis)] = a.k;
  return s;
}

namespace {

// Every Reduce*: axes from the attribute (before opset 18; ReduceSum before 13) or the second input.
Result<Inferred> infer_reduce(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ReduceAttrs a;
  a.keepdims = c.attr_int("keepdims", 1) != 0;
  Dims axes;
  if (auto v = c.attr_ints("axes")) {
    axes = *v;
  } else if (c.has(1) && std::find(c.dims(1).begin(), c.dims(1).end(), 0) != c.dims(1).end()) {
    // An empty axes tensor: its value is known even when the model feeds it at run time.
  } else {
    ASSIGN_OR_RETURN(axes, c.static_ints(1, "axes"));
  }
  k.data_inputs = {0};
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) {
    a.noop = true;
    k.typed = a;
    k.outs.push_back({c.dtype(0), c.dims(0)});
    return k;
  }
  if (axes.empty()) {
    axes.resize(static_cast<std::size_t>(r0));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& ax : axes) {
    ASSIGN_OR_RETURN(ax, checked_axis(ax, r0));
  }
  std::sort(axes.begin(), axes.end());
  if (auto dup = std::adjacent_find(axes.begin(), axes.end()); dup != axes.end())
    return invalid_argument("axes name axis " + std::to_string(*dup) + " twice; list each axis once");
  Dims out;
  for (int64_t i = 0; i < r0; ++i) {
    bool const reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced)
      out.push_back(c.dims(0)[i]);
    else if (a.keepdims)
      out.push_back(1);
  }
  a.axes = axes;
  k.typed = a;
  k.outs.push_back({c.dtype(0), out});
  return k;
}

// Softmax, LogSoftmax, Hardmax.
Result<Inferred> infer_softmax(InferContext const& c) {
  int64_t const r0 = c.rank(0);
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", c.opset < 13 ? 1 : -1), r0));
  if (c.opset < 13 && axis != r0 - 1)
    return unsupported(c.type + " before opset 13 normalises over all axes from " + std::to_string(axis) +
                       " together; graphpipe supports one axis: re-export with opset 13 or later");
  return like_input(c, SoftmaxAttrs{axis});
}

Result<Inferred> infer_cumsum(InferContext const& c) {
  ASSIGN_OR_RETURN(Dims const axis, c.static_ints(1, "axis"));
  if (axis.size() != 1)
    return invalid_argument("the axis input holds " + std::to_string(axis.size()) +
                            " values; CumSum needs exactly one (a scalar)");
  CumSumAttrs a;
  ASSIGN_OR_RETURN(a.axis, checked_axis(axis[0], c.rank(0)));
  a.exclusive = c.attr_int("exclusive", 0) != 0;
  a.reverse = c.attr_int("reverse", 0) != 0;
  return like_input(c, a);
}

// ArgMax, ArgMin: int64 indices.
Result<Inferred> infer_arg_reduce(InferContext const& c) {
  Inferred k;
  ArgReduceAttrs a;
  ASSIGN_OR_RETURN(a.axis, checked_axis(c.attr_int("axis", 0), c.rank(0)));
  a.keepdims = c.attr_int("keepdims", 1) != 0;
  a.select_last_index = c.attr_int("select_last_index", 0) != 0;
  Dims out = c.dims(0);
  if (a.keepdims)
    out[a.axis] = 1;
  else
    out.erase(out.begin() + a.axis);
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({DType::kInt64, out});
  return k;
}

// TopK: the k largest (or smallest) elements along one axis and their int64 indices. k comes from
// the K input (from opset 10; it must be known at import, since it sets the output's shape) or the
// attribute (before). Along the batch axis it would pick across samples, which micro-batching changes.
Result<Inferred> infer_topk(InferContext const& c) {
  TopKAttrs a;
  ASSIGN_OR_RETURN(a.axis, checked_axis(c.attr_int("axis", -1), c.rank(0)));
  if (c.opset < 10) {
    a.k = c.attr_int("k", -1);
    if (a.k < 0) return invalid_argument("TopK before opset 10 needs its k attribute (a count of at least 0)");
  } else {
    ASSIGN_OR_RETURN(Dims const k, c.static_ints(1, "K (the number of elements TopK keeps)"));
    if (k.size() != 1)
      return invalid_argument("the K input holds " + std::to_string(k.size()) + " values; TopK needs exactly one");
    a.k = k[0];
  }
  a.largest = c.attr_int("largest", 1) != 0;  // `sorted` needs nothing: the outputs are always in order
  int64_t const dim = c.dims(0)[static_cast<std::size_t>(a.axis)];
  if (dim < 0)
    return unsupported("TopK along the batch dimension (axis " + std::to_string(a.axis) +
                       "): micro-batching would change which samples' elements are picked");
  if (a.k < 0 || a.k > dim)
    return invalid_argument("k = " + std::to_string(a.k) + " is outside [0, " + std::to_string(dim) +
                            "], the size of axis " + std::to_string(a.axis) + " of input " + dims_str(c.dims(0)));
  Dims out = c.dims(0);
  out[static_cast<std::size_t>(a.axis)] = a.k;
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  k.outs.push_back({DType::kInt64, out});
  return k;
}

Result<std::vector<Dims>> topk_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(TopKShape s, topk_shape(op, in.at(0)));
  return std::vector<Dims>{s.out_shape, s.out_shape};
}

// The backward scatters the output gradient to the indices (output 1) it keeps.
void save_topk_indices(CostContext const& c, SavedForBackward& s) {
  if (c.op.outputs.size() > 1) c.save(s, c.op.outputs[1]);
}

// Reduce{Sum,Mean,Max,Min,Prod} over values known at import time: BEiT's relative position index
// sums its coordinates (relative_coords.sum(-1)) before a ScatterND that needs it static. Integers
// exactly (Mean is left to run), floats in double and rounded to float32 for a float32 result; a
// value holding the batch size, or too large, is left to run.
Result<Folded> fold_reduce(FoldContext const& c) {
  SymArray const* x = c.in(0);
  if (x == nullptr || x->has_batch() || fold_numel(x->dims) > kMaxFoldElements) return Folded{};
  std::string_view const t = c.type;
  bool const mean = t == "ReduceMean";
  if (mean && !x->is_float()) return Folded{};
  int64_t const r = static_cast<int64_t>(x->dims.size());
  Dims axes;
  if (auto v = c.attr_ints("axes")) {
    axes = *v;
  } else if (c.in(1) != nullptr) {
    ASSIGN_OR_RETURN(axes, plain_ints(c.in(1), "axes"));
  }
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) return folded_one(*x);
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  }
  std::vector<bool> reduced(static_cast<std::size_t>(r), false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t const n, checked_axis(a, r));
    reduced[static_cast<std::size_t>(n)] = true;
  }
  // Each input element's output position: its coordinates with the reduced ones dropped.
  bool const keepdims = c.attr_int("keepdims", 1) != 0;
  Dims kept, out_dims;
  for (int64_t d = 0; d < r; ++d) {
    auto const u = static_cast<std::size_t>(d);
    if (!reduced[u]) kept.push_back(x->dims[u]);
    if (!reduced[u] || keepdims) out_dims.push_back(reduced[u] ? 1 : x->dims[u]);
  }
  int64_t const n_out = fold_numel(kept), n_in = fold_numel(x->dims);
  if (n_in == 0) return Folded{};  // an empty reduction's identity is left to the kernels
  Dims const out_strides = row_major_strides(kept);
  std::vector<int64_t> where(static_cast<std::size_t>(n_in));
  {
    Dims pos(static_cast<std::size_t>(r), 0);
    for (int64_t e = 0; e < n_in; ++e) {
      int64_t o = 0;
      for (int64_t d = 0, k = 0; d < r; ++d)
        if (!reduced[static_cast<std::size_t>(d)]) o += pos[static_cast<std::size_t>(d)] * out_strides[k++];
      where[static_cast<std::size_t>(e)] = o;
      for (int64_t d = r - 1; d >= 0; --d) {
        if (++pos[static_cast<std::size_t>(d)] < x->dims[static_cast<std::size_t>(d)]) break;
        pos[static_cast<std::size_t>(d)] = 0;
      }
    }
  }
  SymArray out;
  out.dtype = x->dtype;
  out.dims = out_dims;
  std::vector<bool> seen(static_cast<std::size_t>(n_out), false);
  if (x->is_float()) {
    out.f.assign(static_cast<std::size_t>(n_out), t == "ReduceProd" ? 1.0 : 0.0);
    for (int64_t e = 0; e < n_in; ++e) {
      auto const o = static_cast<std::size_t>(where[static_cast<std::size_t>(e)]);
      double const v = x->f[static_cast<std::size_t>(e)];
      double& acc = out.f[o];
      if (t == "ReduceMax" || t == "ReduceMin")  // a NaN wins, as in the kernels
        acc = !seen[o] || std::isnan(v) ? v
              : std::isnan(acc)         ? acc
              : t == "ReduceMax"        ? std::max(acc, v)
                                        : std::min(acc, v);
      else
        acc = t == "ReduceProd" ? acc * v : acc + v;
      seen[o] = true;
    }
    double const count = static_cast<double>(n_in) / static_cast<double>(std::max<int64_t>(n_out, 1));
    for (double& v : out.f) {
      if (mean) v /= count;
      if (out.dtype == DType::kFloat32) v = static_cast<float>(v);
    }
    return folded_one(std::move(out));
  }
  out.i.assign(static_cast<std::size_t>(n_out), t == "ReduceProd" ? 1 : 0);
  for (int64_t e = 0; e < n_in; ++e) {
    auto const o = static_cast<std::size_t>(where[static_cast<std::size_t>(e)]);
    int64_t const v = x->i[static_cast<std::size_t>(e)];
    int64_t& acc = out.i[o];
    if (t == "ReduceMax" || t == "ReduceMin") {
      acc = !seen[o] ? v : t == "ReduceMax" ? std::max(acc, v) : std::min(acc, v);
    } else if (t == "ReduceProd" ? __builtin_mul_overflow(acc, v, &acc) : __builtin_add_overflow(acc, v, &acc)) {
      return shape_overflow();
    }
    seen[o] = true;
  }
  return folded_one(std::move(out));
}

Result<std::vector<Dims>> reduce_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(ReduceShape s, reduce_shape(op, in.at(0)));
  return std::vector<Dims>{std::move(s.out_shape)};
}

}  // namespace

void register_reduce_ops(OpTable& t) {
  // Reductions cost per input element, forward and backward alike.
  auto reduction = [](InferFn infer, ElemCost per_input_element) {
    return OpDef{.infer = infer, .cost = cost_per_input_element, .per_element = per_input_element};
  };
  auto reduce = [&](ElemCost per_input_element, FoldFn fold = nullptr) {
    OpDef d = reduction(infer_reduce, per_input_element);
    d.run_shape = reduce_run_shape;
    d.fold = fold;
    return d;
  };
  // Every Reduce*'s axes input (opset 18; ReduceSum's since 13) gets no gradient.
  for (char const* r : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"})
    define(t, r, with_grad_free(reduce({1, 1}, fold_reduce), inputs_after_first()));
  for (char const* r : {"ReduceL1", "ReduceLogSum"}) define(t, r, with_grad_free(reduce({1, 1}), inputs_after_first()));
  define(t, "ReduceL2", with_grad_free(reduce({2, 2}), inputs_after_first()));
  define(t, "ReduceSumSquare", with_grad_free(reduce({2, 2}), inputs_after_first()));
  define(t, "ReduceLogSumExp", with_grad_free(reduce({4, 4}), inputs_after_first()));
  define(t, "Softmax", elementwise_op(infer_softmax, {5, 4}, save_output0));
  define(t, "LogSoftmax", elementwise_op(infer_softmax, {5, 5}));
  define(t, "Hardmax", elementwise_op(infer_softmax, {1, 0}));
  define(t, "CumSum", with_grad_free(elementwise_op(infer_cumsum, {1, 1}), inputs_after_first()));  // the axis
  define(t, "ArgMax", with_grad_free(reduction(infer_arg_reduce, {1, 0}), every_input()));
  define(t, "ArgMin", with_grad_free(reduction(infer_arg_reduce, {1, 0}), every_input()));
  OpDef topk = reduction(infer_topk, {2, 1});
  topk.saved = save_topk_indices;
  topk.run_shape = topk_run_shape;
  topk.grad_free = inputs_after_first();  // K
  define(t, "TopK", std::move(topk));
}

}  // namespace gp::graph::ops
