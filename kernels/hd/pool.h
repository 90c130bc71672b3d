// Window math of the pooling kernels (kernels/cuda/pool.cu): MaxPool, AveragePool and
// GlobalAveragePool over 1 to 3 spatial dims, dilated or not, forward and backward, as the CPU
// backend computes them: windows clipped to the input; max keeps the first largest element (its
// index in the input plane, for backward); the average divides by the number of input elements in
// the window, or with count_include_pad by its taps inside the padded input (the whole kernel but
// for ceil_mode's last window, which may reach past the end pads: ONNX's and PyTorch's rule, which
// the CPU gets by rescaling oneDNN's). Backward gathers, per input element, over the outputs whose
// windows hold it: no atomics, a fixed summation order.
#pragma once

#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

enum class PoolMode : int { kMax, kAverageIncludePad, kAverageExcludePad };

// Spatial dims in slots (0, 1, 2) = (d, h, w); fewer spatial dims fill the last slots and leave
// the leading ones at in = out = kernel = stride = 1, pad = 0.
struct PoolParams {
  PoolMode mode = PoolMode::kMax;
  int64_t planes = 0;  // N * C
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};     // a window takes every dilation-th element
  int64_t pad[3] = {0, 0, 0};          // begin pads; end pads only shape `out`
  int64_t counted_end[3] = {1, 1, 1};  // count_include_pad counts the taps before in + the op's end pad
};

GP_HD int64_t pool_in_plane(PoolParams const& p) { return p.in[0] * p.in[1] * p.in[2]; }
GP_HD int64_t pool_out_plane(PoolParams const& p) { return p.out[0] * p.out[1] * p.out[2]; }

// The taps start, start + dil, ... (kernel of them) that lie before `end`.
template <typename I>
GP_HD I pool_taps_before(I start, I kernel, I dil, I end) {
  I const fit = start < end ? (end - 1 - start) / dil + 1 : I(0);
  return fit < kernel ? fit : kernel;
}

// The window of output o along one dim, clipped to the input: the positions lo, lo + dil, ... below
// hi, (hi - lo) / dil of them (none when hi == lo).
template <typename I>
GP_HD void pool_window(I o, I stride, I pad, I kernel, I dil, I in, I& lo, I& hi) {
  I const start = o * stride - pad;
  I const first = start >= 0 ? 0 : (dil - 1 - start) / dil;  // the first tap inside the input
  I const last = pool_taps_before<I>(start, kernel, dil, in);
  lo = start + first * dil;
  hi = start + (last > first ? last : first) * dil;
}

// The outputs along one dim whose windows may hold input position i: [lo, hi); those whose taps
// miss it in a dilated window are the o with pool_tap_misses.
template <typename I>
GP_HD void pool_outputs_of(I i, I stride, I pad, I kernel, I dil, I out, I& lo, I& hi) {
  I const first = i + pad - (kernel - 1) * dil;  // o * stride >= first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = (i + pad) / stride + 1;
  hi = hi < out ? hi : out;
}

template <typename I>
GP_HD bool pool_tap_misses(I i, I o, I stride, I pad, I dil) {
  return dil != 1 && (i + pad - o * stride) % dil != 0;
}

// The parameters in index type I: int64_t always works; a GPU kernel takes int32_t where every
// index fits (pool_fits_int32), since 64-bit division is several times slower there.
template <typename I>
struct PoolDims {
  I in[3], out[3], kernel[3], stride[3], dil[3], pad[3], counted_end[3];
};

template <typename I>
GP_HD PoolDims<I> pool_dims(PoolParams const& p) {
  PoolDims<I> d;
  for (int k = 0; k < 3; ++k) {
    d.in[k] = static_cast<I>(p.in[k]);
    d.out[k] = static_cast<I>(p.out[k]);
    d.kernel[k] = static_cast<I>(p.kernel[k]);
    d.stride[k] = static_cast<I>(p.stride[k]);
    d.dil[k] = static_cast<I>(p.dilation[k]);
    d.pad[k] = static_cast<I>(p.pad[k]);
    d.counted_end[k] = static_cast<I>(p.counted_end[k]);
  }
  return d;
}

inline bool pool_fits_int32(PoolParams const& p) {
  int64_t const lim = 0x7fffffff;
  bool fits = p.planes * pool_in_plane(p) <= lim && p.planes * pool_out_plane(p) <= lim;
  for (int k = 0; k < 3; ++k)
    fits = fits && p.in[k] + p.pad[k] + p.kernel[k] * p.dilation[k] <= lim && p.out[k] * p.stride[k] <= lim &&
           p.counted_end[k] <= lim;
  return fits;
}

// The divisor of output o's window [lo, hi) (pool_window's).
template <typename Acc, typename I>
GP_HD Acc pool_divisor(PoolParams const& p, PoolDims<I> const& d, I const o[3], I const lo[3], I const hi[3]) {
  if (p.mode == PoolMode::kAverageIncludePad) {
    I taps = 1;
    for (int k = 0; k < 3; ++k)
      taps *= pool_taps_before<I>(o[k] * d.stride[k] - d.pad[k], d.kernel[k], d.dil[k], d.counted_end[k]);
    return static_cast<Acc>(taps);
  }
  return static_cast<Acc>((hi[0] - lo[0]) / d.dil[0] * ((hi[1] - lo[1]) / d.dil[1]) * ((hi[2] - lo[2]) / d.dil[2]));
}

