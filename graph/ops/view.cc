// Views: import-time inference (graph/ops/infer.h), constant folding (graph/ops/fold.h), Dropout's
// cost (graph/ops/cost.h) and the output shape of a run. Dropout's family also holds the other
// random ops (RandomUniformLike, RandomNormalLike, Bernoulli), drawn from the same hash.
#include "graph/ops/view.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

#include <algorithm>

namespace gp::graph::ops {

std::optional<std::vector<int64_t>> graph_output_shape(OpGraph const& graph, Op const& op,
                                                       std::vector<int64_t> const& input_shape) {
  int64_t const n = batch_of(graph.tensor(op.inputs[0]).shape.dims, input_shape);
  if (n <= 0) return std::nullopt;
  auto out = concrete_shape(graph.tensor(op.outputs[0]).shape.dims, n);
  if (!out || numel_of(*out) != numel_of(input_shape)) return std::nullopt;
  return out;
}

namespace {

Result<std::vector<int64_t>> reshape_shape(OpGraph const& graph, Op const& op, std::vector<int64_t> const& s) {
  if (auto from_graph = graph_output_shape(graph, op, s)) return *from_graph;
  auto const& attrs = std::get<ReshapeAttrs>(op.typed);
  std::vector<int64_t> out = attrs.shape;
  int infer = -1;
  int64_t known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !attrs.allowzero) {
      if (i >= s.size()) return op_error(op, "shape copies a dimension the input lacks");
      out[i] = s[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) return op_error(op, "shape has two -1 entries");
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) out[infer] = known == 0 ? 0 : numel_of(s) / known;
  return out;
}

}  // namespace

Result<std::vector<int64_t>> view_output_shape(OpGraph const& graph, Op const& op,
                                               std::vector<int64_t> const& input_shape) {
  std::string const& type = op.type;
  std::vector<int64_t> const& s = input_shape;
  int64_t const rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> out;
  if (type == "Identity" || type == "Cast" || type == "Dropout" || type == "RandomUniformLike" ||
      type == "RandomNormalLike" || type == "Bernoulli") {
    out = s;
  } else if (type == "Flatten") {
    int64_t const axis = normalised_axis(std::get<FlattenAttrs>(op.typed).axis, rank);
    if (axis < 0 || axis > rank) return op_error(op, "axis out of range for input " + dims_string(s));
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= s[i];
    out = {a, b};
  } else if (type == "Squeeze") {
    auto const& axes = std::get<SqueezeAttrs>(op.typed).axes;
    for (int64_t i = 0; i < rank; ++i) {
      bool const listed = std::find(axes.begin(), axes.end(), i) != axes.end() ||
                          std::find(axes.begin(), axes.end(), i - rank) != axes.end();
      if (listed && s[i] != 1)
        return op_error(op, "cannot squeeze axis " + std::to_string(i) + " of " + dims_string(s));
      if (!(listed || (axes.empty() && s[i] == 1))) out.push_back(s[i]);
    }
  } else if (type == "Unsqueeze") {
    auto axes = std::get<UnsqueezeAttrs>(op.typed).axes;
    int64_t const r = rank + static_cast<int64_t>(axes.size());
    for (auto& a : axes) a = normalised_axis(a, r);
    std::size_t k = 0;
    for (int64_t i = 0; i < r; ++i) {
      if (std::find(axes.begin(), axes.end(), i) != axes.end()) {
        out.push_back(1);
      } else {
        if (k >= s.size()) return op_error(op, "bad axes for input " + dims_string(s));
        out.push_back(s[k++]);
      }
    }
  } else {  // Reshape
    ASSIGN_OR_RETURN(out, reshape_shape(graph, op, s));
  }
  if (numel_of(out) != numel_of(s))
    return op_error(op, "cannot reshape " + dims_string(s) + " into " + dims_string(out));
  return out;
}

Status view_check(Op const& op, OpGraph const&) {
  if (op.type == "Flatten") return require_typed<FlattenAttrs>(op);
  if (op.type == "Squeeze") return require_typed<SqueezeAttrs>(op);
  if (op.type == "Unsqueeze") return require_typed<UnsqueezeAttrs>(op);
  if (op.type == "Reshape") return require_typed<ReshapeAttrs>(op);
  return Status::ok();
}

