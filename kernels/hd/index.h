// Index math of the data-movement kernels (kernels/cuda/move.cu): strided copies (Transpose,
// Slice, Expand, Concat, Split and their backward passes), the broadcast reduction of Expand's
// backward, Gather and its deterministic scatter-add; OneHot, and GridSample (at the end). GP_HD: the kernels and
// tests/cuda/test_hd_move.cc run these very functions.
//
// Shapes and strides travel by value in fixed arrays of kMaxRank. Every loop over them runs over
// all kMaxRank slots with a constant index (unrolled under nvcc), so the arrays stay in parameter
// space: indexing them with a runtime value would move them to local memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/hd/hd.h"
#include "kernels/hd/reduce.h"
#include "kernels/hd/view.h"

#if defined(__CUDA_ARCH__)  // the device pass only: g++ (host pass) rejects the pragma
#define GP_HD_UNROLL _Pragma("unroll")
#else
#define GP_HD_UNROLL
#endif

namespace gp::kernels::hd {

inline constexpr int kMaxRank = 8;

// An iteration shape and, per dimension, the element strides of a source and a destination (any
// sign; 0 broadcasts). Dimensions [0, rank) are used.
struct StridedParams {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t src[kMaxRank] = {};
  int64_t dst[kMaxRank] = {};
};

// Source and destination offsets of element i (row-major over p.shape), in the index type I:
// int32_t where strided_fits_int32(p) (a 32-bit division is a fraction of a 64-bit one's
// instructions on a GPU, where these copies were bound by their index math), else int64_t.
template <typename I>
GP_HD void strided_offsets(I i, StridedParams const& p, I& src, I& dst) {
  I s = 0, d = 0;
  GP_HD_UNROLL
  for (int k = kMaxRank - 1; k >= 0; --k) {
    if (k < p.rank) {
      I const n = static_cast<I>(p.shape[k]);
      I const q = i / n;
      I const r = i - q * n;
      s += r * static_cast<I>(p.src[k]);
      d += r * static_cast<I>(p.dst[k]);
      i = q;
    }
  }
  src = s;
  dst = d;
}

// Elements of p's iteration shape.
GP_HD int64_t strided_numel(StridedParams const& p) {
  int64_t n = 1;
  GP_HD_UNROLL
  for (int k = 0; k < kMaxRank; ++k)
    if (k < p.rank) n *= p.shape[k];
  return n;
}

// The int32_t index limits of the *_fits_int32 checks: element counts below 2^30 (so that an index
// plus a grid-stride step stays below 2^31), offsets at most INT32_MAX.
inline constexpr int64_t kInt32Elements = int64_t{1} << 30;
inline constexpr int64_t kInt32Offset = 2147483647;

// The largest |offset| a walk over p's shape reaches with `strides` (the sum of (extent - 1) ·
// |stride|): every partial sum of strided_offsets is bounded by it.
GP_HD int64_t strided_reach(StridedParams const& p, int64_t const* strides) {
  int64_t reach = 0;
  GP_HD_UNROLL
  for (int k = 0; k < kMaxRank; ++k)
    if (k < p.rank) reach += (p.shape[k] - 1) * (strides[k] < 0 ? -strides[k] : strides[k]);
  return reach;
}

// Whether int32_t indices suffice for p: fewer than 2^30 elements (so that i plus a grid-stride
// step stays below 2^31) and every offset of both walks below 2^31.
GP_HD bool strided_fits_int32(StridedParams const& p) {
  return strided_numel(p) < kInt32Elements && strided_reach(p, p.src) <= kInt32Offset &&
         strided_reach(p, p.dst) <= kInt32Offset;
}

// dst[element i] = src[element i], or += when accumulating (the destination positions of distinct
// elements must be distinct: no two threads write one place).
template <typename T, typename I>
GP_HD void strided_copy_at(T const* src, T* dst, StridedParams const& p, I i, bool accumulate) {
  I s = 0, d = 0;
  strided_offsets(i, p, s, d);
  if (accumulate) {
    dst[d] += src[s];
  } else {
    dst[d] = src[s];
  }
}

// dst[element i] = src[element i] for any trivially copyable T (the widened copies of
// kernels/hd/move.h's strided_vector_bytes move 4-, 8- or 16-byte chunks this way).
template <typename T, typename I>
GP_HD void strided_assign_at(T const* src, T* dst, StridedParams const& p, I i) {
  I s = 0, d = 0;
  strided_offsets(i, p, s, d);
  dst[d] = src[s];
}

// A sum down to a smaller (broadcastable) shape: `out` runs over the target's elements (src: the
// offset of the element's first contribution in the full tensor, dst: its offset in the target),
// `reduced` over the positions summed into one element (src strides of the full tensor).
struct ReduceParams {
  StridedParams out;
  StridedParams reduced;
  int64_t reduced_count = 1;
};

// Whether int32_t indices suffice for reduce_at over p (as strided_fits_int32, for the target's
// walk and the summed positions together).
GP_HD bool reduce_fits_int32(ReduceParams const& p) {
  return strided_fits_int32(p.out) && p.reduced_count < kInt32Elements &&
         strided_reach(p.out, p.out.src) + strided_reach(p.reduced, p.reduced.src) <= kInt32Offset;
}

// Target element i: the sum of its contributions in row-major order of `reduced`, one thread per
// element, so the result does not depend on scheduling. I: int32_t where reduce_fits_int32(p).
template <typename T, typename Acc = float, typename I = int64_t>
GP_HD void reduce_at(T const* src, T* dst, ReduceParams const& p, I i, bool accumulate) {
  I base = 0, d = 0;
  strided_offsets(i, p.out, base, d);
  Acc acc = 0;
  I const count = static_cast<I>(p.reduced_count);
  for (I j = 0; j < count; ++j) {
    I s = 0, unused = 0;
    strided_offsets(j, p.reduced, s, unused);
    acc += static_cast<Acc>(src[base + s]);
  }
  dst[d] = static_cast<T>(accumulate ? static_cast<Acc>(dst[d]) + acc : acc);
}

// Target element i of an integer ReduceSum or ReduceProd (wrapping, as two's complement: unsigned
// arithmetic, never undefined behaviour), ReduceMax or ReduceMin (of bool bytes: any, all) over
// p's reduced positions, in row-major order of `reduced`; an empty reduction gives the operation's
// identity (0, 1, the type's lowest, its highest). XLM's sequence lengths are the ReduceSum of an
// int64 non-padding mask. r is one of those four (exec's int_reduce_plan refuses the others).
// Never differentiated.
template <typename T, typename I = int64_t>
GP_HD void int_reduce_at(Reduction r, T const* src, T* dst, ReduceParams const& p, I i) {
  using U = std::make_unsigned_t<T>;
  I base = 0, d = 0;
  strided_offsets(i, p.out, base, d);
  U acc = r == Reduction::kProd ? U(1) : U(0);
  T best = r == Reduction::kMax ? int_lowest_value<T>() : int_max_value<T>();
  I const count = static_cast<I>(p.reduced_count);
  for (I j = 0; j < count; ++j) {
    I s = 0, unused = 0;
    strided_offsets(j, p.reduced, s, unused);
    T const v = src[base + s];
    if (r == Reduction::kSum) acc = static_cast<U>(acc + static_cast<U>(v));
    if (r == Reduction::kProd) acc = static_cast<U>(acc * static_cast<U>(v));
    if ((r == Reduction::kMax && best < v) || (r == Reduction::kMin && v < best)) best = v;
  }
  dst[d] = r == Reduction::kSum || r == Reduction::kProd ? static_cast<T>(acc) : best;
}

// An index counted from the end when negative; false when outside [0, axis_dim).
GP_HD bool resolve_index(int64_t idx, int64_t axis_dim, int64_t& k) {
  k = idx < 0 ? idx + axis_dim : idx;
  return k >= 0 && k < axis_dim;
}

// Gather: data seen as [outer, axis_dim, inner], out as [outer, num_indices, inner]. Output
// element e; an index out of range writes 0 and returns false (never reads outside data). E, the
// element index type: int32_t where gather_fits_int32, else int64_t.
template <typename T, typename I, typename E>
GP_HD bool gather_at(T const* data, int64_t axis_dim, int64_t inner, I const* indices, int64_t num_indices, T* out,
                     E e) {
  E const in = static_cast<E>(inner);
  E const w = e % in;
  E const rest = e / in;
  E const j = rest % static_cast<E>(num_indices);
  E const o = rest / static_cast<E>(num_indices);
  int64_t k = 0;
  if (!resolve_index(static_cast<int64_t>(indices[j]), axis_dim, k)) {
    out[e] = T(0);
    return false;
  }
  out[e] = data[(o * static_cast<E>(axis_dim) + static_cast<E>(k)) * in + w];
  return true;
}

// Whether int32_t element indices suffice for Gather and its backward: both [outer, num_indices,
// inner] and [outer, axis_dim, inner] below 2^30 elements.
GP_HD bool gather_fits_int32(int64_t outer, int64_t axis_dim, int64_t inner, int64_t num_indices) {
  int64_t constexpr kN = kInt32Elements;
  // Checked factor by factor so that the products cannot overflow int64 either.
  if (outer >= kN || inner >= kN || axis_dim >= kN || num_indices >= kN) return false;
  if (outer * inner >= kN) return false;
  return outer * inner * num_indices < kN && outer * inner * axis_dim < kN;
}

// The sort key of index j for Gather's backward: the resolved index, or axis_dim (sorted last,
// then skipped) when out of range.
template <typename I>
GP_HD int32_t gather_key(I const* indices, int64_t j, int64_t axis_dim) {
  int64_t k = 0;
  return static_cast<int32_t>(resolve_index(static_cast<int64_t>(indices[j]), axis_dim, k) ? k : axis_dim);
}

// Gather's backward as a segmented sum, deterministic: keys/positions are the gather keys of all
// indices and their positions j, sorted stably by key. Element e of [outer, num_indices, inner]
// belongs to sorted slot p; the first slot of each run of equal keys sums the run's gradients in
// ascending j (the CPU's order) and adds the sum into grad_data; the other slots do nothing.
template <typename T, typename Acc = float, typename E = int64_t>
GP_HD void gather_backward_at(T const* grad_out, int64_t axis_dim, int64_t inner, int32_t const* keys,
                              int32_t const* positions, int64_t num_indices, T* grad_data, E e) {
  E const in = static_cast<E>(inner);
  E const n = static_cast<E>(num_indices);
  E const w = e % in;
  E const rest = e / in;
  E const p = rest % n;
  E const o = rest / n;
  int32_t const key = keys[p];
  if (key >= axis_dim || (p > 0 && keys[p - 1] == key)) return;
  Acc acc = 0;
  for (E q = p; q < n && keys[q] == key; ++q)
    acc += static_cast<Acc>(grad_out[(o * n + static_cast<E>(positions[q])) * in + w]);
  T& dst = grad_data[(o * static_cast<E>(axis_dim) + static_cast<E>(key)) * in + w];
  dst = static_cast<T>(static_cast<Acc>(dst) + acc);
}

// Trilu: whether element (i, j) of a matrix is kept: row i keeps columns j >= i + k (upper) or
// j <= i + k (lower); the others become zero. The CPU's exec/cpu/index.cc and the CUDA kernel ask this.
GP_HD bool trilu_keeps(int64_t i, int64_t j, int64_t k, bool upper) { return upper ? j >= i + k : j <= i + k; }

// OneHot: output element e of [outer, depth, inner] is `on` where the index at (outer, inner),
// from the end when negative, equals its position along the depth axis, else `off` (an index
// outside [-depth, depth) is off everywhere, as ONNX says; a float index is truncated, one past
// the int64 range or NaN is off).
template <typename I>
GP_HD bool one_hot_at(I const* indices, int64_t e, int64_t depth, int64_t inner) {
  int64_t const o = e / (depth * inner), d = (e / inner) % depth, j = e % inner;
  I const raw = indices[o * inner + j];
  if constexpr (!std::is_integral_v<I>)
    if (!(raw > -9.2e18 && raw < 9.2e18)) return false;
  int64_t v = static_cast<int64_t>(raw);
  if (v < 0) v += depth;
  return v == d;
}

// ---- The position-addressed index ops: GatherElements, ScatterElements (and Scatter), GatherND ----

// GatherElements/ScatterElements: indices has data's rank; element j of indices (row-major over
// `ishape`) addresses data at its own coordinates with the one along the axis replaced by its
// value. `walk`: data's strides with the axis' set to 0.
struct ElementIndex {
  int rank = 0;
  int64_t ishape[kMaxRank] = {};
  int64_t walk[kMaxRank] = {};
  int64_t axis_stride = 0;
  int64_t dim = 0;  // data's extent along the axis
};

// The flat position in data of indices element j holding value v (negative: from the end); false
// when v is out of range.
GP_HD bool element_position(ElementIndex const& p, int64_t j, int64_t v, int64_t& pos) {
  int64_t base = 0;
  GP_HD_UNROLL
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < p.rank) {
      int64_t const q = j / p.ishape[d];
      base += (j - q * p.ishape[d]) * p.walk[d];
      j = q;
    }
  }
  int64_t k = 0;
  if (!resolve_index(v, p.dim, k)) return false;
  pos = base + k * p.axis_stride;
  return true;
}

