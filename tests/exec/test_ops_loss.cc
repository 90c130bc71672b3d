// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph ops: forward against plain
// reference loops (every reduction, with and without class weights and ignore_index, 2-D and
// N-D scores), finite-difference gradients, errors, and a model that trains through the loss.
#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "exec/stage_executor.h"
#include "graph/onnx_builder.h"
#include "graph/ops/common.h"
#include "tests/exec/op_harness.h"

namespace gp::exec {
namespace {

using graph::LossAttrs;
using graph::LossReduction;
using testing::In;
using testing::make_op;
using testing::random_tensor;

struct Case {
  std::string type;
  std::vector<int64_t> shape;  // scores
  LossReduction reduction;
  bool weighted;
  bool ignore;
  int64_t ignore_index;
};

std::string describe(Case const& c) {
  static char const* const names[] = {"none", "sum", "mean"};
  return c.type + " " + graph::ops::dims_string(c.shape) + " " + names[static_cast<int>(c.reduction)] +
         (c.weighted ? " weighted" : "") + (c.ignore ? " ignore_index=" + std::to_string(c.ignore_index) : "");
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (char const* type : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 5}, std::vector<int64_t>{2, 3, 4, 2}})
      for (LossReduction r : {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean})
        for (bool weighted : {false, true}) {
          cases.push_back({type, shape, r, weighted, false, -100});
          cases.push_back({type, shape, r, weighted, true, 1});   // a valid class, ignored
          cases.push_back({type, shape, r, weighted, true, -1});  // outside the classes
        }
  return cases;
}

// Targets [N, d...] in [0, C), with the ignore_index at every third position when there is one.
Tensor targets_for(Case const& c) {
  std::vector<int64_t> shape = {c.shape[0]};
  shape.insert(shape.end(), c.shape.begin() + 2, c.shape.end());
  Tensor t(shape, DType::kInt64);
  std::mt19937 rng(5);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = c.ignore && i % 3 == 1 ? c.ignore_index : static_cast<int64_t>(rng() % c.shape[1]);
  return t;
}

Tensor weights_for(Case const& c) {
  Tensor w({c.shape[1]});
  for (int64_t k = 0; k < c.shape[1]; ++k) w.data<float>()[k] = 0.5f + 0.25f * static_cast<float>(k);
  return w;
}

// The ONNX definition, in double: per-position losses, then the reduction.
std::vector<double> reference(Case const& c, Tensor const& x, Tensor const& target, std::vector<double>* log_prob) {
  int64_t const n = c.shape[0], cls = c.shape[1], d = x.numel() / (n * cls);
  std::vector<double> lp(static_cast<std::size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) lp[i] = x.data<float>()[i];
  if (c.type == "SoftmaxCrossEntropyLoss") {
    for (int64_t a = 0; a < n; ++a)
      for (int64_t b = 0; b < d; ++b) {
        double s = 0;
        for (int64_t k = 0; k < cls; ++k) s += std::exp(lp[(a * cls + k) * d + b]);
        double const lse = std::log(s);
        for (int64_t k = 0; k < cls; ++k) lp[(a * cls + k) * d + b] -= lse;
      }
    if (log_prob) *log_prob = lp;
  }
  std::vector<double> per(static_cast<std::size_t>(n * d));
  double sum = 0, wsum = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < d; ++b) {
      int64_t const t = target.data<int64_t>()[a * d + b];
      if (c.ignore && t == c.ignore_index) continue;
      double const w = c.weighted ? 0.5 + 0.25 * static_cast<double>(t) : 1.0;
      per[a * d + b] = -w * lp[(a * cls + t) * d + b];
      sum += per[a * d + b];
      wsum += w;
    }
  if (c.reduction == LossReduction::kNone) return per;
  return {c.reduction == LossReduction::kSum ? sum : sum / wsum};
}

testing::OneOp op_for(Case const& c, Tensor const& x, int outputs = 1) {
  std::vector<In> ins = {{"x", x}, {"target", targets_for(c)}};
  if (c.weighted) ins.push_back({"weight", weights_for(c), graph::TensorRole::kConstant});
  return make_op(c.type, LossAttrs{c.reduction, c.ignore, c.ignore_index}, ins, outputs);
}

