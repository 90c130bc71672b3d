// Inside the CUDA backend: summing a broadcast result down to an operand's shape, which the
// binary family's backward (binary.cc) and the reductions (reduce.cc) share.
#pragma once

#include "exec/cuda/ops_common.h"
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

}  // namespace gp::exec::cuda
