// Dropout's kernels (launchers in kernels/cuda/math.h): the mask bit for bit as the CPU's, from
// the per-element hash of kernels/hd/view.h.
#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"
#include "kernels/hd/view.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T>
__global__ void dropout_forward_kernel(T const* __restrict__ x, int64_t n, float ratio, uint64_t base,
                                       T* __restrict__ y, uint8_t* __restrict__ mask) {
  float const scale = hd::dropout_scale(ratio);
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    bool const keep = hd::dropout_keep(base, i, ratio);
    mask[i] = keep ? 1 : 0;
    y[i] = hd::dropout_apply(x[i], keep, scale);
  }
}

template <typename T>
__global__ void dropout_backward_kernel(T const* __restrict__ dy, uint8_t const* __restrict__ mask, int64_t n,
                                        float ratio, T* __restrict__ dx) {
  float const scale = hd::dropout_scale(ratio);
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dx[i] = hd::dropout_apply(dy[i], mask[i] != 0, scale);
}

}  // namespace

template <typename T>
cudaError_t dropout_forward(T const* x, int64_t n, float ratio, uint64_t seed, T* y, uint8_t* mask,
                            cudaStream_t stream) {
  if (n > 0)
    dropout_forward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(x, n, ratio, hd::dropout_base(seed), y, mask);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dropout_backward(T const* dy, uint8_t const* mask, int64_t n, float ratio, T* dx, cudaStream_t stream) {
  if (n > 0) dropout_backward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(dy, mask, n, ratio, dx);
  return cudaGetLastError();
}

template cudaError_t dropout_forward<float>(float const*, int64_t, float, uint64_t, float*, uint8_t*, cudaStream_t);
template cudaError_t dropout_backward<float>(float const*, uint8_t const*, int64_t, float, float*, cudaStream_t);

}  // namespace gp::kernels::cuda
