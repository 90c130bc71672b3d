#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/optimizer.h"
#include "kernels/optim.h"
#include "tests/exec/device_like_backend.h"

namespace gp::exec {
namespace {

CpuBackend be;  // the optimizer's device operations

TEST(OptimizerKernels, SgdMomentumWeightDecayByHand) {
  float w[2] = {1.f, -2.f};
  float const g[2] = {0.5f, 0.25f};
  float buf[2] = {0.f, 0.f};
  // step 1: d = g + 0.1 w = (0.6, 0.05); buf = d; w -= 0.1 * buf.
  kernels::sgd_update(w, g, buf, 2, 0.1f, 0.9f, 0.1f);
  EXPECT_NEAR(buf[0], 0.6f, 1e-7);
  EXPECT_NEAR(buf[1], 0.05f, 1e-7);
  EXPECT_NEAR(w[0], 0.94f, 1e-7);
  EXPECT_NEAR(w[1], -2.005f, 1e-7);
  // step 2: d = (0.5 + 0.094, 0.25 - 0.2005); buf = 0.9 buf + d.
  kernels::sgd_update(w, g, buf, 2, 0.1f, 0.9f, 0.1f);
  EXPECT_NEAR(buf[0], 0.9f * 0.6f + 0.594f, 1e-6);
  EXPECT_NEAR(buf[1], 0.9f * 0.05f + 0.0495f, 1e-6);
  EXPECT_NEAR(w[0], 0.94f - 0.1f * (0.54f + 0.594f), 1e-6);
  EXPECT_NEAR(w[1], -2.005f - 0.1f * (0.045f + 0.0495f), 1e-6);
}

TEST(OptimizerKernels, PlainSgd) {
  float w[1] = {3.f};
  float const g[1] = {2.f};
  kernels::sgd_update(w, g, nullptr, 1, 0.5f, 0.f, 0.f);
  EXPECT_FLOAT_EQ(w[0], 2.f);
}

TEST(OptimizerKernels, AdamFirstStepsByHand) {
  float w[1] = {1.f}, m[1] = {0.f}, v[1] = {0.f};
  float const g[1] = {0.5f};
  kernels::AdamParams p;
  p.lr = 0.1f;
  p.step = 1;
  kernels::adam_update(w, g, m, v, 1, p);
  // Bias-corrected m/sqrt(v) = g/|g| on step 1: w = 1 - 0.1 * 0.5 / (0.5 + eps).
  EXPECT_NEAR(m[0], 0.05f, 1e-7);
  EXPECT_NEAR(v[0], 0.00025f, 1e-8);
  EXPECT_NEAR(w[0], 0.9f, 1e-6);
  p.step = 2;
  kernels::adam_update(w, g, m, v, 1, p);
  double const m2 = 0.9 * 0.05 + 0.1 * 0.5, v2 = 0.999 * 0.00025 + 0.001 * 0.25;
  double const expected = 0.9 - 0.1 * (m2 / (1 - 0.81)) / (std::sqrt(v2 / (1 - 0.999 * 0.999)) + 1e-8);
  EXPECT_NEAR(w[0], expected, 1e-6);
}

TEST(OptimizerKernels, AdamWDecouplesDecay) {
  float w1[1] = {2.f}, m1[1] = {0.f}, v1[1] = {0.f};
  float w2[1] = {2.f}, m2[1] = {0.f}, v2[1] = {0.f};
  float const g[1] = {1.f};
  kernels::AdamParams p;
  p.lr = 0.1f;
  p.weight_decay = 0.5f;
  p.decoupled = true;
  kernels::adam_update(w1, g, m1, v1, 1, p);
  EXPECT_NEAR(w1[0], 2.f * (1.f - 0.05f) - 0.1f, 1e-6);
  p.decoupled = false;  // Adam: decay enters the gradient, which the normalisation cancels on step 1
  kernels::adam_update(w2, g, m2, v2, 1, p);
  EXPECT_NEAR(w2[0], 2.f - 0.1f, 1e-6);
}

TEST(Optimizer, KeepsMomentsPerParameterAndCountsSteps) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.lr = 0.1f;
  c.momentum = 0.5f;
  Optimizer opt(c);
  std::map<std::string, Tensor> params = {{"a", Tensor::from_floats({2}, {1.f, 1.f})},
                                          {"b", Tensor::from_floats({1}, {0.f})}};
  std::map<std::string, Tensor> grads = {{"a", Tensor::from_floats({2}, {1.f, -1.f})},
                                         {"b", Tensor::from_floats({1}, {2.f})}};
  ASSERT_TRUE(opt.step(be, params, grads).is_ok());
  ASSERT_TRUE(opt.step(be, params, grads).is_ok());
  EXPECT_EQ(opt.step_count(), 2);
  // buf: 1, 1.5 → a[0] = 1 - 0.1 - 0.15.
  EXPECT_NEAR(params.at("a").to_vector()[0], 0.75f, 1e-6);
  EXPECT_NEAR(params.at("a").to_vector()[1], 1.25f, 1e-6);
  EXPECT_NEAR(params.at("b").to_vector()[0], -0.5f, 1e-6);
  EXPECT_EQ(opt.state().size(), 2u);
  EXPECT_NEAR(opt.state().at("a#momentum").to_vector()[0], 1.5f, 1e-6);
}

// A step hands the backend every parameter at once (a device updates them in one launch), and
// the result is the per-parameter update's.
TEST(Optimizer, AStepIsOneUpdateOfEveryParameter) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.lr = 0.01f;
  c.weight_decay = 0.1f;
  auto params_of = [] {
    return std::map<std::string, Tensor>{{"a", Tensor::from_floats({2}, {1.f, 2.f})},
                                         {"b", Tensor::from_floats({3}, {0.f, -1.f, 4.f})},
                                         {"c", Tensor::from_floats({1}, {3.f})}};
  };
  std::map<std::string, Tensor> const grads = {{"a", Tensor::from_floats({2}, {1.f, -1.f})},
                                               {"b", Tensor::from_floats({3}, {2.f, 0.5f, -3.f})},
                                               {"c", Tensor::from_floats({1}, {0.25f})}};
  testing::DeviceLikeBackend device;
  CpuBackend cpu;
  Optimizer on_device(c), on_cpu(c);
  auto pd = params_of(), pc = params_of();
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(on_device.step(device, pd, grads).is_ok());
    ASSERT_TRUE(on_cpu.step(cpu, pc, grads).is_ok());
  }
  EXPECT_EQ(device.update_all_calls, 3);
  EXPECT_EQ(device.updated_params, 3 * 3);
  for (auto const& [name, w] : pc) EXPECT_EQ(pd.at(name).to_vector(), w.to_vector()) << name;
}

