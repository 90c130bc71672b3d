// MaxPool, AveragePool, GlobalAveragePool forward and backward: one thread per output (forward)
// or per input element (backward, a gather over the windows holding it: deterministic, no
// atomics). Window math: kernels/hd/pool.h.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/block.cuh"
#include "kernels/cuda/move.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

// I: the index type of the window math, int32_t where every index fits (hd::pool_fits_int32).
template <typename T, typename I>
__global__ void pool_forward_kernel(T const* x, T* y, int32_t* argmax, hd::PoolParams const p, int64_t n, T lowest) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    int32_t arg = -1;
    y[e] = hd::pool_forward_at<T, float, I>(x, p, static_cast<I>(e), arg, lowest);
    if (argmax != nullptr) argmax[e] = arg;
  }
}

template <typename T, typename I>
__global__ void pool_backward_kernel(T const* dy, int32_t const* argmax, T* dx, hd::PoolParams const p, int64_t n,
                                     bool accumulate) {
  for (int64_t e = global_thread(); e < n; e += grid_threads())
    hd::pool_backward_at<T, float, I>(dy, argmax, p, static_cast<I>(e), dx, accumulate);
}

__global__ void pool_indices_kernel(int32_t const* argmax, hd::PoolParams const p, int64_t n, bool column_major,
                                    int64_t* indices) {
  for (int64_t e = global_thread(); e < n; e += grid_threads())
    indices[e] = hd::pool_flat_index(p, e, argmax[e], column_major);
}

// The max's starting value: float's lowest; -inf for the 16-bit types (whose conversion of float's
// lowest would round to -inf anyway). A window always holds at least one element of x.
template <typename T>
T lowest_value() {
  if constexpr (std::is_same_v<T, float>) return std::numeric_limits<float>::lowest();
  return static_cast<T>(-std::numeric_limits<float>::infinity());
}

}  // namespace

template <typename T>
cudaError_t pool_forward(T const* x, T* y, int32_t* argmax, hd::PoolParams const& p, cudaStream_t stream) {
  int64_t const n = p.planes * hd::pool_out_plane(p);
  if (n == 0) return cudaSuccess;
  if (hd::pool_fits_int32(p))
    pool_forward_kernel<T, int32_t><<<grid_for(n), kBlock, 0, stream>>>(x, y, argmax, p, n, lowest_value<T>());
  else
    pool_forward_kernel<T, int64_t><<<grid_for(n), kBlock, 0, stream>>>(x, y, argmax, p, n, lowest_value<T>());
  return cudaGetLastError();
}

template <typename T>
cudaError_t pool_backward(T const* dy, int32_t const* argmax, T* dx, hd::PoolParams const& p, bool accumulate,
                          cudaStream_t stream) {
  int64_t const n = p.planes * hd::pool_in_plane(p);
  if (n == 0) return cudaSuccess;
  if (hd::pool_fits_int32(p))
    pool_backward_kernel<T, int32_t><<<grid_for(n), kBlock, 0, stream>>>(dy, argmax, dx, p, n, accumulate);
  else
    pool_backward_kernel<T, int64_t><<<grid_for(n), kBlock, 0, stream>>>(dy, argmax, dx, p, n, accumulate);
  return cudaGetLastError();
}

cudaError_t pool_indices(int32_t const* argmax, hd::PoolParams const& p, bool column_major, int64_t* indices,
                         cudaStream_t stream) {
  int64_t const n = p.planes * hd::pool_out_plane(p);
  if (n == 0) return cudaSuccess;
  pool_indices_kernel<<<grid_for(n), kBlock, 0, stream>>>(argmax, p, n, column_major, indices);
  return cudaGetLastError();
}

template cudaError_t pool_forward<float>(float const*, float*, int32_t*, hd::PoolParams const&, cudaStream_t);
template cudaError_t pool_backward<float>(float const*, int32_t const*, float*, hd::PoolParams const&, bool,
                                          cudaStream_t);
#define GP_LOW(T)                                                                                    \
  template cudaError_t pool_forward<T>(T const*, T*, int32_t*, hd::PoolParams const&, cudaStream_t); \
  template cudaError_t pool_backward<T>(T const*, int32_t const*, T*, hd::PoolParams const&, bool, cudaStream_t);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW

}  // namespace gp::kernels::cuda