// GatherND (batch_dims 0): indices [..., K]; tuple t addresses the slice of data's axes K.. at
// the offset of its K coordinates (`strides`: in elements, `dims`: data's first K extents).
struct NdIndex {
  int k = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t slice = 1;  // elements per slice
};

template <typename I>
GP_HD bool nd_offset(NdIndex const& p, I const* indices, int64_t t, int64_t& off) {
  off = 0;
  bool ok = true;
  GP_HD_UNROLL
  for (int d = 0; d < kMaxRank; ++d) {
    if (d < p.k) {
      int64_t c = 0;
      ok = resolve_index(static_cast<int64_t>(indices[t * p.k + d]), p.dims[d], c) && ok;
      off += c * p.strides[d];
    }
  }
  return ok;
}

// An index check's verdict, two words in device memory: [0] the smallest bad position (all ones
// when every index is in range), which the checking kernel leaves, and [1] the index found at
// position [0] * scale of `idx` (int64, or int32 with idx64 false), noted by this right after the
// check, while `idx` still holds the indices checked (a deferred check is read at the step's end,
// when an input buffer may hold a later micro-batch's). Untouched when no index is bad.
GP_HD void note_bad_index(uint64_t* verdict, void const* idx, bool idx64, int64_t scale) {
  if (verdict[0] == ~uint64_t{0}) return;
  int64_t const at = static_cast<int64_t>(verdict[0]) * scale;
  int64_t const value = idx64 ? static_cast<int64_t const*>(idx)[at] : static_cast<int32_t const*>(idx)[at];
  verdict[1] = static_cast<uint64_t>(value);
}

