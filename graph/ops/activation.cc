// Elementwise activations and math: import-time inference (graph/ops/infer.h), constant folding
// of Sqrt, Neg, Relu, Abs, Sign, Floor, Ceil, Round and two-input Min and Max (graph/ops/fold.h)
// and cost (graph/ops/cost.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string_view>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_plain_unary(InferContext const& c) { return like_input(c); }

Result<Inferred> infer_leaky_relu(InferContext const& c) {
  return like_input(c, LeakyReluAttrs{static_cast<float>(c.attr_float("alpha", 0.01))});
}

Result<Inferred> infer_gelu(InferContext const& c) {
  return like_input(c, GeluAttrs{c.attr_string("approximate", "none") == "tanh"});
}

// Elu, Selu, Celu, HardSigmoid, ThresholdedRelu, Shrink: the attributes with ONNX's defaults.
Result<Inferred> infer_parametric(InferContext const& c) {
  ActivationAttrs a;
  if (c.type == "Selu") {
    a.alpha = static_cast<float>(c.attr_float("alpha", 1.67326319217681884765625));
    a.gamma = static_cast<float>(c.attr_float("gamma", 1.05070102214813232421875));
  } else if (c.type == "Shrink") {
    a.alpha = static_cast<float>(c.attr_float("lambd", 0.5));
    a.beta = static_cast<float>(c.attr_float("bias", 0.0));
  } else if (c.type == "HardSigmoid") {
    a.alpha = static_cast<float>(c.attr_float("alpha", 0.2));
    a.beta = static_cast<float>(c.attr_float("beta", 0.5));
  } else {  // Elu, Celu, ThresholdedRelu
    a.alpha = static_cast<float>(c.attr_float("alpha", 1.0));
    if (c.type == "Celu" && a.alpha == 0.f) return invalid_argument("Celu's alpha must not be 0");
  }
  return like_input(c, a);
}

// Clip: opset 6 bounds are attributes; from opset 11 they are optional scalar inputs. Static bounds
// are folded into ClipAttrs; a bound computed at run time keeps both bound slots as inputs.
Result<Inferred> infer_clip(InferContext const& c) {
  ClipAttrs a;
  Inferred k;
  k.data_inputs = {0};
  if (c.opset < 11) {
    a.min = static_cast<float>(c.attr_float("min", -std::numeric_limits<float>::infinity()));
    a.max = static_cast<float>(c.attr_float("max", std::numeric_limits<float>::infinity()));
  } else {
    bool runtime = false;
    for (std::size_t s : {std::size_t{1}, std::size_t{2}}) {
      if (!c.has(s)) continue;
      char const* what = s == 1 ? "min" : "max";
      Dims const& d = c.dims(s);
      if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; }))
        return invalid_argument(std::string("its ") + what + " input has shape " + dims_str(d) +
                                "; Clip's bounds must be scalars");
      auto v = c.static_input(s, what);
      if (!v.is_ok()) {
        runtime = true;
        continue;
      }
      ASSIGN_OR_RETURN(double const bound, c.static_scalar(s, what, 0.0));
      (s == 1 ? a.min : a.max) = static_cast<float>(bound);
    }
    // Integer bounds stay inputs, exact (ClipAttrs holds floats): the kernels read them.
    if (runtime || !is_float_dtype(c.dtype(0))) k.data_inputs = all_slots(c);
  }
  k.typed = a;
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

