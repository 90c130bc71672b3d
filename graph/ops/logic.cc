// Comparisons, boolean ops, bitwise ops, Where and Mod: import-time inference (graph/ops/infer.h), their folding
// and that of ConstantOfShape and Range (graph/ops/fold.h), and cost (graph/ops/cost.h). All broadcast
// their inputs the numpy way; comparisons and boolean ops give bool, Where and Mod their data's
// dtype. ConstantOfShape and Range build values from a shape: folded when static, kept as ops
// without data inputs when the shape or the limit holds the batch size.
#include "graph/ops/logic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "graph/ops/common.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Status same_dtypes(InferContext const& c, std::size_t first, std::size_t last) {
  for (std::size_t i = first + 1; i <= last; ++i)
    if (c.dtype(i) != c.dtype(first))
      return invalid_argument("inputs " + std::to_string(first) + " and " + std::to_string(i) + " have dtypes " +
                              dtype_name(c.dtype(first)) + " and " + dtype_name(c.dtype(i)) + "; they must match");
  return Status::ok();
}

Result<Inferred> infer_broadcast_logic(InferContext const& c) {
  std::string const& t = c.type;
  std::size_t const arity = t == "Not" ? 1 : t == "Where" ? 3 : 2;
  if (c.inputs.size() != arity)
    return invalid_argument("has " + std::to_string(c.inputs.size()) + " inputs; it takes " + std::to_string(arity));
  for (std::size_t i = 0; i < arity; ++i)
    if (!c.has(i)) return invalid_argument("input " + std::to_string(i) + " is missing");
  Inferred k;
  Dims out;
  for (std::size_t i = 0; i < arity; ++i) {
    ASSIGN_OR_RETURN(out, broadcast_dims(out, c.dims(i)));
  }
  DType dt = DType::kBool;
  if (t == "Not" || t == "And" || t == "Or" || t == "Xor") {
    for (std::size_t i = 0; i < arity; ++i)
      if (!is_boolean(c.dtype(i)))
        return invalid_argument("input " + std::to_string(i) + " has dtype " + dtype_name(c.dtype(i)) +
                                "; it must be bool");
  } else if (t == "Where") {
    if (!is_boolean(c.dtype(0)))
      return invalid_argument("the condition has dtype " + std::string(dtype_name(c.dtype(0))) + "; it must be bool");
    RETURN_IF_ERROR(same_dtypes(c, 1, 2));
    dt = c.dtype(1);
  } else {
    RETURN_IF_ERROR(same_dtypes(c, 0, 1));
    if (t == "Mod") {
      dt = c.dtype(0);
      k.typed = ModAttrs{c.attr_int("fmod", 0) != 0};
    }
  }
  k.data_inputs = all_slots(c);
  k.outs.push_back({dt, out});
  return k;
}

// The bitwise family (BitwiseAnd/Or/Xor/Not, BitShift): integers of one dtype, broadcast, giving
// that dtype. ONNX takes BitShift of unsigned integers only (its checker refuses the rest); the
// direction is its one attribute. None is folded: a value known at import runs as an op.
bool is_integer(DType d) { return !is_float_dtype(d) && d != DType::kBool; }

Result<Inferred> infer_bitwise(InferContext const& c) {
  std::size_t const arity = c.type == "BitwiseNot" ? 1 : 2;
  if (c.inputs.size() != arity)
    return invalid_argument("has " + std::to_string(c.inputs.size()) + " inputs; it takes " + std::to_string(arity));
  Dims out;
  for (std::size_t i = 0; i < arity; ++i) {
    if (!c.has(i)) return invalid_argument("input " + std::to_string(i) + " is missing");
    if (!is_integer(c.dtype(i)))
      return invalid_argument("input " + std::to_string(i) + " has dtype " + dtype_name(c.dtype(i)) +
                              "; it must be an integer");
    ASSIGN_OR_RETURN(out, broadcast_dims(out, c.dims(i)));
  }
  if (arity == 2) RETURN_IF_ERROR(same_dtypes(c, 0, 1));
  Inferred k;
  if (c.type == "BitShift") {
    std::string const direction = c.attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      return invalid_argument("direction is '" + direction + "'; it must be LEFT or RIGHT");
    k.typed = BitShiftAttrs{direction == "LEFT"};
  }
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
  return k;
}

