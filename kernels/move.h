// Strided copies and broadcast reductions over dense float tensors: one odometer loop that
// serves Transpose (permuted strides), Expand (zero strides), Slice (offset and stepped strides)
// and their backward passes.
//
// Gather along one axis (embedding lookup for axis 0) and its backward, a scatter-add.
#pragma once

#include <cstdint>
#include <vector>

namespace gp::kernels {

// Row-major strides (in elements) of a shape.
std::vector<int64_t> contiguous_strides(std::vector<int64_t> const& shape);

// dst[idx · dst_strides] = src[idx · src_strides] for every index idx of `shape`.
void strided_copy(float const* src, std::vector<int64_t> const& src_strides, float* dst,
                  std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape);
// The same for 16-bit elements (bfloat16 moved as bits).
void strided_copy(uint16_t const* src, std::vector<int64_t> const& src_strides, uint16_t* dst,
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

namespace gp::kernels {

// data viewed as [outer, axis_dim, inner]; out as [outer, num_indices, inner]. Indices may be
// negative (counted from the end). Returns false when an index is out of range, with the first
// such position in *bad_position when given.
bool gather(float const* data, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
            int64_t num_indices, float* out, int64_t* bad_position = nullptr);
// The same for elements of any size (masks and indices gathered, never differentiated).
bool gather_bytes(void const* data, std::size_t element_bytes, int64_t outer, int64_t axis_dim, int64_t inner,
                  int64_t const* indices, int64_t num_indices, void* out, int64_t* bad_position = nullptr);
// grad_data[o, idx[j], :] += grad_out[o, j, :]  (grad_data is accumulated into, not cleared).
bool gather_backward(float const* grad_out, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
                     int64_t num_indices, float* grad_data);

}  // namespace gp::kernels
