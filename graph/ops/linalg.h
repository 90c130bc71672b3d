// MatMul's numpy semantics (1-D operands promoted, batch dims broadcast), with an operand stored
// transposed where the importer folded a Transpose into the op (MatMulAttrs): the one shape rule
// the importer and every backend share.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "graph/op_graph.h"

namespace gp::graph::ops {

struct MatMulShapes {
  std::vector<int64_t> a, b, y;           // op(A), op(B) and Y, promoted to rank >= 2, padded to one rank
  std::vector<int64_t> out;               // the ONNX output shape (promoted 1-D dims removed)
  bool fold = false;                      // op(B) is a plain matrix and A is not transposed: A's batch dims fold into M
  bool trans_a = false, trans_b = false;  // MatMulAttrs': A and B are stored with their last two axes swapped

  // The operands as stored (a, b with the last two axes swapped back where transposed), padded.
  std::vector<int64_t> stored_a() const;
  std::vector<int64_t> stored_b() const;
};

// A MatMul's typed attributes; the defaults (no transpose, alpha 1) for one built without them.
inline MatMulAttrs matmul_attrs(Op const& op) {
  auto const* a = std::get_if<MatMulAttrs>(&op.typed);
  return a ? *a : MatMulAttrs{};
}

// For concrete shapes (a run) or symbolic ones (import: a negative dim is a multiple of the batch).
// a and b are the operands as stored; a transposed operand must have rank >= 2.
Result<MatMulShapes> matmul_shapes(std::vector<int64_t> a, std::vector<int64_t> b, bool trans_a = false,
                                   bool trans_b = false);

// Gemm's Y [M, N] = alpha · op(A) · op(B) + beta · C: A and B 2-D, op() transposing where the
// attribute says, inner dimensions equal. The one shape rule of the importer and every backend.
struct GemmDims {
  int64_t m = 0, n = 0, k = 0;
};
Result<GemmDims> gemm_dims(std::vector<int64_t> const& a, std::vector<int64_t> const& b, bool trans_a, bool trans_b);

}  // namespace gp::graph::ops
