// Per-element and per-row math of Softmax and LayerNormalization (kernels/cuda/norm.cu), and of LRN
// (at the end).
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

// ---- Training BatchNormalization on our kernels (kernels/cuda/norm.cu) ----
//
// x is [N, C, S] (S the spatial size). Each channel's N·S values are split over blocks so that a
// small C still fills the GPU: block (c, b) of a channel's `BnSplit::blocks()` takes every
// `planes`-th plane (sample) from b / spatial_blocks and, in each, every `spatial_blocks`-th run of
// `lanes` elements from b % spatial_blocks. Its 256 threads form `256 / lanes` rows of `lanes`
// (lanes a power of two, about S, so a short plane still keeps the threads busy): thread t reads
// element (b % spatial_blocks)·lanes + t % lanes + k·spatial_blocks·lanes of planes
// b / spatial_blocks + planes·(t / lanes + rows·j). The blocks' partial sums go to a scratch
// array, finished per channel in a fixed order (deterministic, no atomics).
struct BnSplit {
  int64_t planes = 1;          // blocks across the samples
  int64_t spatial_blocks = 1;  // blocks across each plane
  int64_t lanes = 32;          // threads along a plane (a power of two dividing the block)
  GP_HD int64_t blocks() const { return planes * spatial_blocks; }
};

// About 2048 blocks in all (a few per SM of the largest GPU), never more than the work has.
GP_HD BnSplit bn_split(int64_t batch, int64_t channels, int64_t spatial, int64_t block) {
  BnSplit sp;
  while (sp.lanes < block && sp.lanes < spatial) sp.lanes *= 2;
  int64_t const rows = block / sp.lanes;
  int64_t const want = (2048 + channels - 1) / channels;  // blocks per channel
  int64_t const by_planes = (batch + rows - 1) / rows;    // a block's rows each take >= 1 plane
  sp.planes = want < by_planes ? want : by_planes;
  if (sp.planes < 1) sp.planes = 1;
  int64_t const more = (want + sp.planes - 1) / sp.planes;
  int64_t const runs = (spatial + sp.lanes - 1) / sp.lanes;
  sp.spatial_blocks = more < runs ? more : runs;
  if (sp.spatial_blocks < 1) sp.spatial_blocks = 1;
  return sp;
}

// Thread t of block b: calls f(offset) for each of its elements of channel c.
template <typename F>
GP_HD void bn_for_slice(BnSplit const& sp, int64_t batch, int64_t channels, int64_t spatial, int64_t block, int64_t c,
                        int64_t b, int64_t t, F&& f) {
  int64_t const rows = block / sp.lanes;
  int64_t const n_step = sp.planes * rows;
  int64_t const i_step = sp.spatial_blocks * sp.lanes;
  int64_t const i0 = (b % sp.spatial_blocks) * sp.lanes + t % sp.lanes;
  for (int64_t n = b / sp.spatial_blocks + sp.planes * (t / sp.lanes); n < batch; n += n_step) {
    int64_t const plane = (n * channels + c) * spatial;
    for (int64_t i = i0; i < spatial; i += i_step) f(plane + i);
  }
}

// The elementwise passes (y, dx) run by planes: `lanes` threads along a plane (a power of two,
// about S), the block's other threads on the next planes, a grid of `along` x `across` blocks
// (capped at CUDA's grid limits; the loops stride over the rest). Thread t of block (bx, by) calls
// f(offset, channel) for its elements, so the channel is known per plane, not divided out per
// element.
struct BnPlanes {
  int64_t lanes = 32, along = 1, across = 1;
};
GP_HD BnPlanes bn_planes(int64_t planes, int64_t spatial, int64_t block) {
  BnPlanes g;
  while (g.lanes < block && g.lanes < spatial) g.lanes *= 2;
  int64_t const rows = block / g.lanes;
  g.along = (spatial + g.lanes - 1) / g.lanes;
  g.across = (planes + rows - 1) / rows;
  g.along = g.along < 1 ? 1 : (g.along > (int64_t{1} << 16) ? (int64_t{1} << 16) : g.along);
  g.across = g.across < 1 ? 1 : (g.across > 65535 ? 65535 : g.across);
  return g;
}
template <typename F>
GP_HD void bn_for_planes(BnPlanes const& g, int64_t planes, int64_t channels, int64_t spatial, int64_t block,
                         int64_t bx, int64_t by, int64_t t, F&& f) {
  int64_t const rows = block / g.lanes;
  int64_t const i0 = bx * g.lanes + t % g.lanes, i_step = g.along * g.lanes;
  for (int64_t p = by * rows + t / g.lanes; p < planes; p += g.across * rows) {
    int64_t const c = p % channels;
    for (int64_t i = i0; i < spatial; i += i_step) f(p * spatial + i, c);
  }
}