// ConstantOfShape whose shape holds the batch (an RNN's zero initial state [1, N, H]): kept as an op
// without data inputs that fills its output per micro-batch. A static shape is folded at import.
Result<Inferred> infer_constant_of_shape(InferContext const& c) {
  ASSIGN_OR_RETURN(StaticValue const* shape, c.static_input(0, "shape"));
  if (shape == nullptr) return invalid_argument("the shape input is missing");
  ConstantOfShapeAttrs a;
  for (std::size_t i = 0; i < shape->i.size(); ++i) {
    int64_t const b = shape->has_batch() ? shape->b[i] : 0;
    if (b != 0 && shape->i[i] != 0) return unsupported("a ConstantOfShape dimension is the batch size plus a number");
    if (b == 0 && shape->i[i] < 0)
      return invalid_argument("shape has the negative dimension " + std::to_string(shape->i[i]));
    a.shape.push_back(b != 0 ? -b : shape->i[i]);
  }
  int batch_dims = 0;
  for (int64_t d : a.shape) batch_dims += d < 0;
  if (batch_dims > 1) return unsupported("a ConstantOfShape shape with the batch size in two dimensions");
  DType dtype = DType::kFloat32;
  auto it = c.attrs.find("value");
  if (it != c.attrs.end()) {
    auto const* v = std::get_if<TensorData>(&it->second);
    if (v == nullptr || v->numel() != 1) return invalid_argument("'value' must be a tensor of one element");
    dtype = v->dtype;
    if (dtype != DType::kFloat32 && dtype != DType::kInt64 && dtype != DType::kInt32 && dtype != DType::kBool)
      return unsupported("ConstantOfShape of dtype " + std::string(dtype_name(dtype)) +
                         " (float32, int64, int32 and bool are supported)");
    a.value = is_float_dtype(dtype) ? v->to_doubles().at(0) : static_cast<double>(v->to_int64s().at(0));
  }
  a.dtype = dtype == DType::kFloat32 ? 1 : dtype == DType::kInt64 ? 7 : dtype == DType::kInt32 ? 6 : 9;
  Inferred k;
  k.typed = a;
  k.outs.push_back({dtype, a.shape});
  return k;
}

Result<Folded> fold_where(FoldContext const& c) {
  ASSIGN_OR_RETURN(BroadcastInputs const bc, broadcast_inputs(c));
  SymArray const* cond = c.ins[0];
  SymArray const* x = c.ins[1];
  SymArray const* y = c.ins[2];
  SymArray out;
  out.dims = bc.dims;
  out.dtype = x->dtype;
  bool const anyb = x->has_batch() || y->has_batch();
  for (int64_t k = 0; k < bc.count; ++k) {
    auto const pick = cond->is_float() ? cond->f[bc.idx[0][k]] != 0 : cond->i[bc.idx[0][k]] != 0;
    if (cond->has_batch() && cond->b[bc.idx[0][k]] != 0)
      return unsupported("Where condition depends on the batch size");
    SymArray const* src = pick ? x : y;
    int64_t const s = pick ? bc.idx[1][k] : bc.idx[2][k];
    if (out.is_float()) {
      out.f.push_back(src->f[s]);
    } else {
      out.i.push_back(src->i[s]);
      if (anyb) out.b.push_back(src->has_batch() ? src->b[s] : 0);
    }
  }
  return folded_one(std::move(out));
}