Status cast_check(Op const& op, OpGraph const& graph) {
  RETURN_IF_ERROR(require_typed<CastAttrs>(op));
  DType const from = graph.tensor(op.inputs[0]).dtype;
  int32_t const to = std::get<CastAttrs>(op.typed).to;
  if (from != DType::kFloat32 || to != 1)
    return unsupported("only float32 → float32 casts are supported (got " + std::string(dtype_name(from)) +
                       " → ONNX type " + std::to_string(to) + ")");
  return Status::ok();
}

Status random_check(Op const& op, OpGraph const& graph) {
  RETURN_IF_ERROR(require_typed<RandomAttrs>(op));
  DType const to = graph.tensor(op.outputs.at(0)).dtype;
  bool const bernoulli = std::get<RandomAttrs>(op.typed).kind == RandomKind::kBernoulli;
  if (bernoulli && graph.tensor(op.inputs.at(0)).dtype != DType::kFloat32)
    return unsupported("Bernoulli probabilities must be float32");
  if (to != DType::kFloat32 && !(bernoulli && (to == DType::kBool || to == DType::kUInt8)))
    return unsupported("output dtype " + std::string(dtype_name(to)) + " (float32 only)");
  return Status::ok();
}

// ---- import-time inference ----
namespace {

// The importer rewires Identity's readers to its input; the rule exists for the table.
Result<Inferred> infer_identity(InferContext const& c) { return like_input(c); }

Result<Inferred> infer_flatten(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 1), r0, /*split_point=*/true));
  ASSIGN_OR_RETURN(int64_t a, prod_dims(c.dims(0), 0, static_cast<std::size_t>(axis)));
  ASSIGN_OR_RETURN(int64_t b, prod_dims(c.dims(0), static_cast<std::size_t>(axis), c.dims(0).size()));
  k.typed = FlattenAttrs{axis};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), {a, b}});
  return k;
}