// A one-tap, unit-weight pass of a separable op (Pad, Tile: exec/separable_maps.h) on elements of
// any dtype, x [outer, in, inner] -> y [outer, out, inner]: the flat position in x that output
// element e copies, or -1 where the axis map (idx, one entry per output position) says fill. The
// CUDA backend's Pad and Tile of ids and masks run it; the CPU copies the same rows (copy_axis).
template <typename I>
GP_HD I axis_copy_source(I e, I in, I out, I inner, int64_t const* idx) {
  I const i = e % inner, r = e / inner;
  I const o = r % out, b = r / out;
  int64_t const s = idx[o];
  return s < 0 ? I(-1) : (b * in + static_cast<I>(s)) * inner + i;
}

// ---- ScatterElements' reductions max and min ----
// The extremum of a and b, a NaN winning (as torch's scatter_reduce amax and amin).
GP_HD float extremum_of(float a, float b, bool max) {
  if (a != a) return a;
  if (b != b) return b;
  return max ? (b > a ? b : a) : (b < a ? b : a);
}
// 1 where v is the extremum r (a NaN equal to a NaN), else 0: the values that share r's gradient.
GP_HD int64_t extremum_ties(float v, float r) { return v == r || (v != v && r != r) ? 1 : 0; }

// ---- GridSample (4-D and 5-D) ----
// Per-element math of GridSample, as torch's grid_sample and ONNX define it: x [N, C, H, W] sampled
// at grid [N, Ho, Wo, 2] (x then y, in [-1, 1]) into y [N, C, Ho, Wo], or x [N, C, D, H, W] at grid
// [N, Do, Ho, Wo, 3] (x, y then z) into y [N, C, Do, Ho, Wo]; (bi/tri)linear or nearest (half to
// even), the grid's coordinates mapped to pixels with or without align_corners and then padded:
// zeros (outside reads 0), border (clipped into the image) or reflection (mirrored at the borders,
// then clipped). A 4-D op is the volumetric one's code with D = Do = 1 and no z. Bicubic (4-D
// only, torch's: A = -0.75 over the 4x4 pixels around the point) pads each of its 16 reads rather
// than the point. The CPU (kernels/index.cc) and CUDA (kernels/cuda/move.cu) kernels run these
// functions:
// - forward: one call per output element;
// - the input's gradient: one call per (n, c) plane (volume), its output positions in order, so
//   the scatter-add is deterministic without atomics;
// - the grid's gradient: one call per grid point, the channels summed in order (nearest: zero).
struct GridSampleParams {
  int64_t n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
  int64_t d = 1, dout = 1;  // depth of x and of the output (5-D); 1 for 4-D
  bool volumetric = false;  // 5-D: the grid holds (x, y, z)
  bool nearest = false, align = false;
  bool cubic = false;  // bicubic (4-D)
  int padding = 0;     // graph::GridSamplePadding: 0 zeros, 1 border, 2 reflection
};

