// Host side of the data-movement and pooling kernels: the parameter structs of kernels/hd/index.h
// and pool.h built from shapes and attributes, with the CPU backend's rules (exec/cpu/
// cpu_ops_shape.cc, cpu_ops_pool.cc). Shared by the CUDA ops (exec/cuda/ops_move.cc) and their
// host test; plain values in, an error message out (empty when fine).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
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

// Slice (ONNX, as the CPU backend clamps it): the output shape, the input strides times the
// steps, and the offset of the first element.
struct SliceGeometry {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> src_strides;
  int64_t offset = 0;
};

inline std::string slice_geometry(std::vector<int64_t> const& in_shape, std::vector<int64_t> const& starts,
                                  std::vector<int64_t> const& ends, std::vector<int64_t> const& axes,
                                  std::vector<int64_t> const& steps, SliceGeometry& g) {
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  std::vector<int64_t> start(in_shape.size(), 0), step(in_shape.size(), 1);
  g.out_shape = in_shape;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = k < axes.size() ? axes[k] : static_cast<int64_t>(k);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return "slice axis " + std::to_string(axis) + " out of range";
    int64_t const dim = in_shape[axis];
    int64_t const st = k < steps.size() ? steps[k] : 1;
    if (st == 0) return "slice step is 0";
    int64_t s = starts[k], e = k < ends.size() ? ends[k] : dim;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count = 0;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    start[axis] = s;
    step[axis] = st;
    g.out_shape[axis] = count;
  }
  std::vector<int64_t> const strides = row_major_strides(in_shape);
  g.src_strides.assign(in_shape.size(), 0);
  g.offset = 0;
  for (std::size_t i = 0; i < in_shape.size(); ++i) {
    g.src_strides[i] = strides[i] * step[i];
    if (g.out_shape[i] > 0) g.offset += start[i] * strides[i];
  }
  return {};
}

// Pooling over x_shape = [N, C, spatial...] (1 to 3 spatial dims); out_shape receives the output
// shape. `kernel` is ignored for a global pool.
inline std::string pool_params(std::vector<int64_t> const& x_shape, PoolMode mode, bool global,
                               std::vector<int64_t> const& kernel, std::vector<int64_t> const& strides,
                               std::vector<int64_t> const& pads, bool ceil_mode, PoolParams& p,
                               std::vector<int64_t>& out_shape) {
  if (x_shape.size() < 3 || x_shape.size() > 5) return "needs an input of rank 3 to 5 (N, C, 1 to 3 spatial dims)";
  std::size_t const sp = x_shape.size() - 2;
  if (!global && kernel.size() < sp) return "kernel_shape has fewer entries than spatial dims";
  p = PoolParams{};
  p.mode = mode;
  p.planes = x_shape[0] * x_shape[1];
  out_shape = {x_shape[0], x_shape[1]};
  std::size_t const slot0 = 3 - sp;
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const in = x_shape[2 + i];
    int64_t const k = global ? in : kernel[i];
    int64_t const s = global ? 1 : (i < strides.size() ? strides[i] : 1);
    int64_t const pl = !global && i < pads.size() / 2 ? pads[i] : 0;
    int64_t const pr = !global && i < pads.size() / 2 ? pads[i + pads.size() / 2] : 0;
    if (s <= 0 || k <= 0) return "kernel and strides must be positive";
    int64_t const span = in + pl + pr - k;
    if (span < 0) return "kernel larger than the padded input";
    int64_t out = span / s + 1;
    if (ceil_mode && !global) {
      out = (span + s - 1) / s + 1;
      if ((out - 1) * s >= in + pl) --out;  // the last window must start inside the input
    }
    out_shape.push_back(out);
    p.in[slot0 + i] = in;
    p.out[slot0 + i] = out;
    p.kernel[slot0 + i] = k;
    p.stride[slot0 + i] = s;
    p.pad[slot0 + i] = pl;
  }
  return {};
}

}  // namespace gp::kernels::hd