Result<Folded> fold_equal(FoldContext const& c) {
  ASSIGN_OR_RETURN(BroadcastInputs const bc, broadcast_inputs(c));
  SymArray out;
  out.dims = bc.dims;
  out.dtype = DType::kBool;
  SymArray const& a = *c.ins[0];
  SymArray const& x = *c.ins[1];
  for (int64_t k = 0; k < bc.count; ++k) {
    bool eq;
    if (a.is_float() || x.is_float()) {
      double const av = a.is_float() ? a.f[bc.idx[0][k]] : static_cast<double>(a.i[bc.idx[0][k]]);
      double const xv = x.is_float() ? x.f[bc.idx[1][k]] : static_cast<double>(x.i[bc.idx[1][k]]);
      eq = av == xv;
    } else {
      int64_t const ab = a.has_batch() ? a.b[bc.idx[0][k]] : 0, xb = x.has_batch() ? x.b[bc.idx[1][k]] : 0;
      // N is a free symbol: b*N equals a number only when it is the same symbolic expression.
      eq = ab == xb && a.i[bc.idx[0][k]] == x.i[bc.idx[1][k]];
    }
    out.i.push_back(eq);
  }
  return folded_one(std::move(out));
}

// Mod of shape values (torch 2.x's TorchScript export of nn.MultiheadAttention computes a
// dimension index as (3 + -1) % 3). Integers take the divisor's sign unless fmod=1. The batch size
// has no known remainder: a Mod of it is left to run.
Result<SymInt> mod_int(SymInt a, SymInt c, bool, std::string_view) {
  if (a.b != 0 || c.b != 0) return unsupported("Mod of the batch size");
  if (c.v == 0) return invalid_argument("integer Mod by zero in a shape computation");
  if (c.v == -1) return SymInt{0, 0};
  int64_t r = a.v % c.v;
  if (r != 0 && ((r < 0) != (c.v < 0))) r += c.v;
  return SymInt{r, 0};
}

Result<SymInt> fmod_int(SymInt a, SymInt c, bool any_batch, std::string_view type) {
  if (a.b != 0 || c.b != 0) return mod_int(a, c, any_batch, type);
  if (c.v == 0) return invalid_argument("integer Mod by zero in a shape computation");
  return SymInt{c.v == -1 ? 0 : a.v % c.v, 0};
}

Result<Folded> fold_mod(FoldContext const& c) {
  for (auto const* in : c.ins)
    if (in && in->has_batch()) return Folded{};  // left to run
  if (c.attr_int("fmod", 0) != 0)
    return fold_elementwise(
        c, [](double a, double b) { return std::fmod(a, b); }, fmod_int);
  return fold_elementwise(
      c,
      [](double a, double b) {
        double const r = std::fmod(a, b);
        return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
      },
      mod_int);
}

// Comparisons and boolean ops over values known at import time (masks and index arithmetic built
// from shapes), one fold per op through its predicate. A value that depends on the batch is left
// to run. long double holds every int64 exactly.
using Predicate = bool (*)(long double a, long double x);

template <Predicate P>
Result<Folded> fold_predicate(FoldContext const& c) {
  for (auto const* in : c.ins)
    if (!in || in->has_batch()) return Folded{};
  ASSIGN_OR_RETURN(BroadcastInputs const bc, broadcast_inputs(c));
  auto value = [&](std::size_t j, int64_t k) -> long double {
    SymArray const& a = *c.ins[j];
    return a.is_float() ? a.f[bc.idx[j][k]] : a.i[bc.idx[j][k]];
  };
  SymArray out;
  out.dims = bc.dims;
  out.dtype = DType::kBool;
  for (int64_t k = 0; k < bc.count; ++k) out.i.push_back(P(value(0, k), c.ins.size() > 1 ? value(1, k) : 0));
  return folded_one(std::move(out));
}

bool less(long double a, long double x) { return a < x; }
bool greater(long double a, long double x) { return a > x; }
bool less_equal(long double a, long double x) { return a <= x; }
bool greater_equal(long double a, long double x) { return a >= x; }
bool logical_not(long double a, long double) { return a == 0; }
bool logical_and(long double a, long double x) { return a != 0 && x != 0; }
bool logical_or(long double a, long double x) { return a != 0 || x != 0; }
bool logical_xor(long double a, long double x) { return (a != 0) != (x != 0); }