// A coordinate in [-1, 1] as a pixel position; *d its derivative.
GP_HD float gs_unnormalize(float coord, int64_t size, bool align, float* d) {
  if (align) {
    *d = static_cast<float>(size - 1) / 2.f;
    return (coord + 1.f) / 2.f * static_cast<float>(size - 1);
  }
  *d = static_cast<float>(size) / 2.f;
  return ((coord + 1.f) * static_cast<float>(size) - 1.f) / 2.f;
}

// Clipped into [0, size − 1]; *d = 0 where clipped (at the bounds too, as torch), else 1.
GP_HD float gs_clip(float x, int64_t size, float* d) {
  float const hi = static_cast<float>(size - 1);
  if (!(x > 0.f)) {
    *d = 0.f;
    return 0.f;
  }
  if (x >= hi) {
    *d = 0.f;
    return hi;
  }
  *d = 1.f;
  return x;
}

// Mirrored into [twice_low/2, twice_high/2]; *d = ±1.
GP_HD float gs_reflect(float x, int64_t twice_low, int64_t twice_high, float* d) {
  if (twice_low == twice_high) {
    *d = 0.f;
    return 0.f;
  }
  float const lo = static_cast<float>(twice_low) / 2.f, span = static_cast<float>(twice_high - twice_low) / 2.f;
  x -= lo;
  float sign = 1.f;
  if (x < 0.f) {
    sign = -1.f;
    x = -x;
  }
  float const extra = fmodf(x, span);
  int64_t const flips = static_cast<int64_t>(floorf(x / span));
  if (flips % 2 == 0) {
    *d = sign;
    return extra + lo;
  }
  *d = -sign;
  return span - extra + lo;
}

