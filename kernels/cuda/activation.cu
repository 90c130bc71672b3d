// Elementwise activation kernels (launchers in kernels/cuda/math.h; per-element math in
// kernels/hd/activation.h). Grid-stride loops.
#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"

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

template <typename T>
__global__ void pointwise_forward_kernel(hd::Pointwise f, hd::PointwiseParams p, T const* __restrict__ x,
                                         T* __restrict__ y, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::pointwise_forward(f, p, x[i]);
}

template <typename T>
__global__ void pointwise_backward_kernel(hd::Pointwise f, hd::PointwiseParams p, T const* __restrict__ x,
                                          T const* __restrict__ dy, T* __restrict__ dx, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dx[i] = hd::pointwise_backward(f, p, x[i], dy[i]);
}

}  // namespace

template <typename T>
cudaError_t pointwise_forward(hd::Pointwise f, hd::PointwiseParams p, T const* x, T* y, int64_t n,
                              cudaStream_t stream) {
  if (n > 0) pointwise_forward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(f, p, x, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t pointwise_backward(hd::Pointwise f, hd::PointwiseParams p, T const* x, T const* dy, T* dx, int64_t n,
                               cudaStream_t stream) {
  if (n > 0) pointwise_backward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(f, p, x, dy, dx, n);
  return cudaGetLastError();
}

template cudaError_t pointwise_forward<float>(hd::Pointwise, hd::PointwiseParams, float const*, float*, int64_t,
                                              cudaStream_t);
template cudaError_t pointwise_backward<float>(hd::Pointwise, hd::PointwiseParams, float const*, float const*, float*,
                                               int64_t, cudaStream_t);

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

template cudaError_t unary_forward<float>(hd::UnaryKind, float, float const*, float*, int64_t, cudaStream_t);
template cudaError_t unary_backward<float>(hd::UnaryKind, float, float const*, float const*, float*, int64_t,
                                           cudaStream_t);

}  // namespace gp::kernels::cuda
