// Index math of the broadcasting arithmetic and the sums down to a shape (kernels/cuda/
// binary.cu): numpy broadcasting of two operands, and ReduceSum/ReduceMean and the binary
// operators' backward (a sum of the full gradient down to an input's shape). GP_HD index math and
// the host planners that build it from shapes; tests/cuda/test_hd_math.cc runs the same code.
//
// Shapes and strides travel by value in fixed arrays; every loop over them runs over all slots
// with a constant index (unrolled under nvcc) so that they stay in parameter space: a runtime
// index would move them to local memory.
//
// Per-element math of Pow with a tensor exponent (kernels/cuda/binary.cu), with the CPU
// backend's formulas (exec/cpu/binary.cc): y = a^b with a and b broadcast to y's shape
// (hd::BinaryIndex). The gradients are full-shape values that sum_to then sums down to each
// operand's shape. Computed in float whatever T is.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>
#include <cmath>

#include "kernels/hd/hd.h"

// Device pass only: the host compiler of an nvcc build does not know the pragma.
#if defined(__CUDA_ARCH__)
#define GP_HD_BCAST_UNROLL _Pragma("unroll")
#else
#define GP_HD_BCAST_UNROLL
#endif

namespace gp::kernels::hd {

inline constexpr int kMaxBroadcastDims = 8;

// Output dims [0, rank) (coalesced: no size-1 dims, neighbours merged where both operands allow)
// and each operand's element strides over them (0 on a broadcast dim).
struct BinaryIndex {
  int rank = 0;
  int64_t numel = 0;
  int64_t dims[kMaxBroadcastDims] = {};
  int64_t a[kMaxBroadcastDims] = {};
  int64_t b[kMaxBroadcastDims] = {};
};

// Offsets into a and b of output element i (row-major). I: int32_t where every offset and the
// element count fit (cheaper division), else int64_t.
template <typename I>
GP_HD void binary_offsets(BinaryIndex const& p, I i, I& a, I& b) {
  I oa = 0, ob = 0;
  GP_HD_BCAST_UNROLL
  for (int d = kMaxBroadcastDims - 1; d >= 0; --d) {
    if (d < p.rank) {
      I const n = static_cast<I>(p.dims[d]);
      I const q = i / n;
      I const r = i - q * n;
      oa += r * static_cast<I>(p.a[d]);
      ob += r * static_cast<I>(p.b[d]);
      i = q;
    }
  }
  a = oa;
  b = ob;
}

// One dims/strides list (the kept or the summed dims of a SumIndex).
struct DimList {
  int rank = 0;
  int64_t dims[kMaxBroadcastDims] = {};
  int64_t strides[kMaxBroadcastDims] = {};
};

template <typename I>
GP_HD I dim_offset(DimList const& p, I i) {
  I off = 0;
  GP_HD_BCAST_UNROLL
  for (int d = kMaxBroadcastDims - 1; d >= 0; --d) {
    if (d < p.rank) {
      I const n = static_cast<I>(p.dims[d]);
      I const q = i / n;
      off += (i - q * n) * static_cast<I>(p.strides[d]);
      i = q;
    }
  }
  return off;
}

// A sum of a full tensor down to a target shape (numpy-broadcastable to it): target element o
// sums full[dim_offset(kept, o) + dim_offset(summed, r)] over r in [0, summed_count).
struct SumIndex {
  int64_t out_count = 0;
  int64_t summed_count = 1;
  DimList kept;
  DimList summed;
};

// Σ over summed positions r0, r0 + step, ... of target element with base offset `base` (the
// offset of its first contribution): step 1 from one thread, or one block's thread share.
template <typename T, typename I>
GP_HD float sum_partial(T const* x, SumIndex const& p, I base, I r0, I step) {
  float acc = 0.f;
  I const n = static_cast<I>(p.summed_count);
  if (p.summed.rank <= 1) {
    I const s = p.summed.rank == 1 ? static_cast<I>(p.summed.strides[0]) : I(0);
    for (I r = r0; r < n; r += step) acc += static_cast<float>(x[base + r * s]);
  } else {
    for (I r = r0; r < n; r += step) acc += static_cast<float>(x[base + dim_offset(p.summed, r)]);
  }
  return acc;
}

// ---- host planners ----

namespace detail {
inline std::vector<int64_t> padded(std::vector<int64_t> const& s, std::size_t rank) {
  std::vector<int64_t> out(rank - s.size(), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}
// Strides of `s` (padded to out's rank) over out's dims, 0 where s broadcasts.
inline std::vector<int64_t> strides_over(std::vector<int64_t> const& s, std::vector<int64_t> const& out) {
  std::vector<int64_t> p = padded(s, out.size()), st(out.size(), 0);
  int64_t acc = 1;
  for (std::size_t i = out.size(); i-- > 0;) {
    st[i] = p[i] == 1 ? 0 : acc;
    acc *= p[i];
  }
  return st;
}
// Drops size-1 dims and merges neighbours contiguous in every stride list; false when more than
// kMaxBroadcastDims remain.
inline bool coalesce(std::vector<int64_t>& dims, std::vector<std::vector<int64_t>*> const& strides) {
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> s(strides.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !d.empty();
    for (std::size_t k = 0; k < strides.size() && merge; ++k) merge = s[k].back() == (*strides[k])[i] * dims[i];
    if (merge) {
      d.back() *= dims[i];
      for (std::size_t k = 0; k < strides.size(); ++k) s[k].back() = (*strides[k])[i];
    } else {
      d.push_back(dims[i]);
      for (std::size_t k = 0; k < strides.size(); ++k) s[k].push_back((*strides[k])[i]);
    }
  }
  dims = d;
  for (std::size_t k = 0; k < strides.size(); ++k) *strides[k] = s[k];
  return dims.size() <= static_cast<std::size_t>(kMaxBroadcastDims);
}
inline void fill_list(std::vector<int64_t> const& dims, std::vector<int64_t> const& strides, DimList& l) {
  l.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    l.dims[i] = dims[i];
    l.strides[i] = strides[i];
  }
}
}  // namespace detail

// Numpy broadcast of two shapes; false when they are incompatible.
inline bool broadcast_shape(std::vector<int64_t> const& a, std::vector<int64_t> const& b, std::vector<int64_t>& out) {
  std::size_t const rank = a.size() > b.size() ? a.size() : b.size();
  std::vector<int64_t> const pa = detail::padded(a, rank), pb = detail::padded(b, rank);
  out.assign(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    if (pa[i] != pb[i] && pa[i] != 1 && pb[i] != 1) return false;
    out[i] = pa[i] == 1 ? pb[i] : pa[i];
  }
  return true;
}

// a ∘ b into `out` (the broadcast of the two shapes). False when the layout needs more dims.
inline bool make_binary_index(std::vector<int64_t> const& out, std::vector<int64_t> const& a,
                              std::vector<int64_t> const& b, BinaryIndex& p) {
  p = BinaryIndex{};
  p.numel = 1;
  for (int64_t d : out) p.numel *= d;
  std::vector<int64_t> dims = out, sa = detail::strides_over(a, out), sb = detail::strides_over(b, out);
  if (!detail::coalesce(dims, {&sa, &sb})) return false;
  p.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    p.dims[i] = dims[i];
    p.a[i] = sa[i];
    p.b[i] = sb[i];
  }
  return true;
}

