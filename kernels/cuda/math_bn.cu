// BatchNormalization's inference-mode backward (launchers in kernels/cuda/math.h; per-element math
// in kernels/hd/batchnorm.h). The input gradient is elementwise; the scale and bias gradients are
// per-channel sums, one block per channel combined by the fixed shuffle tree of block.cuh (no
// atomics: the result does not depend on scheduling).
#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T>
__global__ void bn_infer_backward_input_kernel(T const* __restrict__ dy, T const* __restrict__ scale,
                                               float const* __restrict__ inv_std, int64_t n, int64_t channels,
                                               int64_t spatial, T* __restrict__ dx) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t const c = hd::bn_channel(i, channels, spatial);
    dx[i] = hd::bn_infer_grad_input(dy[i], scale[c], inv_std[c]);
  }
}

// Block c sums channel c; blockDim.x == kBlock (the host twin replays that split).
template <typename T>
__global__ void bn_infer_backward_params_kernel(T const* __restrict__ x, T const* __restrict__ dy,
                                                float const* __restrict__ mean, float const* __restrict__ inv_std,
                                                int64_t batch, int64_t channels, int64_t spatial,
                                                T* __restrict__ dscale, T* __restrict__ dbias) {
  __shared__ float smem[32];
  int64_t const count = batch * spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float ds = 0.f, db = 0.f;
    hd::bn_infer_param_partial(x, dy, mean[c], inv_std[c], c, channels, spatial, count,
                               static_cast<int64_t>(threadIdx.x), static_cast<int64_t>(blockDim.x), ds, db);
    float const ds_total = detail::block_sum(ds, smem);
    float const db_total = detail::block_sum(db, smem);
    if (threadIdx.x == 0) {
      dscale[c] = static_cast<T>(ds_total);
      dbias[c] = static_cast<T>(db_total);
    }
  }
}

}  // namespace

template <typename T>
cudaError_t batchnorm_infer_backward_input(T const* dy, T const* scale, float const* inv_std, int64_t batch,
                                           int64_t channels, int64_t spatial, T* dx, cudaStream_t stream) {
  int64_t const n = batch * channels * spatial;
  if (n > 0)
    bn_infer_backward_input_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(dy, scale, inv_std, n, channels, spatial, dx);
  return cudaGetLastError();
}

template <typename T>
cudaError_t batchnorm_infer_backward_params(T const* x, T const* dy, float const* mean, float const* inv_std,
                                            int64_t batch, int64_t channels, int64_t spatial, T* dscale, T* dbias,
                                            cudaStream_t stream) {
  if (channels > 0)
    bn_infer_backward_params_kernel<T><<<detail::grid_rows(channels), kBlock, 0, stream>>>(
        x, dy, mean, inv_std, batch, channels, spatial, dscale, dbias);
  return cudaGetLastError();
}

template cudaError_t batchnorm_infer_backward_input<float>(float const*, float const*, float const*, int64_t, int64_t,
                                                           int64_t, float*, cudaStream_t);
template cudaError_t batchnorm_infer_backward_params<float>(float const*, float const*, float const*, float const*,
                                                            int64_t, int64_t, int64_t, float*, float*, cudaStream_t);

}  // namespace gp::kernels::cuda