// PRelu: the slope broadcasts to x (unidirectionally); the output has x's shape.
Result<Inferred> infer_prelu(InferContext const& c) {
  if (!c.has(1)) return invalid_argument("PRelu needs its slope input");
  auto out = broadcast_dims(c.dims(0), c.dims(1));
  if (!out.is_ok() || *out != c.dims(0))
    return invalid_argument("its slope of shape " + dims_str(c.dims(1)) + " does not broadcast to x of shape " +
                            dims_str(c.dims(0)) + " (the slope may only have x's trailing dims or 1s)");
  Inferred k;
  k.data_inputs = {0, 1};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

// Min, Max, Sum, Mean: one or more inputs, numpy broadcasting.
Result<Inferred> infer_variadic(InferContext const& c) {
  Dims out;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.has(i))
      return invalid_argument("input " + std::to_string(i) + " is empty; " + c.type + " needs every input");
    ASSIGN_OR_RETURN(out, broadcast_dims(out, c.dims(i)));
  }
  Inferred k;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<SymInt> neg_int(SymInt a, SymInt, bool, std::string_view) {
  int64_t constexpr kMin = std::numeric_limits<int64_t>::min();
  if (a.v == kMin || a.b == kMin) return shape_overflow();
  return SymInt{-a.v, -a.b};
}

Result<SymInt> relu_int(SymInt a, SymInt c, bool any_batch, std::string_view type) {
  if (any_batch) return no_int_fold(a, c, any_batch, type);
  return SymInt{a.v > 0 ? a.v : 0, 0};
}

Result<Folded> fold_sqrt(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return std::sqrt(a); }, no_int_fold);
}
// torch exports attention's 1/sqrt(d) as Reciprocal(Pow(Cast(Div(Shape ...)))): folded, it becomes
// the constant the importer moves into the MatMul (fuse_matmul_scales).
Result<Folded> fold_reciprocal(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return 1.0 / a; }, no_int_fold);
}
Result<Folded> fold_neg(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return -a; }, neg_int);
}
Result<Folded> fold_relu(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return a > 0 ? a : 0; }, relu_int);
}

// Min and Max of two values known at import time (the dynamo exporter's adaptive pooling windows
// clamp static int64 indices with minimum/maximum; its index_put broadcasts the index tensors'
// shapes, Max of [N, 1] and [1, 3]); other input counts run. A value v + b·N that holds the batch
// size N (b > 0) is at least v + b, as N >= 1: against a number k <= v + b the order is known
// (Max is the batch term, Min is k); against a larger number it is not, and the error says so.
Result<SymInt> extremum_int(SymInt a, SymInt c, bool max, std::string_view type) {
  if (a.b == 0 && c.b == 0) return SymInt{max ? std::max(a.v, c.v) : std::min(a.v, c.v), 0};
  if (a.v == c.v && a.b == c.b) return a;
  SymInt const batch = a.b != 0 ? a : c, other = a.b != 0 ? c : a;
  int64_t least = 0;
  if (other.b == 0 && batch.b > 0 && !__builtin_add_overflow(batch.v, batch.b, &least) && other.v <= least)
    return max ? batch : other;
  return unsupported(std::string(type) + " of shape values that hold the batch size, whose order depends on it");
}
Result<SymInt> min_int(SymInt a, SymInt c, bool, std::string_view type) { return extremum_int(a, c, false, type); }
Result<SymInt> max_int(SymInt a, SymInt c, bool, std::string_view type) { return extremum_int(a, c, true, type); }
// Abs, Sign, Floor, Ceil and Round of import-time values (the same index computations: window
// starts as Sign(x)·Floor(Abs(x)) of a float division). Integers keep their value (Floor, Ceil,
// Round) or take their sign or magnitude; a value that holds the batch size is not folded.
Result<SymInt> abs_int(SymInt a, SymInt c, bool any_batch, std::string_view type) {
  if (any_batch) return no_int_fold(a, c, any_batch, type);
  if (a.v == std::numeric_limits<int64_t>::min()) return shape_overflow();
  return SymInt{a.v < 0 ? -a.v : a.v, 0};
}
Result<SymInt> sign_int(SymInt a, SymInt c, bool any_batch, std::string_view type) {
  if (any_batch) return no_int_fold(a, c, any_batch, type);
  return SymInt{a.v > 0 ? 1 : a.v < 0 ? -1 : 0, 0};
}
Result<SymInt> same_int(SymInt a, SymInt c, bool any_batch, std::string_view type) {
  if (any_batch) return no_int_fold(a, c, any_batch, type);
  return a;
}
Result<Folded> fold_abs(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return std::fabs(a); }, abs_int);
}
Result<Folded> fold_sign(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return a > 0   ? 1.0
                                       : a < 0 ? -1.0
                                               : a; }, sign_int);
}
Result<Folded> fold_floor(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return std::floor(a); }, same_int);
}
Result<Folded> fold_ceil(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return std::ceil(a); }, same_int);
}
Result<Folded> fold_round(FoldContext const& c) {
  return fold_elementwise(
      c, [](double a, double) { return std::nearbyint(a); }, same_int);
}