// The pixel position a grid coordinate reads along an axis of `size`; *grad its derivative.
GP_HD float gs_source(float coord, int64_t size, GridSampleParams const& p, float* grad) {
  float g = 1.f;
  float x = gs_unnormalize(coord, size, p.align, &g);
  if (p.padding == 1) {
    float gc = 1.f;
    x = gs_clip(x, size, &gc);
    g *= gc;
  } else if (p.padding == 2) {
    float gr = 1.f, gc = 1.f;
    x = p.align ? gs_reflect(x, 0, 2 * (size - 1), &gr) : gs_reflect(x, -1, 2 * size - 1, &gr);
    x = gs_clip(x, size, &gc);
    g *= gr * gc;
  }
  *grad = g;
  return x;
}

GP_HD bool gs_inside(int64_t zz, int64_t yy, int64_t xx, GridSampleParams const& p) {
  return zz >= 0 && zz < p.d && yy >= 0 && yy < p.h && xx >= 0 && xx < p.w;
}
GP_HD float gs_at(float const* plane, int64_t zz, int64_t yy, int64_t xx, GridSampleParams const& p) {
  return gs_inside(zz, yy, xx, p) ? plane[(zz * p.h + yy) * p.w + xx] : 0.f;
}

// One coordinate's read: the pixel position, its derivative, and the pixel read (nearest) or the
// lower of the two read (linear, with the fraction t toward the upper).
struct GsAxis {
  float pos = 0, grad = 1, t = 0;
  int64_t lo = 0;
};
GP_HD GsAxis gs_axis(float coord, int64_t size, GridSampleParams const& p) {
  GsAxis a;
  if (p.cubic) {  // unpadded: the padding applies to each of the reads around the point
    a.pos = gs_unnormalize(coord, size, p.align, &a.grad);
    a.pos = fminf(fmaxf(a.pos, -1048576.f), 1048576.f);  // floor fits an integer (a NaN reads padding)
    float const lo = floorf(a.pos);
    a.t = a.pos - lo;
    a.lo = static_cast<int64_t>(lo);
    return a;
  }
  a.pos = gs_source(coord, size, p, &a.grad);
  // Past one pixel outside every read is zero: kept in a range whose floor fits an integer (a NaN
  // or huge coordinate reads zeros, as torch's safe_downgrade_to_int_range makes it).
  a.pos = fminf(fmaxf(a.pos, -2.f), static_cast<float>(size + 1));
  if (p.nearest) {
    a.lo = static_cast<int64_t>(nearbyintf(a.pos));
    return a;
  }
  float const lo = floorf(a.pos);
  a.t = a.pos - lo;
  a.lo = static_cast<int64_t>(lo);
  return a;
}

// Where output position (n, od, ho, wo) reads, along x, y and z (z: position 0 in 4-D).
struct GsPoint {
  GsAxis x, y, z;
};
GP_HD GsPoint gs_point(float const* grid, GridSampleParams const& p, int64_t n, int64_t od, int64_t ho, int64_t wo) {
  int64_t const coords = p.volumetric ? 3 : 2;
  float const* g = grid + (((n * p.dout + od) * p.ho + ho) * p.wo + wo) * coords;
  GsPoint q;
  q.x = gs_axis(g[0], p.w, p);
  q.y = gs_axis(g[1], p.h, p);
  if (p.volumetric) q.z = gs_axis(g[2], p.d, p);
  return q;
}

// The (bi/tri)linear corner k (bit 0: x upper, bit 1: y upper, bit 2: z upper) and its weight.
GP_HD float gs_corner_weight(GsPoint const& q, int k) {
  float const wx = (k & 1) ? q.x.t : 1.f - q.x.t, wy = (k & 2) ? q.y.t : 1.f - q.y.t;
  return (k & 4) ? wx * wy * q.z.t : wx * wy * (1.f - q.z.t);
}

// Bicubic: the weights of the 4 reads lo - 1 .. lo + 2 at fraction t (torch's cubic convolution,
// A = -0.75), and their derivatives in t.
GP_HD void gs_cubic_weights(float t, float w[4], float dw[4]) {
  float const A = -0.75f;
  // |s| <= 1: ((A + 2) s - (A + 3)) s^2 + 1; 1 < |s| < 2: ((A s - 5A) s + 8A) s - 4A.
  auto near = [A](float s) { return ((A + 2.f) * s - (A + 3.f)) * s * s + 1.f; };
  auto far = [A](float s) { return ((A * s - 5.f * A) * s + 8.f * A) * s - 4.f * A; };
  auto d_near = [A](float s) { return (3.f * (A + 2.f) * s - 2.f * (A + 3.f)) * s; };
  auto d_far = [A](float s) { return (3.f * A * s - 10.f * A) * s + 8.f * A; };
  w[0] = far(t + 1.f);
  w[1] = near(t);
  w[2] = near(1.f - t);
  w[3] = far(2.f - t);
  dw[0] = d_far(t + 1.f);
  dw[1] = d_near(t);
  dw[2] = -d_near(1.f - t);
  dw[3] = -d_far(2.f - t);
}

