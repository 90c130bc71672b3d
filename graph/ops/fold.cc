#include "graph/ops/fold.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gp::graph::ops {

std::string FoldContext::where() const { return std::string(type) + " '" + std::string(name) + "'"; }

int64_t fold_numel(Dims const& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

Dims row_major_strides(Dims const& dims) {
  Dims s(dims.size(), 1);
  for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * dims[k + 1];
  return s;
}

SymArray take(SymArray const& src, Dims dims, Dims const& idx) {
  SymArray out;
  out.dtype = src.dtype;
  out.dims = std::move(dims);
  if (src.is_float()) {
    out.f.reserve(idx.size());
    for (int64_t k : idx) out.f.push_back(src.f[static_cast<std::size_t>(k)]);
  } else {
    out.i.reserve(idx.size());
    for (int64_t k : idx) out.i.push_back(src.i[static_cast<std::size_t>(k)]);
    if (!src.b.empty()) {
      out.b.reserve(idx.size());
      for (int64_t k : idx) out.b.push_back(src.b[static_cast<std::size_t>(k)]);
    }
  }
  return out;
}

Dims broadcast_index(Dims const& in, Dims const& out) {
  int64_t const n = fold_numel(out);
  std::size_t const r = out.size(), off = out.size() - in.size();
  Dims const in_strides = row_major_strides(in);
  Dims idx(static_cast<std::size_t>(n));
  Dims pos(r, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (std::size_t a = off; a < r; ++a)
      if (in[a - off] != 1) flat += pos[a] * in_strides[a - off];
    idx[static_cast<std::size_t>(k)] = flat;
    for (int64_t a = static_cast<int64_t>(r) - 1; a >= 0; --a) {
      if (++pos[static_cast<std::size_t>(a)] < out[static_cast<std::size_t>(a)]) break;
      pos[static_cast<std::size_t>(a)] = 0;
    }
  }
  return idx;
}

int64_t to_int_saturating(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

Result<Dims> plain_ints(SymArray const* a, std::string const& what) {
  if (!a) return invalid_argument(what + " is missing");
  if (a->has_batch()) return unsupported(what + " depends on the batch size");
  if (a->is_float()) {
    Dims v;
    for (double x : a->f) v.push_back(to_int_saturating(x));
    return v;
  }
  return a->i;
}

Result<BroadcastInputs> broadcast_inputs(FoldContext const& c) {
  BroadcastInputs b;
  for (auto const* in : c.ins) {
    if (!in) return invalid_argument("missing input");
    ASSIGN_OR_RETURN(b.dims, broadcast_dims(b.dims, in->dims));
  }
  for (auto const* in : c.ins) b.idx.push_back(broadcast_index(in->dims, b.dims));
  b.count = fold_numel(b.dims);
  return b;
}

Result<Folded> fold_elementwise(FoldContext const& c, FloatFoldOp f, IntFoldOp i) {
  ASSIGN_OR_RETURN(BroadcastInputs const bc, broadcast_inputs(c));
  auto const& ins = c.ins;
  auto const& idx = bc.idx;
  SymArray out;
  out.dims = bc.dims;
  out.dtype = ins[0]->dtype;
  if (out.is_float()) {
    for (auto const* in : ins)
      if (in->has_batch()) return unsupported("float arithmetic on the batch size");
    for (int64_t k = 0; k < bc.count; ++k) {
      auto get = [&](std::size_t j) {
        SymArray const& a = *ins[j];
        return a.is_float() ? a.f[idx[j][k]] : static_cast<double>(a.i[idx[j][k]]);
      };
      out.f.push_back(f(get(0), ins.size() > 1 ? get(1) : 0.0));
    }
    if (out.dtype == DType::kFloat32)
      for (double& v : out.f) v = static_cast<float>(v);
    return folded_one(std::move(out));
  }
  bool const anyb = std::any_of(ins.begin(), ins.end(), [](SymArray const* a) { return a->has_batch(); });
  for (int64_t k = 0; k < bc.count; ++k) {
    SymInt a{ins[0]->i[idx[0][k]], ins[0]->has_batch() ? ins[0]->b[idx[0][k]] : 0};
    SymInt x;
    if (ins.size() > 1) {
      x.v = ins[1]->is_float() ? to_int_saturating(ins[1]->f[idx[1][k]]) : ins[1]->i[idx[1][k]];
      x.b = ins[1]->has_batch() ? ins[1]->b[idx[1][k]] : 0;
    }
    ASSIGN_OR_RETURN(SymInt const v, i(a, x, anyb, c.type));
    out.i.push_back(v.v);
    if (anyb) out.b.push_back(v.b);
  }
  if (!anyb || std::all_of(out.b.begin(), out.b.end(), [](int64_t x) { return x == 0; })) out.b.clear();
  return folded_one(std::move(out));
}

Status shape_overflow() { return invalid_argument("integer overflow in a shape computation"); }

Result<SymInt> no_int_fold(SymInt, SymInt, bool, std::string_view type) {
  return unsupported(std::string(type) + " on integer shape values");
}

}  // namespace gp::graph::ops
