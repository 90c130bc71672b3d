// Ops that exist only at import time (the "folded" family): Constant is folded from its value, Shape,
// Size and EyeLike from their input's shape alone, the window ops (HannWindow, HammingWindow,
// BlackmanWindow) from their size, NonZero from its input's value. None has an inference rule: one that cannot be
// folded is an import error. (Range, folded when static, lives with ConstantOfShape in logic.cc:
// over the batch size it stays an op.)
#include <algorithm>
#include <cmath>

#include "graph/ops/common.h"
#include "graph/ops/fold.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Folded> fold_constant(FoldContext const& c) {
  SymArray a;
  if (auto const* v = c.attr_tensor("value")) {
    ASSIGN_OR_RETURN(a, SymArray::from_data(*v));
  } else if (c.attrs.count("value_float")) {
    a.dtype = DType::kFloat32;
    a.f = {c.attr_float("value_float", 0)};
  } else if (c.attrs.count("value_int")) {
    a.i = {c.attr_int("value_int", 0)};
  } else if (auto v = c.attr_ints("value_ints")) {
    a.i = *v;
    a.dims = {static_cast<int64_t>(v->size())};
  } else if (auto it = c.attrs.find("value_floats"); it != c.attrs.end()) {
    a.dtype = DType::kFloat32;
    a.f = std::get<std::vector<double>>(it->second);
    a.dims = {static_cast<int64_t>(a.f.size())};
  } else {
    return unsupported(c.where() + " has no value graphpipe can read (sparse or string constants)");
  }
  return folded_one(std::move(a));
}

// The input's dims [start, end) as int64 values; the batch dim becomes a multiple of N.
Result<Folded> fold_shape(FoldContext const& c) {
  if (c.dims.empty()) return invalid_argument(c.where() + " has no input");
  Dims const& d = c.dims.at(0);
  int64_t const r = static_cast<int64_t>(d.size());
  int64_t const start = std::clamp<int64_t>(normalised_axis(c.attr_int("start", 0), r), 0, r);
  int64_t const end = std::clamp<int64_t>(normalised_axis(c.attr_int("end", r), r), 0, r);
  return folded_one(SymArray::from_dims(Dims(d.begin() + start, d.begin() + std::max(start, end))));
}

// A number, or a multiple of the batch size.
Result<Folded> fold_size(FoldContext const& c) {
  if (c.dims.empty()) return invalid_argument(c.where() + " has no input");
  int64_t elements = 1, batch = 0;
  for (int64_t d : c.dims.at(0)) {
    if (d < 0)
      batch = -d;
    else
      elements *= d;
  }
  SymArray a;
  a.dtype = DType::kInt64;
  a.i = {batch ? 0 : elements};
  if (batch) a.b = {batch * elements};
  return folded_one(std::move(a));
}

// The dtype of a constant `op` builds at import time from an ONNX element type: SymArray holds
// float32/float64 and integers, so float16 and bfloat16 are refused.
Result<DType> built_dtype(FoldContext const& c, int64_t onnx_type, std::string const& op) {
  ASSIGN_OR_RETURN(DType const dt, dtype_of_onnx(onnx_type));
  if (dt == DType::kFloat16 || dt == DType::kBFloat16)
    return unsupported(c.where() + ": " + op + " of dtype " + std::string(dtype_name(dt)));
  return dt;
}

// EyeLike: ones on diagonal k of a 2-D tensor of the input's shape, zeros elsewhere, in the dtype
// attribute's type (the input's by default). A constant whenever the shape is known: the input's
// values are never read. Over the batch dim it would be a per-micro-batch op: refused.
Result<Folded> fold_eye_like(FoldContext const& c) {
  if (c.dims.empty()) return invalid_argument(c.where() + " has no input");
  Dims const& d = c.dims.at(0);
  if (d.size() != 2) return invalid_argument(c.where() + ": EyeLike needs a 2-D input, got " + dims_str(d));
  if (d[0] < 0 || d[1] < 0)
    return unsupported(c.where() + ": EyeLike of " + dims_str(d) +
                       ", which holds the batch size; give it an input of fixed shape");
  DType const in = c.dtypes.empty() ? DType::kFloat32 : c.dtypes.at(0);
  ASSIGN_OR_RETURN(DType const dt, built_dtype(c, c.attr_int("dtype", onnx_of_dtype(in)), "EyeLike"));
  if (fold_numel(d) > kMaxFoldElements)
    return unsupported(c.where() + ": EyeLike of " + dims_str(d) + " is too large to build at import time");
  int64_t const k = c.attr_int("k", 0);
  SymArray a;
  a.dtype = dt;
  a.dims = d;
  auto const n = static_cast<std::size_t>(d[0] * d[1]);
  if (a.is_float())
    a.f.assign(n, 0.0);
  else
    a.i.assign(n, 0);
  for (int64_t r = 0; r < d[0]; ++r) {
    int64_t const col = r + k;
    if (col < 0 || col >= d[1]) continue;
    auto const e = static_cast<std::size_t>(r * d[1] + col);
    if (a.is_float())
      a.f[e] = 1.0;
    else
      a.i[e] = 1;
  }
  return folded_one(std::move(a));
}