// A bicubic read at integer position i along an axis of `size`, padded (border: clipped;
// reflection: mirrored, then clipped; zeros: as is, read as 0 outside).
GP_HD int64_t gs_cubic_tap(int64_t i, int64_t size, GridSampleParams const& p) {
  if (p.padding == 0) return i;
  float x = static_cast<float>(i), d = 0.f;
  if (p.padding == 2) x = p.align ? gs_reflect(x, 0, 2 * (size - 1), &d) : gs_reflect(x, -1, 2 * size - 1, &d);
  return static_cast<int64_t>(gs_clip(x, size, &d));
}
// The 4 reads lo - 1 .. lo + 2 along an axis, padded.
GP_HD void gs_cubic_taps(int64_t lo, int64_t size, GridSampleParams const& p, int64_t taps[4]) {
  GP_HD_UNROLL
  for (int k = 0; k < 4; ++k) taps[k] = gs_cubic_tap(lo - 1 + k, size, p);
}

GP_HD float gs_sample(float const* plane, GsPoint const& q, GridSampleParams const& p) {
  if (p.nearest) return gs_at(plane, q.z.lo, q.y.lo, q.x.lo, p);
  if (p.cubic) {
    float wx[4], wy[4], dw[4];
    int64_t xs[4], ys[4];
    gs_cubic_weights(q.x.t, wx, dw);
    gs_cubic_weights(q.y.t, wy, dw);
    gs_cubic_taps(q.x.lo, p.w, p, xs);
    gs_cubic_taps(q.y.lo, p.h, p, ys);
    float v = 0.f;
    GP_HD_UNROLL
    for (int i = 0; i < 4; ++i) {
      float row = 0.f;
      GP_HD_UNROLL
      for (int k = 0; k < 4; ++k) row += gs_at(plane, 0, ys[i], xs[k], p) * wx[k];
      v += row * wy[i];
    }
    return v;
  }
  if (!p.volumetric) {
    int64_t const x0 = q.x.lo, y0 = q.y.lo;
    float const tx = q.x.t, ty = q.y.t;
    return gs_at(plane, 0, y0, x0, p) * (1.f - tx) * (1.f - ty) + gs_at(plane, 0, y0, x0 + 1, p) * tx * (1.f - ty) +
           gs_at(plane, 0, y0 + 1, x0, p) * (1.f - tx) * ty + gs_at(plane, 0, y0 + 1, x0 + 1, p) * tx * ty;
  }
  float v = 0.f;
  for (int k = 0; k < 8; ++k)
    v += gs_at(plane, q.z.lo + (k >> 2), q.y.lo + ((k >> 1) & 1), q.x.lo + (k & 1), p) * gs_corner_weight(q, k);
  return v;
}

// y[e], e over [N, C, (Do,) Ho, Wo].
GP_HD void grid_sample_forward_at(float const* x, float const* grid, GridSampleParams const& p, float* y, int64_t e) {
  int64_t const wo = e % p.wo, ho = (e / p.wo) % p.ho, od = (e / (p.wo * p.ho)) % p.dout,
                nc = e / (p.wo * p.ho * p.dout), n = nc / p.c;
  y[e] = gs_sample(x + nc * p.d * p.h * p.w, gs_point(grid, p, n, od, ho, wo), p);
}

