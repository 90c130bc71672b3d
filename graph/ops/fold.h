// Constant folding at import time: the static shape arithmetic torch exports around Reshape and
// Expand (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...). Each op family registers one
// FoldFn per foldable op type (OpDef::fold, graph/ops/registry.h); the importer only dispatches.
// Values may hold the symbolic batch size: an integer element is i + b * N (StaticValue).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/ops/infer.h"

namespace gp::graph::ops {

using SymArray = StaticValue;

// What a fold function sees of one node whose inputs are all known at import time.
struct FoldContext {
  std::string_view type, name;
  int64_t opset = 17;
  Attributes const& attrs;
  std::vector<SymArray const*> ins;  // one per input slot; null for an omitted one
  // Every input's dims (symbolic batch), for the ops folded from shapes alone (OpDef::folds_from_shape):
  // their `ins` may be null where the value is computed at run time.
  std::vector<Dims> dims{};
  std::vector<DType> dtypes{};  // every input's dtype, as dims (EyeLike's default output dtype)

  SymArray const* in(std::size_t k) const { return k < ins.size() ? ins[k] : nullptr; }
  int64_t attr_int(std::string const& key, int64_t dflt) const { return ops::attr_int(attrs, key, dflt); }
  double attr_float(std::string const& key, double dflt) const { return ops::attr_float(attrs, key, dflt); }
  std::optional<Dims> attr_ints(std::string const& key) const { return ops::attr_ints(attrs, key); }
  TensorData const* attr_tensor(std::string const& key) const { return ops::attr_tensor(attrs, key); }
  std::string where() const;  // "<type> '<name>'"
};

// The node's outputs, or nullopt when it is better left to run (inputs too large, a dtype folding
// does not handle, a value that depends on the batch where the op runs per micro-batch).
using Folded = std::optional<std::vector<SymArray>>;
using FoldFn = Result<Folded> (*)(FoldContext const& c);

inline Folded folded_one(SymArray a) { return Folded(std::vector<SymArray>{std::move(a)}); }

// Folding makes copies element by element; past this, leave the work to the executor.
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 20;

// Elements of a constant of these dims; INT64_MAX (never folded) for a negative dimension or a
// count that overflows, so every "too big to fold" check also catches malformed shapes.
int64_t fold_numel(Dims const& dims);
Dims row_major_strides(Dims const& dims);
// Element `idx[k]` of `src` becomes element k of the result, whose dims are `dims`.
SymArray take(SymArray const& src, Dims dims, Dims const& idx);
// For each element of a tensor of `out` dims, the flat index into a tensor of `in` dims that
// numpy broadcasting reads.
Dims broadcast_index(Dims const& in, Dims const& out);
// A float as an integer, saturating at the int64 range and NaN as 0 (a plain cast of those is UB).
int64_t to_int_saturating(double x);
// The value as plain integers (floats truncated); an error when it is missing or depends on the batch.
Result<Dims> plain_ints(SymArray const* a, std::string const& what);

// The inputs broadcast against each other (every one must be present): the result's dims and, per
// input, the flat index broadcast_index reads for each result element.
struct BroadcastInputs {
  Dims dims;
  std::vector<Dims> idx;
  int64_t count = 0;
};
Result<BroadcastInputs> broadcast_inputs(FoldContext const& c);

// Elementwise arithmetic over broadcast inputs (one or two). Floats go through `f` (no batch
// allowed) and are rounded to float32 for a float32 result; integers through `i`, which carries
// batch coefficients where the arithmetic allows (an error otherwise).
struct SymInt {
  int64_t v = 0, b = 0;  // v + b * N
};
using FloatFoldOp = double (*)(double a, double c);
using IntFoldOp = Result<SymInt> (*)(SymInt a, SymInt c, bool any_batch, std::string_view type);
Result<Folded> fold_elementwise(FoldContext const& c, FloatFoldOp f, IntFoldOp i);
// The error of integer shape arithmetic that overflows.
Status shape_overflow();
// The IntFoldOp of an op that has no integer rule: an error naming the op.
Result<SymInt> no_int_fold(SymInt a, SymInt c, bool any_batch, std::string_view type);

}  // namespace gp::graph::ops
