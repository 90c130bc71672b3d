#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "exec/autodiff.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/stage_executor.h"
#include "graph/onnx_import.h"
#include "tests/exec/tiny_models.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec {
namespace {

double dot(Tensor const& a, Tensor const& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += static_cast<double>(a.data<float>()[i]) * b.data<float>()[i];
  return s;
}

struct Model {
  graph::OpGraph graph;
  CpuBackend backend;
  std::unique_ptr<StageExecutor> ex;
  TensorMap inputs;
  Tensor probe;  // objective = <output, probe>: its gradient w.r.t. the output is `probe`
  graph::TensorId out = graph::kNoTensor;
};

std::unique_ptr<Model> make_model(Result<graph::OpGraph> g, int64_t batch) {
  auto m = std::make_unique<Model>();
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return nullptr;
  m->graph = std::move(g).value();
  auto ex = StageExecutor::create(m->graph, m->backend);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  m->ex = std::move(ex).value();
  uint32_t seed = 11;
  for (graph::TensorId t : m->graph.inputs())
    m->inputs.emplace(t, testing::normal_tensor(m->graph.tensor(t).shape.concrete(batch), seed++));
  m->out = m->graph.outputs()[0];
  m->probe = testing::normal_tensor(m->graph.tensor(m->out).shape.concrete(batch), 99);
  return m;
}

std::unique_ptr<Model> make_model(graph::OnnxModelBuilder const& builder, int64_t batch) {
  return make_model(builder.to_graph(), batch);
}

double objective(Model& m) {
  TensorMap outs;
  EXPECT_TRUE(m.ex->forward(1000, m.inputs, outs, true, 5).is_ok());
  m.ex->discard(1000);
  return dot(outs.at(m.out), m.probe);
}

// The weight `name` of m drawn again from a standard normal (`seed`), in place; returns it.
Tensor& draw_weight(Model& m, std::string const& name, uint32_t seed) {
  Tensor& w = m.ex->parameters().at(name);
  Tensor const r = testing::normal_tensor(w.shape(), seed);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = r.data<float>()[i];
  return w;
}

// Element (b, j) of x [N, 4] times w [4, 4], in double.
double matmul_4x4(Tensor const& x, Tensor const& w, int64_t b, int64_t j) {
  double h = 0;
  for (int64_t i = 0; i < 4; ++i) h += double(x.data<float>()[b * 4 + i]) * w.data<float>()[i * 4 + j];
  return h;
}

// Every trainable weight: analytic gradient vs central differences on a few elements each.
void check_gradients(Model& m, int samples_per_weight = 6) {
  TensorMap outs, in_grads;
  EXPECT_TRUE(m.ex->zero_grads().is_ok());
  ASSERT_TRUE(m.ex->forward(0, m.inputs, outs, true, 5).is_ok());
  ASSERT_TRUE(m.ex->backward(0, {{m.out, m.probe}}, in_grads).is_ok());
  ASSERT_FALSE(m.ex->parameters().empty());
  for (auto& [name, w] : m.ex->parameters()) {
    Tensor const& g = m.ex->gradients().at(name);
    double gnorm = 0;
    for (float v : g.to_vector()) gnorm += double(v) * v;
    EXPECT_GT(gnorm, 0.0) << name << ": no gradient reached this weight";
    int64_t const n = w.numel();
    for (int k = 0; k < samples_per_weight && k < n; ++k) {
      int64_t const i = (k * 7919 + 3) % n;
      float* p = w.data<float>() + i;
      float const orig = *p, h = 2e-3f;
      *p = orig + h;
      double const up = objective(m);
      *p = orig - h;
      double const down = objective(m);
      *p = orig;
      double const fd = (up - down) / (2.0 * h);
      double const an = g.data<float>()[i];
      EXPECT_NEAR(an, fd, 2e-2 * std::max(std::abs(fd), 0.05) + 1e-3) << name << "[" << i << "]";
    }
  }
}

TEST(Autodiff, MlpGradientsMatchFiniteDifferences) {
  auto m = make_model(testing::tiny_mlp(), 3);
  check_gradients(*m);
}

TEST(Autodiff, CnnGradientsMatchFiniteDifferences) {
  auto m = make_model(testing::tiny_cnn(), 4);
  check_gradients(*m);
}

TEST(Autodiff, ConvStackGradientsMatchFiniteDifferences) {
  auto m = make_model(testing::tiny_conv_stack(), 3);
  check_gradients(*m);
}

TEST(Autodiff, AttentionGradientsMatchFiniteDifferences) {
  auto m = make_model(testing::tiny_attention(), 2);
  check_gradients(*m);
}

// Opset 23's RMSNormalization, causal Attention and Mish train through the ONNX function bodies
// the importer expands them into (no OpDef of their own).
TEST(Autodiff, FunctionOperatorsTrainThroughTheirExpandedBodies) {
  using graph::zeros;
  std::string const text = graph::model_text(
      "float[N,2,4,8] x", "float[N,2,4,8] y", {zeros("w", {8, 8}, 0.1), zeros("scale", {8}, 1)},
      "h = MatMul(x, w)\n n = RMSNormalization<axis = -1>(h, scale)\n a = Attention<is_causal = 1>(n, h, h)\n"
      " y = Mish(a)",
      23);
  auto m = make_model(graph::load_onnx_text(text), 2);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->ex->parameters().size(), 2u);
  uint32_t seed = 40;
  for (auto& [name, w] : m->ex->parameters()) {
    Tensor const r = testing::normal_tensor(w.shape(), seed++);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 1.f + 0.3f * r.data<float>()[i];
  }
  check_gradients(*m, 12);
}