// full summed down to target (target padded on the left with ones to full's rank; a dim is summed
// where target has 1 and full does not). False when the layout needs more dims, or target has
// more dims than full.
inline bool make_sum_index(std::vector<int64_t> const& full, std::vector<int64_t> const& target, SumIndex& p) {
  p = SumIndex{};
  if (target.size() > full.size()) return false;
  std::vector<int64_t> const t = detail::padded(target, full.size());
  std::vector<int64_t> kd, ks, sd, ss;
  int64_t acc = 1;
  std::vector<int64_t> stride(full.size());
  for (std::size_t i = full.size(); i-- > 0;) {
    stride[i] = acc;
    acc *= full[i];
  }
  p.out_count = 1;
  for (std::size_t i = 0; i < full.size(); ++i) {
    bool const summed = t[i] == 1 && full[i] != 1;
    (summed ? sd : kd).push_back(full[i]);
    (summed ? ss : ks).push_back(stride[i]);
    if (summed) {
      p.summed_count *= full[i];
    } else {
      p.out_count *= full[i];
    }
  }
  if (!detail::coalesce(kd, {&ks}) || !detail::coalesce(sd, {&ss})) return false;
  detail::fill_list(kd, ks, p.kept);
  detail::fill_list(sd, ss, p.summed);
  return true;
}

}  // namespace gp::kernels::hd