// Exp, Log, Erf and the trigonometric and hyperbolic functions of import-time values (DeBERTa's
// log-bucketed relative positions take the Log of distances computed from shapes): float only,
// each result rounded to float32 for a float32 tensor. One instance per operator, F its function.
template <auto F>
Result<Folded> fold_float_unary(FoldContext const& c) {
  SymArray const* x = c.in(0);
  if (x == nullptr || !x->is_float() || fold_numel(x->dims) > kMaxFoldElements) return Folded{};
  SymArray out = *x;
  for (double& v : out.f) v = F(v);
  if (out.dtype == DType::kFloat32)
    for (double& v : out.f) v = static_cast<float>(v);
  return folded_one(std::move(out));
}

// Clip of import-time values (DeBERTa's relative positions clamped into the bucket range):
// min(max(x, lo), hi) with the attributes' bounds (opset < 11) or the inputs', as the kernels
// compute it (a NaN stays NaN; a lower bound above the upper gives the upper).
Result<Folded> fold_clip(FoldContext const& c) {
  SymArray const* x = c.in(0);
  if (x == nullptr || x->has_batch() || fold_numel(x->dims) > kMaxFoldElements) return Folded{};
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  std::optional<int64_t> ilo, ihi;
  if (c.opset < 11) {
    lo = c.attr_float("min", lo);
    hi = c.attr_float("max", hi);
  }
  for (std::size_t k : {std::size_t{1}, std::size_t{2}}) {
    SymArray const* b = c.in(k);
    if (b == nullptr) continue;
    if (b->numel() != 1 || b->has_batch()) return Folded{};  // left to the kernels' checks
    (k == 1 ? lo : hi) = b->is_float() ? b->f[0] : static_cast<double>(b->i[0]);
    if (!b->is_float()) (k == 1 ? ilo : ihi) = b->i[0];
  }
  SymArray out = *x;
  if (out.is_float()) {
    for (double& v : out.f) {
      double const m = v < lo ? lo : v;
      v = hi < m ? hi : m;
    }
    if (out.dtype == DType::kFloat32)
      for (double& v : out.f) v = static_cast<float>(v);
  } else {
    for (int64_t& v : out.i) {
      if (ilo && v < *ilo) v = *ilo;
      if (ihi && *ihi < v) v = *ihi;
    }
  }
  return folded_one(std::move(out));
}

Result<Folded> fold_min(FoldContext const& c) {
  if (c.ins.size() != 2) return Folded{};
  return fold_elementwise(
      c, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }, min_int);
}
Result<Folded> fold_max(FoldContext const& c) {
  if (c.ins.size() != 2) return Folded{};
  return fold_elementwise(
      c, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }, max_int);
}

}  // namespace

