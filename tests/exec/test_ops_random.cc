// RandomUniformLike, RandomNormalLike and Bernoulli (the draws of torchvision's stochastic depth):
// the draws' range and moments, that a draw is a pure function of (seed, element) like Dropout's
// mask, import of the attributes and of torchvision's stochastic-depth pattern (a ConstantOfShape
// of [N, 1, 1, 1] drawn, compared with the survival rate, cast and divided), and that each sample
// is then kept whole or dropped whole, with the gradient following the same draw.
#include <cmath>
#include <set>

#include "exec/stage_executor.h"
#include "graph/onnx_import.h"
#include "kernels/hd/view.h"
#include "tests/exec/op_harness.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec::testing {
namespace {

using graph::RandomAttrs;
using graph::RandomKind;

std::vector<float> draw(RandomAttrs a, Tensor x, uint64_t seed) {
  OneOp o = make_op(a.kind == RandomKind::kUniform  ? "RandomUniformLike"
                    : a.kind == RandomKind::kNormal ? "RandomNormalLike"
                                                    : "Bernoulli",
                    a, {{"x", std::move(x), graph::TensorRole::kInput}});
  CpuBackend be;
  Status const s = be.supports(o.the_op(), o.graph);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<Tensor> out = run_forward(be, o, true, seed);
  return out.empty() ? std::vector<float>{} : out[0].to_vector();
}

struct Moments {
  double mean = 0, sd = 0, min = 0, max = 0;
};

Moments moments(std::vector<float> const& v) {
  Moments m{0, 0, v.at(0), v.at(0)};
  for (float x : v) {
    m.mean += x;
    m.min = std::min<double>(m.min, x);
    m.max = std::max<double>(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (float x : v) m.sd += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(m.sd / static_cast<double>(v.size()));
  return m;
}

constexpr int64_t kDraws = 20000;

TEST(RandomOps, UniformDrawsFillTheRangeWithTheRightMoments) {
  RandomAttrs a;
  a.a = 2.f;
  a.b = 5.f;
  std::vector<float> const v = draw(a, Tensor({kDraws}), 11);
  ASSERT_EQ(v.size(), static_cast<std::size_t>(kDraws));
  Moments const m = moments(v);
  EXPECT_GE(m.min, 2.0);
  EXPECT_LT(m.max, 5.0);
  EXPECT_NEAR(m.mean, 3.5, 0.03);                  // sd of the mean: 0.87 / sqrt(20000) = 0.006
  EXPECT_NEAR(m.sd, 3.0 / std::sqrt(12.0), 0.02);  // 0.866
  EXPECT_LT(m.min, 2.01);
  EXPECT_GT(m.max, 4.99);
}

TEST(RandomOps, NormalDrawsHaveTheMeanAndScale) {
  RandomAttrs a;
  a.kind = RandomKind::kNormal;
  a.a = -1.f;
  a.b = 2.f;
  std::vector<float> const v = draw(a, Tensor({kDraws}), 12);
  Moments const m = moments(v);
  EXPECT_NEAR(m.mean, -1.0, 0.06);  // sd of the mean: 2 / sqrt(20000) = 0.014
  EXPECT_NEAR(m.sd, 2.0, 0.05);
  int within_one_sd = 0;
  for (float x : v) within_one_sd += std::fabs(x + 1.f) < 2.f;
  EXPECT_NEAR(static_cast<double>(within_one_sd) / kDraws, 0.6827, 0.015);
  for (float x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(RandomOps, BernoulliOnesFollowEachElementsProbability) {
  Tensor p({kDraws});
  for (int64_t i = 0; i < kDraws; ++i) p.data<float>()[i] = i % 2 == 0 ? 0.3f : (i % 4 == 1 ? 0.f : 1.f);
  RandomAttrs a;
  a.kind = RandomKind::kBernoulli;
  std::vector<float> const v = draw(a, p, 13);
  double ones_at_03 = 0;
  for (int64_t i = 0; i < kDraws; ++i) {
    ASSERT_TRUE(v[i] == 0.f || v[i] == 1.f) << v[i];
    if (i % 2 == 0)
      ones_at_03 += v[i];
    else
      ASSERT_EQ(v[i], i % 4 == 1 ? 0.f : 1.f) << "element " << i << " has probability " << p.data<float>()[i];
  }
  EXPECT_NEAR(ones_at_03 / (kDraws / 2), 0.3, 0.015);
}

// The draws are a pure function of (seed, element index): the same seed redraws them (a
// pipeline's recomputation and one device draw alike), another seed does not.
TEST(RandomOps, DrawsArePureFunctionsOfSeedAndElement) {
  RandomAttrs a;
  std::vector<float> const first = draw(a, Tensor({64}), 21);
  EXPECT_EQ(draw(a, Tensor({64}), 21), first);
  EXPECT_NE(draw(a, Tensor({64}), 22), first);
  // Element i's draw does not depend on how many elements there are.
  std::vector<float> const longer = draw(a, Tensor({128}), 21);
  EXPECT_EQ(std::vector<float>(longer.begin(), longer.begin() + 64), first);
  // The node's seed attribute is mixed in.
  RandomAttrs seeded = a;
  seeded.has_seed = true;
  seeded.seed = 3.f;
  EXPECT_NE(draw(seeded, Tensor({64}), 21), first);
  EXPECT_EQ(draw(seeded, Tensor({64}), 21), draw(seeded, Tensor({64}), 21));
}

// Dropout draws from the same hash: a uniform draw below the ratio is a dropped element. Both
// must stay the same function, or Dropout masks (and with them the CUDA twin) would move.
TEST(RandomOps, UniformDrawIsTheOneDropoutCompares) {
  uint64_t const base = kernels::hd::dropout_base(99);
  for (int64_t i = 0; i < 1000; ++i) {
    float const u = kernels::hd::random_unit(base, i);
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    EXPECT_EQ(kernels::hd::dropout_keep(base, i, 0.4f), u >= 0.4f);
    EXPECT_EQ(kernels::hd::bernoulli_at(base, i, 0.4f), u < 0.4f);
  }
}

TEST(RandomOps, ImportReadsTheAttributesAndRefusesOtherDtypes) {
  auto g = graph::load_onnx_text(graph::model_text("float[N,3] x", "float[N,3] y", {},
                                                   "y = RandomNormalLike<mean = 0.5, scale = 2.0, seed = 4.0>(x)", 17));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto const& a = std::get<RandomAttrs>(g->ops().back().typed);
  EXPECT_EQ(a.kind, RandomKind::kNormal);
  EXPECT_FLOAT_EQ(a.a, 0.5f);
  EXPECT_FLOAT_EQ(a.b, 2.f);
  EXPECT_TRUE(a.has_seed);
  EXPECT_FLOAT_EQ(a.seed, 4.f);
  auto b =
      graph::load_onnx_text(graph::model_text("float[N,3] p", "bool[N,3] y", {}, "y = Bernoulli<dtype = 9>(p)", 17));
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->tensor(b->ops().back().outputs[0]).dtype, graph::DType::kBool);
  auto d = graph::load_onnx_text(
      graph::model_text("float[N,3] x", "double[N,3] y", {}, "y = RandomUniformLike<dtype = 11>(x)", 17));
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("RandomUniformLike of dtype float64 (float32 only)"), std::string::npos)
      << d.status().message();
}

// torchvision.ops.stochastic_depth as the TorchScript exporter writes it (mode "row"): noise of
// shape [N, 1, 1, 1] from ConstantOfShape, RandomUniformLike, Less than the survival rate, Cast to
// float, divided by the rate, times the block's output, plus the residual.
std::string const kStochasticDepth = R"(<ir_version: 8, opset_import: ["" : 17]>
net (float[N,2,3,3] x) => (float[N,2,3,3] y)
<float[2,1,1] w = {1.5, -0.5}> {
  s = Shape(x)
  zero = Constant<value = int64[1] {0}>()
  one = Constant<value = int64[1] {1}>()
  n = Slice(s, zero, one)
  ones = Constant<value = int64[3] {1, 1, 1}>()
  size = Concat<axis = 0>(n, ones)
  empty = ConstantOfShape<value = float[1] {0}>(size)
  u = RandomUniformLike<dtype = 1, high = 1.0, low = 0.0>(empty)
  rate = Constant<value = float {0.5}>()
  keep = Less(u, rate)
  mask = Cast<to = 1>(keep)
  noise = Div(mask, rate)
  block = Mul(x, w)
  dropped = Mul(block, noise)
  y = Add(dropped, x)
})";

TEST(StochasticDepth, EachSampleIsKeptOrDroppedWholeAndTheGradientFollows) {
  auto g = graph::load_onnx_text(kStochasticDepth);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  bool drawn = false;
  for (graph::Op const& op : g->ops()) drawn = drawn || op.type == "RandomUniformLike";
  ASSERT_TRUE(drawn) << "the draw is an op, not a folded constant";
  CpuBackend be;
  auto ex = StageExecutor::create(*g, be);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  int64_t const batch = 64;
  TensorMap inputs;
  inputs.emplace(g->inputs()[0], Tensor({batch, 2, 3, 3}));
  inputs.at(g->inputs()[0]).fill(1.f);
  std::set<std::vector<float>> masks;
  int kept_total = 0;
  for (uint64_t seed : {1u, 2u}) {
    TensorMap outputs;
    ASSERT_TRUE((*ex)->forward(0, inputs, outputs, true, seed).is_ok());
    Tensor const& y = outputs.at(g->outputs()[0]);
    std::vector<float> kept;
    for (int64_t b = 0; b < batch; ++b) {
      float const* row = y.data<float>() + b * 18;
      // Dropped: y = x = 1. Kept: y = x + (w x) / 0.5 = 4 on channel 0, 0 on channel 1.
      bool const keep = row[0] != 1.f;
      for (int k = 0; k < 9; ++k) {
        ASSERT_FLOAT_EQ(row[k], keep ? 4.f : 1.f) << "sample " << b;
        ASSERT_FLOAT_EQ(row[9 + k], keep ? 0.f : 1.f) << "sample " << b;
      }
      kept.push_back(keep ? 1.f : 0.f);
      kept_total += keep;
    }
    masks.insert(kept);
    // d loss / d w[c] = Σ over kept samples of x / 0.5 = 2 · 9 per kept sample.
    Tensor gy({batch, 2, 3, 3});
    gy.fill(1.f);
    TensorMap grads;
    ASSERT_TRUE((*ex)->zero_grads().is_ok());
    ASSERT_TRUE((*ex)->backward(0, {{g->outputs()[0], gy}}, grads).is_ok());
    auto it = (*ex)->gradients().find("w");
    ASSERT_NE(it, (*ex)->gradients().end());
    double const want = 18.0 * std::count(kept.begin(), kept.end(), 1.f);
    EXPECT_FLOAT_EQ(it->second.data<float>()[0], static_cast<float>(want));
    EXPECT_FLOAT_EQ(it->second.data<float>()[1], static_cast<float>(want));
  }
  EXPECT_EQ(masks.size(), 2u) << "two seeds, two draws";
  EXPECT_GT(kept_total, 64 - 20);  // about half of 128 samples survive
  EXPECT_LT(kept_total, 64 + 20);
}

}  // namespace
}  // namespace gp::exec::testing