namespace gp::kernels::hd {

enum class PowOperand : int32_t { kBase, kExponent };

template <typename T>
GP_HD T pow_value(T a, T b) {
  return static_cast<T>(powf(static_cast<float>(a), static_cast<float>(b)));
}

// dy·∂(a^b)/∂a = dy·b·a^(b−1); dy·∂(a^b)/∂b = dy·a^b·ln a, with y = a^b from the forward pass. As
// on the CPU, a ≤ 0 gives the exponent a NaN or infinite gradient (ln a), never a guess.
template <typename T>
GP_HD T pow_grad(PowOperand wrt, T a, T b, T y, T dy) {
  float const av = static_cast<float>(a), bv = static_cast<float>(b), g = static_cast<float>(dy);
  if (wrt == PowOperand::kBase) return static_cast<T>(g * (bv * powf(av, bv - 1.f)));
  return static_cast<T>(g * (static_cast<float>(y) * logf(av)));
}

// Mod of floats as the CPU computes it (exec/cpu/logic.cc runs these): with fmod the remainder of
// truncated division (the sign of a), else of floored division (the sign of b). r = a - b·q, so
// dr/da = 1 and dr/db = -q, with the quotient q = trunc(a / b) or floor(a / b) taken in double.
GP_HD float mod_value(float a, float b, bool fmod) {
  float r = fmodf(a, b);
  if (!fmod && r != 0 && (r < 0) != (b < 0)) r += b;
  return r;
}
// Mod of integers (int64, int32, int8, uint8; the CPU's exec/cpu/logic.cc and the CUDA kernel run
// this): fmod, the remainder of truncated division (the sign of a), else of floored division (the
// sign of b). A signed divisor of -1 gives 0 (a % -1 overflows for the smallest a); a divisor of 0
// gives 0 too: the callers report it (integer division by zero).
template <typename T>
GP_HD T int_mod_value(T a, T b, bool fmod) {
  if (b == 0) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
    T r = static_cast<T>(a % b);
    if (!fmod && r != 0 && (r < 0) != (b < 0)) r = static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}
// The bitwise family (BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, BitShift) of int64, int32,
// int8 or uint8 (the CPU's exec/cpu/logic.cc and the CUDA kernel run this) on the two's-complement
// bits, in unsigned arithmetic; Not reads x only. A shift by the width or more gives 0, as numpy
// and ONNX's reference do (C++ leaves it undefined); a signed shift is logical.
enum class BitwiseKind : int32_t { kAnd, kOr, kXor, kNot, kShiftLeft, kShiftRight };

template <typename T>
GP_HD T bitwise_value(BitwiseKind k, T x, T z) {
  using U = std::make_unsigned_t<T>;
  U const a = static_cast<U>(x), b = static_cast<U>(z);
  U const bits = static_cast<U>(sizeof(T) * 8);
  switch (k) {
    case BitwiseKind::kAnd:
      return static_cast<T>(static_cast<U>(a & b));
    case BitwiseKind::kOr:
      return static_cast<T>(static_cast<U>(a | b));
    case BitwiseKind::kXor:
      return static_cast<T>(static_cast<U>(a ^ b));
    case BitwiseKind::kNot:
      return static_cast<T>(static_cast<U>(~a));
    case BitwiseKind::kShiftLeft:
      return b >= bits ? T(0) : static_cast<T>(static_cast<U>(a << b));
    case BitwiseKind::kShiftRight:
      return b >= bits ? T(0) : static_cast<T>(static_cast<U>(a >> b));
  }
  return x;
}

GP_HD float mod_b_grad(float a, float b, float dy, bool fmod) {
  double const ratio = static_cast<double>(a) / b;
  return -dy * static_cast<float>(fmod ? trunc(ratio) : floor(ratio));
}

}  // namespace gp::kernels::hd
