// Host side of the data-movement and pooling kernels: the parameter structs of kernels/hd/index.h
// and pool.h built from shapes that the op's shape function (graph/ops/) has already checked.
// Shared by the CUDA ops (exec/cuda/move.cc, view.cc, pool.cc) and their host test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/hd/index.h"
#include "kernels/hd/pool.h"

namespace gp::kernels::hd {

inline int64_t numel_of(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline std::vector<int64_t> row_major_strides(std::vector<int64_t> const& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

// The parameters of a strided copy over `shape`: size-1 dims dropped and neighbours that are
// contiguous in both tensors merged, so that up to kMaxRank dims remain for any rank whose layout
// allows it. False when more remain.
inline bool make_strided(std::vector<int64_t> const& shape, std::vector<int64_t> const& src,
                         std::vector<int64_t> const& dst, StridedParams& p) {
  std::vector<int64_t> sh, ss, ds;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!sh.empty() && ss.back() == src[i] * shape[i] && ds.back() == dst[i] * shape[i]) {
      sh.back() *= shape[i];
      ss.back() = src[i];
      ds.back() = dst[i];
      continue;
    }
    sh.push_back(shape[i]);
    ss.push_back(src[i]);
    ds.push_back(dst[i]);
  }
  if (sh.size() > static_cast<std::size_t>(kMaxRank)) return false;
  p = StridedParams{};
  p.rank = static_cast<int>(sh.size());
  for (std::size_t i = 0; i < sh.size(); ++i) {
    p.shape[i] = sh[i];
    p.src[i] = ss[i];
    p.dst[i] = ds[i];
  }
  return true;
}

// A copy (not an accumulation) of `elem`-byte elements as one of `vec`-byte chunks, the widest of
// 16, 8 and 4 bytes that fits: the innermost dim must be contiguous in both tensors (stride 1), its
// extent and every other stride multiples of vec / elem, and both base addresses vec-aligned.
// Returns vec and p in chunks (`wide`), or 0 when no width fits (then copy element by element).
// A Transpose that keeps the last axis (a GPT's head permutations), Split, Concat, Slice along an
// outer axis and Expand of whole rows move up to 16 bytes a thread this way, for a fraction of the
// index math.
inline int strided_vector_bytes(StridedParams const& p, int elem, std::uintptr_t src, std::uintptr_t dst,
                                StridedParams& wide) {
  if (p.rank < 1 || elem < 1) return 0;
  int const inner = p.rank - 1;
  if (p.src[inner] != 1 || p.dst[inner] != 1) return 0;
  for (int vec : {16, 8, 4}) {
    if (vec <= elem || vec % elem != 0) continue;
    int64_t const w = vec / elem;
    if (src % static_cast<std::uintptr_t>(vec) != 0 || dst % static_cast<std::uintptr_t>(vec) != 0) continue;
    if (p.shape[inner] % w != 0) continue;
    bool strides_ok = true;
    for (int k = 0; k < inner; ++k) strides_ok = strides_ok && p.src[k] % w == 0 && p.dst[k] % w == 0;
    if (!strides_ok) continue;
    wide = p;
    wide.shape[inner] /= w;
    for (int k = 0; k < inner; ++k) {
      wide.src[k] /= w;
      wide.dst[k] /= w;
    }
    return vec;
  }
  return 0;
}

// How kernels/cuda/move.cu's strided_copy runs a copy: in chunks of chunk_bytes (0: element by
// element, always so when accumulating), over `p` (in chunks when chunked), with int32_t indices
// where they fit. The host twins (tests/cuda/test_hd_move.cc) run the same plan.
struct StridedCopyPlan {
  int chunk_bytes = 0;
  StridedParams p;
  bool int32 = false;
};
inline StridedCopyPlan plan_strided_copy(StridedParams const& p, int elem, std::uintptr_t src, std::uintptr_t dst,
                                         bool accumulate) {
  StridedCopyPlan plan;
  plan.p = p;
  if (!accumulate) plan.chunk_bytes = strided_vector_bytes(p, elem, src, dst, plan.p);
  plan.int32 = strided_fits_int32(plan.p);
  return plan;
}

// Numpy broadcast of two shapes; false when they are incompatible.
inline bool broadcast_shapes(std::vector<int64_t> const& a, std::vector<int64_t> const& b, std::vector<int64_t>& out) {
  std::size_t const rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    int64_t const da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t const db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

// Strides of `small` (left-padded with ones to out's rank) with 0 on the broadcast dims.
inline std::vector<int64_t> broadcast_strides(std::vector<int64_t> const& small, std::vector<int64_t> const& out) {
  std::vector<int64_t> padded(out.size() - small.size(), 1);
  padded.insert(padded.end(), small.begin(), small.end());
  std::vector<int64_t> s = row_major_strides(padded);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (padded[i] == 1 && out[i] != 1) s[i] = 0;
  return s;
}

// The sum of a tensor of full_shape down to target_shape (numpy-broadcastable to it, rank <= full).
inline bool make_reduce(std::vector<int64_t> const& full_shape, std::vector<int64_t> const& target_shape,
                        ReduceParams& p) {
  if (target_shape.size() > full_shape.size()) return false;
  std::vector<int64_t> const fs = row_major_strides(full_shape);
  std::vector<int64_t> const ts = broadcast_strides(target_shape, full_shape);
  std::vector<int64_t> keep_shape, keep_src, keep_dst, red_shape, red_src;
  p.reduced_count = 1;
  for (std::size_t i = 0; i < full_shape.size(); ++i) {
    if (ts[i] == 0) {  // a broadcast dim: summed
      red_shape.push_back(full_shape[i]);
      red_src.push_back(fs[i]);
      p.reduced_count *= full_shape[i];
    } else {
      keep_shape.push_back(full_shape[i]);
      keep_src.push_back(fs[i]);
      keep_dst.push_back(ts[i]);
    }
  }
  std::vector<int64_t> const zeros(red_shape.size(), 0);
  return make_strided(keep_shape, keep_src, keep_dst, p.out) && make_strided(red_shape, red_src, zeros, p.reduced);
}

// The kernel parameters of a pool over x_shape = [N, C, spatial...] (1 to 3 spatial dims) whose
// window and output shape are already checked and computed (graph/ops/pool.h's pool_window).
inline void pool_params(std::vector<int64_t> const& x_shape, std::vector<int64_t> const& out_shape,
                        std::vector<int64_t> const& kernel, std::vector<int64_t> const& strides,
                        std::vector<int64_t> const& dilations, std::vector<int64_t> const& pads_begin,
                        std::vector<int64_t> const& counted_pads_end, PoolMode mode, PoolParams& p) {
  std::size_t const sp = x_shape.size() - 2;
  std::size_t const slot0 = 3 - sp;
  p = PoolParams{};
  p.mode = mode;
  p.planes = x_shape[0] * x_shape[1];
  for (std::size_t i = 0; i < sp; ++i) {
    p.in[slot0 + i] = x_shape[2 + i];
    p.out[slot0 + i] = out_shape[2 + i];
    p.kernel[slot0 + i] = kernel[i];
    p.stride[slot0 + i] = strides[i];
    p.dilation[slot0 + i] = i < dilations.size() ? dilations[i] : 1;
    p.pad[slot0 + i] = pads_begin[i];
    p.counted_end[slot0 + i] = x_shape[2 + i] + counted_pads_end[i];
  }
}

}  // namespace gp::kernels::hd
