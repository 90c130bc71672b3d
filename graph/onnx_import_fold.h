// Constant folding for the importer: the static shape arithmetic that torch exports around
// Reshape/Expand (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...). Values may hold the
// symbolic batch size: an integer element is `b * N` when its batch coefficient b is non-zero.
// Internal to the importer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/onnx_import_raw.h"
#include "graph/ops/infer.h"

namespace gp::graph::onnx_import {

using SymArray = ops::StaticValue;
using ops::broadcast_dims;
using ops::checked_axis;
using ops::is_float_dtype;

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

}  // namespace gp::graph::onnx_import
