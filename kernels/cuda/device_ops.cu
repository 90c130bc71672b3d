// The CUDA backend's device operations: fill,
// add-into, losses and optimizer updates. Per-element math in kernels/hd/loss.h and optim.h.
#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/block.cuh"
#include "kernels/hd/index.h"
#include "kernels/hd/loss.h"
#include "kernels/hd/optim.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T>
__global__ void fill_kernel(T* __restrict__ dst, float value, int64_t n) {
  T const v = static_cast<T>(value);
  for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = v;
}

template <typename T>
__global__ void add_inplace_kernel(T* __restrict__ dst, T const* __restrict__ src, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = static_cast<T>(static_cast<float>(dst[i]) + static_cast<float>(src[i]));
}

// One block per row: max, Σ exp(x − max), then the loss and the gradient.
template <typename T>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    cross_entropy_kernel(T const* __restrict__ logits, int64_t const* __restrict__ labels, int64_t rows,
                         int64_t classes, float scale, float* __restrict__ row_loss, T* __restrict__ grad,
                         int64_t* __restrict__ bad_row) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T const* x = logits + r * classes;
    T* g = grad + r * classes;
    int64_t const label = labels[r];
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) mx = fmaxf(mx, static_cast<float>(x[c]));
    mx = detail::block_max(mx, smem);
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += expf(static_cast<float>(x[c]) - mx);
    sum = detail::block_sum(sum, smem);
    float const inv = 1.f / sum;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      g[c] = hd::cross_entropy_grad(x[c], mx, inv, c == label, scale);
    if (threadIdx.x == 0) {
      bool const ok = hd::valid_label(label, classes);
      row_loss[r] = ok ? hd::cross_entropy_loss(x[label], mx, sum) : 0.f;
      // -1 is the largest value as unsigned: the minimum over bad rows is the smallest bad row.
      if (!ok) atomicMin(reinterpret_cast<unsigned long long*>(bad_row), static_cast<unsigned long long>(r));
    }
  }
}

template <typename T>
__global__ void mse_kernel(T const* __restrict__ pred, T const* __restrict__ target, int64_t n, float scale,
                           float* __restrict__ elem_loss, T* __restrict__ grad) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    elem_loss[i] = hd::squared_error(pred[i], target[i]);
    grad[i] = hd::squared_error_grad(pred[i], target[i], scale);
  }
}

template <typename T>
__global__ void sgd_kernel(T* __restrict__ w, T const* __restrict__ g, T* __restrict__ buf, int64_t n, float lr,
                           float momentum, float weight_decay) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    hd::sgd_step(w[i], g[i], buf != nullptr ? buf + i : nullptr, lr, momentum, weight_decay);
}

template <typename T>
__global__ void adam_kernel(T* __restrict__ w, T const* __restrict__ g, T* __restrict__ m, T* __restrict__ v, int64_t n,
                            hd::AdamCoeffs const c) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) hd::adam_step(w[i], g[i], m[i], v[i], c);
}

__global__ void multi_sgd_kernel(hd::MultiTensorEntry const* __restrict__ entries,
                                 hd::MultiTensorChunk const* __restrict__ chunks, int64_t num_chunks, float lr,
                                 float momentum, float weight_decay) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    hd::MultiTensorChunk const chunk = chunks[c];
    for (int64_t i = threadIdx.x; i < chunk.end - chunk.begin; i += blockDim.x)
      hd::multi_sgd_at(entries, chunk, i, lr, momentum, weight_decay);
  }
}

__global__ void multi_adam_kernel(hd::MultiTensorEntry const* __restrict__ entries,
                                  hd::MultiTensorChunk const* __restrict__ chunks, int64_t num_chunks,
                                  hd::AdamCoeffs const coeffs) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    hd::MultiTensorChunk const chunk = chunks[c];
    for (int64_t i = threadIdx.x; i < chunk.end - chunk.begin; i += blockDim.x)
      hd::multi_adam_at(entries, chunk, i, coeffs);
  }
}

}  // namespace

template <typename T>
cudaError_t fill(T* dst, float value, int64_t n, cudaStream_t stream) {
  if (n > 0) fill_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(dst, value, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t add_inplace(T* dst, T const* src, int64_t n, cudaStream_t stream) {
  if (n > 0) add_inplace_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(dst, src, n);
  return cudaGetLastError();
}

namespace {

__global__ void scale_kernel(float* __restrict__ x, float factor, float const* factor_at, int64_t n) {
  if (factor_at != nullptr) factor = *factor_at;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) x[i] *= factor;
}

__global__ void note_bad_index_kernel(unsigned long long* verdict, void const* idx, bool idx64, int64_t scale) {
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t));
  hd::note_bad_index(reinterpret_cast<uint64_t*>(verdict), idx, idx64, scale);
}

__global__ void nonfinite_kernel(float const* __restrict__ x, int64_t n, int* __restrict__ flag) {
  bool bad = false;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) bad = bad || !isfinite(x[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;  // a plain store: every writer writes 1
}

}  // namespace

