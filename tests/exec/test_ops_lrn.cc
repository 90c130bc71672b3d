// LRN (local response normalisation across channels) on the CPU backend: forward against a plain
// reference loop written from the ONNX definition (odd and even window sizes, 3-D to 5-D inputs,
// windows wider than the channels), finite-difference gradients, and import: shapes, attributes
// and refusals.
#include <cmath>

#include "graph/onnx_import.h"
#include "graph/ops/registry.h"
#include "tests/exec/op_harness.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec::testing {
namespace {

graph::LrnAttrs lrn_attrs(int64_t size, float alpha = 1e-4f, float beta = 0.75f, float bias = 1.f) {
  graph::LrnAttrs a;
  a.size = size;
  a.alpha = alpha;
  a.beta = beta;
  a.bias = bias;
  return a;
}

OneOp lrn_op(std::vector<int64_t> const& x, graph::LrnAttrs const& a, uint32_t seed) {
  return make_op("LRN", a, {{"x", random_tensor(x, seed, -1.f, 1.f), kIn}});
}

// ONNX: square_sum[n, c, ...] = Σ x[n, i, ...]² for i in [max(0, c − ⌊(size−1)/2⌋),
// min(C−1, c + ⌈(size−1)/2⌉)]; y = x / (bias + alpha/size · square_sum)^beta. In doubles.
std::vector<double> reference_lrn(Tensor const& x, graph::LrnAttrs const& a) {
  int64_t const N = x.dim(0), C = x.dim(1), S = x.numel() / (N * C);
  int64_t const before = (a.size - 1) / 2, after = static_cast<int64_t>(std::ceil((a.size - 1) / 2.0));
  std::vector<double> y(static_cast<std::size_t>(x.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        double sum = 0;
        for (int64_t i = std::max<int64_t>(0, c - before); i <= std::min(C - 1, c + after); ++i) {
          double const v = x.data<float>()[(n * C + i) * S + s];
          sum += v * v;
        }
        int64_t const e = (n * C + c) * S + s;
        y[e] = x.data<float>()[e] / std::pow(a.bias + a.alpha / static_cast<double>(a.size) * sum, a.beta);
      }
  return y;
}

TEST(Lrn, ForwardMatchesTheOnnxDefinition) {
  CpuBackend be;
  struct Case {
    std::vector<int64_t> x;
    graph::LrnAttrs a;
  };
  // alpha large enough that the window matters (the default 1e-4 leaves y within 1e-4 of x).
  for (Case const& k : {Case{{2, 7, 3, 4}, lrn_attrs(5, 0.8f, 0.75f, 1.f)},
                        Case{{2, 6, 5}, lrn_attrs(4, 1.5f, 0.5f, 2.f)},  // even: one more channel after than before
                        Case{{1, 3, 2, 2, 3}, lrn_attrs(3, 0.9f, 1.2f, 0.5f)},
                        Case{{3, 2, 4}, lrn_attrs(7, 2.f, 0.75f, 1.f)},  // the window wider than the channels
                        Case{{2, 5, 3}, lrn_attrs(1, 1.f, 0.6f, 1.f)}}) {
    SCOPED_TRACE(::testing::Message() << "size " << k.a.size << " x " << Tensor(k.x).shape_string());
    OneOp o = lrn_op(k.x, k.a, 7);
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
    std::vector<Tensor> const out = run_forward(be, o);
    std::vector<double> const want = reference_lrn(o.inputs[0], k.a);
    ASSERT_EQ(out[0].shape(), k.x);
    double worst = 0, moved = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(out[0].data<float>()[i] - want[i]) / (1e-6 + std::fabs(want[i])));
      moved = std::max(moved, std::fabs(want[i] - o.inputs[0].data<float>()[i]));
    }
    EXPECT_LT(worst, 1e-5);
    EXPECT_GT(moved, 1e-2) << "the case does not normalise: it cannot test the window";
  }
}

