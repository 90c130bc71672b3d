// Inside the CUDA backend: summing a broadcast result down to an operand's shape, and its adjoint,
// broadcasting an operand up to a shape, which the binary, reduce, activation, index and norm
// families share.
#pragma once

#include "exec/cuda/ops_common.h"
#include "graph/ops/common.h"
#include "kernels/cuda/math.h"

namespace gp::exec::cuda {

// scale · full summed down to `target` (a new tensor).
template <typename T>
Result<Tensor> sum_down(OpCall const& call, Tensor const& full, std::vector<int64_t> const& target, float scale) {
  kernels::hd::SumIndex index;
  if (!kernels::hd::make_sum_index(full.shape(), target, index))
    return op_error(call, "summing " + full.shape_string() + " down needs more than " +
                              std::to_string(kernels::hd::kMaxBroadcastDims) + " dimensions after merging");
  ASSIGN_OR_RETURN(Tensor g, empty(target, full.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kernels::cuda::sum_to<T>(index, full.data<T>(), scale, g.data<T>(), stream));
  return g;
}

// scale · x broadcast to `shape` (a new tensor): x seen as `view` (its own shape when empty), whose
// dims are 1 or equal to shape's. The adjoint of sum_down.
template <typename T>
Result<Tensor> broadcast_to(OpCall const& call, Tensor const& x, std::vector<int64_t> const& shape, float scale = 1.f,
                            std::vector<int64_t> const& view = {}) {
  ASSIGN_OR_RETURN(Tensor y, empty(shape, x.dtype()));
  if (y.numel() == 0) return y;
  std::vector<int64_t> const& in = view.empty() ? x.shape() : view;
  kernels::hd::BinaryIndex index;
  if (!kernels::hd::make_binary_index(shape, in, in, index))
    return op_error(call, "broadcasting " + x.shape_string() + " to " + graph::ops::dims_string(shape) +
                              " needs more than " + std::to_string(kernels::hd::kMaxBroadcastDims) +
                              " dimensions after merging");
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kernels::cuda::broadcast_scaled<T>(index, x.data<T>(), scale, y.data<T>(), stream));
  return y;
}

}  // namespace gp::exec::cuda
