// Per-element and per-row math of Softmax and LayerNormalization (kernels/cuda/norm.cu).
// Numerically stable: softmax subtracts the row maximum, layer norm takes the mean first and the
// variance of the centred values second; statistics accumulate in float whatever T is.
//
// The row kernels split a row over a block and combine partial sums with warp shuffles; the
// serial *_row functions below run one row with the same per-element functions (the kernels for
// a strided axis, and the host twin).
//
// Per-element math of BatchNormalization (kernels/cuda/norm.cu), as the CPU backend computes it
// (oneDNN), with x seen as [N, C, S] (S: the spatial dims' product) and M = N·S per channel:
// - inference-mode backward (use_global_stats): the running statistics are constants, so with
//   inv_std = 1/√(var + eps) per channel, dx = dy·scale·inv_std, and per channel
//   dscale = Σ dy·(x − mean)·inv_std and dbias = Σ dy over N and the spatial dims;
// - the kernels that run the op where cuDNN refuses a shape: training forward with the batch's
//   mean and biased variance (saving mean and inv_std, as cuDNN does), the running statistics
//   updated as exec/cpu/norm.cc does (ONNX momentum, torch's unbiased variance), inference forward,
//   and the training backward dx = scale·inv_std·(dy − dbias/M − x̂·dscale/M), x̂ = (x − mean)·inv_std,
//   with dscale and dbias the same sums as the inference-mode backward.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

template <typename T>
GP_HD float softmax_exp(T x, float row_max) {
  return expf(static_cast<float>(x) - row_max);
}
template <typename T>
GP_HD T softmax_value(T x, float row_max, float inv_sum) {
  return static_cast<T>(softmax_exp(x, row_max) * inv_sum);
}
// dx = y · (dy − Σ y·dy)
template <typename T>
GP_HD T softmax_grad(T y, T dy, float dot) {
  return static_cast<T>(static_cast<float>(y) * (static_cast<float>(dy) - dot));
}

// One softmax row of n elements `stride` apart.
template <typename T>
GP_HD void softmax_row(T const* x, int64_t n, int64_t stride, T* y) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = fmaxf(mx, static_cast<float>(x[i * stride]));
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += softmax_exp(x[i * stride], mx);
  float const inv = 1.f / sum;
  for (int64_t i = 0; i < n; ++i) y[i * stride] = softmax_value(x[i * stride], mx, inv);
}
template <typename T>
GP_HD void softmax_backward_row(T const* y, T const* dy, int64_t n, int64_t stride, T* dx) {
  float dot = 0.f;
  for (int64_t i = 0; i < n; ++i) dot += static_cast<float>(y[i * stride]) * static_cast<float>(dy[i * stride]);
  for (int64_t i = 0; i < n; ++i) dx[i * stride] = softmax_grad(y[i * stride], dy[i * stride], dot);
}

// ---- LayerNormalization over rows of `cols` elements ----

GP_HD float layernorm_rstd(float var, float eps) { return 1.f / sqrtf(var + eps); }

// y = (x − mean) · rstd · scale (+ bias, where there is one).
template <typename T>
GP_HD T layernorm_value(T x, float mean, float rstd, T scale, T const* bias, int64_t c) {
  float const v = (static_cast<float>(x) - mean) * rstd * static_cast<float>(scale);
  return static_cast<T>(bias != nullptr ? v + static_cast<float>(bias[c]) : v);
}

// With x̂ = (x − mean)·rstd and g = dy·scale: dx = rstd · (g − mean(g) − x̂ · mean(g·x̂)).
GP_HD float layernorm_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }
template <typename T>
GP_HD T layernorm_grad(float xhat, float g, float mean_g, float mean_gx, float rstd) {
  return static_cast<T>(rstd * (g - mean_g - xhat * mean_gx));
}

// One row: y, and its mean and rstd.
template <typename T>
GP_HD void layernorm_row(T const* x, T const* scale, T const* bias, int64_t cols, float eps, T* y, float& mean,
                         float& rstd) {
  float sum = 0.f;
  for (int64_t c = 0; c < cols; ++c) sum += static_cast<float>(x[c]);
  mean = sum / static_cast<float>(cols);
  float sq = 0.f;
  for (int64_t c = 0; c < cols; ++c) {
    float const d = static_cast<float>(x[c]) - mean;
    sq += d * d;
  }
  rstd = layernorm_rstd(sq / static_cast<float>(cols), eps);
  for (int64_t c = 0; c < cols; ++c) y[c] = layernorm_value(x[c], mean, rstd, scale[c], bias, c);
}
template <typename T>
GP_HD void layernorm_backward_row(T const* x, T const* scale, T const* dy, int64_t cols, float mean, float rstd,
                                  T* dx) {
  float sg = 0.f, sgx = 0.f;
  for (int64_t c = 0; c < cols; ++c) {
    float const g = static_cast<float>(dy[c]) * static_cast<float>(scale[c]);
    sg += g;
    sgx += g * layernorm_xhat(static_cast<float>(x[c]), mean, rstd);
  }
  float const n = static_cast<float>(cols);
  for (int64_t c = 0; c < cols; ++c) {
    float const g = static_cast<float>(dy[c]) * static_cast<float>(scale[c]);
    dx[c] = layernorm_grad<T>(layernorm_xhat(static_cast<float>(x[c]), mean, rstd), g, sg / n, sgx / n, rstd);
  }
}

