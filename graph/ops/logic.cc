// Comparisons, boolean ops, Where and Mod: import-time inference (graph/ops/infer.h). All broadcast
// their inputs the numpy way; comparisons and boolean ops give bool, Where and Mod their data's dtype.
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

bool is_boolean(DType d) { return d == DType::kBool || d == DType::kUInt8; }

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

}  // namespace

void register_logic_ops(OpTable& t) {
  define(t, "ConstantOfShape", infer_constant_of_shape);
  for (char const* type :
       {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Where", "Mod"})
    define(t, type, infer_broadcast_logic);
}

}  // namespace gp::graph::ops