// The statistics' partial sums of one thread: Σ (x − shift) and Σ (x − shift)², shift a value of
// the channel (its first), so that the variance E[d²] − E[d]² does not cancel when |mean| is large.
template <typename T>
GP_HD void bn_stats_slice(T const* x, BnSplit const& sp, int64_t batch, int64_t channels, int64_t spatial,
                          int64_t block, int64_t c, int64_t b, int64_t t, float shift, float& sum, float& sq) {
  float s = 0.f, q = 0.f;
  bn_for_slice(sp, batch, channels, spatial, block, c, b, t, [&](int64_t o) {
    float const d = static_cast<float>(x[o]) - shift;
    s += d;
    q += d * d;
  });
  sum = s;
  sq = q;
}

// dy at offset o, or 0 where a fused Relu's output y[o] is not positive (BatchNormAttrs::relu:
// the normalisation's gradient is Relu's, dy·[y > 0]); y null: no Relu.
template <typename T>
GP_HD float bn_masked_dy(T const* dy, T const* y, int64_t o) {
  return y != nullptr && !(static_cast<float>(y[o]) > 0.f) ? 0.f : static_cast<float>(dy[o]);
}

// The gradient sums of one thread: Σ dy and Σ dy·(x − mean), dy masked by a fused Relu's output y
// (null: none).
template <typename T>
GP_HD void bn_grad_slice(T const* x, T const* dy, T const* y, float mean, BnSplit const& sp, int64_t batch,
                         int64_t channels, int64_t spatial, int64_t block, int64_t c, int64_t b, int64_t t,
                         float& sum_dy, float& sum_dyx) {
  float s = 0.f, q = 0.f;
  bn_for_slice(sp, batch, channels, spatial, block, c, b, t, [&](int64_t o) {
    float const g = bn_masked_dy(dy, y, o);
    s += g;
    q += g * (static_cast<float>(x[o]) - mean);
  });
  sum_dy = s;
  sum_dyx = q;
}

// scratch[(b·C + c)·2 + {0, 1}]: block b's two sums for channel c; their totals, in block order.
GP_HD void bn_totals(float const* scratch, int64_t blocks, int64_t channels, int64_t c, float& first, float& second) {
  float a = 0.f, q = 0.f;
  for (int64_t b = 0; b < blocks; ++b) {
    a += scratch[(b * channels + c) * 2];
    q += scratch[(b * channels + c) * 2 + 1];
  }
  first = a;
  second = q;
}

// The biased variance from the shifted totals (never below 0).
GP_HD float bn_shifted_variance(float sum, float sq, int64_t count) {
  float const m = sum / static_cast<float>(count);
  float const v = sq / static_cast<float>(count) - m * m;
  return v > 0.f ? v : 0.f;
}

GP_HD float bn_inv_std(float var, float eps) { return 1.f / sqrtf(var + eps); }

// A fused Relu's max(0, v) (NaN to 0, as the Relu kernels).
GP_HD float bn_relu(float v) { return v > 0.f ? v : 0.f; }

