// Ops that exist only at import time (the "folded" family): Constant and Range are folded from
// static values, Shape and Size from their input's shape alone. None has an inference rule: one
// that cannot be folded is an import error.
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

Result<Folded> fold_range(FoldContext const& c) {
  if (!c.in(0) || !c.in(1) || !c.in(2)) return invalid_argument(c.where() + " needs three inputs");
  for (auto const* x : c.ins) {
    if (x->has_batch()) return unsupported("Range over the batch size");
    if (x->f.size() + x->i.size() != 1) return invalid_argument("start, limit and delta must be scalars");
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

}  // namespace

void register_folded_ops(OpTable& t) {
  define(t, "Constant", {.fold = fold_constant});
  define(t, "Range", {.fold = fold_range});
  define(t, "Shape", {.fold = fold_shape, .folds_from_shape = true});
  define(t, "Size", {.fold = fold_size, .folds_from_shape = true});
}

}  // namespace gp::graph::ops