void register_activation_ops(OpTable& t) {
  define(t, "Relu", elementwise_op(infer_plain_unary, {1, 1}, save_output0, fold_relu));
  define(t, "Sigmoid", elementwise_op(infer_plain_unary, {4, 2}, save_output0));
  define(t, "Tanh", elementwise_op(infer_plain_unary, {4, 2}, save_output0));
  define(t, "Sqrt", elementwise_op(infer_plain_unary, {2, 2}, save_output0, fold_sqrt));
  define(t, "Neg", elementwise_op(infer_plain_unary, {1, 1}, nullptr, fold_neg));
  define(t, "Abs", elementwise_op(infer_plain_unary, {1, 1}, nullptr, fold_abs));
  // Steps: their gradient is zero, so no input gets one.
  define(t, "Sign", with_grad_free(elementwise_op(infer_plain_unary, {1, 0}, nullptr, fold_sign), every_input()));
  define(t, "Floor", with_grad_free(elementwise_op(infer_plain_unary, {1, 0}, nullptr, fold_floor), every_input()));
  define(t, "Ceil", with_grad_free(elementwise_op(infer_plain_unary, {1, 0}, nullptr, fold_ceil), every_input()));
  define(t, "Round", with_grad_free(elementwise_op(infer_plain_unary, {1, 0}, nullptr, fold_round), every_input()));
  // Transcendentals count 1.
  define(t, "Reciprocal", elementwise_op(infer_plain_unary, {1, 2}, nullptr, fold_reciprocal));
  auto const transcendental = [&t](char const* type, FoldFn fold) {
    define(t, type, elementwise_op(infer_plain_unary, {1, 2}, nullptr, fold));
  };
  transcendental("Exp", fold_float_unary<[](double a) { return std::exp(a); }>);
  transcendental("Log", fold_float_unary<[](double a) { return std::log(a); }>);
  transcendental("Erf", fold_float_unary<[](double a) { return std::erf(a); }>);
  transcendental("Sin", fold_float_unary<[](double a) { return std::sin(a); }>);
  transcendental("Cos", fold_float_unary<[](double a) { return std::cos(a); }>);
  transcendental("Tan", fold_float_unary<[](double a) { return std::tan(a); }>);
  transcendental("Asin", fold_float_unary<[](double a) { return std::asin(a); }>);
  transcendental("Acos", fold_float_unary<[](double a) { return std::acos(a); }>);
  transcendental("Atan", fold_float_unary<[](double a) { return std::atan(a); }>);
  transcendental("Sinh", fold_float_unary<[](double a) { return std::sinh(a); }>);
  transcendental("Cosh", fold_float_unary<[](double a) { return std::cosh(a); }>);
  transcendental("Asinh", fold_float_unary<[](double a) { return std::asinh(a); }>);
  transcendental("Acosh", fold_float_unary<[](double a) { return std::acosh(a); }>);
  transcendental("Atanh", fold_float_unary<[](double a) { return std::atanh(a); }>);
  define(t, "Softplus", elementwise_op(infer_plain_unary, {3, 3}));
  define(t, "Softsign", elementwise_op(infer_plain_unary, {3, 3}));
  define(t, "HardSwish", elementwise_op(infer_plain_unary, {5, 5}));
  define(t, "LeakyRelu", elementwise_op(infer_leaky_relu, {2, 2}, save_input0));
  define(t, "Gelu", elementwise_op(infer_gelu, {8, 12}, save_input0));
  define(t, "Elu", elementwise_op(infer_parametric, {3, 3}));
  define(t, "Selu", elementwise_op(infer_parametric, {4, 4}));
  define(t, "Celu", elementwise_op(infer_parametric, {5, 5}));
  define(t, "HardSigmoid", elementwise_op(infer_parametric, {4, 2}));
  define(t, "ThresholdedRelu", elementwise_op(infer_parametric, {1, 1}));
  define(t, "Shrink", elementwise_op(infer_parametric, {2, 1}));
  // A bound computed at run time gets a gradient too (ONNX declares the bounds non-differentiable).
  define(t, "Clip", elementwise_op(infer_clip, {2, 1}, save_input0, fold_clip));
  define(t, "PRelu", elementwise_op(infer_prelu, {2, 4}, save_input0));
  define(t, "Min", broadcasting_op(infer_variadic, {1, 1}, nullptr, fold_min));
  define(t, "Max", broadcasting_op(infer_variadic, {1, 1}, nullptr, fold_max));
  define(t, "Sum", broadcasting_op(infer_variadic, {1, 1}));
  define(t, "Mean", broadcasting_op(infer_variadic, {2, 1}));
}

}  // namespace gp::graph::ops
