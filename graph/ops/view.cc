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
  if (type == "Identity" || type == "Cast" || type == "Dropout") {
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

}  // namespace

void register_view_ops(OpTable& t) {
  define(t, "Flatten", infer_flatten);
  define(t, "Identity", infer_identity);
  define(t, "Reshape", infer_reshape);
  define(t, "Dropout", infer_dropout);
  define(t, "Squeeze", infer_squeeze_unsqueeze);
  define(t, "Unsqueeze", infer_squeeze_unsqueeze);
  define(t, "Cast", infer_cast);
}

}  // namespace gp::graph::ops