// The scale and bias gradients sum over chunks of rows (in parallel), then over the chunks in
// order: at most 128 chunks of at least 32 rows.
GP_HD int64_t layernorm_chunk_rows(int64_t rows) {
  int64_t const per = (rows + 127) / 128;
  return per < 32 ? 32 : per;
}
GP_HD int64_t layernorm_chunks(int64_t rows) {
  int64_t const per = layernorm_chunk_rows(rows);
  return (rows + per - 1) / per;
}

// The scale and bias gradients of column c summed over rows [r0, r1): Σ dy·x̂ and Σ dy.
template <typename T>
GP_HD void layernorm_param_sums(T const* x, T const* dy, float const* mean, float const* rstd, int64_t cols, int64_t c,
                                int64_t r0, int64_t r1, float& dscale, float& dbias) {
  float ds = 0.f, db = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    float const g = static_cast<float>(dy[r * cols + c]);
    ds += g * layernorm_xhat(static_cast<float>(x[r * cols + c]), mean[r], rstd[r]);
    db += g;
  }
  dscale = ds;
  dbias = db;
}

}  // namespace gp::kernels::hd

namespace gp::kernels::hd {

template <typename T>
GP_HD T bn_infer_grad_input(T dy, T scale, float inv_std) {
  return static_cast<T>(static_cast<float>(dy) * static_cast<float>(scale) * inv_std);
}

// The channel of element i of an [N, C, S] tensor.
GP_HD int64_t bn_channel(int64_t i, int64_t channels, int64_t spatial) { return (i / spatial) % channels; }

// Offset of the k-th element of channel c, k in [0, N·S): n = k / S, s = k mod S.
GP_HD int64_t bn_channel_offset(int64_t k, int64_t c, int64_t channels, int64_t spatial) {
  int64_t const n = k / spatial;
  return (n * channels + c) * spatial + (k - n * spatial);
}

// One thread's share of channel c's sums over k = k0, k0 + step, ... < count (count = N·S):
// Σ dy·(x − mean)·inv_std and Σ dy. One thread with step 1, or one block's threads (norm.cu).
template <typename T>
GP_HD void bn_infer_param_partial(T const* x, T const* dy, float mean, float inv_std, int64_t c, int64_t channels,
                                  int64_t spatial, int64_t count, int64_t k0, int64_t step, float& dscale,
                                  float& dbias) {
  float ds = 0.f, db = 0.f;
  for (int64_t k = k0; k < count; k += step) {
    int64_t const o = bn_channel_offset(k, c, channels, spatial);
    float const g = static_cast<float>(dy[o]);
    ds += g * ((static_cast<float>(x[o]) - mean) * inv_std);
    db += g;
  }
  dscale = ds;
  dbias = db;
}

}  // namespace gp::kernels::hd

namespace gp::kernels::hd {

// ---- BatchNormalization where cuDNN refuses the shape: one 256-thread block per channel ----

// One thread's share of channel c's Σ x over k = k0, k0 + step, ... < count (count = N·S).
template <typename T>
GP_HD float bn_sum_partial(T const* x, int64_t c, int64_t channels, int64_t spatial, int64_t count, int64_t k0,
                           int64_t step) {
  float s = 0.f;
  for (int64_t k = k0; k < count; k += step) s += static_cast<float>(x[bn_channel_offset(k, c, channels, spatial)]);
  return s;
}

// One thread's share of channel c's Σ (x − mean)² (the variance of the centred values, as layer
// norm takes it: no cancellation when |mean| is large).
template <typename T>
GP_HD float bn_sq_partial(T const* x, float mean, int64_t c, int64_t channels, int64_t spatial, int64_t count,
                          int64_t k0, int64_t step) {
  float s = 0.f;
  for (int64_t k = k0; k < count; k += step) {
    float const d = static_cast<float>(x[bn_channel_offset(k, c, channels, spatial)]) - mean;
    s += d * d;
  }
  return s;
}

// From the channel's totals: the batch mean, the biased variance, and inv_std = 1/√(var + eps).
GP_HD float bn_mean(float sum, int64_t count) { return sum / static_cast<float>(count); }
GP_HD float bn_variance(float sq_sum, int64_t count) { return sq_sum / static_cast<float>(count); }
GP_HD float bn_inv_std(float var, float eps) { return 1.f / sqrtf(var + eps); }

// y = (x − mean)·inv_std·scale + bias (training with the batch's statistics, inference with the
// running ones).
template <typename T>
GP_HD T bn_value(T x, float mean, float inv_std, T scale, T bias) {
  return static_cast<T>((static_cast<float>(x) - mean) * inv_std * static_cast<float>(scale) +
                        static_cast<float>(bias));
}

// The biased variance's correction to torch's unbiased one, M/(M − 1) (1 for M = 1), and the
// running statistic's update new = old·momentum + batch·correction·(1 − momentum) in exec/cpu/norm.cc's
// precision (float product, double sum); the mean's correction is 1.
GP_HD double bn_unbias(int64_t count) {
  return count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
}
GP_HD float bn_running_update(float running, float batch, double correction, float momentum) {
  return static_cast<float>(running * momentum + batch * correction * (1.0 - momentum));
}

// Training backward's dx from the channel's dscale = Σ dy·x̂ and dbias = Σ dy.
template <typename T>
GP_HD T bn_train_grad_input(T dy, T x, float mean, float inv_std, T scale, float dscale, float dbias, int64_t count) {
  float const m = static_cast<float>(count);
  float const xhat = (static_cast<float>(x) - mean) * inv_std;
  return static_cast<T>(static_cast<float>(scale) * inv_std *
                        (static_cast<float>(dy) - dbias / m - xhat * (dscale / m)));
}

}  // namespace gp::kernels::hd