// y = (x − mean)·inv_std·scale + bias (training with the batch's statistics, inference with the
// running ones), plus a fused residual z (BatchNormAttrs::residual, 0 without), and max(0, ·) with a
// fused Relu (BatchNormAttrs::relu).
template <typename T, typename P = T>
GP_HD T bn_value(T x, float mean, float inv_std, P scale, P bias, bool relu = false, float residual = 0.f) {
  float const v =
      (static_cast<float>(x) - mean) * inv_std * static_cast<float>(scale) + static_cast<float>(bias) + residual;
  return static_cast<T>(relu ? bn_relu(v) : v);
}

// z at offset o as float, or 0 where there is no residual (z null).
template <typename T>
GP_HD float bn_residual(T const* z, int64_t o) {
  return z != nullptr ? static_cast<float>(z[o]) : 0.f;
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

// Training backward's dx from the channel's dscale = Σ dy·x̂ and dbias = Σ dy (dy already masked
// by a fused Relu: bn_masked_dy).
template <typename T, typename P = T>
GP_HD T bn_train_grad_input(float dy, T x, float mean, float inv_std, P scale, float dscale, float dbias,
                            int64_t count) {
  float const m = static_cast<float>(count);
  float const xhat = (static_cast<float>(x) - mean) * inv_std;
  return static_cast<T>(static_cast<float>(scale) * inv_std * (dy - dbias / m - xhat * (dscale / m)));
}

// ---- LRN across channels (kernels/norm.cc on the CPU, kernels/cuda/norm.cu on the GPU), x seen as
// [N, C, S] (S: the spatial dims' product), element i = (n·C + c)·S + s. Channel c's window is
// [c − before, c + after] ∩ [0, C) with before = ⌊(size−1)/2⌋ and after = ⌈(size−1)/2⌉ (ONNX);
// d = bias + alpha/size · Σ x² over the window and y = x · d^−beta.
struct LrnParams {
  int64_t channels = 0, spatial = 0, size = 1;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.f;
};
GP_HD int64_t lrn_before(int64_t size) { return (size - 1) / 2; }
GP_HD int64_t lrn_after(int64_t size) { return size / 2; }

// Forward at element i: y[i] and d[i] (kept for the backward pass).
GP_HD void lrn_forward_at(float const* x, LrnParams const& p, float* y, float* d, int64_t i) {
  int64_t const c = (i / p.spatial) % p.channels;
  int64_t const lo = c - lrn_before(p.size) < 0 ? 0 : c - lrn_before(p.size);
  int64_t const hi = c + lrn_after(p.size) >= p.channels ? p.channels - 1 : c + lrn_after(p.size);
  float sum = 0.f;
  for (int64_t k = lo; k <= hi; ++k) {
    float const v = x[i + (k - c) * p.spatial];
    sum += v * v;
  }
  float const dv = p.bias + p.alpha / static_cast<float>(p.size) * sum;
  d[i] = dv;
  y[i] = x[i] * powf(dv, -p.beta);
}

// dx[i] = dy[i]·d[i]^−β − (2αβ/size)·x[i]·Σ dy[k]·x[k]·d[k]^(−β−1) over the channels k whose window
// holds channel c: k ∈ [c − after, c + before].
GP_HD void lrn_backward_at(float const* x, float const* d, float const* dy, LrnParams const& p, float* dx, int64_t i) {
  int64_t const c = (i / p.spatial) % p.channels;
  int64_t const lo = c - lrn_after(p.size) < 0 ? 0 : c - lrn_after(p.size);
  int64_t const hi = c + lrn_before(p.size) >= p.channels ? p.channels - 1 : c + lrn_before(p.size);
  float sum = 0.f;
  for (int64_t k = lo; k <= hi; ++k) {
    int64_t const o = i + (k - c) * p.spatial;
    sum += dy[o] * x[o] * powf(d[o], -p.beta - 1.f);
  }
  dx[i] = dy[i] * powf(d[i], -p.beta) - 2.f * p.alpha * p.beta / static_cast<float>(p.size) * x[i] * sum;
}

}  // namespace gp::kernels::hd
