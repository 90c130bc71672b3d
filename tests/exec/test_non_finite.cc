// Buffers are not weights, and a NaN names its source: a model whose causal mask is a -inf buffer
// trains with finite losses, and a non-finite loss stops with an error that names the first
// non-finite tensor (a weight, or an activation and the op that produced it).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/non_finite.h"
#include "exec/trainer.h"
#include "tests/exec/device_like_backend.h"
#include "tests/exec/tiny_models.h"
#include "tests/graph/causal_attention_model.h"

namespace gp::exec {
namespace {

TrainConfig config(int64_t steps) {
  TrainConfig c;
  c.batch = 8;
  c.micro_batches = 2;
  c.steps = steps;
  c.seed = 5;
  c.optimizer.lr = 0.1f;
  c.data.samples = 32;
  return c;
}

std::unique_ptr<Trainer> make_trainer(graph::OpGraph const& g, Backend& be, TrainConfig const& c) {
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  if (!data.is_ok()) return nullptr;
  auto t = Trainer::create(c, g, be, std::move(data).value());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

TEST(Buffers, CausalMaskModelTrainsWithFiniteLosses) {
  for (bool where_mask : {false, true}) {
    auto g = gp::testing::causal_attention({.mask_is_float_ones = where_mask}).to_graph();
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    CpuBackend be;
    auto t = make_trainer(*g, be, config(3));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->executor().parameters().size(), 4u);  // wq, wk, wv, head: not the mask
    EXPECT_EQ(t->executor().parameters().count(where_mask ? "attn.bias" : "attn.mask"), 0u);
    Status const s = t->run(nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    ASSERT_EQ(t->losses().size(), 3u);
    for (double l : t->losses()) EXPECT_TRUE(std::isfinite(l)) << l;
    EXPECT_LT(t->losses().back(), t->losses().front());
  }
}

TEST(NonFinite, KindsOfValues) {
  float const inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(non_finite_kind(Tensor::from_floats({3}, {1, 2, 3})), NonFinite::kNone);
  EXPECT_EQ(non_finite_kind(Tensor::from_floats({3}, {1, -inf, 3})), NonFinite::kNegInf);
  EXPECT_EQ(non_finite_kind(Tensor::from_floats({3}, {-inf, inf, 3})), NonFinite::kBad);
  EXPECT_EQ(non_finite_kind(Tensor::from_floats({2}, {std::nanf(""), 0})), NonFinite::kBad);
}

// `check` on a fresh trainer on the CPU, then on a device-like backend: the CPU knows each loss at
// once, a device reads them at the step's end and reruns a non-finite one's forward after the
// step's backward. The same messages either way.
template <typename Check>
void on_both_backends(graph::OpGraph const& g, Check check) {
  CpuBackend cpu;
  testing::DeviceLikeBackend device;
  for (Backend* be : std::vector<Backend*>{&cpu, &device}) {
    SCOPED_TRACE(be->name());
    auto t = make_trainer(g, *be, config(3));
    ASSERT_TRUE(t);
    check(t.get());
  }
}

TEST(NonFinite, NaNWeightIsNamedWithTheOpThatReadsIt) {
  auto g = gp::testing::causal_attention().to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  on_both_backends(*g, [](Trainer* t) {
    ASSERT_TRUE(t->step().is_ok());
    Tensor bad = Tensor::from_floats({8, 8}, std::vector<float>(64, 0.1f));
    bad.data<float>()[9] = std::nanf("");
    ASSERT_TRUE(t->executor().set_parameter("attn.wv", bad).is_ok());
    Status const s = t->step();
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kNumerical);
    std::string const msg = s.message();
    EXPECT_NE(msg.find("loss is NaN at step 2, micro-batch 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the first non-finite tensor is weight 'attn.wv' (read by MatMul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("made so by the optimizer update of step 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("frozen: [\"attn.wv\"]"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(t->steps_done(), 1);
  });
}

TEST(NonFinite, ActivationIsNamedWithTheOpThatProducedIt) {
  // Row 0 of the mask is -inf everywhere: the Softmax of that row is NaN. The -inf the mask adds
  // to the scores before it (attn/add_mask) is not the culprit.
  auto g = gp::testing::causal_attention({.mask_first_row = true}).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  on_both_backends(*g, [](Trainer* t) {
    std::map<std::string, std::vector<float>> initial;
    for (auto const& [n, w] : t->executor().parameters()) initial[n] = w.to_vector();
    Status const s = t->step();
    ASSERT_FALSE(s.is_ok());
    std::string const msg = s.message();
    EXPECT_NE(msg.find("loss is NaN at step 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the first non-finite tensor is activation 'probs', the output of Softmax 'attn/softmax'"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("add_mask"), std::string::npos) << msg;
    // The diagnosis kept nothing in flight: the executor is ready for another forward.
    EXPECT_EQ(t->executor().in_flight(), 0);
    // Stopped before the update: every weight is as it was.
    for (auto const& [n, w] : t->executor().parameters()) EXPECT_EQ(w.to_vector(), initial.at(n)) << n;
  });
}

TEST(NonFinite, OverflowingUpdateIsNamed) {
  auto g = testing::tiny_mlp().to_graph();
  ASSERT_TRUE(g.is_ok());
  CpuBackend be;
  TrainConfig c = config(50);
  c.micro_batches = 1;
  c.optimizer.lr = 1e30f;
  c.optimizer.weight_decay = 1e-3f;
  auto t = make_trainer(*g, be, c);
  ASSERT_TRUE(t);
  Status const s = t->run(nullptr);
  ASSERT_FALSE(s.is_ok());
  std::string const msg = s.message();
  EXPECT_NE(msg.find("at step " + std::to_string(t->steps_done() + 1)), std::string::npos) << msg;
  // SGD with lr 1e30 overflows w1, the first weight, in an update; the loss after it is NaN.
  EXPECT_NE(msg.find("the first non-finite tensor is weight 'w1' (read by Gemm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("made so by the optimizer update of step " + std::to_string(t->steps_done())), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace gp::exec
