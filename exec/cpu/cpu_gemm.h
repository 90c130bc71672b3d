// Products of strided row-major matrix views through oneDNN matmul (cached primitives): the
// per-time-step products of the recurrent layers and Einsum's batched contractions.
#pragma once

#include <cstdint>
#include <vector>

namespace gp::exec::cpu {

// A [rows, cols] or [batch, rows, cols] view of float memory with explicit strides (elements).
struct MatView {
  void const* data = nullptr;
  std::vector<int64_t> dims, strides;
};

// The rows × cols block at `data` whose rows lie `ld` elements apart.
MatView mat(void const* data, int64_t rows, int64_t cols, int64_t ld);
// Dense row-major [batch, rows, cols].
MatView batched(void const* data, int64_t batch, int64_t rows, int64_t cols);
// The view with its last two dims swapped (no copy).
MatView transposed(MatView v);

// c = a · b, or c += a · b when accumulate. Views must have the same rank; c is written in place.
void gemm(MatView const& a, MatView const& b, MatView const& c, bool accumulate);

}  // namespace gp::exec::cpu