// A static shape only: a shape with the batch stays an op (infer_constant_of_shape).
Result<Folded> fold_constant_of_shape(FoldContext const& c) {
  if (c.in(0) && c.in(0)->has_batch()) return Folded{};
  ASSIGN_OR_RETURN(auto dims, plain_ints(c.in(0), "ConstantOfShape shape"));
  SymArray out;
  out.dims = dims;
  TensorData const* v = c.attr_tensor("value");
  SymArray value;
  if (v) {
    ASSIGN_OR_RETURN(value, SymArray::from_data(*v));
    if (value.f.size() + value.i.size() != 1) return invalid_argument("'value' must hold exactly one element");
  } else {
    value.dtype = DType::kFloat32;
    value.f = {0.0};
  }
  out.dtype = value.dtype;
  int64_t const n = fold_numel(dims);
  if (n > kMaxFoldElements) return Folded{};
  out.f.assign(value.is_float() ? n : 0, value.is_float() ? value.f[0] : 0);
  out.i.assign(value.is_float() ? 0 : n, value.is_float() ? 0 : value.i[0]);
  return folded_one(std::move(out));
}

// A static Range only: one whose limit holds the batch size stays an op (infer_range).
Result<Folded> fold_range(FoldContext const& c) {
  if (!c.in(0) || !c.in(1) || !c.in(2)) return invalid_argument(c.where() + " needs three inputs");
  for (auto const* x : c.ins) {
    if (x->f.size() + x->i.size() != 1) return invalid_argument("start, limit and delta must be scalars");
    if (x->has_batch()) return Folded{};
  }
  SymArray out;
  out.dtype = c.in(0)->dtype;
  auto val = [](SymArray const* a) { return a->is_float() ? a->f[0] : static_cast<double>(a->i[0]); };
  double const start = val(c.in(0)), limit = val(c.in(1)), delta = val(c.in(2));
  if (delta == 0) return invalid_argument(c.where() + " has delta 0");
  double const steps = std::ceil((limit - start) / delta);
  if (!(steps <= static_cast<double>(kMaxFoldElements))) return Folded{};  // also NaN and infinities
  int64_t const count = steps <= 0 ? 0 : static_cast<int64_t>(steps);
  out.dims = {count};
  for (int64_t k = 0; k < count; ++k) {
    double const v = start + static_cast<double>(k) * delta;
    if (out.is_float())
      out.f.push_back(v);
    else
      out.i.push_back(to_int_saturating(v));
  }
  return folded_one(std::move(out));
}

// Range over the batch size (HF GPT-2's arange(batch) row index for the last token's logits): an
// op without data inputs that fills [start, limit + b·N) per micro-batch. Its length must be a
// multiple of N for every N, so start must equal the static part of the limit and delta divide b.
Result<Inferred> infer_range(InferContext const& c) {
  StaticValue const* v[3] = {};
  char const* const names[3] = {"start", "limit", "delta"};
  for (std::size_t k = 0; k < 3; ++k) {
    ASSIGN_OR_RETURN(v[k], c.static_input(k, names[k]));
    if (v[k] == nullptr) return invalid_argument(std::string("the ") + names[k] + " input is missing");
    if (v[k]->numel() != 1) return invalid_argument(std::string(names[k]) + " must be a scalar");
    if (k != 1 && v[k]->has_batch())
      return unsupported(std::string("a Range whose ") + names[k] + " holds the batch size");
  }
  DType const dtype = v[0]->dtype;
  for (StaticValue const* x : v)
    if (x->is_float() || (x->dtype != DType::kInt64 && x->dtype != DType::kInt32) || x->i.size() != 1)
      return unsupported("a Range over the batch size of dtype " + std::string(dtype_name(x->dtype)) +
                         " (int64 and int32 are supported)");
  RangeAttrs a;
  a.start = static_cast<double>(v[0]->i.at(0));
  a.limit = static_cast<double>(v[1]->i.at(0));
  a.limit_batch = v[1]->has_batch() ? v[1]->b.at(0) : 0;
  a.delta = static_cast<double>(v[2]->i.at(0));
  int64_t const delta = v[2]->i.at(0);
  if (delta == 0) return invalid_argument("delta is 0");
  if (a.limit_batch <= 0 || a.start != a.limit || delta < 0 || a.limit_batch % delta != 0)
    return unsupported("Range(" + std::to_string(v[0]->i[0]) + ", " + std::to_string(v[1]->i[0]) + " + " +
                       std::to_string(a.limit_batch) + "·N, " + std::to_string(delta) +
                       "): graphpipe keeps Range(s, s + k·N, d) with d dividing k, whose length is a multiple of N");
  Inferred k;
  k.typed = a;
  k.outs.push_back({dtype, {-(a.limit_batch / delta)}});
  return k;
}

}  // namespace