Result<Inferred> infer_reshape(InferContext const& c) {
  Inferred k;
  ASSIGN_OR_RETURN(StaticValue const* s, c.static_input(1, "shape"));
  if (!s) return invalid_argument("the shape input is missing");
  bool const allowzero = c.attr_int("allowzero", 0) != 0;
  Dims const& x = c.dims(0);
  Dims out;
  int infer = -1;
  for (std::size_t i = 0; i < s->i.size(); ++i) {
    int64_t const b = s->has_batch() ? s->b[i] : 0;
    int64_t const v = s->i[i];
    if (b != 0) {
      if (v != 0) return unsupported("a reshape dimension is the batch size plus a number");
      out.push_back(-b);
    } else if (v == 0 && !allowzero) {
      if (i >= x.size())
        return invalid_argument("shape copies dimension " + std::to_string(i) + " that the input lacks");
      out.push_back(x[i]);
    } else if (v == -1) {
      infer = static_cast<int>(i);
      out.push_back(1);
    } else {
      out.push_back(v);
    }
  }
  // A model exported with a fixed batch size B spells the batch as the number B (or a
  // multiple of it) in its first reshape dimension.
  bool const out_has_batch = std::any_of(out.begin(), out.end(), [](int64_t d) { return d < 0; });
  if (!out_has_batch && c.fixed_batch > 0 && !out.empty() && infer != 0 && out[0] > 0 && out[0] % c.fixed_batch == 0 &&
      std::any_of(x.begin(), x.end(), [](int64_t d) { return d < 0; }))
    out[0] = -(out[0] / c.fixed_batch);
  static constexpr int64_t kTooLarge = int64_t{1} << 50;  // elements no real tensor has; keeps the products below exact
  auto split = [](Dims const& d) {  // (batch coefficient, static product), each capped at kTooLarge
    int64_t b = 0, p = 1;
    for (int64_t v : d) {
      if (v < 0)
        b = v < -kTooLarge ? kTooLarge : -v;
      else if (__builtin_mul_overflow(p, v, &p) || p > kTooLarge)
        p = kTooLarge;
    }
    return std::pair{b, p};
  };
  auto [ib, ip] = split(x);
  auto [ob, op] = split(out);
  // Elements per sample-batch unit: the static product times the batch coefficient (each below
  // 2^50, so their product is checked too).
  int64_t in_total = 0, out_total = 0;
  if (ib == kTooLarge || ip == kTooLarge || ob == kTooLarge || op == kTooLarge ||
      __builtin_mul_overflow(ip, std::max<int64_t>(ib, 1), &in_total) ||
      __builtin_mul_overflow(op, std::max<int64_t>(ob, 1), &out_total))
    return invalid_argument("cannot reshape " + dims_str(x) + " to " + dims_str(out) + ": too many elements");
  if (infer >= 0) {
    if (ib > 0 && ob == 0) {
      if (op == 0 || in_total % op) return invalid_argument("cannot infer the -1 dimension of " + dims_str(out));
      out[infer] = -(in_total / op);
    } else if (ib == 0 && ob > 0) {
      return invalid_argument("the shape puts the batch size into a tensor that has none");
    } else {
      if (out_total == 0 || in_total % out_total)
        return invalid_argument("cannot infer the -1 dimension of " + dims_str(out) + " from " + dims_str(x));
      out[infer] = in_total / out_total;
    }
    std::tie(ob, op) = split(out);
    if (__builtin_mul_overflow(op, std::max<int64_t>(ob, 1), &out_total))
      return invalid_argument("cannot reshape " + dims_str(x) + " to " + dims_str(out) + ": too many elements");
  }
  if ((ib > 0) != (ob > 0) || in_total != out_total)
    return invalid_argument("cannot reshape " + dims_str(x) + " to " + dims_str(out));
  k.typed = ReshapeAttrs{out, allowzero};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_dropout(InferContext const& c) {
  DropoutAttrs a;
  a.ratio = static_cast<float>(c.attr_float("ratio", 0.5));
  if (c.opset >= 12) {
    ASSIGN_OR_RETURN(StaticValue const* ratio, c.static_input(1, "ratio"));
    if (ratio) a.ratio = static_cast<float>(ratio->is_float() ? ratio->f.at(0) : static_cast<double>(ratio->i.at(0)));
    ASSIGN_OR_RETURN(StaticValue const* mode, c.static_input(2, "training_mode"));
    if (mode) a.training = (mode->is_float() ? mode->f.at(0) != 0 : mode->i.at(0) != 0);
  } else {
    a.training = c.outputs.size() > 1 && !c.outputs[1].empty();
  }
  return like_input(c, a);
}

// RandomUniformLike, RandomNormalLike (input 0 gives the shape; its values are not read) and
// Bernoulli (input 0 holds the probabilities): the draws of torchvision's stochastic depth. Output
// float32 (Bernoulli also bool); never folded, since a draw is not a constant.
Result<Inferred> infer_random(InferContext const& c) {
  if (!c.has(0)) return invalid_argument("the input is missing");
  RandomAttrs a;
  if (c.type == "RandomUniformLike") {
    a.kind = RandomKind::kUniform;
    a.a = static_cast<float>(c.attr_float("low", 0.0));
    a.b = static_cast<float>(c.attr_float("high", 1.0));
    if (!(a.a <= a.b)) return invalid_argument("low " + std::to_string(a.a) + " exceeds high " + std::to_string(a.b));
  } else if (c.type == "RandomNormalLike") {
    a.kind = RandomKind::kNormal;
    a.a = static_cast<float>(c.attr_float("mean", 0.0));
    a.b = static_cast<float>(c.attr_float("scale", 1.0));
  } else {
    a.kind = RandomKind::kBernoulli;
    if (c.dtype(0) != DType::kFloat32)
      return unsupported("Bernoulli probabilities of dtype " + std::string(dtype_name(c.dtype(0))) + " (float32 only)");
  }
  int64_t const to = c.attr_int("dtype", onnx_of_dtype(c.dtype(0)));
  ASSIGN_OR_RETURN(DType const dt, dtype_of_onnx(to));
  bool const bool_ok = a.kind == RandomKind::kBernoulli && (dt == DType::kBool || dt == DType::kUInt8);
  if (dt != DType::kFloat32 && !bool_ok)
    return unsupported(c.type + " of dtype " + std::string(dtype_name(dt)) + " (float32" +
                       (a.kind == RandomKind::kBernoulli ? " or bool" : "") + " only)");
  a.dtype = static_cast<int32_t>(to);
  if (c.attrs.count("seed")) {
    a.has_seed = true;
    a.seed = static_cast<float>(c.attr_float("seed", 0.0));
  }
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({dt, c.dims(0)});
  return k;
}

Result<Inferred> infer_squeeze_unsqueeze(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  Dims axes;
  if (auto v = c.attr_ints("axes"))
    axes = *v;
  else {
    ASSIGN_OR_RETURN(axes, c.static_ints(1, "axes"));
  }
  Dims out;
  if (c.type == "Unsqueeze") {
    int64_t const r = r0 + static_cast<int64_t>(axes.size());
    for (int64_t& ax : axes) {
      ASSIGN_OR_RETURN(ax, checked_axis(ax, r));
    }
    std::sort(axes.begin(), axes.end());
    out = c.dims(0);
    for (int64_t ax : axes) out.insert(out.begin() + std::min<int64_t>(ax, static_cast<int64_t>(out.size())), 1);
    k.typed = UnsqueezeAttrs{axes};
  } else {
    for (int64_t& ax : axes) {
      ASSIGN_OR_RETURN(ax, checked_axis(ax, r0));
    }
    if (axes.empty())
      for (int64_t i = 0; i < r0; ++i)
        if (c.dims(0)[i] == 1) axes.push_back(i);
    std::sort(axes.begin(), axes.end());
    for (int64_t i = 0; i < r0; ++i) {
      if (!std::binary_search(axes.begin(), axes.end(), i))
        out.push_back(c.dims(0)[i]);
      else if (c.dims(0)[i] != 1)
        return invalid_argument("squeezing dimension " + std::to_string(i) + " of size " + dim_str(c.dims(0)[i]));
    }
    k.typed = SqueezeAttrs{axes};
  }
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_cast(InferContext const& c) {
  Inferred k;
  int64_t const to = c.attr_int("to", 1);
  ASSIGN_OR_RETURN(DType dt, dtype_of_onnx(to));
  k.typed = CastAttrs{static_cast<int32_t>(to)};
  k.data_inputs = {0};
  k.outs.push_back({dt, c.dims(0)});
  return k;
}

// ---- folding ----

// ONNX element types folding handles; others (float16, ...) are left to run.
std::optional<DType> foldable_dtype(int64_t onnx_type) {
  switch (onnx_type) {
    case 1:
      return DType::kFloat32;
    case 11:
      return DType::kFloat64;
    case 7:
      return DType::kInt64;
    case 6:
      return DType::kInt32;
    case 3:
      return DType::kInt8;
    case 2:
      return DType::kUInt8;
    case 9:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

SymArray cast_to(SymArray const& a, DType to) {
  SymArray out;
  out.dtype = to;
  out.dims = a.dims;
  bool const to_float = is_float_dtype(to);
  if (a.is_float() && to_float) {
    out.f = a.f;
  } else if (a.is_float()) {
    for (double x : a.f) out.i.push_back(to == DType::kBool ? (x != 0) : to_int_saturating(x));
  } else if (to_float) {
    for (int64_t x : a.i) out.f.push_back(static_cast<double>(x));
  } else {
    out.i = a.i;
    if (to == DType::kBool)
      for (std::size_t k = 0; k < out.i.size(); ++k) out.i[k] = (out.i[k] != 0 || (!a.b.empty() && a.b[k] != 0));
    else
      out.b = a.b;
  }
  return out;
}

Result<Folded> fold_identity(FoldContext const& c) { return folded_one(*c.in(0)); }

Result<Folded> fold_cast(FoldContext const& c) {
  std::optional<DType> const to = foldable_dtype(c.attr_int("to", 1));
  if (!to) return Folded{};
  if (is_float_dtype(*to) && c.in(0)->has_batch()) return unsupported("casting the batch size to a float");
  return folded_one(cast_to(*c.in(0), *to));
}

// Axes from the attribute (older opsets) or the second input (newer ones).
Result<std::optional<Dims>> fold_axes(FoldContext const& c) {
  if (auto a = c.attr_ints("axes")) return std::optional<Dims>(*a);
  if (c.in(1)) {
    ASSIGN_OR_RETURN(auto v, plain_ints(c.in(1), "axes"));
    return std::optional<Dims>(v);
  }
  return std::optional<Dims>{};
}

Result<Folded> fold_unsqueeze(FoldContext const& c) {
  SymArray out = *c.in(0);
  ASSIGN_OR_RETURN(auto axes, fold_axes(c));
  if (!axes) return invalid_argument(c.where() + " has no axes");
  int64_t const r = static_cast<int64_t>(out.dims.size() + axes->size());
  Dims a = *axes;
  for (int64_t& x : a) {
    ASSIGN_OR_RETURN(x, checked_axis(x, r));
  }
  std::sort(a.begin(), a.end());
  for (int64_t x : a) out.dims.insert(out.dims.begin() + std::min<int64_t>(x, out.dims.size()), 1);
  return folded_one(std::move(out));
}

Result<Folded> fold_squeeze(FoldContext const& c) {
  SymArray out = *c.in(0);
  ASSIGN_OR_RETURN(auto axes, fold_axes(c));
  int64_t const r = static_cast<int64_t>(out.dims.size());
  Dims keep;
  for (int64_t k = 0; k < r; ++k) {
    bool drop = !axes && out.dims[k] == 1;
    if (axes)
      for (int64_t x : *axes) drop |= normalised_axis(x, r) == k;
    if (!drop) keep.push_back(out.dims[k]);
  }
  out.dims = keep;
  return folded_one(std::move(out));
}

Result<Folded> reshaped(FoldContext const& c, SymArray out, Dims const& shape) {
  if (fold_numel(shape) != out.numel())
    return invalid_argument("Reshape '" + std::string(c.name) + "': element counts differ");
  out.dims = shape;
  return folded_one(std::move(out));
}

Result<Folded> fold_flatten(FoldContext const& c) {
  SymArray const& in = *c.in(0);
  int64_t const r = static_cast<int64_t>(in.dims.size());
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 1), r, /*split_point=*/true));
  Dims const shape = {fold_numel({in.dims.begin(), in.dims.begin() + axis}),
                      fold_numel({in.dims.begin() + axis, in.dims.end()})};
  return reshaped(c, in, shape);
}

Result<Folded> fold_reshape(FoldContext const& c) {
  SymArray const& in = *c.in(0);
  int64_t const total = in.numel();
  ASSIGN_OR_RETURN(Dims shape, plain_ints(c.in(1), "Reshape shape"));
  int64_t known = 1, infer = -1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0 && c.attr_int("allowzero", 0) == 0) shape[k] = in.dims.at(k);
    if (shape[k] == -1)
      infer = static_cast<int64_t>(k);
    else
      known *= shape[k];
  }
  if (infer >= 0) shape[infer] = known ? total / known : 0;
  return reshaped(c, in, shape);
}

