// Constant folding for the importer: a node whose inputs are known at import time is folded
// through its op's rule (OpDef::fold, graph/ops/fold.h). Internal to the importer.
#pragma once

#include <vector>

#include "graph/onnx_import_raw.h"
#include "graph/ops/registry.h"

namespace gp::graph::onnx_import {

using SymArray = ops::StaticValue;
using ops::is_float_dtype;

// Folds `node` (of op `def`) over its static inputs (null for omitted ones; for an op that folds
// from shapes alone, null where the value is computed at run time); `dims` and `dtypes` hold every
// input's dims and dtype. Returns nullopt when the op has no fold rule or the inputs are too large or of a dtype
// folding leaves alone; an error when it cannot be folded and cannot be left to run either (e.g.
// arithmetic on the batch size that is not a multiple).
Result<ops::Folded> fold_node(RawNode const& node, ops::OpDef const& def, std::vector<SymArray const*> const& ins,
                              std::vector<ops::Dims> dims, int64_t opset, std::vector<DType> dtypes = {});

}  // namespace gp::graph::onnx_import
