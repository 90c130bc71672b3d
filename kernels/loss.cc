#include "kernels/loss.h"

#include <algorithm>
#include <cmath>

namespace gp::kernels {

double softmax_cross_entropy_forward(float const* logits, int64_t const* labels, int64_t rows, int64_t classes,
                                     int64_t* bad_row) {
  if (bad_row) *bad_row = -1;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float const* x = logits + r * classes;
    int64_t const label = labels[r];
    if (label < 0 || label >= classes) {
      if (bad_row && *bad_row < 0) *bad_row = r;
      continue;
    }
    float const mx = *std::max_element(x, x + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(x[c] - mx));
    total += std::log(sum) - static_cast<double>(x[label] - mx);
  }
  return total;
}

void softmax_cross_entropy_backward(float const* logits, int64_t const* labels, int64_t rows, int64_t classes,
                                    float scale, float* grad) {
  for (int64_t r = 0; r < rows; ++r) {
    float const* x = logits + r * classes;
    float* g = grad + r * classes;
    float const mx = *std::max_element(x, x + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(x[c] - mx));
    double const inv = 1.0 / sum;
    for (int64_t c = 0; c < classes; ++c)
      g[c] = static_cast<float>(scale * std::exp(static_cast<double>(x[c] - mx)) * inv);
    int64_t const label = labels[r];
    if (label >= 0 && label < classes) g[label] -= scale;
  }
}

double mse_forward(float const* pred, float const* target, int64_t n) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double const d = static_cast<double>(pred[i]) - target[i];
    total += d * d;
  }
  return total;
}

void mse_backward(float const* pred, float const* target, int64_t n, float scale, float* grad) {
  for (int64_t i = 0; i < n; ++i) grad[i] = scale * 2.f * (pred[i] - target[i]);
}

}  // namespace gp::kernels
