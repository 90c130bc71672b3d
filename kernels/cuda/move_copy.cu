// Strided copies (Transpose, Slice, Expand, Concat, Split and their backward passes) and Expand's
// backward reduction. The index math is kernels/hd/index.h.
#include <cstdint>

#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/block.cuh"
#include "kernels/cuda/move.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T>
__global__ void strided_copy_kernel(T const* src, T* dst, hd::StridedParams const p, int64_t n, bool accumulate) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) hd::strided_copy_at(src, dst, p, i, accumulate);
}

template <typename T>
__global__ void reduce_kernel(T const* src, T* dst, hd::ReduceParams const p, int64_t n, bool accumulate) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) hd::reduce_at(src, dst, p, i, accumulate);
}

}  // namespace

template <typename T>
cudaError_t strided_copy(T const* src, T* dst, hd::StridedParams const& p, bool accumulate, cudaStream_t stream) {
  int64_t n = 1;
  for (int k = 0; k < p.rank; ++k) n *= p.shape[k];
  if (n == 0) return cudaSuccess;
  strided_copy_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(src, dst, p, n, accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t reduce_to(T const* src, T* dst, hd::ReduceParams const& p, int64_t target_numel, bool accumulate,
                      cudaStream_t stream) {
  if (target_numel == 0) return cudaSuccess;
  reduce_kernel<T><<<grid_for(target_numel), kBlock, 0, stream>>>(src, dst, p, target_numel, accumulate);
  return cudaGetLastError();
}

template cudaError_t strided_copy<float>(float const*, float*, hd::StridedParams const&, bool, cudaStream_t);
template cudaError_t reduce_to<float>(float const*, float*, hd::ReduceParams const&, int64_t, bool, cudaStream_t);

}  // namespace gp::kernels::cuda