// Output element e of [planes, out...]. Max pooling also returns the arg-max's index in the input
// plane (-1 for a window with no input element, whose output is then the lowest value T holds).
template <typename T, typename Acc = float, typename I = int64_t>
GP_HD T pool_forward_at(T const* x, PoolParams const& p, I e, int32_t& argmax, T lowest) {
  PoolDims<I> const d = pool_dims<I>(p);
  I o[3];
  I t = e;
  o[2] = t % d.out[2];
  t /= d.out[2];
  o[1] = t % d.out[1];
  t /= d.out[1];
  o[0] = t % d.out[0];
  I const plane = t / d.out[0];
  I lo[3], hi[3];
  for (int k = 0; k < 3; ++k) pool_window<I>(o[k], d.stride[k], d.pad[k], d.kernel[k], d.dil[k], d.in[k], lo[k], hi[k]);
  T const* xp = x + plane * (d.in[0] * d.in[1] * d.in[2]);
  if (p.mode == PoolMode::kMax) {
    T best = lowest;
    I arg = -1;
    for (I a = lo[0]; a < hi[0]; a += d.dil[0])
      for (I b = lo[1]; b < hi[1]; b += d.dil[1])
        for (I c = lo[2]; c < hi[2]; c += d.dil[2]) {
          I const idx = (a * d.in[1] + b) * d.in[2] + c;
          if (arg < 0 || xp[idx] > best) {
            best = xp[idx];
            arg = idx;
          }
        }
    argmax = static_cast<int32_t>(arg);
    return best;
  }
  Acc sum = 0;
  for (I a = lo[0]; a < hi[0]; a += d.dil[0])
    for (I b = lo[1]; b < hi[1]; b += d.dil[1])
      for (I c = lo[2]; c < hi[2]; c += d.dil[2]) sum += static_cast<Acc>(xp[(a * d.in[1] + b) * d.in[2] + c]);
  Acc const div = pool_divisor<Acc, I>(p, d, o, lo, hi);
  argmax = -1;
  return static_cast<T>(div > Acc(0) ? sum / div : Acc(0));
}

// MaxPool's Indices output (ONNX's) of output element e: its plane's arg-max (pool_forward_at's,
// row-major in the plane) as an index into the whole input flattened, the planes row-major and,
// with storage_order 1 (`column_major`), the spatial position column-major (d + D (h + H w)).
GP_HD int64_t pool_flat_index(PoolParams const& p, int64_t e, int32_t argmax, bool column_major) {
  int64_t within = argmax;
  if (column_major) {
    int64_t const w = argmax % p.in[2], h = (argmax / p.in[2]) % p.in[1], d = argmax / (p.in[1] * p.in[2]);
    within = d + p.in[0] * (h + p.in[1] * w);
  }
  return (e / pool_out_plane(p)) * pool_in_plane(p) + within;
}

// The gradient of input element e of [planes, in...] (added to *dx when accumulating): the output
// gradients of the windows holding it, max pooling only those whose arg-max it is.
template <typename T, typename Acc = float, typename I = int64_t>
GP_HD void pool_backward_at(T const* dy, int32_t const* argmax, PoolParams const& p, I e, T* dx, bool accumulate) {
  PoolDims<I> const d = pool_dims<I>(p);
  I i[3];
  I t = e;
  i[2] = t % d.in[2];
  t /= d.in[2];
  i[1] = t % d.in[1];
  t /= d.in[1];
  i[0] = t % d.in[0];
  I const plane = t / d.in[0];
  I const local = (i[0] * d.in[1] + i[1]) * d.in[2] + i[2];
  I olo[3], ohi[3];
  for (int k = 0; k < 3; ++k)
    pool_outputs_of<I>(i[k], d.stride[k], d.pad[k], d.kernel[k], d.dil[k], d.out[k], olo[k], ohi[k]);
  I const base = plane * (d.out[0] * d.out[1] * d.out[2]);
  Acc acc = 0;
  for (I a = olo[0]; a < ohi[0]; ++a) {
    if (pool_tap_misses<I>(i[0], a, d.stride[0], d.pad[0], d.dil[0])) continue;
    for (I b = olo[1]; b < ohi[1]; ++b) {
      if (pool_tap_misses<I>(i[1], b, d.stride[1], d.pad[1], d.dil[1])) continue;
      for (I c = olo[2]; c < ohi[2]; ++c) {
        if (pool_tap_misses<I>(i[2], c, d.stride[2], d.pad[2], d.dil[2])) continue;
        I const oi = base + (a * d.out[1] + b) * d.out[2] + c;
        if (p.mode == PoolMode::kMax) {
          if (argmax[oi] == local) acc += static_cast<Acc>(dy[oi]);
          continue;
        }
        I const o[3] = {a, b, c};
        I lo[3], hi[3];
        for (int k = 0; k < 3; ++k)
          pool_window<I>(o[k], d.stride[k], d.pad[k], d.kernel[k], d.dil[k], d.in[k], lo[k], hi[k]);
        acc += static_cast<Acc>(dy[oi]) / pool_divisor<Acc, I>(p, d, o, lo, hi);
      }
    }
  }
  dx[e] = static_cast<T>(accumulate ? static_cast<Acc>(dx[e]) + acc : acc);
}

}  // namespace gp::kernels::hd
