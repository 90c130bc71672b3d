// Softmax and LayerNormalization kernels (launchers in kernels/cuda/math.h). A contiguous row runs
// on one block (max and sums by block_reduce: deterministic); Softmax over a strided axis runs one
// thread per column with hd::softmax_row, adjacent threads on adjacent columns (coalesced).
//
// BatchNormalization (launchers in kernels/cuda/math.h; per-element math and the split of a
// channel over blocks in kernels/hd/norm.h). Training: each channel's sums are split over blocks
// (hd::bn_split: a small channel count still fills the GPU), each block's total by the fixed
// shuffle tree of block.cuh, the blocks' totals in block order by one thread per channel (no
// atomics: the result does not depend on scheduling); the elementwise passes run by planes, so
// the channel is known without a division per element. Inference: one thread per element; its
// backward's per-channel sums one block per channel.

#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"
#include "kernels/hd/norm.h"

namespace gp::kernels::cuda {
namespace {

using detail::block_max;
using detail::block_sum;
using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    softmax_rows_kernel(T const* __restrict__ x, int64_t rows, int64_t cols, T* __restrict__ y) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T const* xr = x + r * cols;
    T* yr = y + r * cols;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, static_cast<float>(xr[c]));
    mx = block_max(mx, smem);
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += hd::softmax_exp(xr[c], mx);
    float const inv = 1.f / block_sum(sum, smem);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = hd::softmax_value(xr[c], mx, inv);
  }
}

template <typename T>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    softmax_rows_backward_kernel(T const* __restrict__ y, T const* __restrict__ dy, int64_t rows, int64_t cols,
                                 T* __restrict__ dx) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t const base = r * cols;
    float dot = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      dot += static_cast<float>(y[base + c]) * static_cast<float>(dy[base + c]);
    dot = block_sum(dot, smem);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      dx[base + c] = hd::softmax_grad(y[base + c], dy[base + c], dot);
  }
}

template <typename T>
__global__ void softmax_columns_kernel(T const* __restrict__ x, int64_t outer, int64_t axis, int64_t inner,
                                       T* __restrict__ y) {
  int64_t const n = outer * inner;
  for (int64_t t = global_thread(); t < n; t += grid_threads()) {
    int64_t const base = (t / inner) * axis * inner + t % inner;
    hd::softmax_row(x + base, axis, inner, y + base);
  }
}

template <typename T>
__global__ void softmax_columns_backward_kernel(T const* __restrict__ y, T const* __restrict__ dy, int64_t outer,
                                                int64_t axis, int64_t inner, T* __restrict__ dx) {
  int64_t const n = outer * inner;
  for (int64_t t = global_thread(); t < n; t += grid_threads()) {
    int64_t const base = (t / inner) * axis * inner + t % inner;
    hd::softmax_backward_row(y + base, dy + base, axis, inner, dx + base);
  }
}

template <typename T>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    layernorm_forward_kernel(T const* __restrict__ x, T const* __restrict__ scale, T const* __restrict__ bias,
                             int64_t rows, int64_t cols, float eps, T* __restrict__ y, float* __restrict__ mean,
                             float* __restrict__ rstd) {
  __shared__ float smem[32];
  float const n = static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T const* xr = x + r * cols;
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += static_cast<float>(xr[c]);
    float const mu = block_sum(sum, smem) / n;
    float sq = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float const d = static_cast<float>(xr[c]) - mu;
      sq += d * d;
    }
    float const rs = hd::layernorm_rstd(block_sum(sq, smem) / n, eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      y[r * cols + c] = hd::layernorm_value(xr[c], mu, rs, scale[c], bias, c);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    layernorm_backward_input_kernel(T const* __restrict__ x, T const* __restrict__ scale,
                                    float const* __restrict__ mean, float const* __restrict__ rstd,
                                    T const* __restrict__ dy, int64_t rows, int64_t cols, T* __restrict__ dx) {
  __shared__ float smem[32];
  float const n = static_cast<float>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t const base = r * cols;
    float const mu = mean[r], rs = rstd[r];
    float sg = 0.f, sgx = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float const g = static_cast<float>(dy[base + c]) * static_cast<float>(scale[c]);
      sg += g;
      sgx += g * hd::layernorm_xhat(static_cast<float>(x[base + c]), mu, rs);
    }
    float const mean_g = block_sum(sg, smem) / n;
    float const mean_gx = block_sum(sgx, smem) / n;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float const g = static_cast<float>(dy[base + c]) * static_cast<float>(scale[c]);
      dx[base + c] =
          hd::layernorm_grad<T>(hd::layernorm_xhat(static_cast<float>(x[base + c]), mu, rs), g, mean_g, mean_gx, rs);
    }
  }
}