Result<std::vector<int64_t>> range_output_shape(RangeAttrs const& a, int64_t batch) {
  if (a.limit_batch != 0 && batch <= 0)
    return invalid_argument(
        "its length holds the batch size, which is unknown here (a stage whose inputs carry no batch)");
  double const steps = std::ceil((a.limit + static_cast<double>(a.limit_batch * batch) - a.start) / a.delta);
  return std::vector<int64_t>{steps <= 0 ? 0 : static_cast<int64_t>(steps)};
}

Result<std::vector<int64_t>> constant_of_shape_output_shape(ConstantOfShapeAttrs const& a, int64_t batch) {
  auto shape = concrete_shape(a.shape, batch);
  if (!shape)
    return invalid_argument(
        "its shape holds the batch size, which is unknown here (a stage whose inputs carry no batch)");
  return *std::move(shape);
}

namespace {
Result<std::vector<Dims>> range_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const&, int64_t batch) {
  RETURN_IF_ERROR(require_typed<RangeAttrs>(op));
  ASSIGN_OR_RETURN(Dims out, range_output_shape(std::get<RangeAttrs>(op.typed), batch));
  return std::vector<Dims>{std::move(out)};
}
}  // namespace

void register_logic_ops(OpTable& t) {
  // Made from shapes and bounds, or comparisons and boolean logic: no input gets a gradient.
  define(t, "ConstantOfShape",
         {.infer = infer_constant_of_shape, .fold = fold_constant_of_shape, .grad_free = every_input()});
  define(t, "Range",
         {.infer = infer_range, .fold = fold_range, .run_shape = range_run_shape, .grad_free = every_input()});
  define(t, "Equal",
         with_grad_free(broadcasting_op(infer_broadcast_logic, {1, 0}, nullptr, fold_equal), every_input()));
  define(t, "Where",
         with_grad_free(broadcasting_op(infer_broadcast_logic, {1, 1}, save_input0, fold_where),
                        input_slots({0})));  // the condition
  std::pair<char const*, FoldFn> const predicates[] = {
      {"Less", fold_predicate<less>},
      {"Greater", fold_predicate<greater>},
      {"LessOrEqual", fold_predicate<less_equal>},
      {"GreaterOrEqual", fold_predicate<greater_equal>},
      {"And", fold_predicate<logical_and>},
      {"Or", fold_predicate<logical_or>},
      {"Xor", fold_predicate<logical_xor>},
  };
  for (auto const& [type, fold] : predicates)
    define(t, type, with_grad_free(broadcasting_op(infer_broadcast_logic, {1, 0}, nullptr, fold), every_input()));
  define(t, "Not",
         with_grad_free(elementwise_op(infer_broadcast_logic, {1, 0}, nullptr, fold_predicate<logical_not>),
                        every_input()));  // one input
  // Bits of integers: nothing to differentiate.
  for (char const* type : {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift"})
    define(t, type, with_grad_free(broadcasting_op(infer_bitwise, {1, 0}), every_input()));
  define(t, "BitwiseNot", with_grad_free(elementwise_op(infer_bitwise, {1, 0}), every_input()));
  // Both operands get a gradient (ONNX declares the divisor non-differentiable; the kernels give it one).
  define(t, "Mod", broadcasting_op(infer_broadcast_logic, {3, 3}, nullptr, fold_mod));
}

}  // namespace gp::graph::ops
