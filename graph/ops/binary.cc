// Broadcasting arithmetic: import-time inference (graph/ops/infer.h), constant folding
// (graph/ops/fold.h) and cost (graph/ops/cost.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_broadcast(InferContext const& c) {
  Inferred k;
  Dims out;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(out, broadcast_dims(out, c.dims(i)));
  }
  DType const dt = c.type == "Equal" ? DType::kBool : c.type == "Where" ? c.dtype(1) : c.dtype(0);
  k.data_inputs = all_slots(c);
  k.outs.push_back({dt, out});
  return k;
}

// ---- folding: integers carry the batch where the result stays a multiple of it ----

Result<SymInt> add_scaled(SymInt a, SymInt c, int64_t s) {
  SymInt v, sc;
  if (__builtin_mul_overflow(s, c.v, &sc.v) || __builtin_add_overflow(a.v, sc.v, &v.v) ||
      __builtin_mul_overflow(s, c.b, &sc.b) || __builtin_add_overflow(a.b, sc.b, &v.b))
    return shape_overflow();
  if (v.b != 0 && v.v != 0) return unsupported("a shape computation adds a number to the batch size");
  return v;
}

Result<SymInt> add_int(SymInt a, SymInt c, bool, std::string_view) { return add_scaled(a, c, 1); }
Result<SymInt> sub_int(SymInt a, SymInt c, bool, std::string_view) { return add_scaled(a, c, -1); }

Result<SymInt> mul_int(SymInt a, SymInt c, bool, std::string_view) {
  if (a.b != 0 && c.b != 0) return unsupported("a shape computation multiplies the batch size by itself");
  SymInt v;
  int64_t x = 0, y = 0;
  if (__builtin_mul_overflow(a.v, c.v, &v.v) || __builtin_mul_overflow(a.b, c.v, &x) ||
      __builtin_mul_overflow(c.b, a.v, &y) || __builtin_add_overflow(x, y, &v.b))
    return shape_overflow();
  return v;
}

Result<SymInt> div_int(SymInt a, SymInt c, bool, std::string_view) {
  int64_t constexpr kMin = std::numeric_limits<int64_t>::min();
  if ((c.v == -1 && (a.v == kMin || a.b == kMin)) || (c.b == -1 && a.b == kMin)) return shape_overflow();
  SymInt v;
  if (c.b != 0 && a.b != 0 && c.v == 0 && a.v == 0 && a.b % c.b == 0) {
    v.v = a.b / c.b;
  } else if (c.b != 0) {
    return unsupported("a shape computation divides by the batch size");
  } else if (c.v == 0) {
    return invalid_argument("integer division by zero in a shape computation");
  } else if (a.b != 0) {
    if (a.b % c.v != 0) return unsupported("a shape computation divides the batch size by " + std::to_string(c.v));
    v.b = a.b / c.v;
  } else {
    v.v = a.v / c.v;  // truncated toward zero, as ONNX's reference (and the runtime's kernels) divide
  }
  return v;
}

Result<SymInt> pow_int(SymInt a, SymInt c, bool any_batch, std::string_view type) {
  if (any_batch) return no_int_fold(a, c, any_batch, type);
  return SymInt{to_int_saturating(std::pow(static_cast<double>(a.v), static_cast<double>(c.v))), 0};
}

Result<Folded> fold_add(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double b) { return a + b; }, add_int);
}
Result<Folded> fold_sub(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double b) { return a - b; }, sub_int);
}
Result<Folded> fold_mul(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double b) { return a * b; }, mul_int);
}
Result<Folded> fold_div(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double b) { return a / b; }, div_int);
}
Result<Folded> fold_pow(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double b) { return std::pow(a, b); }, pow_int);
}

}  // namespace

void register_binary_ops(OpTable& t) {
  // Add's gradient passes through unchanged (a sum where broadcast).
  define(t, "Add", broadcasting_op(infer_broadcast, {1, 0}, nullptr, fold_add));
  define(t, "Sub", broadcasting_op(infer_broadcast, {1, 1}, nullptr, fold_sub));
  define(t, "Mul", broadcasting_op(infer_broadcast, {1, 2}, save_inputs01, fold_mul));
  define(t, "Div", broadcasting_op(infer_broadcast, {1, 4}, save_inputs01, fold_div));
  define(t, "Pow", broadcasting_op(infer_broadcast, {2, 4}, save_inputs01, fold_pow));
}

}  // namespace gp::graph::ops
