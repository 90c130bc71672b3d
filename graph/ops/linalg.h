// MatMul's numpy semantics (1-D operands promoted, batch dims broadcast): the one shape rule the
// importer and every backend share.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace gp::graph::ops {

struct MatMulShapes {
  std::vector<int64_t> a, b, y;  // promoted to rank >= 2, padded to one rank
  std::vector<int64_t> out;      // the ONNX output shape (promoted 1-D dims removed)
  bool fold = false;             // B is a plain matrix: A's batch dims fold into M
};

// For concrete shapes (a run) or symbolic ones (import: a negative dim is a multiple of the batch).
Result<MatMulShapes> matmul_shapes(std::vector<int64_t> a, std::vector<int64_t> b);

}  // namespace gp::graph::ops
