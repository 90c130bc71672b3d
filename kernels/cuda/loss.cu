// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph ops: one thread per target
// position (kernels/hd/loss.h), log-softmax one thread per (n, d) line, sums in one block.
#include "kernels/cuda/block.cuh"
#include "kernels/cuda/loss.h"
#include "kernels/hd/reduce.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename I>
__global__ void pick_kernel(hd::LossParams const p, I const* target, float const* weight, int64_t* cls, float* w,
                            unsigned long long* first_bad) {
  int64_t const m = p.n * p.d;
  for (int64_t i = global_thread(); i < m; i += grid_threads()) {
    int64_t c = -1;
    float wi = 0.f;
    if (!hd::loss_pick(p, static_cast<int64_t>(target[i]), weight, c, wi))
      atomicMin(first_bad, static_cast<unsigned long long>(i));
    cls[i] = c;
    w[i] = wi;
  }
}

__global__ void log_softmax_kernel(hd::LossParams const p, float const* x, float* y) {
  int64_t const lines = p.n * p.d;
  for (int64_t i = global_thread(); i < lines; i += grid_threads()) {
    int64_t const base = hd::loss_at(p, i, 0);
    hd::log_softmax_line(x + base, p.c, p.d, y + base);
  }
}

__global__ void values_kernel(hd::LossParams const p, float const* src, int64_t const* cls, float const* w,
                              float* values) {
  int64_t const m = p.n * p.d;
  for (int64_t i = global_thread(); i < m; i += grid_threads()) values[i] = hd::loss_value(p, src, i, cls[i], w[i]);
}

// One block: each thread sums a fixed stride of positions, then a fixed tree.
constexpr int kSumThreads = 256;
__global__ void __launch_bounds__(kSumThreads)
    sums_kernel(float const* values, float const* w, int64_t m, bool mean, double* sums, float* out) {
  __shared__ double sv[kSumThreads], sw[kSumThreads];
  double a = 0, b = 0;
  for (int64_t i = threadIdx.x; i < m; i += kSumThreads) {
    a += values[i];
    b += w[i];
  }
  sv[threadIdx.x] = a;
  sw[threadIdx.x] = b;
  __syncthreads();
  for (int s = kSumThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      sv[threadIdx.x] += sv[threadIdx.x + s];
      sw[threadIdx.x] += sw[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sums[0] = sv[0];
    sums[1] = sw[0];
    if (out) out[0] = static_cast<float>(mean ? sv[0] / sw[0] : sv[0]);  // 0 / 0 (all ignored): NaN
  }
}

__global__ void backward_kernel(hd::LossParams const p, int reduction, float const* g, double const* sums,
                                int64_t const* cls, float const* w, float const* logp, float const* logp_grad,
                                float* dx) {
  int64_t const m = p.n * p.d;
  for (int64_t i = global_thread(); i < m; i += grid_threads()) {
    float coef = 0.f;
    if (g && cls[i] >= 0) {
      float const pg = reduction == 0 ? g[i] : reduction == 1 ? g[0] : static_cast<float>(g[0] / sums[1]);
      coef = w[i] * pg;
    }
    if (!logp) {
      if (coef != 0.f) dx[hd::loss_at(p, i, cls[i])] = -coef;
      continue;
    }
    hd::sce_position_backward(p, logp, logp_grad, i, cls[i], coef, dx);
  }
}

}  // namespace

template <typename I>
cudaError_t loss_pick(hd::LossParams const& p, I const* target, float const* weight, int64_t* cls, float* w,
                      unsigned long long* first_bad, cudaStream_t stream) {
  if (cudaError_t e = cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream); e != cudaSuccess) return e;
  int64_t const m = p.n * p.d;
  if (m == 0) return cudaSuccess;
  pick_kernel<I><<<grid_for(m), kBlock, 0, stream>>>(p, target, weight, cls, w, first_bad);
  return cudaGetLastError();
}

cudaError_t loss_log_softmax(hd::LossParams const& p, float const* x, float* y, cudaStream_t stream) {
  int64_t const lines = p.n * p.d;
  if (lines == 0 || p.c == 0) return cudaSuccess;
  log_softmax_kernel<<<grid_for(lines), kBlock, 0, stream>>>(p, x, y);
  return cudaGetLastError();
}

cudaError_t loss_values(hd::LossParams const& p, float const* src, int64_t const* cls, float const* w, float* values,
                        cudaStream_t stream) {
  int64_t const m = p.n * p.d;
  if (m == 0) return cudaSuccess;
  values_kernel<<<grid_for(m), kBlock, 0, stream>>>(p, src, cls, w, values);
  return cudaGetLastError();
}

cudaError_t loss_sums(float const* values, float const* w, int64_t m, bool mean, double* sums, float* out,
                      cudaStream_t stream) {
  sums_kernel<<<1, kSumThreads, 0, stream>>>(values, w, m, mean, sums, out);
  return cudaGetLastError();
}

cudaError_t loss_backward(hd::LossParams const& p, int reduction, float const* g, double const* sums,
                          int64_t const* cls, float const* w, float const* logp, float const* logp_grad, float* dx,
                          cudaStream_t stream) {
  int64_t const m = p.n * p.d;
  if (m == 0) return cudaSuccess;
  backward_kernel<<<grid_for(m), kBlock, 0, stream>>>(p, reduction, g, sums, cls, w, logp, logp_grad, dx);
  return cudaGetLastError();
}

template cudaError_t loss_pick<int64_t>(hd::LossParams const&, int64_t const*, float const*, int64_t*, float*,
                                        unsigned long long*, cudaStream_t);
template cudaError_t loss_pick<int32_t>(hd::LossParams const&, int32_t const*, float const*, int64_t*, float*,
                                        unsigned long long*, cudaStream_t);

}  // namespace gp::kernels::cuda
