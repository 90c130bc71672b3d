//

#include <cassert>
#include <cstring>

#include "kernels/move.h"

namespace gp::kernels {
namespace {

int64_t numel(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Calls body(src_offset, dst_offset) for each row (all dims but the last).
template <typename Body>
void for_each_row(std::vector<int64_t> const& shape, std::vector<int64_t> const& s1, std::vector<int64_t> const& s2,
                  Body&& body) {
  std::size_t const rank = shape.size();
  if (rank <= 1) {
    body(int64_t{0}, int64_t{0});
    return;
  }
  for (int64_t d : shape)
    if (d == 0) return;
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t o1 = 0, o2 = 0;
  while (true) {
    body(o1, o2);
    int k = static_cast<int>(rank) - 2;
    for (; k >= 0; --k) {
      ++idx[k];
      o1 += s1[k];
      o2 += s2[k];
      if (idx[k] < shape[k]) break;
      o1 -= s1[k] * shape[k];
      o2 -= s2[k] * shape[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace

std::vector<int64_t> contiguous_strides(std::vector<int64_t> const& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

namespace {
template <typename T>
void strided_copy_of(T const* src, std::vector<int64_t> const& src_strides, T* dst,
                     std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape) {
  if (numel(shape) == 0) return;
  if (shape.empty()) {
    dst[0] = src[0];
    return;
  }
  int64_t const n = shape.back();
  int64_t const ss = src_strides.back(), ds = dst_strides.back();
  for_each_row(shape, src_strides, dst_strides, [&](int64_t so, int64_t doff) {
    T const* s = src + so;
    T* d = dst + doff;
    if (ss == 1 && ds == 1) {
      std::memcpy(d, s, static_cast<std::size_t>(n) * sizeof(T));
    } else if (ss == 0) {
      T const v = s[0];
      for (int64_t i = 0; i < n; ++i) d[i * ds] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
    }
  });
}
}  // namespace

void strided_copy(float const* src, std::vector<int64_t> const& src_strides, float* dst,
                  std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape) {
  strided_copy_of(src, src_strides, dst, dst_strides, shape);
}

void strided_copy(uint16_t const* src, std::vector<int64_t> const& src_strides, uint16_t* dst,
                  std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape) {
  strided_copy_of(src, src_strides, dst, dst_strides, shape);
}

void strided_add(float const* src, std::vector<int64_t> const& src_strides, float* dst,
                 std::vector<int64_t> const& dst_strides, std::vector<int64_t> const& shape) {
  if (numel(shape) == 0) return;
  if (shape.empty()) {
    dst[0] += src[0];
    return;
  }
  int64_t const n = shape.back();
  int64_t const ss = src_strides.back(), ds = dst_strides.back();
  for_each_row(shape, src_strides, dst_strides, [&](int64_t so, int64_t doff) {
    float const* s = src + so;
    float* d = dst + doff;
    if (ds == 0) {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += s[i * ss];
      d[0] += static_cast<float>(acc);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * ds] += s[i * ss];
    }
  });
}

std::vector<int64_t> pad_shape(std::vector<int64_t> const& shape, std::size_t rank) {
  assert(shape.size() <= rank);
  std::vector<int64_t> out(rank - shape.size(), 1);
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

bool broadcast_shapes(std::vector<int64_t> const& a, std::vector<int64_t> const& b, std::vector<int64_t>& out) {
  std::size_t const rank = std::max(a.size(), b.size());
  std::vector<int64_t> pa = pad_shape(a, rank), pb = pad_shape(b, rank);
  out.assign(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    if (pa[i] == pb[i] || pb[i] == 1) {
      out[i] = pa[i];
    } else if (pa[i] == 1) {
      out[i] = pb[i];
    } else {
      return false;
    }
  }
  return true;
}

namespace {
// Strides of `small` (padded to out's rank) with zero strides on broadcast dimensions.
std::vector<int64_t> broadcast_strides(std::vector<int64_t> const& small, std::vector<int64_t> const& out) {
  std::vector<int64_t> padded = pad_shape(small, out.size());
  std::vector<int64_t> s = contiguous_strides(padded);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (padded[i] == 1 && out[i] != 1) s[i] = 0;
  return s;
}
}  // namespace

void expand(float const* src, std::vector<int64_t> const& src_shape, float* dst,
            std::vector<int64_t> const& out_shape) {
  strided_copy(src, broadcast_strides(src_shape, out_shape), dst, contiguous_strides(out_shape), out_shape);
}

void reduce_sum_to(float const* src, std::vector<int64_t> const& full_shape, float* dst,
                   std::vector<int64_t> const& target_shape, bool accumulate) {
  if (!accumulate) std::memset(dst, 0, static_cast<std::size_t>(numel(target_shape)) * sizeof(float));
  strided_add(src, contiguous_strides(full_shape), dst, broadcast_strides(target_shape, full_shape), full_shape);
}

}  // namespace gp::kernels

namespace gp::kernels {
namespace {
bool resolve(int64_t idx, int64_t axis_dim, int64_t& out) {
  out = idx < 0 ? idx + axis_dim : idx;
  return out >= 0 && out < axis_dim;
}
}  // namespace

bool gather_bytes(void const* data, std::size_t element_bytes, int64_t outer, int64_t axis_dim, int64_t inner,
                  int64_t const* indices, int64_t num_indices, void* out, int64_t* bad_position) {
  auto const* src = static_cast<char const*>(data);
  auto* dst = static_cast<char*>(out);
  std::size_t const row = static_cast<std::size_t>(inner) * element_bytes;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < num_indices; ++j) {
      int64_t k = 0;
      if (!resolve(indices[j], axis_dim, k)) {
        if (bad_position) *bad_position = j;  // the first: o = 0 visits every position in order
        return false;
      }
      std::memcpy(dst + static_cast<std::size_t>(o * num_indices + j) * row,
                  src + static_cast<std::size_t>(o * axis_dim + k) * row, row);
    }
  }
  return true;
}

bool gather(float const* data, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
            int64_t num_indices, float* out, int64_t* bad_position) {
  return gather_bytes(data, sizeof(float), outer, axis_dim, inner, indices, num_indices, out, bad_position);
}

bool gather_backward(float const* grad_out, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
                     int64_t num_indices, float* grad_data) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < num_indices; ++j) {
      int64_t k = 0;
      if (!resolve(indices[j], axis_dim, k)) return false;
      float const* src = grad_out + (o * num_indices + j) * inner;
      float* dst = grad_data + (o * axis_dim + k) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
  }
  return true;
}

}  // namespace gp::kernels