// scratch[chunk][0 | 1][c]: Σ dy·x̂ and Σ dy over the chunk's rows (grid.y = chunk).
template <typename T>
__global__ void layernorm_params_partial_kernel(T const* __restrict__ x, float const* __restrict__ mean,
                                                float const* __restrict__ rstd, T const* __restrict__ dy, int64_t rows,
                                                int64_t cols, float* __restrict__ scratch) {
  int64_t const per = hd::layernorm_chunk_rows(rows);
  int64_t const k = blockIdx.y;
  int64_t const r0 = k * per, r1 = r0 + per < rows ? r0 + per : rows;
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) {
    float ds = 0.f, db = 0.f;
    hd::layernorm_param_sums(x, dy, mean, rstd, cols, c, r0, r1, ds, db);
    scratch[(2 * k) * cols + c] = ds;
    scratch[(2 * k + 1) * cols + c] = db;
  }
}

template <typename T>
__global__ void layernorm_params_final_kernel(float const* __restrict__ scratch, int64_t chunks, int64_t cols,
                                              T* __restrict__ dscale, T* __restrict__ dbias) {
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) {
    float ds = 0.f, db = 0.f;
    for (int64_t k = 0; k < chunks; ++k) {
      ds += scratch[(2 * k) * cols + c];
      db += scratch[(2 * k + 1) * cols + c];
    }
    dscale[c] = static_cast<T>(ds);
    if (dbias != nullptr) dbias[c] = static_cast<T>(db);
  }
}

}  // namespace

