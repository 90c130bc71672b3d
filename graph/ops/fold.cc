#include "graph/onnx_import_fold.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

namespace gp::graph::onnx_import {
namespace {

// Folding makes copies element by element; past this, leave the work to the executor.
constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

// Elements of a constant of these dims; INT64_MAX (never folded) for a negative dimension or a
// count that overflows, so every "too big to fold" check also catches malformed shapes.
int64_t product(std::vector<int64_t> const& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

std::vector<int64_t> strides_of(std::vector<int64_t> const& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t k = static_cast<int64_t>(dims.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * dims[k + 1];
  return s;
}

// Element `idx[k]` of `src` becomes element k of the result, whose dims are `dims`.
SymArray take(SymArray const& src, std::vector<int64_t> dims, std::vector<int64_t> const& idx) {
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

// For each element of a tensor of `out` dims, the flat index into a tensor of `in` dims that
// numpy broadcasting reads.
std::vector<int64_t> broadcast_index(std::vector<int64_t> const& in, std::vector<int64_t> const& out) {
  int64_t const n = product(out);
  std::size_t const r = out.size(), off = out.size() - in.size();
  std::vector<int64_t> const in_strides = strides_of(in);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  std::vector<int64_t> pos(r, 0);
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

int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace

namespace {

// A float as an integer, saturating at the int64 range and NaN as 0 (a plain cast of those is UB).
int64_t to_int_saturating(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

Result<std::vector<int64_t>> plain_ints(SymArray const* a, std::string const& what) {
  if (!a) return invalid_argument(what + " is missing");
  if (a->has_batch()) return unsupported(what + " depends on the batch size");
  if (a->is_float()) {
    std::vector<int64_t> v;
    for (double x : a->f) v.push_back(to_int_saturating(x));
    return v;
  }
  return a->i;
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

Result<std::optional<DType>> onnx_dtype(int64_t t) {
  switch (t) {
    case 1:
      return std::optional<DType>(DType::kFloat32);
    case 11:
      return std::optional<DType>(DType::kFloat64);
    case 7:
      return std::optional<DType>(DType::kInt64);
    case 6:
      return std::optional<DType>(DType::kInt32);
    case 3:
      return std::optional<DType>(DType::kInt8);
    case 2:
      return std::optional<DType>(DType::kUInt8);
    case 9:
      return std::optional<DType>(DType::kBool);
    default:
      return std::optional<DType>{};
  }
}

// Elementwise op over broadcast inputs; ints carry batch coefficients where the arithmetic allows.
Result<SymArray> elementwise(RawNode const& n, std::vector<SymArray const*> const& ins) {
  std::vector<int64_t> dims;
  for (auto const* in : ins) {
    if (!in) return invalid_argument("missing input");
    ASSIGN_OR_RETURN(dims, broadcast_dims(dims, in->dims));
  }
  std::vector<std::vector<int64_t>> idx;
  for (auto const* in : ins) idx.push_back(broadcast_index(in->dims, dims));
  int64_t const count = product(dims);
  std::string const& t = n.type;
  SymArray out;
  out.dims = dims;
  if (t == "Where") {
    out.dtype = ins[1]->dtype;
    SymArray const* x = ins[1];
    SymArray const* y = ins[2];
    bool const anyb = x->has_batch() || y->has_batch();
    for (int64_t k = 0; k < count; ++k) {
      auto const c = ins[0]->is_float() ? ins[0]->f[idx[0][k]] != 0 : ins[0]->i[idx[0][k]] != 0;
      if (ins[0]->has_batch() && ins[0]->b[idx[0][k]] != 0)
        return unsupported("Where condition depends on the batch size");
      SymArray const* src = c ? x : y;
      int64_t const s = c ? idx[1][k] : idx[2][k];
      if (out.is_float()) {
        out.f.push_back(src->f[s]);
      } else {
        out.i.push_back(src->i[s]);
        if (anyb) out.b.push_back(src->has_batch() ? src->b[s] : 0);
      }
    }
    return out;
  }
  if (t == "Equal") {
    out.dtype = DType::kBool;
    for (int64_t k = 0; k < count; ++k) {
      SymArray const& a = *ins[0];
      SymArray const& c = *ins[1];
      bool eq;
      if (a.is_float() || c.is_float()) {
        double const av = a.is_float() ? a.f[idx[0][k]] : static_cast<double>(a.i[idx[0][k]]);
        double const cv = c.is_float() ? c.f[idx[1][k]] : static_cast<double>(c.i[idx[1][k]]);
        eq = av == cv;
      } else {
        int64_t const ab = a.has_batch() ? a.b[idx[0][k]] : 0, cb = c.has_batch() ? c.b[idx[1][k]] : 0;
        // N is a free symbol: b*N equals a number only when it is the same symbolic expression.
        eq = ab == cb && a.i[idx[0][k]] == c.i[idx[1][k]];
      }
      out.i.push_back(eq);
    }
    return out;
  }
  out.dtype = ins[0]->dtype;
  if (out.is_float()) {
    std::function<double(double, double)> fn;
    if (t == "Add")
      fn = [](double a, double b) { return a + b; };
    else if (t == "Sub")
      fn = [](double a, double b) { return a - b; };
    else if (t == "Mul")
      fn = [](double a, double b) { return a * b; };
    else if (t == "Div")
      fn = [](double a, double b) { return a / b; };
    else if (t == "Pow")
      fn = [](double a, double b) { return std::pow(a, b); };
    else if (t == "Sqrt")
      fn = [](double a, double) { return std::sqrt(a); };
    else if (t == "Neg")
      fn = [](double a, double) { return -a; };
    else if (t == "Relu")
      fn = [](double a, double) { return a > 0 ? a : 0; };
    else
      return invalid_argument("not an elementwise op");
    for (auto const* in : ins)
      if (in->has_batch()) return unsupported("float arithmetic on the batch size");
    for (int64_t k = 0; k < count; ++k) {
      auto get = [&](std::size_t j) {
        SymArray const& a = *ins[j];
        return a.is_float() ? a.f[idx[j][k]] : static_cast<double>(a.i[idx[j][k]]);
      };
      out.f.push_back(fn(get(0), ins.size() > 1 ? get(1) : 0.0));
    }
    if (out.dtype == DType::kFloat32)
      for (double& v : out.f) v = static_cast<float>(v);
    return out;
  }
  bool const anyb = std::any_of(ins.begin(), ins.end(), [](SymArray const* a) { return a->has_batch(); });
  for (int64_t k = 0; k < count; ++k) {
    int64_t const a = ins[0]->i[idx[0][k]];
    int64_t const ab = ins[0]->has_batch() ? ins[0]->b[idx[0][k]] : 0;
    int64_t c = 0, cb = 0;
    if (ins.size() > 1) {
      c = ins[1]->is_float() ? to_int_saturating(ins[1]->f[idx[1][k]]) : ins[1]->i[idx[1][k]];
      cb = ins[1]->has_batch() ? ins[1]->b[idx[1][k]] : 0;
    }
    int64_t v = 0, vb = 0;
    auto const overflow = [] { return invalid_argument("integer overflow in a shape computation"); };
    int64_t constexpr kMin = std::numeric_limits<int64_t>::min();
    if (t == "Add" || t == "Sub") {
      int64_t const s = t == "Add" ? 1 : -1;
      int64_t sc = 0, scb = 0;
      if (__builtin_mul_overflow(s, c, &sc) || __builtin_add_overflow(a, sc, &v) ||
          __builtin_mul_overflow(s, cb, &scb) || __builtin_add_overflow(ab, scb, &vb))
        return overflow();
      if (vb != 0 && v != 0) return unsupported("a shape computation adds a number to the batch size");
    } else if (t == "Mul") {
      if (ab != 0 && cb != 0) return unsupported("a shape computation multiplies the batch size by itself");
      int64_t x = 0, y = 0;
      if (__builtin_mul_overflow(a, c, &v) || __builtin_mul_overflow(ab, c, &x) || __builtin_mul_overflow(cb, a, &y) ||
          __builtin_add_overflow(x, y, &vb))
        return overflow();
    } else if (t == "Div") {
      if ((c == -1 && (a == kMin || ab == kMin)) || (cb == -1 && ab == kMin)) return overflow();
      if (cb != 0 && ab != 0 && c == 0 && a == 0 && ab % cb == 0) {
        v = ab / cb;
      } else if (cb != 0) {
        return unsupported("a shape computation divides by the batch size");
      } else if (c == 0) {
        return invalid_argument("integer division by zero in a shape computation");
      } else if (ab != 0) {
        if (ab % c != 0) return unsupported("a shape computation divides the batch size by " + std::to_string(c));
        vb = ab / c;
      } else {
        v = a / c;
        if ((a % c != 0) && ((a < 0) != (c < 0))) --v;  // ONNX integer Div floors like numpy
      }
    } else if (t == "Neg") {
      if (a == kMin || ab == kMin) return overflow();
      v = -a;
      vb = -ab;
    } else if (t == "Pow" && !anyb) {
      v = to_int_saturating(std::pow(static_cast<double>(a), static_cast<double>(c)));
    } else if (t == "Relu" && !anyb) {
      v = a > 0 ? a : 0;
    } else {
      return unsupported(t + " on integer shape values");
    }
    out.i.push_back(v);
    if (anyb) out.b.push_back(vb);
  }
  if (!anyb || std::all_of(out.b.begin(), out.b.end(), [](int64_t x) { return x == 0; })) out.b.clear();
  return out;
}

}  // namespace

int64_t attr_int(RawNode const& n, std::string const& key, int64_t dflt) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return dflt;
  if (auto v = std::get_if<int64_t>(&it->second)) return *v;
  return dflt;
}

double attr_float(RawNode const& n, std::string const& key, double dflt) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return dflt;
  if (auto v = std::get_if<double>(&it->second)) return *v;
  if (auto v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  return dflt;
}

std::string attr_string(RawNode const& n, std::string const& key, std::string const& dflt) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return dflt;
  if (auto v = std::get_if<std::string>(&it->second)) return *v;
  return dflt;
}

std::optional<std::vector<int64_t>> attr_ints(RawNode const& n, std::string const& key) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return std::nullopt;
  if (auto v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return std::nullopt;
}

TensorData const* attr_tensor(RawNode const& n, std::string const& key) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return nullptr;
  return std::get_if<TensorData>(&it->second);
}

Result<std::optional<std::vector<SymArray>>> fold_node(RawNode const& n, std::vector<SymArray const*> const& ins,
                                                       int64_t opset) {
  using Out = std::optional<std::vector<SymArray>>;
  auto one = [](SymArray a) { return Out(std::vector<SymArray>{std::move(a)}); };
  std::string const& t = n.type;
  for (auto const* in : ins)
    if (in && in->numel() > kMaxFoldElements) return Out{};
  auto in = [&](std::size_t k) -> SymArray const* { return k < ins.size() ? ins[k] : nullptr; };
  // Axes from the attribute (older opsets) or the second input (newer ones).
  auto axes_of = [&](std::size_t input) -> Result<std::optional<std::vector<int64_t>>> {
    if (auto a = attr_ints(n, "axes")) return std::optional<std::vector<int64_t>>(*a);
    if (in(input)) {
      ASSIGN_OR_RETURN(auto v, plain_ints(in(input), "axes"));
      return std::optional<std::vector<int64_t>>(v);
    }
    return std::optional<std::vector<int64_t>>{};
  };

  if (t == "Constant") {
    SymArray a;
    if (auto const* v = attr_tensor(n, "value")) {
      ASSIGN_OR_RETURN(a, SymArray::from_data(*v));
    } else if (n.attrs.count("value_float")) {
      a.dtype = DType::kFloat32;
      a.f = {attr_float(n, "value_float", 0)};
    } else if (n.attrs.count("value_int")) {
      a.i = {attr_int(n, "value_int", 0)};
    } else if (auto v = attr_ints(n, "value_ints")) {
      a.i = *v;
      a.dims = {static_cast<int64_t>(v->size())};
    } else if (auto it = n.attrs.find("value_floats"); it != n.attrs.end()) {
      a.dtype = DType::kFloat32;
      a.f = std::get<std::vector<double>>(it->second);
      a.dims = {static_cast<int64_t>(a.f.size())};
    } else {
      return unsupported("Constant '" + n.name + "' has no value graphpipe can read (sparse or string constants)");
    }
    return one(std::move(a));
  }
  for (auto const* x : ins)
    if (x && (x->dtype == DType::kFloat16 || x->dtype == DType::kBFloat16)) return Out{};

  if (t == "Identity") return one(*in(0));
  if (t == "Cast") {
    ASSIGN_OR_RETURN(auto to, onnx_dtype(attr_int(n, "to", 1)));
    if (!to) return Out{};
    if (is_float_dtype(*to) && in(0)->has_batch()) return unsupported("casting the batch size to a float");
    return one(cast_to(*in(0), *to));
  }
  if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Pow" || t == "Sqrt" || t == "Neg" || t == "Equal" ||
      t == "Where" || t == "Relu") {
    ASSIGN_OR_RETURN(SymArray r, elementwise(n, ins));
    return one(std::move(r));
  }
  if (t == "Unsqueeze" || t == "Squeeze") {
    SymArray out = *in(0);
    ASSIGN_OR_RETURN(auto axes, axes_of(1));
    if (t == "Unsqueeze") {
      if (!axes) return invalid_argument("Unsqueeze '" + n.name + "' has no axes");
      int64_t const r = static_cast<int64_t>(out.dims.size() + axes->size());
      std::vector<int64_t> a = *axes;
      for (int64_t& x : a) {
        ASSIGN_OR_RETURN(x, checked_axis(x, r));
      }
      std::sort(a.begin(), a.end());
      for (int64_t x : a) out.dims.insert(out.dims.begin() + std::min<int64_t>(x, out.dims.size()), 1);
    } else {
      int64_t const r = static_cast<int64_t>(out.dims.size());
      std::vector<int64_t> keep;
      for (int64_t k = 0; k < r; ++k) {
        bool drop = !axes && out.dims[k] == 1;
        if (axes)
          for (int64_t x : *axes) drop |= norm_axis(x, r) == k;
        if (!drop) keep.push_back(out.dims[k]);
      }
      out.dims = keep;
    }
    return one(std::move(out));
  }
  if (t == "Gather") {
    SymArray const& data = *in(0);
    ASSIGN_OR_RETURN(auto indices, plain_ints(in(1), "Gather indices"));
    int64_t const r = static_cast<int64_t>(data.dims.size());
    int64_t const axis = norm_axis(attr_int(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return invalid_argument("Gather '" + n.name + "': axis out of range");
    int64_t const outer = product({data.dims.begin(), data.dims.begin() + axis});
    int64_t const inner = product({data.dims.begin() + axis + 1, data.dims.end()});
    int64_t const len = data.dims[axis];
    std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + axis);
    dims.insert(dims.end(), in(1)->dims.begin(), in(1)->dims.end());
    dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t g : indices) {
        int64_t const gi = g < 0 ? g + len : g;
        if (gi < 0 || gi >= len) return invalid_argument("Gather '" + n.name + "': index out of range");
        for (int64_t k = 0; k < inner; ++k) idx.push_back((o * len + gi) * inner + k);
      }
    return one(take(data, dims, idx));
  }
  if (t == "Concat") {
    std::vector<SymArray const*> parts;
    for (auto const* x : ins)
      if (x) parts.push_back(x);
    if (parts.empty()) return invalid_argument("Concat '" + n.name + "' has no inputs");
    int64_t const r = static_cast<int64_t>(parts[0]->dims.size());
    ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", 0), r));
    SymArray out;
    out.dtype = parts[0]->dtype;
    out.dims = parts[0]->dims;
    out.dims[axis] = 0;
    bool anyb = false;
    for (auto const* p : parts) {
      out.dims[axis] += p->dims[axis];
      anyb |= p->has_batch();
    }
    int64_t const outer = product({out.dims.begin(), out.dims.begin() + axis});
    for (int64_t o = 0; o < outer; ++o)
      for (auto const* p : parts) {
        int64_t const chunk = product({p->dims.begin() + axis, p->dims.end()});
        for (int64_t k = o * chunk; k < (o + 1) * chunk; ++k) {
          if (out.is_float())
            out.f.push_back(p->is_float() ? p->f[k] : static_cast<double>(p->i[k]));
          else
            out.i.push_back(p->i[k]);
          if (anyb) out.b.push_back(p->has_batch() ? p->b[k] : 0);
        }
      }
    return one(std::move(out));
  }
  if (t == "Shape") return Out{};  // folded by the lowering from the input's shape
  if (t == "ConstantOfShape") {
    if (in(0) && in(0)->has_batch()) return Out{};  // kept: a per-micro-batch op (graph/ops/logic.cc)
    ASSIGN_OR_RETURN(auto dims, plain_ints(in(0), "ConstantOfShape shape"));
    SymArray out;
    out.dims = dims;
    TensorData const* v = attr_tensor(n, "value");
    SymArray value;
    if (v) {
      ASSIGN_OR_RETURN(value, SymArray::from_data(*v));
      if (value.f.size() + value.i.size() != 1) return invalid_argument("'value' must hold exactly one element");
    } else {
      value.dtype = DType::kFloat32;
      value.f = {0.0};
    }
    out.dtype = value.dtype;
    if (product(dims) > kMaxFoldElements) return Out{};
    out.f.assign(value.is_float() ? product(dims) : 0, value.is_float() ? value.f[0] : 0);
    out.i.assign(value.is_float() ? 0 : product(dims), value.is_float() ? 0 : value.i[0]);
    return one(std::move(out));
  }
  if (t == "Range") {
    if (!in(0) || !in(1) || !in(2)) return invalid_argument("Range '" + n.name + "' needs three inputs");
    for (auto const* x : ins) {
      if (x->has_batch()) return unsupported("Range over the batch size");
      if (x->f.size() + x->i.size() != 1) return invalid_argument("start, limit and delta must be scalars");
    }
    SymArray out;
    out.dtype = in(0)->dtype;
    auto val = [](SymArray const* a) { return a->is_float() ? a->f[0] : static_cast<double>(a->i[0]); };
    double const start = val(in(0)), limit = val(in(1)), delta = val(in(2));
    if (delta == 0) return invalid_argument("Range '" + n.name + "' has delta 0");
    double const steps = std::ceil((limit - start) / delta);
    if (!(steps <= static_cast<double>(kMaxFoldElements))) return Out{};  // also NaN and infinities
    int64_t const count = steps <= 0 ? 0 : static_cast<int64_t>(steps);
    out.dims = {count};
    for (int64_t k = 0; k < count; ++k) {
      double const v = start + static_cast<double>(k) * delta;
      if (out.is_float())
        out.f.push_back(v);
      else
        out.i.push_back(to_int_saturating(v));
    }
    return one(std::move(out));
  }
  if (t == "Reshape" || t == "Flatten") {
    SymArray out = *in(0);
    int64_t const total = out.numel();
    std::vector<int64_t> shape;
    if (t == "Flatten") {
      int64_t const r = static_cast<int64_t>(out.dims.size());
      ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", 1), r, /*split_point=*/true));
      shape = {product({out.dims.begin(), out.dims.begin() + axis}),
               product({out.dims.begin() + axis, out.dims.end()})};
    } else {
      ASSIGN_OR_RETURN(shape, plain_ints(in(1), "Reshape shape"));
      int64_t known = 1, infer = -1;
      for (std::size_t k = 0; k < shape.size(); ++k) {
        if (shape[k] == 0 && attr_int(n, "allowzero", 0) == 0) shape[k] = out.dims.at(k);
        if (shape[k] == -1)
          infer = static_cast<int64_t>(k);
        else
          known *= shape[k];
      }
      if (infer >= 0) shape[infer] = known ? total / known : 0;
    }
    if (product(shape) != total) return invalid_argument("Reshape '" + n.name + "': element counts differ");
    out.dims = shape;
    return one(std::move(out));
  }
  if (t == "Transpose") {
    SymArray const& a = *in(0);
    int64_t const r = static_cast<int64_t>(a.dims.size());
    std::vector<int64_t> perm(r);
    std::iota(perm.rbegin(), perm.rend(), 0);
    if (auto p = attr_ints(n, "perm")) perm = *p;
    std::vector<int64_t> dims(r);
    for (int64_t k = 0; k < r; ++k) dims[k] = a.dims[perm[k]];
    std::vector<int64_t> const src_strides = strides_of(a.dims);
    std::vector<int64_t> idx;
    std::vector<int64_t> pos(r, 0);
    for (int64_t e = 0; e < a.numel(); ++e) {
      int64_t flat = 0;
      for (int64_t k = 0; k < r; ++k) flat += pos[k] * src_strides[perm[k]];
      idx.push_back(flat);
      for (int64_t k = r - 1; k >= 0; --k) {
        if (++pos[k] < dims[k]) break;
        pos[k] = 0;
      }
    }
    return one(take(a, dims, idx));
  }
  if (t == "Expand") {
    if (in(1) && in(1)->has_batch()) return Out{};  // kept: expands to the batch at run time
    ASSIGN_OR_RETURN(auto shape, plain_ints(in(1), "Expand shape"));
    ASSIGN_OR_RETURN(auto dims, broadcast_dims(in(0)->dims, shape));
    if (product(dims) > kMaxFoldElements) return Out{};
    return one(take(*in(0), dims, broadcast_index(in(0)->dims, dims)));
  }
  if (t == "Slice") {
    SymArray const& a = *in(0);
    int64_t const r = static_cast<int64_t>(a.dims.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset < 10) {
      starts = attr_ints(n, "starts").value_or(std::vector<int64_t>{});
      ends = attr_ints(n, "ends").value_or(std::vector<int64_t>{});
      axes = attr_ints(n, "axes").value_or(std::vector<int64_t>{});
    } else {
      ASSIGN_OR_RETURN(starts, plain_ints(in(1), "Slice starts"));
      ASSIGN_OR_RETURN(ends, plain_ints(in(2), "Slice ends"));
      if (in(3)) {
        ASSIGN_OR_RETURN(axes, plain_ints(in(3), "Slice axes"));
      }
      if (in(4)) {
        ASSIGN_OR_RETURN(steps, plain_ints(in(4), "Slice steps"));
      }
    }
    if (axes.empty())
      for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    std::vector<int64_t> lo(r, 0), step(r, 1), dims = a.dims;
    if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
      return invalid_argument("starts, ends, axes and steps differ in length");
    for (std::size_t k = 0; k < axes.size(); ++k) {
      ASSIGN_OR_RETURN(int64_t const ax, checked_axis(axes[k], r));
      int64_t const d = a.dims[ax];
      int64_t s = starts[k], e = ends[k];
      int64_t const st = steps[k];
      if (st == 0) return invalid_argument("Slice '" + n.name + "' has step 0");
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
    std::vector<int64_t> const src_strides = strides_of(a.dims);
    std::vector<int64_t> idx;
    std::vector<int64_t> pos(r, 0);
    int64_t const count = product(dims);
    for (int64_t e = 0; e < count; ++e) {
      int64_t flat = 0;
      for (int64_t k = 0; k < r; ++k) flat += (lo[k] + pos[k] * step[k]) * src_strides[k];
      idx.push_back(flat);
      for (int64_t k = r - 1; k >= 0; --k) {
        if (++pos[k] < dims[k]) break;
        pos[k] = 0;
      }
    }
    return one(take(a, dims, idx));
  }
  return Out{};
}

}  // namespace gp::graph::onnx_import