// dx's plane (volume) nc (= n·C + c), written whole: zeros, then every output position's share in
// order.
GP_HD void grid_sample_input_grad_plane(float const* grid, float const* dy, GridSampleParams const& p, float* dx,
                                        int64_t nc) {
  float* plane = dx + nc * p.d * p.h * p.w;
  for (int64_t i = 0; i < p.d * p.h * p.w; ++i) plane[i] = 0.f;
  int64_t const n = nc / p.c;
  float const* dyp = dy + nc * p.dout * p.ho * p.wo;
  auto add = [&](int64_t zz, int64_t yy, int64_t xx, float v) {
    if (gs_inside(zz, yy, xx, p)) plane[(zz * p.h + yy) * p.w + xx] += v;
  };
  for (int64_t od = 0; od < p.dout; ++od)
    for (int64_t ho = 0; ho < p.ho; ++ho)
      for (int64_t wo = 0; wo < p.wo; ++wo) {
        float const g = dyp[(od * p.ho + ho) * p.wo + wo];
        GsPoint const q = gs_point(grid, p, n, od, ho, wo);
        if (p.nearest) {
          add(q.z.lo, q.y.lo, q.x.lo, g);
          continue;
        }
        if (p.cubic) {
          float wx[4], wy[4], dw[4];
          int64_t xs[4], ys[4];
          gs_cubic_weights(q.x.t, wx, dw);
          gs_cubic_weights(q.y.t, wy, dw);
          gs_cubic_taps(q.x.lo, p.w, p, xs);
          gs_cubic_taps(q.y.lo, p.h, p, ys);
          GP_HD_UNROLL
          for (int i = 0; i < 4; ++i) {
            GP_HD_UNROLL
            for (int k = 0; k < 4; ++k) add(0, ys[i], xs[k], g * wy[i] * wx[k]);
          }
          continue;
        }
        if (!p.volumetric) {
          int64_t const x0 = q.x.lo, y0 = q.y.lo;
          float const tx = q.x.t, ty = q.y.t;
          add(0, y0, x0, g * (1.f - tx) * (1.f - ty));
          add(0, y0, x0 + 1, g * tx * (1.f - ty));
          add(0, y0 + 1, x0, g * (1.f - tx) * ty);
          add(0, y0 + 1, x0 + 1, g * tx * ty);
          continue;
        }
        for (int k = 0; k < 8; ++k)
          add(q.z.lo + (k >> 2), q.y.lo + ((k >> 1) & 1), q.x.lo + (k & 1), g * gs_corner_weight(q, k));
      }
}

// dgrid[e·coords + {0, 1(, 2)}], e over [N, (Do,) Ho, Wo]: the interpolation weights' slopes times
// the source positions' derivatives, summed over the channels in order; nearest reads are steps
// (zero).
GP_HD void grid_sample_grid_grad_at(float const* x, float const* grid, float const* dy, GridSampleParams const& p,
                                    float* dgrid, int64_t e) {
  int64_t const wo = e % p.wo, ho = (e / p.wo) % p.ho, od = (e / (p.wo * p.ho)) % p.dout,
                n = e / (p.wo * p.ho * p.dout);
  int64_t const coords = p.volumetric ? 3 : 2;
  float sx = 0.f, sy = 0.f, sz = 0.f;
  if (!p.nearest) {
    GsPoint const q = gs_point(grid, p, n, od, ho, wo);
    int64_t const x0 = q.x.lo, y0 = q.y.lo, z0 = q.z.lo;
    float const tx = q.x.t, ty = q.y.t, tz = q.z.t;
    // Bicubic: the weights, their slopes and the padded reads, the same for every channel.
    float wx[4] = {}, wy[4] = {}, dwx[4] = {}, dwy[4] = {};
    int64_t xs[4] = {}, ys[4] = {};
    if (p.cubic) {
      gs_cubic_weights(tx, wx, dwx);
      gs_cubic_weights(ty, wy, dwy);
      gs_cubic_taps(x0, p.w, p, xs);
      gs_cubic_taps(y0, p.h, p, ys);
    }
    for (int64_t c = 0; c < p.c; ++c) {
      float const* plane = x + (n * p.c + c) * p.d * p.h * p.w;
      float const g = dy[(((n * p.c + c) * p.dout + od) * p.ho + ho) * p.wo + wo];
      if (p.cubic) {
        GP_HD_UNROLL
        for (int i = 0; i < 4; ++i) {
          GP_HD_UNROLL
          for (int k = 0; k < 4; ++k) {
            float const v = gs_at(plane, 0, ys[i], xs[k], p);
            sx += g * v * dwx[k] * wy[i];
            sy += g * v * wx[k] * dwy[i];
          }
        }
        continue;
      }
      if (!p.volumetric) {
        float const v00 = gs_at(plane, 0, y0, x0, p), v01 = gs_at(plane, 0, y0, x0 + 1, p);
        float const v10 = gs_at(plane, 0, y0 + 1, x0, p), v11 = gs_at(plane, 0, y0 + 1, x0 + 1, p);
        sx += g * ((v01 - v00) * (1.f - ty) + (v11 - v10) * ty);
        sy += g * ((v10 - v00) * (1.f - tx) + (v11 - v01) * tx);
        continue;
      }
      float dx = 0.f, dyy = 0.f, dz = 0.f;
      for (int k = 0; k < 8; ++k) {
        float const v = gs_at(plane, z0 + (k >> 2), y0 + ((k >> 1) & 1), x0 + (k & 1), p);
        float const wx = (k & 1) ? tx : 1.f - tx, wy = (k & 2) ? ty : 1.f - ty, wz = (k & 4) ? tz : 1.f - tz;
        float const sgx = (k & 1) ? 1.f : -1.f, sgy = (k & 2) ? 1.f : -1.f, sgz = (k & 4) ? 1.f : -1.f;
        dx += v * sgx * wy * wz;
        dyy += v * wx * sgy * wz;
        dz += v * wx * wy * sgz;
      }
      sx += g * dx;
      sy += g * dyy;
      sz += g * dz;
    }
    sx *= q.x.grad;
    sy *= q.y.grad;
    sz *= q.z.grad;
  }
  dgrid[e * coords] = sx;
  dgrid[e * coords + 1] = sy;
  if (p.volumetric) dgrid[e * coords + 2] = sz;
}

