#include "graph/ops/infer.h"

#include <algorithm>
#include <cmath>

namespace gp::graph::ops {
namespace {

int64_t product_of(Dims const& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <typename T>
T const* attr_get(Attributes const& attrs, std::string const& key) {
  auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : std::get_if<T>(&it->second);
}

}  // namespace

bool is_float_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

bool StaticValue::is_float() const { return is_float_dtype(dtype); }
int64_t StaticValue::numel() const { return product_of(dims); }
bool StaticValue::has_batch() const {
  return std::any_of(b.begin(), b.end(), [](int64_t x) { return x != 0; });
}

Result<TensorData> StaticValue::to_data(std::string const& name) const {
  if (has_batch())
    return unsupported("value '" + name +
                       "' depends on the batch size and is used as data; graphpipe can only "
                       "use such values as shapes");
  TensorData t;
  t.dtype = dtype;
  t.dims = dims;
  std::size_t const n = static_cast<std::size_t>(numel());
  t.bytes.resize(n * dtype_size(dtype));
  for (std::size_t k = 0; k < n; ++k) {
    switch (dtype) {
      case DType::kFloat32:
        t.as_mut<float>()[k] = static_cast<float>(f[k]);
        break;
      case DType::kFloat64:
        t.as_mut<double>()[k] = f[k];
        break;
      case DType::kInt64:
        t.as_mut<int64_t>()[k] = i[k];
        break;
      case DType::kInt32:
        t.as_mut<int32_t>()[k] = static_cast<int32_t>(i[k]);
        break;
      case DType::kInt8:
        t.as_mut<int8_t>()[k] = static_cast<int8_t>(i[k]);
        break;
      case DType::kUInt8:
      case DType::kBool:
        t.as_mut<uint8_t>()[k] = static_cast<uint8_t>(i[k]);
        break;
      case DType::kFloat16:
      case DType::kBFloat16:
        return unsupported("folding float16/bfloat16 values");
    }
  }
  return t;
}

Result<StaticValue> StaticValue::from_data(TensorData const& data, std::vector<int64_t> const& batch_coef) {
  if (data.dtype == DType::kFloat16 || data.dtype == DType::kBFloat16)
    return unsupported("folding float16/bfloat16 values");
  StaticValue a;
  a.dtype = data.dtype;
  a.dims = data.dims;
  if (a.is_float())
    a.f = data.to_doubles();
  else
    a.i = data.to_int64s();
  a.b = batch_coef;
  return a;
}

StaticValue StaticValue::from_dims(Dims const& dims) {
  StaticValue a;
  a.dtype = DType::kInt64;
  a.dims = {static_cast<int64_t>(dims.size())};
  bool anyb = false;
  for (int64_t d : dims) {
    a.i.push_back(d < 0 ? 0 : d);
    a.b.push_back(d < 0 ? -d : 0);
    anyb |= d < 0;
  }
  if (!anyb) a.b.clear();
  return a;
}

int64_t attr_int(Attributes const& attrs, std::string const& key, int64_t dflt) {
  if (auto const* v = attr_get<int64_t>(attrs, key)) return *v;
  return dflt;
}

double attr_float(Attributes const& attrs, std::string const& key, double dflt) {
  if (auto const* v = attr_get<double>(attrs, key)) return *v;
  if (auto const* v = attr_get<int64_t>(attrs, key)) return static_cast<double>(*v);
  return dflt;
}

std::string attr_string(Attributes const& attrs, std::string const& key, std::string const& dflt) {
  if (auto const* v = attr_get<std::string>(attrs, key)) return *v;
  return dflt;
}

std::optional<Dims> attr_ints(Attributes const& attrs, std::string const& key) {
  if (auto const* v = attr_get<std::vector<int64_t>>(attrs, key)) return *v;
  return std::nullopt;
}

std::optional<std::vector<double>> attr_floats(Attributes const& attrs, std::string const& key) {
  if (auto const* v = attr_get<std::vector<double>>(attrs, key)) return *v;
  return std::nullopt;
}

TensorData const* attr_tensor(Attributes const& attrs, std::string const& key) {
  return attr_get<TensorData>(attrs, key);
}

std::size_t InferContext::named_outputs() const {
  std::size_t n = 0;
  for (auto const& o : outputs) n += !o.empty();
  return n;
}

Result<StaticValue const*> InferContext::static_input(std::size_t k, std::string const& what) const {
  if (!has(k)) return static_cast<StaticValue const*>(nullptr);
  if (!value_of)
    return unsupported("its " + what + " (input " + std::to_string(k) +
                       ") is computed at run time; graphpipe needs static shapes and attributes (only the first, "
                       "batch dimension of the inputs may be dynamic)");
  return value_of(k, what);
}

Result<Dims> InferContext::static_ints(std::size_t k, std::string const& what) const {
  ASSIGN_OR_RETURN(StaticValue const* a, static_input(k, what));
  if (!a) return Dims{};
  if (a->has_batch()) return unsupported("its " + what + " depends on the batch size");
  if (a->is_float()) {
    Dims v;
    for (double x : a->f) v.push_back(static_cast<int64_t>(x));
    return v;
  }
  return a->i;
}

Result<double> InferContext::static_scalar(std::size_t k, std::string const& what, double dflt) const {
  ASSIGN_OR_RETURN(StaticValue const* a, static_input(k, what));
  if (!a) return dflt;
  if (a->numel() != 1)
    return invalid_argument("its " + what + " must hold one value, has " + std::to_string(a->numel()));
  if (a->has_batch()) return unsupported("its " + what + " depends on the batch size");
  return a->is_float() ? a->f.at(0) : static_cast<double>(a->i.at(0));
}

std::string dim_str(int64_t d) {
  if (d == kBatch) return "N";
  if (d < 0) return std::to_string(-d) + "N";
  return std::to_string(d);
}

std::string dims_str(Dims const& d) { return Shape{d}.to_string(); }

Result<int64_t> mul_dims(int64_t a, int64_t b) {
  if (a < 0 && b < 0) return unsupported("a shape multiplies the batch size by itself");
  if (a < 0 || b < 0) return -(std::abs(a) * std::abs(b));
  return a * b;
}

Result<int64_t> prod_dims(Dims const& d, std::size_t from, std::size_t to) {
  int64_t p = 1;
  for (std::size_t k = from; k < to; ++k) {
    ASSIGN_OR_RETURN(p, mul_dims(p, d[k]));
  }
  return p;
}

Result<int64_t> checked_axis(int64_t axis, int64_t rank, bool split_point) {
  // An axis is in [-rank, rank); a split point (Flatten's) in [-rank, rank]. Negative counts from the
  // back either way: axis + rank (Flatten's -1 keeps the last dimension apart).
  int64_t const limit = split_point ? rank + 1 : rank;
  if (axis < -rank || axis >= limit)
    return invalid_argument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Result<Dims> broadcast_dims(Dims const& a, Dims const& b) {
  std::size_t const r = std::max(a.size(), b.size());
  Dims out(r);
  for (std::size_t k = 0; k < r; ++k) {
    int64_t const x = k + a.size() >= r ? a[k + a.size() - r] : 1;
    int64_t const y = k + b.size() >= r ? b[k + b.size() - r] : 1;
    if (x == y || y == 1)
      out[k] = x;
    else if (x == 1)
      out[k] = y;
    else {
      auto const s = [](int64_t d) {
        return d < 0 ? (d == -1 ? std::string("N") : std::to_string(-d) + "N") : std::to_string(d);
      };
      return invalid_argument("shapes do not broadcast: dimension " + s(x) + " against " + s(y));
    }
  }
  return out;
}

Result<Window> sliding_window(InferContext const& c, Dims const& in, Dims const& kernel, Dims const& strides,
                              Dims const& dil, bool ceil_mode) {
  std::size_t const sp = in.size();
  if (kernel.size() != sp || strides.size() != sp || dil.size() != sp)
    return invalid_argument("kernel_shape, strides and dilations need one value per spatial dimension (" +
                            std::to_string(sp) + ")");
  Window w;
  w.pads = c.attr_ints("pads").value_or(Dims(2 * sp, 0));
  if (w.pads.size() != 2 * sp) return invalid_argument("pads has " + std::to_string(w.pads.size()) + " values");
  std::string const auto_pad = c.attr_string("auto_pad", "NOTSET");
  for (std::size_t i = 0; i < sp; ++i) {
    if (in[i] < 0) return unsupported("a sliding window over the batch dimension");
    if (kernel[i] <= 0 || strides[i] <= 0 || dil[i] <= 0)
      return invalid_argument("kernel_shape, strides and dilations must be positive");
    int64_t const eff = (kernel[i] - 1) * dil[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t const out = (in[i] + strides[i] - 1) / strides[i];
      int64_t const total = std::max<int64_t>(0, (out - 1) * strides[i] + eff - in[i]);
      int64_t const small = total / 2;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pads[i + sp] = total - w.pads[i];
    } else if (auto_pad == "VALID") {
      w.pads[i] = w.pads[i + sp] = 0;
    }
    int64_t const out = window_outputs(in[i], kernel[i], strides[i], dil[i], w.pads[i], w.pads[i + sp], ceil_mode);
    if (out <= 0) return invalid_argument("the window is larger than the padded input");
    w.out.push_back(out);
  }
  return w;
}

Result<DType> dtype_of_onnx(int64_t t) {
  switch (t) {
    case 1:
      return DType::kFloat32;
    case 10:
      return DType::kFloat16;
    case 16:
      return DType::kBFloat16;
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
      break;
  }
  return unsupported("Cast to ONNX element type " + std::to_string(t) + " is not supported");
}

int64_t onnx_of_dtype(DType d) {
  switch (d) {
    case DType::kFloat32:
      return 1;
    case DType::kFloat16:
      return 10;
    case DType::kBFloat16:
      return 16;
    case DType::kFloat64:
      return 11;
    case DType::kInt64:
      return 7;
    case DType::kInt32:
      return 6;
    case DType::kInt8:
      return 3;
    case DType::kUInt8:
      return 2;
    case DType::kBool:
      return 9;
  }
  return 0;
}

Inferred like_input(InferContext const& c, OpAttrs typed) {
  Inferred k;
  k.typed = std::move(typed);
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

std::vector<std::size_t> all_slots(InferContext const& c) {
  std::vector<std::size_t> v(c.inputs.size());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = k;
  return v;
}

}  // namespace gp::graph::ops
