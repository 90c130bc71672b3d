// Per-element math of BatchNormalization's inference-mode backward (kernels/cuda/math_bn.cu), as
// the CPU backend computes it (oneDNN with use_global_stats): the running statistics are
// constants, so with inv_std = 1/√(var + eps) per channel, dx = dy·scale·inv_std, and per channel
// dscale = Σ dy·(x − mean)·inv_std and dbias = Σ dy over N and the spatial dims. x is seen as
// [N, C, S] (S: the spatial dims' product).
#pragma once

#include <cstdint>

#include "kernels/hd/hd.h"

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
// Σ dy·(x − mean)·inv_std and Σ dy. One thread with step 1, or one block's threads (math_bn.cu).
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