TEST(Optimizer, MissingOrMisshapenGradientIsAnError) {
  Optimizer opt(OptimizerConfig{});
  std::map<std::string, Tensor> params = {{"a", Tensor::from_floats({2}, {1.f, 1.f})}};
  std::map<std::string, Tensor> none;
  EXPECT_FALSE(opt.step(be, params, none).is_ok());
  std::map<std::string, Tensor> wrong = {{"a", Tensor::from_floats({3}, {1.f, 1.f, 1.f})}};
  auto s = opt.step(be, params, wrong);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'a'"), std::string::npos);
}

TEST(Optimizer, AdamStateRestoresExactly) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.lr = 0.01f;
  c.weight_decay = 0.1f;
  Optimizer a(c);
  std::map<std::string, Tensor> pa = {{"w", Tensor::from_floats({3}, {1.f, 2.f, 3.f})}};
  std::map<std::string, Tensor> g = {{"w", Tensor::from_floats({3}, {0.3f, -0.2f, 0.1f})}};
  ASSERT_TRUE(a.step(be, pa, g).is_ok());
  // Copy state into a fresh optimizer and continue both: identical results.
  Optimizer b(c);
  std::map<std::string, Tensor> copied;
  for (auto const& [k, t] : a.state()) copied.emplace(k, t.clone());
  b.load_state(copied, a.step_count());
  std::map<std::string, Tensor> pb = {{"w", pa.at("w").clone()}};
  ASSERT_TRUE(a.step(be, pa, g).is_ok());
  ASSERT_TRUE(b.step(be, pb, g).is_ok());
  EXPECT_EQ(pa.at("w").to_vector(), pb.at("w").to_vector());
}

}  // namespace
}  // namespace gp::exec
