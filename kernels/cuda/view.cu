// The view family's kernels (launchers in kernels/cuda/math.h): Dropout's mask bit for bit as the
// CPU's, and the random ops' draws, from the per-element hash of kernels/hd/view.h; Cast between
// float32, float64, int64, int32, int8, uint8 and bool (hd::cast_value, the CPU's per-element
// conversion).
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
__global__ void dropout_forward_kernel(T const* __restrict__ x, int64_t n, float ratio, hd::SeedSource seed,
                                       T* __restrict__ y, uint8_t* __restrict__ mask) {
  uint64_t const base = hd::dropout_base(hd::seed_of(seed));  // a slot's seed is read as the kernel runs
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

template <typename From, typename To>
__global__ void cast_kernel(From const* __restrict__ x, To* __restrict__ y, int64_t n, bool to_bool) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::cast_value<From, To>(x[i], to_bool);
}

__global__ void random_kernel(int kind, hd::SeedSource seed, float a, float b, float* __restrict__ y, int64_t n) {
  uint64_t const base = hd::dropout_base(hd::seed_of(seed));
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    y[i] = kind == 0 ? hd::random_uniform_at(base, i, a, b) : hd::random_normal_at(base, i, a, b);
}

template <typename To>
__global__ void bernoulli_kernel(hd::SeedSource seed, float const* __restrict__ p, To* __restrict__ y, int64_t n) {
  uint64_t const base = hd::dropout_base(hd::seed_of(seed));
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::bernoulli_at(base, i, p[i]) ? To(1) : To(0);
}

}  // namespace

template <typename From, typename To>
cudaError_t cast(From const* x, To* y, int64_t n, bool to_bool, cudaStream_t stream) {
  if (n > 0) cast_kernel<From, To><<<grid_for(n), kBlock, 0, stream>>>(x, y, n, to_bool);
  return cudaGetLastError();
}

#define GP_CAST_FROM(F)                                                                   \
  template cudaError_t cast<F, float>(F const*, float*, int64_t, bool, cudaStream_t);     \
  template cudaError_t cast<F, double>(F const*, double*, int64_t, bool, cudaStream_t);   \
  template cudaError_t cast<F, int64_t>(F const*, int64_t*, int64_t, bool, cudaStream_t); \
  template cudaError_t cast<F, int32_t>(F const*, int32_t*, int64_t, bool, cudaStream_t); \
  template cudaError_t cast<F, int8_t>(F const*, int8_t*, int64_t, bool, cudaStream_t);   \
  template cudaError_t cast<F, uint8_t>(F const*, uint8_t*, int64_t, bool, cudaStream_t);
GP_CAST_FROM(float)
GP_CAST_FROM(double)
GP_CAST_FROM(int64_t)
GP_CAST_FROM(int32_t)
GP_CAST_FROM(int8_t)
GP_CAST_FROM(uint8_t)
#undef GP_CAST_FROM
// Mixed precision's casts: float32 <-> bfloat16 and half (round to nearest even, as the CPU).
#define GP_LOW(T)                                                                     \
  template cudaError_t cast<float, T>(float const*, T*, int64_t, bool, cudaStream_t); \
  template cudaError_t cast<T, float>(T const*, float*, int64_t, bool, cudaStream_t);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW

cudaError_t random_fill(bool normal, hd::SeedSource seed, float a, float b, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) random_kernel<<<grid_for(n), kBlock, 0, stream>>>(normal ? 1 : 0, seed, a, b, y, n);
  return cudaGetLastError();
}

template <typename To>
cudaError_t bernoulli(hd::SeedSource seed, float const* p, To* y, int64_t n, cudaStream_t stream) {
  if (n > 0) bernoulli_kernel<To><<<grid_for(n), kBlock, 0, stream>>>(seed, p, y, n);
  return cudaGetLastError();
}
template cudaError_t bernoulli<float>(hd::SeedSource, float const*, float*, int64_t, cudaStream_t);
template cudaError_t bernoulli<uint8_t>(hd::SeedSource, float const*, uint8_t*, int64_t, cudaStream_t);

template <typename T>
cudaError_t dropout_forward(T const* x, int64_t n, float ratio, hd::SeedSource seed, T* y, uint8_t* mask,
                            cudaStream_t stream) {
  if (n > 0) dropout_forward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(x, n, ratio, seed, y, mask);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dropout_backward(T const* dy, uint8_t const* mask, int64_t n, float ratio, T* dx, cudaStream_t stream) {
  if (n > 0) dropout_backward_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(dy, mask, n, ratio, dx);
  return cudaGetLastError();
}

template cudaError_t dropout_forward<float>(float const*, int64_t, float, hd::SeedSource, float*, uint8_t*,
                                            cudaStream_t);
template cudaError_t dropout_backward<float>(float const*, uint8_t const*, int64_t, float, float*, cudaStream_t);

}  // namespace gp::kernels::cuda
