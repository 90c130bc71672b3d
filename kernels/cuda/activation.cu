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

__global__ void select_step_kernel(float const* __restrict__ x, int64_t n, bool take_max, int32_t k,
                                   float* __restrict__ acc, int32_t* __restrict__ which) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) hd::select_step_at(x[i], take_max, k, acc[i], which[i]);
}

__global__ void selected_grad_kernel(float const* __restrict__ gy, int32_t const* __restrict__ which, int32_t k,
                                     int64_t n, float* __restrict__ out) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = hd::selected_grad_at(gy[i], which[i], k);
}

__global__ void prelu_forward_kernel(float const* __restrict__ x, float const* __restrict__ slope, int64_t n,
                                     float* __restrict__ y) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::prelu_at(x[i], slope[i]);
}

__global__ void prelu_backward_kernel(float const* __restrict__ x, float const* __restrict__ slope,
                                      float const* __restrict__ gy, int64_t n, float* __restrict__ gx,
                                      float* __restrict__ gslope) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    if (gx) gx[i] = hd::prelu_dx_at(x[i], slope[i], gy[i]);
    if (gslope) gslope[i] = hd::prelu_dslope_at(x[i], gy[i]);
  }
}

__global__ void clip_bounds_kernel(float const* lo, float const* hi, float lo_default, float hi_default,
                                   float* bounds) {
  bounds[0] = lo != nullptr ? *lo : lo_default;
  bounds[1] = hi != nullptr ? *hi : hi_default;
}

__global__ void clip_forward_kernel(float const* __restrict__ x, int64_t n, float const* __restrict__ bounds,
                                    float* __restrict__ y) {
  float const lo = bounds[0], hi = bounds[1];
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::clip_at(x[i], lo, hi);
}

__global__ void clip_backward_kernel(float const* __restrict__ x, float const* __restrict__ dy, int64_t n,
                                     float const* __restrict__ bounds, float* __restrict__ dx,
                                     float* __restrict__ to_lo, float* __restrict__ to_hi) {
  float const lo = bounds[0], hi = bounds[1];
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    hd::ClipSide const side = hd::clip_side(x[i], lo, hi);
    if (dx != nullptr) dx[i] = side == hd::ClipSide::kInside ? dy[i] : 0.f;
    if (to_lo != nullptr) to_lo[i] = side == hd::ClipSide::kLow ? dy[i] : 0.f;
    if (to_hi != nullptr) to_hi[i] = side == hd::ClipSide::kHigh ? dy[i] : 0.f;
  }
}

template <typename T>
__global__ void int_unary_kernel(hd::IntUnaryKind kind, T const* __restrict__ x, int64_t n, T* __restrict__ y) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::int_unary_at(kind, x[i]);
}

template <typename T>
__global__ void int_clip_kernel(T const* __restrict__ x, int64_t n, T const* lo, T const* hi, T* __restrict__ y) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::int_clip_at(x[i], lo, hi);
}

}  // namespace

template <typename T>
cudaError_t int_unary(hd::IntUnaryKind kind, T const* x, int64_t n, T* y, cudaStream_t stream) {
  if (n > 0) int_unary_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(kind, x, n, y);
  return cudaGetLastError();
}
template cudaError_t int_unary<int64_t>(hd::IntUnaryKind, int64_t const*, int64_t, int64_t*, cudaStream_t);
template cudaError_t int_unary<int32_t>(hd::IntUnaryKind, int32_t const*, int64_t, int32_t*, cudaStream_t);
template cudaError_t int_unary<int8_t>(hd::IntUnaryKind, int8_t const*, int64_t, int8_t*, cudaStream_t);
template cudaError_t int_unary<uint8_t>(hd::IntUnaryKind, uint8_t const*, int64_t, uint8_t*, cudaStream_t);

template <typename T>
cudaError_t int_clip(T const* x, int64_t n, T const* lo, T const* hi, T* y, cudaStream_t stream) {
  if (n > 0) int_clip_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(x, n, lo, hi, y);
  return cudaGetLastError();
}
template cudaError_t int_clip<int64_t>(int64_t const*, int64_t, int64_t const*, int64_t const*, int64_t*, cudaStream_t);
template cudaError_t int_clip<int32_t>(int32_t const*, int64_t, int32_t const*, int32_t const*, int32_t*, cudaStream_t);
template cudaError_t int_clip<int8_t>(int8_t const*, int64_t, int8_t const*, int8_t const*, int8_t*, cudaStream_t);
template cudaError_t int_clip<uint8_t>(uint8_t const*, int64_t, uint8_t const*, uint8_t const*, uint8_t*, cudaStream_t);

cudaError_t select_step(float const* x, int64_t n, bool take_max, int32_t k, float* acc, int32_t* which,
                        cudaStream_t stream) {
  if (n > 0) select_step_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, take_max, k, acc, which);
  return cudaGetLastError();
}

cudaError_t selected_grad(float const* gy, int32_t const* which, int32_t k, int64_t n, float* out,
                          cudaStream_t stream) {
  if (n > 0) selected_grad_kernel<<<grid_for(n), kBlock, 0, stream>>>(gy, which, k, n, out);
  return cudaGetLastError();
}

cudaError_t prelu_forward(float const* x, float const* slope, int64_t n, float* y, cudaStream_t stream) {
  if (n > 0) prelu_forward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, slope, n, y);
  return cudaGetLastError();
}

cudaError_t prelu_backward(float const* x, float const* slope, float const* gy, int64_t n, float* gx, float* gslope,
                           cudaStream_t stream) {
  if (n > 0) prelu_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, slope, gy, n, gx, gslope);
  return cudaGetLastError();
}

cudaError_t clip_bounds(float const* lo, float const* hi, float lo_default, float hi_default, float* bounds,
                        cudaStream_t stream) {
  clip_bounds_kernel<<<1, 1, 0, stream>>>(lo, hi, lo_default, hi_default, bounds);
  return cudaGetLastError();
}

cudaError_t clip_forward(float const* x, int64_t n, float const* bounds, float* y, cudaStream_t stream) {
  if (n > 0) clip_forward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, bounds, y);
  return cudaGetLastError();
}

cudaError_t clip_backward(float const* x, float const* dy, int64_t n, float const* bounds, float* dx, float* to_lo,
                          float* to_hi, cudaStream_t stream) {
  if (n > 0) clip_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, dy, n, bounds, dx, to_lo, to_hi);
  return cudaGetLastError();
}

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
// Mixed precision's elementwise activations (Relu, ...) on bfloat16 and half tensors.
#define GP_LOW(T)                                                                                   \
  template cudaError_t unary_forward<T>(hd::UnaryKind, float, T const*, T*, int64_t, cudaStream_t); \
  template cudaError_t unary_backward<T>(hd::UnaryKind, float, T const*, T const*, T*, int64_t, cudaStream_t);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW

}  // namespace gp::kernels::cuda