// DFT and STFT import as a MatMul and a strided Conv with their constant matrices: their values are
// the transforms' definitions (truncated to dft_length, one-sided, windowed frames), and a weight
// before them trains with gradients equal to finite differences.
TEST(Autodiff, DftAndStftAreTheirDefinitionsAndTrainThrough) {
  using graph::zeros;
  // h = x * w, [N, 6, 4]; a one-sided DFT along axis 1 truncated to 5 points: [N, 3, 4, 2].
  auto dft = make_model(graph::load_onnx_text(graph::model_text(
                            "float[N,6,4] x", "float[N,3,4,2] y", {zeros("w", {4}, 0.5)},
                            "h = Mul(x, w)\n axes = Constant<value = int64[1] {-1}>()\n u = Unsqueeze(h, axes)\n"
                            " len = Constant<value = int64 {5}>()\n axis = Constant<value = int64 {1}>()\n"
                            " y = DFT<onesided = 1>(u, len, axis)",
                            20)),
                        2);
  ASSERT_NE(dft, nullptr);
  for (auto const& op : dft->graph.ops()) EXPECT_NE(op.type, "DFT");
  Tensor& w = dft->ex->parameters().at("w");
  for (int64_t i = 0; i < 4; ++i) w.data<float>()[i] = 0.5f + 0.25f * static_cast<float>(i);
  TensorMap outs;
  ASSERT_TRUE(dft->ex->forward(0, dft->inputs, outs, false).is_ok());
  Tensor const& x = dft->inputs.begin()->second;
  Tensor const& y = outs.at(dft->out);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 4, 2}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 4; ++j) {
        double re = 0, im = 0;
        for (int64_t m = 0; m < 5; ++m) {
          double const h = double(x.data<float>()[(b * 6 + m) * 4 + j]) * w.data<float>()[j];
          re += h * std::cos(2 * M_PI * double(k * m) / 5);
          im -= h * std::sin(2 * M_PI * double(k * m) / 5);
        }
        EXPECT_NEAR(y.data<float>()[((b * 3 + k) * 4 + j) * 2], re, 1e-5) << b << k << j;
        EXPECT_NEAR(y.data<float>()[((b * 3 + k) * 4 + j) * 2 + 1], im, 1e-5) << b << k << j;
      }
  check_gradients(*dft, 4);

  // An STFT of a gained signal of 20 samples: frames of 8 under a window, step 3: [N, 5, 5, 2].
  auto stft = make_model(graph::load_onnx_text(graph::model_text(
                             "float[N,20] x", "float[N,5,5,2] y", {zeros("g", {20}, 0.5)},
                             "h = Mul(x, g)\n axes = Constant<value = int64[1] {-1}>()\n s = Unsqueeze(h, axes)\n"
                             " step = Constant<value = int64 {3}>()\n"
                             " win = Constant<value = float[8] {0.1, 0.3, 0.6, 0.9, 1.0, 0.8, 0.5, 0.2}>()\n"
                             " y = STFT(s, step, win)",
                             17)),
                         2);
  ASSERT_NE(stft, nullptr);
  for (auto const& op : stft->graph.ops()) EXPECT_NE(op.type, "STFT");
  Tensor& g = stft->ex->parameters().at("g");
  for (int64_t i = 0; i < 20; ++i) g.data<float>()[i] = 1.f - 0.03f * static_cast<float>(i);
  float const win[8] = {0.1f, 0.3f, 0.6f, 0.9f, 1.0f, 0.8f, 0.5f, 0.2f};
  TensorMap souts;
  ASSERT_TRUE(stft->ex->forward(0, stft->inputs, souts, false).is_ok());
  Tensor const& sx = stft->inputs.begin()->second;
  Tensor const& sy = souts.at(stft->out);
  ASSERT_EQ(sy.shape(), (std::vector<int64_t>{2, 5, 5, 2}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t f = 0; f < 5; ++f)
      for (int64_t k = 0; k < 5; ++k) {
        double re = 0, im = 0;
        for (int64_t m = 0; m < 8; ++m) {
          int64_t const t = f * 3 + m;
          double const v = double(sx.data<float>()[b * 20 + t]) * g.data<float>()[t] * win[m];
          re += v * std::cos(2 * M_PI * double(k * m) / 8);
          im -= v * std::sin(2 * M_PI * double(k * m) / 8);
        }
        EXPECT_NEAR(sy.data<float>()[((b * 5 + f) * 5 + k) * 2], re, 1e-5) << b << f << k;
        EXPECT_NEAR(sy.data<float>()[((b * 5 + f) * 5 + k) * 2 + 1], im, 1e-5) << b << f << k;
      }
  check_gradients(*stft, 6);

  // What the expansion cannot do is refused with the reason.
  auto refused = [](std::string const& body, int opset, std::string const& in, std::string const& out,
                    std::string const& words) {
    auto r = graph::load_onnx_text(graph::model_text(in, out, {}, body, opset));
    ASSERT_FALSE(r.is_ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  refused("axis = Constant<value = int64 {0}>()\n y = DFT(x, , axis)", 20, "float[N,4,2] x", "float[N,4,2] y",
          "it transforms along the batch dimension");
  refused("y = DFT<onesided = 1, axis = 1>(x)", 17, "float[N,4,2] x", "float[N,3,2] y",
          "a one-sided DFT of a complex input");
  refused("step = Constant<value = int64 {2}>()\n y = STFT(s, step, w)", 17, "float[N,8,1] s, float[4] w",
          "float[N,3,3,2] y", "its window ('w') is computed at run time");
}

// AffineGrid imports as theta times the constant matrix of the grid's coordinates: its values are
// the definition (pixel centres, or corners with align_corners; an axis of one point at 0, as
// torch), 2-D and 3-D, and the weights theta is computed from train with gradients equal to finite
// differences. The size it reads is built from the input's shape, as torch's TorchScript export
// builds it.
TEST(Autodiff, AffineGridIsItsDefinitionAndTrainsThrough) {
  using graph::zeros;
  struct Case {
    std::vector<int64_t> spatial;  // (D,) H, W
    int align_corners;
  };
  for (Case const& c : {Case{{3, 4}, 0}, Case{{3, 4}, 1}, Case{{2, 1, 3}, 1}, Case{{2, 3, 2}, 0}}) {
    auto const k = static_cast<int64_t>(c.spatial.size());
    std::string dims, sizes, grid = "float[N";
    for (int64_t d : c.spatial) {
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
      grid += "," + std::to_string(d);
    }
    grid += "," + std::to_string(k) + "] y";
    std::string const theta_shape = std::to_string(k) + ", " + std::to_string(k + 1);
    std::string const body =
        "t = MatMul(x, w)\n ts = Constant<value = int64[3] {0, " + theta_shape +
        "}>()\n theta = Reshape(t, ts)\n"
        " n = Shape<start = 0, end = 1>(x)\n rest = Constant<value = int64[" +
        std::to_string(k + 1) + "] {1, " + sizes +
        "}>()\n size = Concat<axis = 0>(n, rest)\n y = AffineGrid<align_corners = " + std::to_string(c.align_corners) +
        ">(theta, size)";
    auto m = make_model(
        graph::load_onnx_text(graph::model_text("float[N,3] x", grid, {zeros("w", {3, k * (k + 1)}, 0.1)}, body, 20)),
        2);
    ASSERT_NE(m, nullptr) << sizes;
    for (auto const& op : m->graph.ops()) EXPECT_NE(op.type, "AffineGrid");
    Tensor const& w = draw_weight(*m, "w", 43);
    TensorMap outs;
    ASSERT_TRUE(m->ex->forward(0, m->inputs, outs, false).is_ok());
    Tensor const& x = m->inputs.begin()->second;
    Tensor const& y = outs.at(m->out);
    int64_t points = 1;
    for (int64_t d : c.spatial) points *= d;
    ASSERT_EQ(y.numel(), 2 * points * k) << sizes;
    auto coordinate = [&](int64_t i, int64_t steps) {
      if (steps == 1) return 0.0;
      return c.align_corners ? -1.0 + 2.0 * double(i) / double(steps - 1) : (2.0 * double(i) + 1) / double(steps) - 1;
    };
    for (int64_t b = 0; b < 2; ++b) {
      std::vector<double> theta(static_cast<std::size_t>(k * (k + 1)), 0.0);
      for (std::size_t j = 0; j < theta.size(); ++j)
        for (int64_t i = 0; i < 3; ++i)
          theta[j] += double(x.data<float>()[b * 3 + i]) * w.data<float>()[i * k * (k + 1) + int64_t(j)];
      for (int64_t p = 0; p < points; ++p) {
        std::vector<double> point(static_cast<std::size_t>(k + 1), 1.0);  // x (last axis) first, then 1
        int64_t rest = p;
        for (int64_t a = k - 1; a >= 0; --a) {
          int64_t const steps = c.spatial[static_cast<std::size_t>(a)];
          point[static_cast<std::size_t>(k - 1 - a)] = coordinate(rest % steps, steps);
          rest /= steps;
        }
        for (int64_t o = 0; o < k; ++o) {
          double want = 0;
          for (int64_t i = 0; i <= k; ++i) want += theta[std::size_t(o * (k + 1) + i)] * point[std::size_t(i)];
          EXPECT_NEAR(y.data<float>()[(b * points + p) * k + o], want, 1e-5) << sizes << " " << b << " " << p;
        }
      }
    }
    check_gradients(*m, 8);
  }
  // A size computed at run time, or theta of the wrong shape, is refused with the reason.
  auto refused = [](std::string const& in, std::string const& body, std::string const& words) {
    auto r = graph::load_onnx_text(graph::model_text(in, "float[N,3,4,2] y", {}, body, 20));
    ASSERT_FALSE(r.is_ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  refused("float[N,2,3] t, int64[4] s", "y = AffineGrid(t, s)", "its size ('s') is computed at run time");
  refused("float[N,3,3] t", "s = Constant<value = int64[4] {2, 1, 3, 4}>()\n y = AffineGrid(t, s)",
          "theta [N,3,3] must be [N, 2, 3]");
}

// Swish (opset 24) imports as the Sigmoid and Mul it is: its values are x·sigmoid(alpha·x), and a
// weight before it trains with gradients equal to finite differences.
TEST(Autodiff, SwishOfOpset24IsXTimesSigmoidOfAlphaX) {
  using graph::zeros;
  auto m = make_model(graph::load_onnx_text(graph::model_text("float[N,4] x", "float[N,4] y", {zeros("w", {4, 4}, 0.2)},
                                                              "h = MatMul(x, w)\n y = Swish<alpha = 1.5>(h)", 24)),
                      2);
  ASSERT_NE(m, nullptr);
  for (auto const& op : m->graph.ops()) EXPECT_NE(op.type, "Swish");
  Tensor const& w = draw_weight(*m, "w", 44);
  TensorMap outs;
  ASSERT_TRUE(m->ex->forward(0, m->inputs, outs, false).is_ok());
  Tensor const& x = m->inputs.begin()->second;
  Tensor const& y = outs.at(m->out);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 4; ++j) {
      double const h = matmul_4x4(x, w, b, j);
      EXPECT_NEAR(y.data<float>()[b * 4 + j], h / (1 + std::exp(-1.5 * h)), 1e-5) << b << " " << j;
    }
  check_gradients(*m, 8);
}

// Pow of a float base by an integer exponent (torch.pow(x, ids); ONNX's pow_types node tests):
// the exponent becomes float32 at import, the values are the powers, and the base trains.
TEST(Autodiff, PowOfAnIntegerExponentIsTheFloatPower) {
  using graph::zeros;
  auto m = make_model(graph::load_onnx_text(graph::model_text(
                          "float[N,4] x", "float[N,4] y", {zeros("w", {4, 4}, 0.2)},
                          "h = MatMul(x, w)\n e = Constant<value = int64[4] {2, 3, 1, 0}>()\n y = Pow(h, e)", 17)),
                      2);
  ASSERT_NE(m, nullptr);
  Tensor const& w = draw_weight(*m, "w", 45);
  TensorMap outs;
  ASSERT_TRUE(m->ex->forward(0, m->inputs, outs, false).is_ok());
  Tensor const& x = m->inputs.begin()->second;
  Tensor const& y = outs.at(m->out);
  int const e[4] = {2, 3, 1, 0};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 4; ++j) {
      double const h = matmul_4x4(x, w, b, j);
      EXPECT_NEAR(y.data<float>()[b * 4 + j], std::pow(h, e[j]), 1e-5) << b << " " << j;
    }
  check_gradients(*m, 8);
}

// LpPool and GlobalLpPool import as the p-th root of a pooled |x|^p (AveragePool times the window,
// ReduceSum): the model trains through them with gradients equal to finite differences.
TEST(Autodiff, LpPoolingTrainsThroughItsRewrite) {
  using graph::zeros;
  std::string const text =
      graph::model_text("float[N,2,5,5] x", "float[N,3,1,1] y", {zeros("w", {3, 2, 2, 2}, 0.1)},
                        "c = Conv(x, w)\n p = LpPool<kernel_shape = [2, 2], p = 3, pads = [1, 1, 1, 1]>(c)\n"
                        " y = GlobalLpPool<p = 2>(p)",
                        18);
  auto m = make_model(graph::load_onnx_text(text), 2);
  ASSERT_NE(m, nullptr);
  for (char const* type : {"LpPool", "GlobalLpPool"})
    for (auto const& op : m->graph.ops()) EXPECT_NE(op.type, type);
  draw_weight(*m, "w", 41);
  check_gradients(*m, 12);
  // GlobalLpPool's value against its definition, (sum |x|^p)^(1/p) per sample and channel.
  auto pool = make_model(graph::load_onnx_text(graph::model_text("float[N,2,3,3] x", "float[N,2,1,1] y", {},
                                                                 "y = GlobalLpPool<p = 3>(x)", 18)),
                         2);
  ASSERT_NE(pool, nullptr);
  TensorMap outs;
  ASSERT_TRUE(pool->ex->forward(0, pool->inputs, outs, false).is_ok());
  Tensor const& x = pool->inputs.begin()->second;
  for (int64_t nc = 0; nc < 4; ++nc) {
    double sum = 0;
    for (int64_t k = 0; k < 9; ++k) sum += std::pow(std::abs(double(x.data<float>()[nc * 9 + k])), 3.0);
    EXPECT_NEAR(outs.at(pool->out).data<float>()[nc], std::cbrt(sum), 1e-5 * std::cbrt(sum)) << nc;
  }
  // LpPool's value with dilated windows and ceil_mode, whose last windows reach past the end pads
  // along both dims: (sum over the taps inside x of |x|^2)^(1/2).
  auto lp = make_model(graph::load_onnx_text(graph::model_text(
                           "float[N,2,6,5] x", "float[N,2,4,3] y", {},
                           "y = LpPool<kernel_shape = [2, 2], p = 2, strides = [2, 2], pads = [1, 0, 1, 0], "
                           "dilations = [2, 1], ceil_mode = 1>(x)",
                           18)),
                       2);
  ASSERT_NE(lp, nullptr);
  TensorMap lp_outs;
  ASSERT_TRUE(lp->ex->forward(0, lp->inputs, lp_outs, false).is_ok());
  Tensor const& lx = lp->inputs.begin()->second;
  Tensor const& ly = lp_outs.at(lp->out);
  ASSERT_EQ(ly.shape(), (std::vector<int64_t>{2, 2, 4, 3}));
  for (int64_t nc = 0; nc < 4; ++nc)
    for (int64_t oh = 0; oh < 4; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        double sum = 0;
        for (int64_t kh = 0; kh < 2; ++kh)
          for (int64_t kw = 0; kw < 2; ++kw) {
            int64_t const ih = oh * 2 - 1 + kh * 2, iw = ow * 2 + kw;
            if (ih >= 0 && ih < 6 && iw < 5) sum += std::pow(double(lx.data<float>()[(nc * 6 + ih) * 5 + iw]), 2.0);
          }
        EXPECT_NEAR(ly.data<float>()[(nc * 4 + oh) * 3 + ow], std::sqrt(sum), 1e-5 * std::sqrt(sum) + 1e-6)
            << nc << " " << oh << " " << ow;
      }
}

TEST(Autodiff, PlanMarksFanOutAndWeights) {
  auto g = testing::tiny_mlp().to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto p = plan_autodiff(*g);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->weights.size(), 5u);
  EXPECT_EQ(p->backward_order.size(), g->num_ops());
  auto a = g->find_tensor("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(p->grad_fan_in[*a], 2);
  EXPECT_TRUE(p->input_grads.empty());  // graph inputs get no gradient
  EXPECT_FALSE(describe(*p, *g).empty());
}

TEST(Autodiff, SplitBackwardEqualsWholeBackward) {
  for (auto make : {&testing::tiny_cnn, &testing::tiny_conv_stack}) {
    auto m = make_model(make(7), 4);
    SCOPED_TRACE(m->graph.name());
    TensorMap outs, ig;
    ASSERT_TRUE(m->ex->forward(0, m->inputs, outs, true, 1).is_ok());
    ASSERT_TRUE(m->ex->backward(0, {{m->out, m->probe}}, ig).is_ok());
    std::map<std::string, std::vector<float>> whole;
    for (auto const& [n, g] : m->ex->gradients()) whole[n] = g.to_vector();
    EXPECT_TRUE(m->ex->zero_grads().is_ok());
    ASSERT_TRUE(m->ex->forward(0, m->inputs, outs, true, 1).is_ok());
    ASSERT_TRUE(m->ex->backward_input(0, {{m->out, m->probe}}, ig).is_ok());
    for (auto const& [n, g] : m->ex->gradients())
      for (float v : g.to_vector()) EXPECT_EQ(v, 0.f) << n << ": B must not touch weight gradients";
    EXPECT_GT(m->ex->saved_bytes(0), 0);  // W still needs the conv/gemm inputs
    ASSERT_TRUE(m->ex->backward_weight(0).is_ok());
    EXPECT_EQ(m->ex->in_flight(), 0);
    for (auto const& [n, g] : m->ex->gradients()) EXPECT_EQ(g.to_vector(), whole[n]) << n;
  }
}

TEST(Autodiff, SeveralMicroBatchesInFlightAccumulate) {
  auto a = make_model(testing::tiny_mlp(), 2);
  auto second = a->inputs;
  for (auto& [t, x] : second) x = testing::normal_tensor(x.shape(), 77);
  TensorMap o0, o1, ig;
  ASSERT_TRUE(a->ex->forward(0, a->inputs, o0, true, 1).is_ok());
  ASSERT_TRUE(a->ex->forward(1, second, o1, true, 2).is_ok());
  EXPECT_EQ(a->ex->in_flight(), 2);
  int64_t const both = a->ex->saved_bytes();
  EXPECT_EQ(both, a->ex->saved_bytes(0) + a->ex->saved_bytes(1));
  EXPECT_FALSE(a->ex->forward(1, second, o1, true, 2).is_ok());  // mb 1 is already in flight
  ASSERT_TRUE(a->ex->backward(1, {{a->out, a->probe}}, ig).is_ok());
  ASSERT_TRUE(a->ex->backward(0, {{a->out, a->probe}}, ig).is_ok());
  EXPECT_EQ(a->ex->saved_bytes(), 0);
  EXPECT_EQ(a->ex->peak_saved_bytes(), both);

  auto b = make_model(testing::tiny_mlp(), 2);
  for (auto const* in : {&a->inputs, &second}) {
    TensorMap o;
    ASSERT_TRUE(b->ex->forward(0, *in, o, true, 1).is_ok());
    ASSERT_TRUE(b->ex->backward(0, {{b->out, b->probe}}, ig).is_ok());
  }
  for (auto const& [n, g] : a->ex->gradients()) {
    auto x = g.to_vector(), y = b->ex->gradients().at(n).to_vector();
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-6) << n;
  }
}

TEST(Autodiff, InferenceKeepsNothing) {
  auto m = make_model(testing::tiny_attention(), 2);
  TensorMap outs;
  ASSERT_TRUE(m->ex->forward(0, m->inputs, outs, false).is_ok());
  EXPECT_EQ(m->ex->in_flight(), 0);
  EXPECT_EQ(m->ex->saved_bytes(), 0);
  TensorMap ig;
  EXPECT_FALSE(m->ex->backward(0, {{m->out, m->probe}}, ig).is_ok());
}

// A pipeline cut: two stages chained by their boundary tensors give the whole graph's gradients.
TEST(Autodiff, TwoStagesEqualTheWholeGraph) {
  auto whole = make_model(testing::tiny_attention(), 2);
  check_gradients(*whole, 0);
  auto const& g = whole->graph;
  auto const& topo = g.topo_order();
  std::size_t const cut = topo.size() / 2;
  std::vector<graph::OpId> s1(topo.begin(), topo.begin() + cut), s2(topo.begin() + cut, topo.end());
  CpuBackend be;
  auto e1 = StageExecutor::create(g, be, s1);
  auto e2 = StageExecutor::create(g, be, s2);
  ASSERT_TRUE(e1.is_ok() && e2.is_ok());
  EXPECT_FALSE((*e2)->plan().input_grads.empty());
  TensorMap o1, o2, in2 = whole->inputs, g1, g2;
  ASSERT_TRUE((*e1)->forward(0, whole->inputs, o1, true, 5).is_ok());
  for (auto const& [t, v] : o1) in2[t] = v;
  ASSERT_TRUE((*e2)->forward(0, in2, o2, true, 5).is_ok());
  ASSERT_TRUE((*e2)->backward(0, {{whole->out, whole->probe}}, g2).is_ok());
  ASSERT_EQ(g2.size(), (*e2)->plan().input_grads.size());
  ASSERT_TRUE((*e1)->backward(0, g2, g1).is_ok());
  std::size_t seen = 0;
  for (auto* e : {e1->get(), e2->get()}) {
    for (auto const& [n, grad] : e->gradients()) {
      ++seen;
      auto x = grad.to_vector(), y = whole->ex->gradients().at(n).to_vector();
      for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5 + 1e-5 * std::abs(y[i])) << n;
    }
  }
  EXPECT_EQ(seen, whole->ex->parameters().size());
}