TEST(LossOps, ForwardMatchesReference) {
  CpuBackend be;
  for (Case const& c : all_cases()) {
    SCOPED_TRACE(describe(c));
    Tensor const x = random_tensor(c.shape, 3, 0.1f, 2.f);
    bool const sce = c.type == "SoftmaxCrossEntropyLoss";
    auto o = op_for(c, x, sce ? 2 : 1);
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
    std::vector<Tensor> const out = testing::run_forward(be, o);
    std::vector<double> lp;
    std::vector<double> const want = reference(c, x, o.inputs[1], &lp);
    ASSERT_EQ(out[0].numel(), static_cast<int64_t>(want.size()));
    EXPECT_EQ(out[0].rank(), c.reduction == LossReduction::kNone ? static_cast<int64_t>(c.shape.size()) - 1 : 0);
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(out[0].data<float>()[i], want[i], 1e-5 + 1e-5 * std::abs(want[i])) << "loss element " << i;
    if (!sce) continue;
    ASSERT_EQ(out[1].shape(), x.shape());
    for (std::size_t i = 0; i < lp.size(); ++i) EXPECT_NEAR(out[1].data<float>()[i], lp[i], 1e-5) << "log_prob " << i;
  }
}

TEST(LossOps, GradientsMatchFiniteDifferences) {
  CpuBackend be;
  for (Case const& c : all_cases()) {
    SCOPED_TRACE(describe(c));
    int const max_outputs = c.type == "SoftmaxCrossEntropyLoss" ? 2 : 1;
    for (int outputs = 1; outputs <= max_outputs; ++outputs) {
      SCOPED_TRACE(std::to_string(outputs) + " output(s)");
      auto o = op_for(c, random_tensor(c.shape, 9, 0.1f, 2.f), outputs);
      testing::expect_grads_ok(testing::grad_check(be, o));
    }
  }
}

TEST(LossOps, MeanOfEveryTargetIgnoredIsNaNWithZeroGradient) {
  CpuBackend be;
  Case const c{"SoftmaxCrossEntropyLoss", {2, 3}, LossReduction::kMean, false, true, 1};
  auto o = make_op(c.type, LossAttrs{c.reduction, true, 1},
                   {{"x", random_tensor({2, 3}, 1)}, {"target", testing::int_tensor({2}, {1, 1})}});
  Saved saved;
  std::vector<Tensor> const out = testing::run_forward(be, o, true, 7, &saved);
  EXPECT_TRUE(std::isnan(out[0].data<float>()[0]));
  std::vector<Tensor> grads;
  Tensor g(std::vector<int64_t>{});
  g.fill(1.f);
  OpCall call{o.the_op(), o.graph, true, 7};
  ASSERT_TRUE(be.backward_input(call, saved, {g}, {true, false}, grads).is_ok());
  for (float v : grads[0].to_vector()) EXPECT_EQ(v, 0.f);
}

TEST(LossOps, TargetOutsideTheClassesIsNamed) {
  CpuBackend be;
  for (char const* type : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    auto o = make_op(type, LossAttrs{LossReduction::kMean, true, -1},
                     {{"x", random_tensor({3, 4}, 1)}, {"target", testing::int_tensor({3}, {0, 4, -1})}});
    std::vector<Tensor> out;
    Status const s = be.forward(OpCall{o.the_op(), o.graph}, o.inputs, out, nullptr);
    ASSERT_FALSE(s.is_ok()) << type;
    EXPECT_NE(s.message().find("target 4 at position 1 is outside [0, 4)"), std::string::npos) << s.message();
  }
}

