// The import-time half of an op family: from one ONNX node (its attributes, its inputs' dtypes and
// shapes with the symbolic batch, the static values of its constant inputs) to the typed
// attributes, the inputs that stay operator inputs, and every output's dtype and shape. Each
// family's file (graph/ops/<family>.cc) registers one InferFn per op type (graph/ops/registry.h);
// the importer only calls them.
//
// Shapes use the graph's encoding: a negative dim -k is k times the batch size N.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "graph/op_graph.h"

namespace gp::graph::ops {

using Dims = std::vector<int64_t>;

bool is_float_dtype(DType d);

// Attribute readers over a node's attributes (defaults when absent or of another kind; an integer
// is read as a float too).
int64_t attr_int(Attributes const& attrs, std::string const& key, int64_t dflt);
double attr_float(Attributes const& attrs, std::string const& key, double dflt);
std::string attr_string(Attributes const& attrs, std::string const& key, std::string const& dflt);
std::optional<Dims> attr_ints(Attributes const& attrs, std::string const& key);
std::optional<std::vector<double>> attr_floats(Attributes const& attrs, std::string const& key);
TensorData const* attr_tensor(Attributes const& attrs, std::string const& key);

// A value known at import time: a folded constant or an initializer's data. Integer elements may
// hold the batch size: element k is i[k] + b[k] * N (b is empty when no element does).
struct StaticValue {
  DType dtype = DType::kInt64;
  Dims dims;
  std::vector<double> f;   // values of float dtypes
  std::vector<int64_t> i;  // values of integer and bool dtypes
  std::vector<int64_t> b;  // batch coefficient per element of i; empty when none is symbolic

  bool is_float() const;
  int64_t numel() const;
  bool has_batch() const;
  // The value as concrete data; fails when it depends on the batch size.
  Result<TensorData> to_data(std::string const& name) const;
  static Result<StaticValue> from_data(TensorData const& data, std::vector<int64_t> const& batch_coef = {});
  // Shape dims (negative: multiple of the batch, as in Shape) as an int64 vector with batch coefficients.
  static StaticValue from_dims(Dims const& dims);
};

struct InputDesc {
  bool present = false;  // false: an omitted optional input
  DType dtype = DType::kFloat32;
  Dims dims;
};

// What an inference function sees of one node.
struct InferContext {
  std::string type, name;
  int64_t opset = 17;
  Attributes attrs;
  std::vector<InputDesc> inputs;     // one per input slot of the node
  std::vector<std::string> outputs;  // output names; "" for an omitted optional output
  int64_t fixed_batch = 0;           // the batch size the file fixes its inputs to (0: symbolic)
  // The static value of input k: null when the slot is empty; an error when the value is computed
  // at run time (the importer supplies it; tests may leave it empty: then every input is dynamic).
  std::function<Result<StaticValue const*>(std::size_t, std::string const&)> value_of;

  // Attribute accessors (defaults when absent).
  int64_t attr_int(std::string const& key, int64_t dflt) const { return ops::attr_int(attrs, key, dflt); }
  double attr_float(std::string const& key, double dflt) const { return ops::attr_float(attrs, key, dflt); }
  std::string attr_string(std::string const& key, std::string const& dflt) const {
    return ops::attr_string(attrs, key, dflt);
  }
  std::optional<Dims> attr_ints(std::string const& key) const { return ops::attr_ints(attrs, key); }
  std::optional<std::vector<double>> attr_floats(std::string const& key) const { return ops::attr_floats(attrs, key); }

  bool has(std::size_t k) const { return k < inputs.size() && inputs[k].present; }
  Dims const& dims(std::size_t k) const { return inputs.at(k).dims; }
  DType dtype(std::size_t k) const { return inputs.at(k).dtype; }
  int64_t rank(std::size_t k) const { return static_cast<int64_t>(inputs.at(k).dims.size()); }
  std::size_t named_outputs() const;  // outputs with a name

  // Input k's static value (null when the slot is empty), or an error naming `what` when it is
  // computed at run time.
  Result<StaticValue const*> static_input(std::size_t k, std::string const& what) const;
  // Input k as integers ({} when the slot is empty); an error when it depends on the batch size.
  Result<Dims> static_ints(std::size_t k, std::string const& what) const;
  // Input k's single float value (a scalar or a one-element tensor), or `dflt` when the slot is empty.
  Result<double> static_scalar(std::size_t k, std::string const& what, double dflt) const;
};

// What the node becomes.
struct Inferred {
  OpAttrs typed;
  std::vector<std::size_t> data_inputs;      // input slots that stay operator inputs, in order
  std::vector<std::pair<DType, Dims>> outs;  // the outputs graphpipe computes (a prefix of the node's)
};

using InferFn = Result<Inferred> (*)(InferContext const& c);

// ---- shape arithmetic in the symbolic encoding ----
std::string dim_str(int64_t d);  // "N", "3N", "7"
std::string dims_str(Dims const& d);
Result<int64_t> mul_dims(int64_t a, int64_t b);
Result<int64_t> prod_dims(Dims const& d, std::size_t from, std::size_t to);
// `axis` (negative: from the end, axis + rank) as an index into `rank` dims, or an error when it lies
// outside [-rank, rank); `split_point` allows rank itself (Flatten's axis: [-rank, rank]).
Result<int64_t> checked_axis(int64_t axis, int64_t rank, bool split_point = false);
// Numpy broadcasting of two shapes.
Result<Dims> broadcast_dims(Dims const& a, Dims const& b);
// Explicit pads (begin..., end...) and output sizes of a sliding window over `in` spatial dims
// (the node's pads and auto_pad attributes).
struct Window {
  Dims pads, out;
};
Result<Window> sliding_window(InferContext const& c, Dims const& in, Dims const& kernel, Dims const& strides,
                              Dims const& dil, bool ceil_mode);
// An ONNX TensorProto element type as ours.
Result<DType> dtype_of_onnx(int64_t t);
// Ours as an ONNX TensorProto element type (its inverse).
int64_t onnx_of_dtype(DType d);
// The most common rule: one output with input 0's dtype and shape, input 0 the only data input
// (the other slots, if any, were folded into `typed`).
Inferred like_input(InferContext const& c, OpAttrs typed = {});
// Every input slot, in order (the common data_inputs; an empty slot becomes an omitted input).
std::vector<std::size_t> all_slots(InferContext const& c);

}  // namespace gp::graph::ops