// A stage input computed from constants alone (a mask without a batch dimension, made in another
// stage) gets no gradient: nothing upstream trains through it, and the runtime could not split a
// batchless gradient between replicas (HF GPT-2's causal mask, cut from its Add by a plan). One
// computed from a weight does.
TEST(Autodiff, AStageInputComputedFromConstantsGetsNoGradient) {
  using graph::model_text;
  using graph::zeros;
  auto g =
      graph::load_onnx_text(model_text("float[N,4] x", "float[N,4] y", {zeros("w", {4, 4}, 0.5), zeros("c", {4}, 1)},
                                       "h = MatMul(x, w)\n m = Sigmoid(c)\n y = Add(h, m)"));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto id = [&](std::string const& name) { return *g->find_tensor(name); };
  std::vector<graph::OpId> second{g->tensor(id("y")).producer};
  auto plan = plan_autodiff(*g, second);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  EXPECT_EQ(plan->stage_inputs.size(), 2u);
  EXPECT_EQ(plan->input_grads, std::vector<graph::TensorId>{id("h")});
  EXPECT_FALSE(plan->requires_grad[id("m")]);
}

// LayerNormalization's Mean and InvStdDev are computed forward only (OpDef::differentiable_outputs):
// as extra graph outputs (ONNX's own tests) the model trains, with the loss depending on them it is
// refused with the op and output named.
TEST(Autodiff, ALossThroughLayerNormStatisticsIsRefused) {
  using graph::model_text;
  using graph::zeros;
  std::vector<std::string> const inits = {zeros("w", {4, 4}, 0.5), zeros("s", {4}, 1), zeros("b", {4}, 0)};
  auto side = graph::load_onnx_text(model_text("float[N,4] x", "float[N,4] y, float[N,1] mean", inits,
                                               "h = MatMul(x, w)\n y, mean, inv = LayerNormalization(h, s, b)", 17));
  ASSERT_TRUE(side.is_ok()) << side.status().message();
  EXPECT_EQ(side->tensor(*side->find_tensor("inv")).shape.dims, (std::vector<int64_t>{graph::kBatch, 1}));
  auto whole = plan_autodiff(*side);
  ASSERT_TRUE(whole.is_ok()) << whole.status().message();
  auto used = graph::load_onnx_text(model_text("float[N,4] x", "float[N,4] y", inits,
                                               "h = MatMul(x, w)\n n, mean = LayerNormalization(h, s, b)\n"
                                               " y = Mul(n, mean)",
                                               17));
  ASSERT_TRUE(used.is_ok()) << used.status().message();
  auto refused = plan_autodiff(*used);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("the loss depends on its output 1 ('mean')"), std::string::npos)
      << refused.status().message();
}

TEST(Autodiff, UnsupportedOpIsNamed) {
  graph::OpGraph g;
  auto x =
      g.add_tensor(graph::TensorInfo{.name = "x", .shape = {{graph::kBatch, 4}}, .role = graph::TensorRole::kInput});
  auto y = g.add_tensor(graph::TensorInfo{.name = "y", .shape = {{graph::kBatch, 4}}});
  graph::Op op;
  op.name = "the_hardmax";
  op.type = "Hardmax";
  op.inputs = {x};
  op.outputs = {y};
  g.add_op(op);
  g.mark_input(x);
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().is_ok());
  CpuBackend be;
  auto ex = StageExecutor::create(g, be);
  ASSERT_FALSE(ex.is_ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(ex.status().message().find("Hardmax"), std::string::npos) << ex.status().message();
}

}  // namespace
}  // namespace gp::exec
