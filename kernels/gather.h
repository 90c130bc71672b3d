// Gather along one axis (embedding lookup for axis 0) and its backward, a scatter-add.
#pragma once

#include <cstdint>

namespace gp::kernels {

// data viewed as [outer, axis_dim, inner]; out as [outer, num_indices, inner]. Indices may be
// negative (counted from the end). Returns false when an index is out of range.
bool gather(float const* data, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
            int64_t num_indices, float* out);
// grad_data[o, idx[j], :] += grad_out[o, j, :]  (grad_data is accumulated into, not cleared).
bool gather_backward(float const* grad_out, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
                     int64_t num_indices, float* grad_data);

}  // namespace gp::kernels