// ---- run shape ----

Result<std::vector<Dims>> view_run_shape(OpGraph const& graph, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(Dims out, view_output_shape(graph, op, in.at(0)));
  return std::vector<Dims>{std::move(out)};
}

// ---- cost ----

// Dropout in training keeps its mask, one byte per element.
void dropout_saved(CostContext const& c, SavedForBackward& s) {
  auto const* a = std::get_if<DropoutAttrs>(&c.op.typed);
  if (a && a->training && a->ratio > 0) s.extra_bytes_per_sample = static_cast<int64_t>(c.elems(c.output0()));
}

}  // namespace

void register_view_ops(OpTable& t) {
  define(t, "Flatten", {.infer = infer_flatten, .fold = fold_flatten, .run_shape = view_run_shape});
  define(t, "Identity", {.infer = infer_identity, .fold = fold_identity, .run_shape = view_run_shape});
  // The shape, axes, ratio and training switch after the data get no gradient.
  define(
      t, "Reshape",
      {.infer = infer_reshape, .fold = fold_reshape, .run_shape = view_run_shape, .grad_free = inputs_after_first()});
  OpDef dropout = elementwise_op(infer_dropout, {2, 1}, dropout_saved);
  dropout.run_shape = view_run_shape;
  dropout.grad_free = inputs_after_first();
  define(t, "Dropout", std::move(dropout));
  for (char const* random : {"RandomUniformLike", "RandomNormalLike", "Bernoulli"}) {
    OpDef def = elementwise_op(infer_random, {4, 0});
    def.run_shape = view_run_shape;
    def.grad_free = every_input();  // draws: the input gives their shape (Bernoulli's, the probabilities)
    define(t, random, std::move(def));
  }
  define(t, "Squeeze",
         {.infer = infer_squeeze_unsqueeze,
          .fold = fold_squeeze,
          .run_shape = view_run_shape,
          .grad_free = inputs_after_first()});
  define(t, "Unsqueeze",
         {.infer = infer_squeeze_unsqueeze,
          .fold = fold_unsqueeze,
          .run_shape = view_run_shape,
          .grad_free = inputs_after_first()});
  define(t, "Cast", {.infer = infer_cast, .fold = fold_cast, .run_shape = view_run_shape});
}

}  // namespace gp::graph::ops