TEST(LossOps, UnsupportedDtypesAreRefused) {
  CpuBackend be;
  Tensor x64({2, 3}, DType::kFloat64);
  auto o =
      make_op("NegativeLogLikelihoodLoss", LossAttrs{}, {{"x", x64}, {"target", testing::int_tensor({2}, {0, 1})}});
  Status s = be.supports(o.the_op(), o.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("float64"), std::string::npos) << s.message();
  Tensor ft({2});
  auto p = make_op("SoftmaxCrossEntropyLoss", LossAttrs{}, {{"x", random_tensor({2, 3}, 1)}, {"target", ft}});
  s = be.supports(p.the_op(), p.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("targets have dtype float32"), std::string::npos) << s.message();
  auto q = make_op("SoftmaxCrossEntropyLoss", graph::MatMulAttrs{},
                   {{"x", random_tensor({2, 3}, 1)}, {"target", testing::int_tensor({2}, {0, 1})}});
  EXPECT_FALSE(be.supports(q.the_op(), q.graph).is_ok());
}

TEST(LossOps, ClassWeightsGetNoGradient) {
  CpuBackend be;
  auto o = make_op("NegativeLogLikelihoodLoss", LossAttrs{},
                   {{"x", random_tensor({2, 3}, 1)},
                    {"target", testing::int_tensor({2}, {0, 2})},
                    {"w", random_tensor({3}, 2, 0.1f, 1.f, true)}});
  Saved saved;
  testing::run_forward(be, o, true, 7, &saved);
  Tensor g(std::vector<int64_t>{});
  g.fill(1.f);
  std::vector<Tensor> grads;
  Status const s = be.backward_input(OpCall{o.the_op(), o.graph}, saved, {g}, {true, false, true}, grads);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("class weights get no gradient"), std::string::npos) << s.message();
}

// A linear layer trained through an in-graph loss (NLL straight on the scores: linear in them): the
// importer keeps the loss as an op, and the executor's weight gradients match finite differences.
TEST(LossOps, ModelTrainsThroughTheLossOp) {
  for (char const* type : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    SCOPED_TRACE(type);
    graph::OnnxModelBuilder b("loss_model", 17, 3);
    auto x = b.add_input("x", {graph::kBatch, 6});
    auto labels = b.add_input("labels", {graph::kBatch}, DType::kInt64);
    auto w = b.add_initializer("w", {4, 6}, graph::InitRule::uniform(0.6));
    auto bias = b.add_initializer("b", {4}, graph::InitRule::uniform(0.1));
    b.add_node("Gemm", {x, w, bias}, {"logits"}, {{"transB", int64_t{1}}});
    b.add_node(type, {"logits", labels}, {"loss"}, {{"reduction", std::string("mean")}});
    b.add_output("loss", {}, DType::kFloat32);
    auto g = b.to_graph();
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    CpuBackend be;
    auto ex = StageExecutor::create(*g, be);
    ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
    TensorMap inputs;
    inputs.emplace(g->inputs()[0], random_tensor({5, 6}, 4, 0.1f, 1.f));
    inputs.emplace(g->inputs()[1], testing::int_tensor({5}, {0, 3, 1, 2, 3}));
    graph::TensorId const out = g->outputs()[0];
    Tensor one(std::vector<int64_t>{});
    one.fill(1.f);
    auto loss = [&]() {
      TensorMap outs;
      EXPECT_TRUE((*ex)->forward(100, inputs, outs, true, 1).is_ok());
      (*ex)->discard(100);
      return static_cast<double>(outs.at(out).data<float>()[0]);
    };
    TensorMap outs, in_grads;
    EXPECT_TRUE((*ex)->zero_grads().is_ok());
    ASSERT_TRUE((*ex)->forward(0, inputs, outs, true, 1).is_ok());
    ASSERT_TRUE((*ex)->backward(0, {{out, one}}, in_grads).is_ok());
    ASSERT_EQ((*ex)->parameters().size(), 2u);
    for (auto& [name, p] : (*ex)->parameters()) {
      Tensor const& grad = (*ex)->gradients().at(name);
      for (int64_t i = 0; i < p.numel(); ++i) {
        float* v = p.data<float>() + i;
        float const orig = *v, h = 1e-2f;
        *v = orig + h;
        double const up = loss();
        *v = orig - h;
        double const down = loss();
        *v = orig;
        double const fd = (up - down) / (2.0 * h);
        EXPECT_NEAR(grad.data<float>()[i], fd, 1e-2 * std::abs(fd) + 1e-4) << name << "[" << i << "]";
      }
    }
  }
}

}  // namespace
}  // namespace gp::exec
