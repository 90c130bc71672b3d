// Window math of the pooling kernels (kernels/cuda/pool.cu): MaxPool, AveragePool and
// GlobalAveragePool over 1 to 3 spatial dims, forward and backward, with oneDNN's semantics (the
// CPU backend's): windows clipped to the input; max keeps the first largest element (its index in
// the input plane, for backward); the average divides by the whole kernel volume with
// count_include_pad, else by the number of input elements in the window. Backward gathers, per
// input element, over the outputs whose windows hold it: no atomics, a fixed summation order.
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
  int64_t pad[3] = {0, 0, 0};  // begin pads; end pads only shape `out`
};

GP_HD int64_t pool_in_plane(PoolParams const& p) { return p.in[0] * p.in[1] * p.in[2]; }
GP_HD int64_t pool_out_plane(PoolParams const& p) { return p.out[0] * p.out[1] * p.out[2]; }

// The window of output o along one dim, clipped to the input: [lo, hi).
GP_HD void pool_window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t in, int64_t& lo, int64_t& hi) {
  lo = o * stride - pad;
  hi = lo + kernel < in ? lo + kernel : in;
  lo = lo < 0 ? 0 : lo;
}

// The outputs along one dim whose windows hold input position i: [lo, hi).
GP_HD void pool_outputs_of(int64_t i, int64_t stride, int64_t pad, int64_t kernel, int64_t out, int64_t& lo,
                           int64_t& hi) {
  int64_t const first = i + pad - kernel + 1;  // o * stride >= first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = (i + pad) / stride + 1;
  hi = hi < out ? hi : out;
}

template <typename Acc>
GP_HD Acc pool_divisor(PoolParams const& p, int64_t const lo[3], int64_t const hi[3]) {
  if (p.mode == PoolMode::kAverageIncludePad) return static_cast<Acc>(p.kernel[0] * p.kernel[1] * p.kernel[2]);
  return static_cast<Acc>((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
}

// Output element e of [planes, out...]. Max pooling also returns the arg-max's index in the input
// plane (-1 for a window with no input element, whose output is then the lowest value T holds).
template <typename T, typename Acc = float>
GP_HD T pool_forward_at(T const* x, PoolParams const& p, int64_t e, int32_t& argmax, T lowest) {
  int64_t o[3];
  int64_t t = e;
  o[2] = t % p.out[2];
  t /= p.out[2];
  o[1] = t % p.out[1];
  t /= p.out[1];
  o[0] = t % p.out[0];
  int64_t const plane = t / p.out[0];
  int64_t lo[3], hi[3];
  pool_window(o[0], p.stride[0], p.pad[0], p.kernel[0], p.in[0], lo[0], hi[0]);
  pool_window(o[1], p.stride[1], p.pad[1], p.kernel[1], p.in[1], lo[1], hi[1]);
  pool_window(o[2], p.stride[2], p.pad[2], p.kernel[2], p.in[2], lo[2], hi[2]);
  T const* xp = x + plane * pool_in_plane(p);
  if (p.mode == PoolMode::kMax) {
    T best = lowest;
    int64_t arg = -1;
    for (int64_t a = lo[0]; a < hi[0]; ++a)
      for (int64_t b = lo[1]; b < hi[1]; ++b)
        for (int64_t c = lo[2]; c < hi[2]; ++c) {
          int64_t const idx = (a * p.in[1] + b) * p.in[2] + c;
          if (arg < 0 || xp[idx] > best) {
            best = xp[idx];
            arg = idx;
          }
        }
    argmax = static_cast<int32_t>(arg);
    return best;
  }
  Acc sum = 0;
  for (int64_t a = lo[0]; a < hi[0]; ++a)
    for (int64_t b = lo[1]; b < hi[1]; ++b)
      for (int64_t c = lo[2]; c < hi[2]; ++c) sum += static_cast<Acc>(xp[(a * p.in[1] + b) * p.in[2] + c]);
  Acc const div = pool_divisor<Acc>(p, lo, hi);
  argmax = -1;
  return static_cast<T>(div > Acc(0) ? sum / div : Acc(0));
}

// The gradient of input element e of [planes, in...] (added to *dx when accumulating): the output
// gradients of the windows holding it, max pooling only those whose arg-max it is.
template <typename T, typename Acc = float>
GP_HD void pool_backward_at(T const* dy, int32_t const* argmax, PoolParams const& p, int64_t e, T* dx,
                            bool accumulate) {
  int64_t i[3];
  int64_t t = e;
  i[2] = t % p.in[2];
  t /= p.in[2];
  i[1] = t % p.in[1];
  t /= p.in[1];
  i[0] = t % p.in[0];
  int64_t const plane = t / p.in[0];
  int64_t const local = (i[0] * p.in[1] + i[1]) * p.in[2] + i[2];
  int64_t olo[3], ohi[3];
  pool_outputs_of(i[0], p.stride[0], p.pad[0], p.kernel[0], p.out[0], olo[0], ohi[0]);
  pool_outputs_of(i[1], p.stride[1], p.pad[1], p.kernel[1], p.out[1], olo[1], ohi[1]);
  pool_outputs_of(i[2], p.stride[2], p.pad[2], p.kernel[2], p.out[2], olo[2], ohi[2]);
  int64_t const base = plane * pool_out_plane(p);
  Acc acc = 0;
  for (int64_t a = olo[0]; a < ohi[0]; ++a)
    for (int64_t b = olo[1]; b < ohi[1]; ++b)
      for (int64_t c = olo[2]; c < ohi[2]; ++c) {
        int64_t const oi = base + (a * p.out[1] + b) * p.out[2] + c;
        if (p.mode == PoolMode::kMax) {
          if (argmax[oi] == local) acc += static_cast<Acc>(dy[oi]);
          continue;
        }
        int64_t lo[3], hi[3];
        pool_window(a, p.stride[0], p.pad[0], p.kernel[0], p.in[0], lo[0], hi[0]);
        pool_window(b, p.stride[1], p.pad[1], p.kernel[1], p.in[1], lo[1], hi[1]);
        pool_window(c, p.stride[2], p.pad[2], p.kernel[2], p.in[2], lo[2], hi[2]);
        acc += static_cast<Acc>(dy[oi]) / pool_divisor<Acc>(p, lo, hi);
      }
  dx[e] = static_cast<T>(accumulate ? static_cast<Acc>(dx[e]) + acc : acc);
}

}  // namespace gp::kernels::hd
