// Output shapes of the logic family's ops without data inputs (ConstantOfShape, Range): one rule for the importer and
// every backend (the actual dims of a run).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "graph/op_attrs.h"

namespace gp::graph::ops {

// The length of a Range over the batch size for a micro-batch of `batch` samples: ceil((limit +
// limit_batch · batch − start) / delta); an error when it needs `batch` and that is unknown (0).
Result<std::vector<int64_t>> range_output_shape(RangeAttrs const& a, int64_t batch);
// ConstantOfShape's shape for a micro-batch of `batch` samples; an error when it holds the batch
// and `batch` is unknown (0).
Result<std::vector<int64_t>> constant_of_shape_output_shape(ConstantOfShapeAttrs const& a, int64_t batch);

}  // namespace gp::graph::ops