template <typename T>
cudaError_t softmax_forward(T const* x, int64_t outer, int64_t axis, int64_t inner, T* y, cudaStream_t stream) {
  if (outer <= 0 || axis <= 0 || inner <= 0) return cudaGetLastError();
  if (inner == 1) {
    softmax_rows_kernel<T><<<detail::grid_rows(outer), detail::row_block(axis), 0, stream>>>(x, outer, axis, y);
  } else {
    softmax_columns_kernel<T><<<grid_for(outer * inner), kBlock, 0, stream>>>(x, outer, axis, inner, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t softmax_backward(T const* y, T const* dy, int64_t outer, int64_t axis, int64_t inner, T* dx,
                             cudaStream_t stream) {
  if (outer <= 0 || axis <= 0 || inner <= 0) return cudaGetLastError();
  if (inner == 1) {
    softmax_rows_backward_kernel<T>
        <<<detail::grid_rows(outer), detail::row_block(axis), 0, stream>>>(y, dy, outer, axis, dx);
  } else {
    softmax_columns_backward_kernel<T><<<grid_for(outer * inner), kBlock, 0, stream>>>(y, dy, outer, axis, inner, dx);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t layernorm_forward(T const* x, T const* scale, T const* bias, int64_t rows, int64_t cols, float eps, T* y,
                              float* mean, float* rstd, cudaStream_t stream) {
  if (rows > 0 && cols > 0)
    layernorm_forward_kernel<T><<<detail::grid_rows(rows), detail::row_block(cols), 0, stream>>>(
        x, scale, bias, rows, cols, eps, y, mean, rstd);
  return cudaGetLastError();
}

template <typename T>
cudaError_t layernorm_backward_input(T const* x, T const* scale, float const* mean, float const* rstd, T const* dy,
                                     int64_t rows, int64_t cols, T* dx, cudaStream_t stream) {
  if (rows > 0 && cols > 0)
    layernorm_backward_input_kernel<T>
        <<<detail::grid_rows(rows), detail::row_block(cols), 0, stream>>>(x, scale, mean, rstd, dy, rows, cols, dx);
  return cudaGetLastError();
}

int64_t layernorm_params_scratch(int64_t rows, int64_t cols) { return 2 * hd::layernorm_chunks(rows) * cols; }

template <typename T>
cudaError_t layernorm_backward_params(T const* x, float const* mean, float const* rstd, T const* dy, int64_t rows,
                                      int64_t cols, float* scratch, T* dscale, T* dbias, cudaStream_t stream) {
  if (cols <= 0) return cudaGetLastError();
  int64_t const chunks = rows > 0 ? hd::layernorm_chunks(rows) : 0;
  if (chunks > 0) {
    dim3 const grid(grid_for(cols), static_cast<unsigned>(chunks));
    layernorm_params_partial_kernel<T><<<grid, kBlock, 0, stream>>>(x, mean, rstd, dy, rows, cols, scratch);
  }
  layernorm_params_final_kernel<T><<<grid_for(cols), kBlock, 0, stream>>>(scratch, chunks, cols, dscale, dbias);
  return cudaGetLastError();
}

template cudaError_t softmax_forward<float>(float const*, int64_t, int64_t, int64_t, float*, cudaStream_t);
template cudaError_t softmax_backward<float>(float const*, float const*, int64_t, int64_t, int64_t, float*,
                                             cudaStream_t);
template cudaError_t layernorm_forward<float>(float const*, float const*, float const*, int64_t, int64_t, float, float*,
                                              float*, float*, cudaStream_t);
template cudaError_t layernorm_backward_input<float>(float const*, float const*, float const*, float const*,
                                                     float const*, int64_t, int64_t, float*, cudaStream_t);
template cudaError_t layernorm_backward_params<float>(float const*, float const*, float const*, float const*, int64_t,
                                                      int64_t, float*, float*, float*, cudaStream_t);

}  // namespace gp::kernels::cuda

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

// Training statistics and gradient sums: block (c, b) = (blockIdx.x, blockIdx.y) sums its slice
// of channel c (hd::bn_for_slice) and writes its two totals to scratch[(b·C + c)·2 + {0, 1}].
template <typename T>
__global__ void bn_stats_kernel(T const* __restrict__ x, hd::BnSplit sp, int64_t batch, int64_t channels,
                                int64_t spatial, float* __restrict__ scratch) {
  __shared__ float smem[32];
  int64_t const c = blockIdx.x, b = blockIdx.y;
  float const shift = static_cast<float>(x[c * spatial]);  // the channel's first value
  float s = 0.f, q = 0.f;
  hd::bn_stats_slice(x, sp, batch, channels, spatial, blockDim.x, c, b, threadIdx.x, shift, s, q);
  s = detail::block_sum(s, smem);
  q = detail::block_sum(q, smem);
  if (threadIdx.x == 0) {
    scratch[(b * channels + c) * 2] = s;
    scratch[(b * channels + c) * 2 + 1] = q;
  }
}

// One thread per channel: the blocks' totals, in block order, to the mean, inv_std and running
// statistics.
template <typename T>
__global__ void bn_stats_final_kernel(T const* __restrict__ x, float const* __restrict__ scratch, int64_t blocks,
                                      int64_t channels, int64_t spatial, int64_t count, float eps, float momentum,
                                      float const* __restrict__ running_mean, float const* __restrict__ running_var,
                                      float* __restrict__ mean, float* __restrict__ inv_std,
                                      float* __restrict__ next_mean, float* __restrict__ next_var) {
  for (int64_t c = global_thread(); c < channels; c += grid_threads()) {
    float s = 0.f, q = 0.f;
    hd::bn_totals(scratch, blocks, channels, c, s, q);
    float const mu = static_cast<float>(x[c * spatial]) + s / static_cast<float>(count);
    float const var = hd::bn_shifted_variance(s, q, count);
    mean[c] = mu;
    inv_std[c] = hd::bn_inv_std(var, eps);
    next_mean[c] = hd::bn_running_update(running_mean[c], mu, 1.0, momentum);
    next_var[c] = hd::bn_running_update(running_var[c], var, hd::bn_unbias(count), momentum);
  }
}

// Elementwise over [N, C, S] by planes (hd::bn_for_planes over this block's threads).
template <typename F>
__device__ __forceinline__ void for_planes(hd::BnPlanes const& g, int64_t planes, int64_t channels, int64_t spatial,
                                           F&& f) {
  hd::bn_for_planes(g, planes, channels, spatial, blockDim.x, blockIdx.x, blockIdx.y, threadIdx.x, f);
}

template <typename T>
__global__ void bn_normalize_kernel(T const* __restrict__ x, float const* __restrict__ scale,
                                    float const* __restrict__ bias, float const* __restrict__ mean,
                                    float const* __restrict__ inv_std, hd::BnPlanes g, int64_t planes, int64_t channels,
                                    int64_t spatial, bool relu, T const* __restrict__ z, T* __restrict__ y) {
  for_planes(g, planes, channels, spatial, [&](int64_t o, int64_t c) {
    y[o] = hd::bn_value(x[o], mean[c], inv_std[c], scale[c], bias[c], relu, hd::bn_residual(z, o));
  });
}

template <typename T>
__global__ void bn_grad_kernel(T const* __restrict__ x, T const* __restrict__ dy, T const* __restrict__ y,
                               float const* __restrict__ mean, hd::BnSplit sp, int64_t batch, int64_t channels,
                               int64_t spatial, float* __restrict__ scratch) {
  __shared__ float smem[32];
  int64_t const c = blockIdx.x, b = blockIdx.y;
  float s = 0.f, q = 0.f;
  hd::bn_grad_slice(x, dy, y, mean[c], sp, batch, channels, spatial, blockDim.x, c, b, threadIdx.x, s, q);
  s = detail::block_sum(s, smem);
  q = detail::block_sum(q, smem);
  if (threadIdx.x == 0) {
    scratch[(b * channels + c) * 2] = s;
    scratch[(b * channels + c) * 2 + 1] = q;
  }
}

// dbias = Σ dy, dscale = Σ dy·x̂ = inv_std·Σ dy·(x − mean).
__global__ void bn_grad_final_kernel(float const* __restrict__ scratch, int64_t blocks, int64_t channels,
                                     float const* __restrict__ inv_std, float* __restrict__ dscale,
                                     float* __restrict__ dbias) {
  for (int64_t c = global_thread(); c < channels; c += grid_threads()) {
    float s = 0.f, q = 0.f;
    hd::bn_totals(scratch, blocks, channels, c, s, q);
    dbias[c] = s;
    dscale[c] = q * inv_std[c];
  }
}

template <typename T>
__global__ void bn_grad_input_kernel(T const* __restrict__ x, T const* __restrict__ dy, T const* __restrict__ y,
                                     float const* __restrict__ scale, float const* __restrict__ mean,
                                     float const* __restrict__ inv_std, float const* __restrict__ dscale,
                                     float const* __restrict__ dbias, int64_t count, hd::BnPlanes g, int64_t planes,
                                     int64_t channels, int64_t spatial, T* __restrict__ dx, T* __restrict__ dz) {
  for_planes(g, planes, channels, spatial, [&](int64_t o, int64_t c) {
    float const g_o = hd::bn_masked_dy(dy, y, o);
    dx[o] = hd::bn_train_grad_input(g_o, x[o], mean[c], inv_std[c], scale[c], dscale[c], dbias[c], count);
    if (dz != nullptr) dz[o] = static_cast<T>(g_o);
  });
}

template <typename T>
__global__ void bn_infer_forward_kernel(T const* __restrict__ x, T const* __restrict__ scale,
                                        T const* __restrict__ bias, float const* __restrict__ mean,
                                        float const* __restrict__ inv_std, int64_t n, int64_t channels, int64_t spatial,
                                        bool relu, T* __restrict__ y) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t const c = hd::bn_channel(i, channels, spatial);
    y[i] = hd::bn_value(x[i], mean[c], inv_std[c], scale[c], bias[c], relu);
  }
}

// y = max(0, y + z) in place (z null: max(0, y)): the residual and Relu after a normalisation that
// ran without them.
template <typename T>
__global__ void add_relu_kernel(T* __restrict__ y, T const* __restrict__ z, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    y[i] = static_cast<T>(hd::bn_relu(static_cast<float>(y[i]) + hd::bn_residual(z, i)));
}

}  // namespace

template <typename T>
cudaError_t add_relu_in_place(T* y, T const* z, int64_t n, cudaStream_t stream) {
  if (n > 0) add_relu_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(y, z, n);
  return cudaGetLastError();
}

int64_t batchnorm_scratch_floats(int64_t batch, int64_t channels, int64_t spatial) {
  return 2 * channels * hd::bn_split(batch, channels, spatial, kBlock).blocks();
}

template <typename T>
cudaError_t batchnorm_train_forward(T const* x, float const* scale, float const* bias, float const* running_mean,
                                    float const* running_var, int64_t batch, int64_t channels, int64_t spatial,
                                    float eps, float momentum, bool relu, T const* z, T* y, float* mean, float* inv_std,
                                    float* next_mean, float* next_var, float* scratch, cudaStream_t stream) {
  if (channels <= 0 || batch * spatial <= 0) return cudaGetLastError();
  hd::BnSplit const sp = hd::bn_split(batch, channels, spatial, kBlock);
  bn_stats_kernel<T><<<dim3(static_cast<unsigned>(channels), static_cast<unsigned>(sp.blocks())), kBlock, 0, stream>>>(
      x, sp, batch, channels, spatial, scratch);
  bn_stats_final_kernel<T><<<grid_for(channels), kBlock, 0, stream>>>(x, scratch, sp.blocks(), channels, spatial,
                                                                      batch * spatial, eps, momentum, running_mean,
                                                                      running_var, mean, inv_std, next_mean, next_var);
  hd::BnPlanes const g = hd::bn_planes(batch * channels, spatial, kBlock);
  bn_normalize_kernel<T><<<dim3(static_cast<unsigned>(g.along), static_cast<unsigned>(g.across)), kBlock, 0, stream>>>(
      x, scale, bias, mean, inv_std, g, batch * channels, channels, spatial, relu, z, y);
  return cudaGetLastError();
}

template <typename T>
cudaError_t batchnorm_infer_forward(T const* x, T const* scale, T const* bias, float const* mean, float const* inv_std,
                                    int64_t batch, int64_t channels, int64_t spatial, bool relu, T* y,
                                    cudaStream_t stream) {
  int64_t const n = batch * channels * spatial;
  if (n > 0)
    bn_infer_forward_kernel<T>
        <<<grid_for(n), kBlock, 0, stream>>>(x, scale, bias, mean, inv_std, n, channels, spatial, relu, y);
  return cudaGetLastError();
}

template <typename T>
cudaError_t batchnorm_train_backward(T const* x, T const* dy, T const* y, float const* scale, float const* mean,
                                     float const* inv_std, int64_t batch, int64_t channels, int64_t spatial, T* dx,
                                     T* dz, float* dscale, float* dbias, float* scratch, cudaStream_t stream) {
  if (channels <= 0 || batch * spatial <= 0) return cudaGetLastError();
  hd::BnSplit const sp = hd::bn_split(batch, channels, spatial, kBlock);
  bn_grad_kernel<T><<<dim3(static_cast<unsigned>(channels), static_cast<unsigned>(sp.blocks())), kBlock, 0, stream>>>(
      x, dy, y, mean, sp, batch, channels, spatial, scratch);
  bn_grad_final_kernel<<<grid_for(channels), kBlock, 0, stream>>>(scratch, sp.blocks(), channels, inv_std, dscale,
                                                                  dbias);
  hd::BnPlanes const g = hd::bn_planes(batch * channels, spatial, kBlock);
  bn_grad_input_kernel<T><<<dim3(static_cast<unsigned>(g.along), static_cast<unsigned>(g.across)), kBlock, 0, stream>>>(
      x, dy, y, scale, mean, inv_std, dscale, dbias, batch * spatial, g, batch * channels, channels, spatial, dx, dz);
  return cudaGetLastError();
}

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

#define GP_BN_TRAIN(T)                                                                                                 \
  template cudaError_t add_relu_in_place<T>(T*, T const*, int64_t, cudaStream_t);                                      \
  template cudaError_t batchnorm_train_forward<T>(T const*, float const*, float const*, float const*, float const*,    \
                                                  int64_t, int64_t, int64_t, float, float, bool, T const*, T*, float*, \
                                                  float*, float*, float*, float*, cudaStream_t);                       \
  template cudaError_t batchnorm_train_backward<T>(T const*, T const*, T const*, float const*, float const*,           \
                                                   float const*, int64_t, int64_t, int64_t, T*, T*, float*, float*,    \
                                                   float*, cudaStream_t);
GP_BN_TRAIN(float)
GP_FOR_LOW_FLOAT_TYPES(GP_BN_TRAIN)
#undef GP_BN_TRAIN
template cudaError_t batchnorm_infer_forward<float>(float const*, float const*, float const*, float const*,
                                                    float const*, int64_t, int64_t, int64_t, bool, float*,
                                                    cudaStream_t);
template cudaError_t batchnorm_infer_backward_input<float>(float const*, float const*, float const*, int64_t, int64_t,
                                                           int64_t, float*, cudaStream_t);
template cudaError_t batchnorm_infer_backward_params<float>(float const*, float const*, float const*, float const*,
                                                            int64_t, int64_t, int64_t, float*, float*, cudaStream_t);

// LRN: one thread per element over hd::lrn_forward_at / hd::lrn_backward_at (the CPU's loops run
// the same functions).
namespace {
__global__ void lrn_forward_kernel(float const* __restrict__ x, hd::LrnParams const p, int64_t n, float* __restrict__ y,
                                   float* __restrict__ d) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) hd::lrn_forward_at(x, p, y, d, i);
}
__global__ void lrn_backward_kernel(float const* __restrict__ x, float const* __restrict__ d,
                                    float const* __restrict__ dy, hd::LrnParams const p, int64_t n,
                                    float* __restrict__ dx) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) hd::lrn_backward_at(x, d, dy, p, dx, i);
}
}  // namespace

cudaError_t lrn_forward(float const* x, hd::LrnParams const& p, int64_t n, float* y, float* d, cudaStream_t stream) {
  if (n > 0) lrn_forward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, p, n, y, d);
  return cudaGetLastError();
}
cudaError_t lrn_backward(float const* x, float const* d, float const* dy, hd::LrnParams const& p, int64_t n, float* dx,
                         cudaStream_t stream) {
  if (n > 0) lrn_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, d, dy, p, n, dx);
  return cudaGetLastError();
}

}  // namespace gp::kernels::cuda
