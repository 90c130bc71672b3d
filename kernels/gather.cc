#include "kernels/gather.h"

#include <cstring>

namespace gp::kernels {
namespace {
bool resolve(int64_t idx, int64_t axis_dim, int64_t& out) {
  out = idx < 0 ? idx + axis_dim : idx;
  return out >= 0 && out < axis_dim;
}
}  // namespace

bool gather(float const* data, int64_t outer, int64_t axis_dim, int64_t inner, int64_t const* indices,
            int64_t num_indices, float* out) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < num_indices; ++j) {
      int64_t k = 0;
      if (!resolve(indices[j], axis_dim, k)) return false;
      std::memcpy(out + (o * num_indices + j) * inner, data + (o * axis_dim + k) * inner,
                  static_cast<std::size_t>(inner) * sizeof(float));
    }
  }
  return true;
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