cudaError_t scale_inplace(float* x, float factor, int64_t n, cudaStream_t stream) {
  if (n > 0) scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, factor, nullptr, n);
  return cudaGetLastError();
}

cudaError_t scale_inplace(float* x, float const* factor, int64_t n, cudaStream_t stream) {
  if (n > 0) scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, 1.f, factor, n);
  return cudaGetLastError();
}

cudaError_t note_bad_index(unsigned long long* verdict, void const* idx, bool idx64, int64_t scale,
                           cudaStream_t stream) {
  note_bad_index_kernel<<<1, 1, 0, stream>>>(verdict, idx, idx64, scale);
  return cudaGetLastError();
}

cudaError_t flag_nonfinite(float const* x, int64_t n, int* flag, cudaStream_t stream) {
  if (n > 0) nonfinite_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, flag);
  return cudaGetLastError();
}

template <typename T>
cudaError_t softmax_cross_entropy(T const* logits, int64_t const* labels, int64_t rows, int64_t classes, float scale,
                                  float* row_loss, T* grad, int64_t* bad_row, cudaStream_t stream) {
  if (rows > 0 && classes > 0)
    cross_entropy_kernel<T><<<detail::grid_rows(rows), detail::row_block(classes), 0, stream>>>(
        logits, labels, rows, classes, scale, row_loss, grad, bad_row);
  return cudaGetLastError();
}

template <typename T>
cudaError_t mse(T const* pred, T const* target, int64_t n, float scale, float* elem_loss, T* grad,
                cudaStream_t stream) {
  if (n > 0) mse_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(pred, target, n, scale, elem_loss, grad);
  return cudaGetLastError();
}

namespace {

constexpr int kSumBlock = 256;

__global__ void __launch_bounds__(kSumBlock)
    sum_to_double_kernel(float const* __restrict__ x, int64_t n, double divisor, double* __restrict__ out) {
  __shared__ double part[kSumBlock];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += kSumBlock) acc += static_cast<double>(x[i]);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kSumBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0] / divisor;
}

}  // namespace

cudaError_t sum_to_double(float const* x, int64_t n, double divisor, double* out, cudaStream_t stream) {
  sum_to_double_kernel<<<1, kSumBlock, 0, stream>>>(x, n, divisor, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t sgd_update(T* w, T const* g, T* buf, int64_t n, float lr, float momentum, float weight_decay,
                       cudaStream_t stream) {
  // kernels/optim.cc: without momentum the buffer is neither read nor written.
  T* const b = momentum == 0.f ? nullptr : buf;
  if (n > 0) sgd_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(w, g, b, n, lr, momentum, weight_decay);
  return cudaGetLastError();
}

template <typename T>
cudaError_t adam_update(T* w, T const* g, T* m, T* v, int64_t n, AdamParams const& p, cudaStream_t stream) {
  if (n > 0) adam_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(w, g, m, v, n, hd::adam_coeffs(p));
  return cudaGetLastError();
}

template cudaError_t fill<float>(float*, float, int64_t, cudaStream_t);
template cudaError_t add_inplace<float>(float*, float const*, int64_t, cudaStream_t);
#define GP_LOW(T)                                                 \
  template cudaError_t fill<T>(T*, float, int64_t, cudaStream_t); \
  template cudaError_t add_inplace<T>(T*, T const*, int64_t, cudaStream_t);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW
template cudaError_t softmax_cross_entropy<float>(float const*, int64_t const*, int64_t, int64_t, float, float*, float*,
                                                  int64_t*, cudaStream_t);
template cudaError_t mse<float>(float const*, float const*, int64_t, float, float*, float*, cudaStream_t);
cudaError_t multi_sgd_update(hd::MultiTensorEntry const* entries, hd::MultiTensorChunk const* chunks,
                             int64_t num_chunks, float lr, float momentum, float weight_decay, cudaStream_t stream) {
  if (num_chunks > 0)
    multi_sgd_kernel<<<detail::grid_rows(num_chunks), kBlock, 0, stream>>>(entries, chunks, num_chunks, lr, momentum,
                                                                           weight_decay);
  return cudaGetLastError();
}

cudaError_t multi_adam_update(hd::MultiTensorEntry const* entries, hd::MultiTensorChunk const* chunks,
                              int64_t num_chunks, AdamParams const& p, cudaStream_t stream) {
  if (num_chunks > 0)
    multi_adam_kernel<<<detail::grid_rows(num_chunks), kBlock, 0, stream>>>(entries, chunks, num_chunks,
                                                                            hd::adam_coeffs(p));
  return cudaGetLastError();
}

template cudaError_t sgd_update<float>(float*, float const*, float*, int64_t, float, float, float, cudaStream_t);
template cudaError_t adam_update<float>(float*, float const*, float*, float*, int64_t, AdamParams const&, cudaStream_t);

}  // namespace gp::kernels::cuda