// ---- Col2Im (torch's nn.Fold) and its adjoint Im2Col ----
// x [N, C·K, L] holds, for each of the L sliding blocks l and each of the K = prod(kernel) offsets
// k of a block, a value of channel c at pixel block_start(l) + k·dil − pad; Col2Im sums them into
// y [N, C, image...] (a pixel no block covers is 0). Its backward, Im2Col, reads each entry of x
// from its pixel of dy (0 in the padding). Spatial dims in slots (0, 1, 2) as PoolParams: fewer
// fill the last slots and leave the leading ones at 1 (no pad). One call per element of y
// (forward: a gather over the kernel offsets in order, deterministic) or of x (backward).
struct Col2ImParams {
  int64_t n = 0, c = 0;
  int64_t image[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
  int64_t pad[3] = {0, 0, 0}, blocks[3] = {1, 1, 1};
};

GP_HD int64_t col2im_taps(Col2ImParams const& p) { return p.kernel[0] * p.kernel[1] * p.kernel[2]; }
GP_HD int64_t col2im_blocks(Col2ImParams const& p) { return p.blocks[0] * p.blocks[1] * p.blocks[2]; }
GP_HD int64_t col2im_plane(Col2ImParams const& p) { return p.image[0] * p.image[1] * p.image[2]; }

// The block along one dim whose tap k lands on pixel i, or -1.
GP_HD int64_t col2im_block_of(int64_t i, int64_t k, int64_t stride, int64_t dil, int64_t pad, int64_t blocks) {
  int64_t const t = i + pad - k * dil;
  if (t < 0 || t % stride != 0 || t / stride >= blocks) return -1;
  return t / stride;
}

// y[e], e over [N, C, image...].
GP_HD void col2im_at(float const* x, Col2ImParams const& p, float* y, int64_t e) {
  int64_t const i2 = e % p.image[2], i1 = (e / p.image[2]) % p.image[1];
  int64_t const i0 = (e / (p.image[2] * p.image[1])) % p.image[0], nc = e / col2im_plane(p);
  int64_t const L = col2im_blocks(p);
  float const* xp = x + nc * col2im_taps(p) * L;  // rows c·K .. c·K + K − 1 of sample n
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < p.kernel[0]; ++k0) {
    int64_t const b0 = col2im_block_of(i0, k0, p.stride[0], p.dil[0], p.pad[0], p.blocks[0]);
    if (b0 < 0) continue;
    for (int64_t k1 = 0; k1 < p.kernel[1]; ++k1) {
      int64_t const b1 = col2im_block_of(i1, k1, p.stride[1], p.dil[1], p.pad[1], p.blocks[1]);
      if (b1 < 0) continue;
      for (int64_t k2 = 0; k2 < p.kernel[2]; ++k2) {
        int64_t const b2 = col2im_block_of(i2, k2, p.stride[2], p.dil[2], p.pad[2], p.blocks[2]);
        if (b2 < 0) continue;
        acc += xp[((k0 * p.kernel[1] + k1) * p.kernel[2] + k2) * L + (b0 * p.blocks[1] + b1) * p.blocks[2] + b2];
      }
    }
  }
  y[e] = acc;
}

// dx[e] (added to it when accumulating), e over [N, C·K, L]: the entry's pixel of dy.
GP_HD void im2col_at(float const* dy, Col2ImParams const& p, float* dx, int64_t e, bool accumulate) {
  int64_t const L = col2im_blocks(p), K = col2im_taps(p);
  int64_t const l = e % L, k = (e / L) % K, nc = e / (L * K);
  int64_t const b2 = l % p.blocks[2], b1 = (l / p.blocks[2]) % p.blocks[1], b0 = l / (p.blocks[2] * p.blocks[1]);
  int64_t const k2 = k % p.kernel[2], k1 = (k / p.kernel[2]) % p.kernel[1], k0 = k / (p.kernel[2] * p.kernel[1]);
  int64_t const i0 = b0 * p.stride[0] - p.pad[0] + k0 * p.dil[0];
  int64_t const i1 = b1 * p.stride[1] - p.pad[1] + k1 * p.dil[1];
  int64_t const i2 = b2 * p.stride[2] - p.pad[2] + k2 * p.dil[2];
  bool const inside = i0 >= 0 && i0 < p.image[0] && i1 >= 0 && i1 < p.image[1] && i2 >= 0 && i2 < p.image[2];
  float const v = inside ? dy[nc * col2im_plane(p) + (i0 * p.image[1] + i1) * p.image[2] + i2] : 0.f;
  dx[e] = accumulate ? dx[e] + v : v;
}

}  // namespace gp::kernels::hd
