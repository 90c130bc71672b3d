// Constant folding for the importer: the static shape arithmetic that torch exports around
// Reshape/Expand (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...). Values may hold the
// symbolic batch size: an integer element is `b * N` when its batch coefficient b is non-zero.
// Internal to the importer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/onnx_import_raw.h"

namespace gp::graph::onnx_import {

struct SymArray {
  DType dtype = DType::kInt64;
  std::vector<int64_t> dims;
  std::vector<double> f;   // values of float dtypes
  std::vector<int64_t> i;  // values of integer and bool dtypes
  std::vector<int64_t> b;  // batch coefficient per element of i; empty when none is symbolic

  bool is_float() const;
  int64_t numel() const;
  bool has_batch() const;
  // The value as concrete data; fails when it depends on the batch size.
  Result<TensorData> to_data(std::string const& name) const;
  static Result<SymArray> from_data(TensorData const& data, std::vector<int64_t> const& batch_coef = {});
  // Shape dims (negative: multiple of the batch, as in Shape) as an int64 vector with batch coefficients.
  static SymArray from_dims(std::vector<int64_t> const& dims);
};

bool is_float_dtype(DType d);

// Folds `node` over its static inputs (null for omitted ones). Returns nullopt when the node type
// is not foldable or the inputs are too large to be worth it; an error when it cannot be folded
// and cannot be left to run either (e.g. arithmetic on the batch size that is not a multiple).
Result<std::optional<std::vector<SymArray>>> fold_node(RawNode const& node, std::vector<SymArray const*> const& ins,
                                                       int64_t opset);

// Attribute accessors (defaults when absent).
int64_t attr_int(RawNode const& n, std::string const& key, int64_t dflt);
double attr_float(RawNode const& n, std::string const& key, double dflt);
std::string attr_string(RawNode const& n, std::string const& key, std::string const& dflt);
std::optional<std::vector<int64_t>> attr_ints(RawNode const& n, std::string const& key);
TensorData const* attr_tensor(RawNode const& n, std::string const& key);

// `axis` (negative: from the end) as an index into `rank` dimensions, or an error (the caller names the node)
// when it lies outside [-rank, rank); `split_point` allows rank itself (Flatten's axis, Unsqueeze's
// position in the output).
Result<int64_t> checked_axis(int64_t axis, int64_t rank, bool split_point = false);

// Numpy broadcasting of two shapes in Shape's encoding (negative = multiple of the batch).
Result<std::vector<int64_t>> broadcast_dims(std::vector<int64_t> const& a, std::vector<int64_t> const& b);

}  // namespace gp::graph::onnx_import
