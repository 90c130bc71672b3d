// The normalisations' shape rules that import-time inference and every backend share.
#pragma once

#include "graph/ops/common.h"

namespace gp::graph::ops {

// LayerNormalization normalises x over its dims from `axis` on: as a [rows, cols] matrix, rows
// the product of the dims before the axis and cols of the rest (the scale's and bias's size).
// ONNX's Mean and InvStdDev outputs have `stat_shape`: x's shape with the normalised dims set to 1.
struct LayerNormSplit {
  int64_t axis = 0;  // normalised
  int64_t rows = 1, cols = 1;
  std::vector<int64_t> stat_shape;
};
Result<LayerNormSplit> layer_norm_split(Op const& op, std::vector<int64_t> const& x_shape);

}  // namespace gp::graph::ops