// HannWindow, HammingWindow and BlackmanWindow (opset 17; torch.stft's window in a current export):
// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size, with N = size (periodic, the
// default) or size - 1 (symmetric), in output_datatype (float32 by default). A constant of the
// size, which the model gives as a constant.
struct WindowCoefficients {
  double a0, a1, a2;
};

Result<Folded> fold_window(FoldContext const& c, WindowCoefficients w) {
  std::string const op(c.type);
  ASSIGN_OR_RETURN(Dims const size, plain_ints(c.in(0), op + " size"));
  if (size.size() != 1 || size[0] < 0)
    return invalid_argument(c.where() + ": " + op + "'s size must be one non-negative integer");
  if (size[0] > kMaxFoldElements)
    return unsupported(c.where() + ": " + op + " of size " + std::to_string(size[0]) +
                       " is too large to build at import time");
  ASSIGN_OR_RETURN(DType const dt, built_dtype(c, c.attr_int("output_datatype", 1), op));
  int64_t const n = size[0];
  double const period = static_cast<double>(c.attr_int("periodic", 1) != 0 ? n : n - 1);
  SymArray a;
  a.dtype = dt;
  a.dims = {n};
  for (int64_t i = 0; i < n; ++i) {
    double const x = period > 0 ? 2 * M_PI * static_cast<double>(i) / period : 0.0;  // size 1: [1]
    double const v = period > 0 ? w.a0 - w.a1 * std::cos(x) + w.a2 * std::cos(2 * x) : 1.0;
    if (a.is_float())
      a.f.push_back(v);
    else
      a.i.push_back(static_cast<int64_t>(v));
  }
  return folded_one(std::move(a));
}

// NonZero of a value known at import (TorchScript writes it for a masked assignment, Longformer's
// `x[mask] = v` over a mask built from shapes): the coordinates of its non-zero elements, int64
// [rank, count], in row-major order. Over a value computed at run time the number of elements
// depends on the data, so the output shape does: such a NonZero is refused by the importer.
Result<Folded> fold_non_zero(FoldContext const& c) {
  SymArray const* x = c.in(0);
  if (x == nullptr) return invalid_argument(c.where() + " has no input");
  if (x->has_batch())
    return unsupported(c.where() +
                       ": its input holds the batch size, so how many of its elements are non-zero "
                       "(its output's shape) changes with the micro-batch");
  int64_t const n = fold_numel(x->dims);
  if (n > kMaxFoldElements)
    return unsupported(c.where() + ": NonZero of " + dims_str(x->dims) + " is too large to fold at import time");
  Dims const strides = row_major_strides(x->dims);
  std::vector<int64_t> hits;
  for (int64_t k = 0; k < n; ++k) {
    auto const e = static_cast<std::size_t>(k);
    if (x->is_float() ? x->f[e] != 0.0 : x->i[e] != 0) hits.push_back(k);
  }
  auto const rank = static_cast<int64_t>(x->dims.size());
  auto const count = static_cast<int64_t>(hits.size());
  SymArray a;
  a.dtype = DType::kInt64;
  a.dims = {rank, count};
  a.i.assign(static_cast<std::size_t>(rank * count), 0);
  for (int64_t h = 0; h < count; ++h)
    for (int64_t d = 0; d < rank; ++d) {
      auto const du = static_cast<std::size_t>(d);
      a.i[static_cast<std::size_t>(d * count + h)] = hits[static_cast<std::size_t>(h)] / strides[du] % x->dims[du];
    }
  return folded_one(std::move(a));
}

}  // namespace

void register_folded_ops(OpTable& t) {
  define(t, "Constant", {.fold = fold_constant});
  // Made from their inputs' shapes or sizes: no input gets a gradient.
  define(t, "Shape", {.fold = fold_shape, .folds_from_shape = true, .grad_free = every_input()});
  define(t, "Size", {.fold = fold_size, .folds_from_shape = true, .grad_free = every_input()});
  define(t, "EyeLike", {.fold = fold_eye_like, .folds_from_shape = true, .grad_free = every_input()});
  define(t, "NonZero", {.fold = fold_non_zero, .grad_free = every_input()});
  define(t, "HannWindow",
         {.fold =
              [](FoldContext const& c) {
                return fold_window(c, {0.5, 0.5, 0});
              },
          .grad_free = every_input()});
  define(t, "HammingWindow",
         {.fold =
              [](FoldContext const& c) {
                return fold_window(c, {25.0 / 46, 21.0 / 46, 0});
              },
          .grad_free = every_input()});
  define(t, "BlackmanWindow",
         {.fold =
              [](FoldContext const& c) {
                return fold_window(c, {0.42, 0.5, 0.08});
              },
          .grad_free = every_input()});
}

}  // namespace gp::graph::ops
