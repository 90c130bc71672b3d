// Strided copies and broadcast reductions over dense float tensors: one odometer loop that
// serves Transpose (permuted strides), Expand (zero strides), Slice (offset and stepped strides)
// and their backward passes.
#pragma once

#include <cstdint>
#include <vector>

namespace gp::kernels {

// Row-major strides (in elements) of a shape.
std::vector<int64_t> contiguous_strides(std::vector<int64_t> const& shape);

// dst[idx · dst_strides] = src[idx · src_strides] for every index idx of `shape`.
void strided_copy(float const* src, std::vector<int64_t> const& src_strides, float* dst,
                  std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape);
// dst[idx · dst_strides] += src[idx · src_strides]  (dst positions may repeat: scatter-add).
void strided_add(float const* src, std::vector<int64_t> const& src_strides, float* dst,
                 std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape);

// Left-pads `shape` with ones to `rank`.
std::vector<int64_t> pad_shape(std::vector<int64_t> const& shape, std::size_t rank);
// Numpy broadcast of two shapes; false when they are incompatible.
bool broadcast_shapes(std::vector<int64_t> const& a, std::vector<int64_t> const& b, std::vector<int64_t>& out);

// Broadcasts src (shape src_shape, numpy-compatible with out_shape) into dst of out_shape.
void expand(float const* src, std::vector<int64_t> const& src_shape, float* dst, std::vector<int64_t> const& out_shape);
// Sums src of full_shape down to target_shape (numpy-broadcastable to full_shape); the reverse of
// expand. accumulate: add into dst instead of overwriting it.
void reduce_sum_to(float const* src, std::vector<int64_t> const& full_shape, float* dst,
                   std::vector<int64_t> const& target_shape, bool accumulate);

}  // namespace gp::kernels