// The window is asymmetric for an even size: the reference with the sides swapped differs, so the
// forward test above checks the side (ONNX puts the extra channel after).
TEST(Lrn, EvenWindowsPutTheExtraChannelAfter) {
  CpuBackend be;
  graph::LrnAttrs const a = lrn_attrs(2, 1.5f, 0.75f, 1.f);
  OneOp o = lrn_op({1, 4, 3}, a, 11);
  std::vector<Tensor> const out = run_forward(be, o);
  Tensor const& x = o.inputs[0];
  // size 2: channel c sums c and c + 1 (before = 0, after = 1); the last channel only itself.
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t s = 0; s < 3; ++s) {
      double sum = 0;
      for (int64_t i = c; i <= std::min<int64_t>(3, c + 1); ++i) sum += std::pow(x.data<float>()[i * 3 + s], 2);
      double const want = x.data<float>()[c * 3 + s] / std::pow(1.0 + 1.5 / 2 * sum, 0.75);
      EXPECT_NEAR(out[0].data<float>()[c * 3 + s], want, 1e-5 * (1 + std::fabs(want))) << c << "," << s;
    }
}

TEST(Lrn, GradientsByFiniteDifferences) {
  CpuBackend be;
  uint32_t seed = 20;
  for (auto const& [shape, a] :
       std::vector<std::pair<std::vector<int64_t>, graph::LrnAttrs>>{{{2, 5, 3}, lrn_attrs(3, 0.9f, 0.75f, 1.f)},
                                                                     {{1, 6, 2, 2}, lrn_attrs(4, 1.5f, 0.5f, 2.f)},
                                                                     {{2, 3, 4}, lrn_attrs(5, 2.f, 1.1f, 1.f)}}) {
    SCOPED_TRACE(a.size);
    OneOp o = lrn_op(shape, a, seed += 3);
    GradCheckResult const r = grad_check(be, o);
    expect_grads_ok(r);
    EXPECT_GE(r.rel_error[0], 0) << "the input's gradient was not checked";
  }
}

// ---- import ----
TEST(LrnImport, ShapesAttributesAndRefusals) {
  auto ok = graph::load_onnx_text(graph::model_text("float[N,6,5,5] x", "float[N,6,5,5] y", {},
                                                    "y = LRN <size = 3, alpha = 0.5, beta = 0.6, bias = 2.0> (x)"));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  graph::Op const* lrn = nullptr;
  for (auto const& op : ok->ops())
    if (op.type == "LRN") lrn = &op;
  ASSERT_NE(lrn, nullptr);
  auto const& a = std::get<graph::LrnAttrs>(lrn->typed);
  EXPECT_EQ(a.size, 3);
  EXPECT_FLOAT_EQ(a.alpha, 0.5f);
  EXPECT_FLOAT_EQ(a.beta, 0.6f);
  EXPECT_FLOAT_EQ(a.bias, 2.f);
  auto dflt =
      graph::load_onnx_text(graph::model_text("float[N,6,5] x", "float[N,6,5] y", {}, "y = LRN <size = 5> (x)"));
  ASSERT_TRUE(dflt.is_ok()) << dflt.status().to_string();
  for (auto const& op : dflt->ops())
    if (op.type == "LRN") {
      auto const& d = std::get<graph::LrnAttrs>(op.typed);
      EXPECT_FLOAT_EQ(d.alpha, 1e-4f);
      EXPECT_FLOAT_EQ(d.beta, 0.75f);
      EXPECT_FLOAT_EQ(d.bias, 1.f);
    }

  auto refused = [](std::string const& inputs, std::string const& attrs, std::string const& words) {
    auto r = graph::load_onnx_text(graph::model_text(inputs, "float[N,6,5] y", {}, "y = LRN " + attrs + " (x)"));
    ASSERT_FALSE(r.is_ok()) << attrs;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << attrs << ": " << r.status().message();
  };
  refused("float[N,6,5] x", "", "Required attribute 'size' is missing");  // the ONNX checker's words
  refused("float[N,6,5] x", "<size = 0>", "positive 'size'");
  refused("float[N,6,5] x", "<size = 3, bias = 0.0>", "only bias > 0 and alpha >= 0");
  refused("float[N,6,5] x", "<size = 3, alpha = -1.0>", "only bias > 0 and alpha >= 0");
  refused("float[N,6] x", "<size = 3>", "needs an N,C,spatial");
  auto batch_in_channels = graph::load_onnx_text(graph::model_text(
      "float[N,6,5] x", "float[6,N,5] y", {}, "t = Transpose <perm = [1, 0, 2]> (x)\ny = LRN <size = 3> (t)"));
  ASSERT_FALSE(batch_in_channels.is_ok());
  EXPECT_NE(batch_in_channels.status().message().find("LRN with the batch size in the channel dimension"),
            std::string::npos)
      << batch_in_channels.status().message();
}

}  // namespace
}  // namespace gp::exec::testing
