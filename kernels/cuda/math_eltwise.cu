// Elementwise, broadcasting, sum-to-shape and dropout kernels (launchers in kernels/cuda/math.h).
// Grid-stride loops; int32 indices where every offset fits (cheaper division), int64 beyond.
#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"
#include "kernels/hd/dropout.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T>
__global__ void unary_forward_kernel(hd::UnaryKind kind, float alpha, T const* __restrict__ x, T* __restrict__ y,
                                     int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::unary_forward(kind, alpha, x[i]);
}

template <typename T>
__global__ void unary_backward_kernel(hd::UnaryKind kind, float alpha, T const* __restrict__ kept,
                                      T const* __restrict__ dy, T* __restrict__ dx, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dx[i] = hd::unary_backward(kind, alpha, kept[i], dy[i]);
}

template <typename T, typename I>
__global__ void binary_kernel(hd::BinaryKind kind, hd::BinaryIndex const p, T const* __restrict__ a,
                              T const* __restrict__ b, T* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = hd::binary_op(kind, a[oa], b[ob]);
  }
}

template <typename T, typename I>
__global__ void broadcast_scaled_kernel(hd::BinaryIndex const p, T const* __restrict__ x, float scale,
                                        T* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = static_cast<T>(scale * static_cast<float>(x[oa]));
  }
}

// One thread per output element: short sums, or many outputs.
template <typename T, typename I>
__global__ void sum_thread_kernel(hd::SumIndex const p, T const* __restrict__ x, float scale, T* __restrict__ y) {
  I const n = static_cast<I>(p.out_count);
  I const stride = static_cast<I>(grid_threads());
  for (I o = static_cast<I>(global_thread()); o < n; o += stride)
    y[o] = static_cast<T>(scale * hd::sum_partial(x, p, hd::dim_offset(p.kept, o), I(0), I(1)));
}

// One block per output element: long sums over few outputs.
template <typename T, typename I>
__global__ void sum_block_kernel(hd::SumIndex const p, T const* __restrict__ x, float scale, T* __restrict__ y) {
  __shared__ float smem[32];
  I const n = static_cast<I>(p.out_count);
  for (I o = static_cast<I>(blockIdx.x); o < n; o += static_cast<I>(gridDim.x)) {
    float const part =
        hd::sum_partial(x, p, hd::dim_offset(p.kept, o), static_cast<I>(threadIdx.x), static_cast<I>(blockDim.x));
    float const total = detail::block_sum(part, smem);
    if (threadIdx.x == 0) y[o] = static_cast<T>(scale * total);
  }
}

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
cudaError_t unary_forward(hd::UnaryKind kind, float alpha, T const* x, T* y, int64_t n, cudaStream_t stream) {
  if (n > 0) unary_forward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(kind, alpha, x, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t unary_backward(hd::UnaryKind kind, float alpha, T const* kept, T const* dy, T* dx, int64_t n,
                           cudaStream_t stream) {
  if (n > 0) unary_backward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(kind, alpha, kept, dy, dx, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t binary(hd::BinaryKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                   cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    binary_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(kind, index, a, b, y);
  } else {
    binary_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(kind, index, a, b, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t broadcast_scaled(hd::BinaryIndex const& index, T const* x, float scale, T* y, cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    broadcast_scaled_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, x, scale, y);
  } else {
    broadcast_scaled_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, x, scale, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t sum_to(hd::SumIndex const& index, T const* x, float scale, T* y, cudaStream_t stream) {
  int64_t const outs = index.out_count, total = index.out_count * index.summed_count;
  if (outs <= 0) return cudaGetLastError();
  // Block per output while the outputs alone cannot fill the GPU and each sum is long.
  bool const per_block = index.summed_count >= 256 && outs < (int64_t{1} << 15);
  bool const narrow = detail::fits_int32(total) && detail::fits_int32(outs);
  if (per_block) {
    unsigned const grid = detail::grid_rows(outs);
    if (narrow) {
      sum_block_kernel<T, int32_t><<<grid, kBlock, 0, stream>>>(index, x, scale, y);
    } else {
      sum_block_kernel<T, int64_t><<<grid, kBlock, 0, stream>>>(index, x, scale, y);
    }
  } else if (narrow) {
    sum_thread_kernel<T, int32_t><<<grid_for(outs), kBlock, 0, stream>>>(index, x, scale, y);
  } else {
    sum_thread_kernel<T, int64_t><<<grid_for(outs), kBlock, 0, stream>>>(index, x, scale, y);
  }
  return cudaGetLastError();
}

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

template cudaError_t unary_forward<float>(hd::UnaryKind, float, float const*, float*, int64_t, cudaStream_t);
template cudaError_t unary_backward<float>(hd::UnaryKind, float, float const*, float const*, float*, int64_t,
                                           cudaStream_t);
template cudaError_t binary<float>(hd::BinaryKind, hd::BinaryIndex const&, float const*, float const*, float*,
                                   cudaStream_t);
template cudaError_t broadcast_scaled<float>(hd::BinaryIndex const&, float const*, float, float*, cudaStream_t);
template cudaError_t sum_to<float>(hd::SumIndex const&, float const*, float, float*, cudaStream_t);
template cudaError_t dropout_forward<float>(float const*, int64_t, float, uint64_t, float*, uint8_t*, cudaStream_t);
template cudaError_t dropout_backward<float>(float const*, uint8_t const*, int64_t, float, float*, cudaStream_t);

}  // namespace gp::kernels::cuda
