#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/loss.h"

namespace gp::kernels {
namespace {

std::vector<float> random_floats(std::size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Loss, CrossEntropyMatchesHandComputedValue) {
  // logits (1, 2, 3), label 2: loss = log(e^1 + e^2 + e^3) - 3.
  std::vector<float> logits = {1.f, 2.f, 3.f};
  std::vector<int64_t> labels = {2};
  int64_t bad = 0;
  double const loss = softmax_cross_entropy_forward(logits.data(), labels.data(), 1, 3, &bad);
  EXPECT_EQ(bad, -1);
  EXPECT_NEAR(loss, std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, 1e-6);
}

TEST(Loss, CrossEntropyReportsLabelOutOfRange) {
  std::vector<float> logits(6, 0.f);
  std::vector<int64_t> labels = {1, 3};
  int64_t bad = 0;
  softmax_cross_entropy_forward(logits.data(), labels.data(), 2, 3, &bad);
  EXPECT_EQ(bad, 1);
}

TEST(Loss, CrossEntropyGradientMatchesFiniteDifferences) {
  int64_t const rows = 4, classes = 5;
  auto logits = random_floats(rows * classes, 1, 2.f);
  std::vector<int64_t> labels = {0, 4, 2, 2};
  float const scale = 0.25f;
  std::vector<float> grad(logits.size());
  softmax_cross_entropy_backward(logits.data(), labels.data(), rows, classes, scale, grad.data());
  float const h = 1e-2f;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    auto plus = logits, minus = logits;
    plus[i] += h;
    minus[i] -= h;
    double const fd = (softmax_cross_entropy_forward(plus.data(), labels.data(), rows, classes, nullptr) -
                       softmax_cross_entropy_forward(minus.data(), labels.data(), rows, classes, nullptr)) /
                      (2.0 * h) * scale;
    EXPECT_NEAR(grad[i], fd, 2e-4) << "element " << i;
  }
  // Each row of (softmax - onehot) sums to zero: a missing term would break this.
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < classes; ++c) s += grad[r * classes + c];
    EXPECT_NEAR(s, 0.0, 1e-6);
  }
}

TEST(Loss, CrossEntropyIsStableForLargeLogits) {
  std::vector<float> logits = {1000.f, 0.f};
  std::vector<int64_t> labels = {1};
  double const loss = softmax_cross_entropy_forward(logits.data(), labels.data(), 1, 2, nullptr);
  EXPECT_NEAR(loss, 1000.0, 1e-3);
}

TEST(Loss, MseValueAndGradient) {
  std::vector<float> pred = {1.f, -2.f, 0.5f};
  std::vector<float> target = {0.f, 1.f, 0.5f};
  EXPECT_NEAR(mse_forward(pred.data(), target.data(), 3), 1.0 + 9.0 + 0.0, 1e-9);
  std::vector<float> grad(3);
  mse_backward(pred.data(), target.data(), 3, 1.f / 3.f, grad.data());
  EXPECT_NEAR(grad[0], 2.f / 3.f, 1e-6);
  EXPECT_NEAR(grad[1], -2.f, 1e-6);
  EXPECT_NEAR(grad[2], 0.f, 1e-6);
  auto p = random_floats(7, 3), t = random_floats(7, 4);
  std::vector<float> g(7);
  mse_backward(p.data(), t.data(), 7, 1.f, g.data());
  float const h = 1e-3f;
  for (int i = 0; i < 7; ++i) {
    auto plus = p, minus = p;
    plus[i] += h;
    minus[i] -= h;
    double const fd = (mse_forward(plus.data(), t.data(), 7) - mse_forward(minus.data(), t.data(), 7)) / (2.0 * h);
    EXPECT_NEAR(g[i], fd, 1e-3);
  }
}

}  // namespace
}  // namespace gp::kernels
