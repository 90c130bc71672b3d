// Elementwise activations and math (graph/ops/activation.cc, exec/cpu/activation.cc): forward
// against float64 reference loops, finite-difference gradients, import of the ONNX nodes, and the
// fusion of torch's tanh-GELU decomposition.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <numbers>
#include <tuple>

#include <unistd.h>

#include "graph/onnx_import.h"
#include "graph/onnx_tensor_io.h"
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;

// Values spread over [lo, hi], none within `gap` of a point where the function has a kink.
Tensor spread(std::vector<int64_t> shape, uint32_t seed, float lo, float hi, std::vector<float> kinks = {},
              float gap = 0.02f) {
  Tensor t(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = u(rng);
    for (bool near = true; near;) {
      near = false;
      for (float k : kinks)
        if (std::fabs(v - k) < gap) near = true;
      if (near) v = u(rng);
    }
    t.data<float>()[i] = v;
  }
  return t;
}

struct UnaryCase {
  std::string type;
  graph::OpAttrs attrs;
  float lo, hi;
  std::vector<float> kinks;
  std::function<double(double)> ref;
};

double const kSeluAlpha = 1.67326319217681884765625, kSeluGamma = 1.05070102214813232421875;

std::vector<UnaryCase> unary_cases() {
  using A = graph::ActivationAttrs;
  return {
      {"Reciprocal", {}, 0.3f, 2.f, {}, [](double x) { return 1 / x; }},
      {"Softplus", {}, -4.f, 4.f, {}, [](double x) { return std::log(std::exp(x) + 1); }},
      {"Softsign", {}, -4.f, 4.f, {}, [](double x) { return x / (1 + std::fabs(x)); }},
      {"HardSwish", {}, -4.f, 4.f, {-3.f, 3.f}, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }},
      {"Elu", A{0.7f, 0, 0}, -3.f, 3.f, {0.f}, [](double x) { return x < 0 ? 0.7 * (std::exp(x) - 1) : x; }},
      {"Selu",
       A{static_cast<float>(kSeluAlpha), 0, static_cast<float>(kSeluGamma)},
       -3.f,
       3.f,
       {0.f},
       [](double x) { return x > 0 ? kSeluGamma * x : kSeluGamma * (kSeluAlpha * std::exp(x) - kSeluAlpha); }},
      {"Celu",
       A{2.f, 0, 0},
       -3.f,
       3.f,
       {0.f},
       [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); }},
      {"HardSigmoid",
       A{0.3f, 0.4f, 0},
       -4.f,
       4.f,
       {-0.4f / 0.3f, 0.6f / 0.3f},
       [](double x) { return std::max(0.0, std::min(1.0, 0.3 * x + 0.4)); }},
      {"ThresholdedRelu", A{0.5f, 0, 0}, -2.f, 2.f, {0.5f}, [](double x) { return x > 0.5 ? x : 0; }},
      {"Shrink",
       A{0.5f, 0.2f, 0},
       -2.f,
       2.f,
       {-0.5f, 0.5f},
       [](double x) { return x < -0.5  ? x + 0.2
                             : x > 0.5 ? x - 0.2
                                       : 0; }},
      {"Sin", {}, -3.f, 3.f, {}, [](double x) { return std::sin(x); }},
      {"Cos", {}, -3.f, 3.f, {}, [](double x) { return std::cos(x); }},
      {"Tan", {}, -1.2f, 1.2f, {}, [](double x) { return std::tan(x); }},
      {"Asin", {}, -0.9f, 0.9f, {}, [](double x) { return std::asin(x); }},
      {"Acos", {}, -0.9f, 0.9f, {}, [](double x) { return std::acos(x); }},
      {"Atan", {}, -3.f, 3.f, {}, [](double x) { return std::atan(x); }},
      {"Sinh", {}, -2.f, 2.f, {}, [](double x) { return std::sinh(x); }},
      {"Cosh", {}, -2.f, 2.f, {}, [](double x) { return std::cosh(x); }},
      {"Asinh", {}, -3.f, 3.f, {}, [](double x) { return std::asinh(x); }},
      {"Acosh", {}, 1.2f, 4.f, {}, [](double x) { return std::acosh(x); }},
      {"Atanh", {}, -0.8f, 0.8f, {}, [](double x) { return std::atanh(x); }},
      {"Exp", {}, -2.f, 2.f, {}, [](double x) { return std::exp(x); }},
      {"Log", {}, 0.2f, 3.f, {}, [](double x) { return std::log(x); }},
      {"Neg", {}, -2.f, 2.f, {}, [](double x) { return -x; }},
      {"Abs", {}, -2.f, 2.f, {0.f}, [](double x) { return std::fabs(x); }},
      {"Erf", {}, -2.f, 2.f, {}, [](double x) { return std::erf(x); }},
  };
}

TEST(OpsActivation, UnaryForwardMatchesFormulas) {
  CpuBackend be;
  uint32_t seed = 1;
  for (UnaryCase const& c : unary_cases()) {
    SCOPED_TRACE(c.type);
    Tensor x = spread({3, 7}, seed++, c.lo, c.hi, c.kinks);
    OneOp o = make_op(c.type, c.attrs, {{"x", x, kIn}});
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
    std::vector<double> ref;
    for (int64_t i = 0; i < x.numel(); ++i) ref.push_back(c.ref(at(x, i)));
    expect_near(run_forward(be, o)[0], ref);
  }
}

TEST(OpsActivation, UnaryGradients) {
  CpuBackend be;
  uint32_t seed = 100;
  for (UnaryCase const& c : unary_cases()) {
    SCOPED_TRACE(c.type);
    OneOp o = make_op(c.type, c.attrs, {{"x", spread({2, 9}, seed++, c.lo, c.hi, c.kinks), kIn}});
    expect_grads_ok(grad_check(be, o));
  }
}

TEST(OpsActivation, RoundingOpsForwardAndZeroGradient) {
  CpuBackend be;
  std::vector<float> const xs = {-2.5f, -1.5f, -0.5f, -0.4f, 0.f, 0.5f, 1.5f, 2.5f, 2.6f, -3.7f};
  Tensor x({static_cast<int64_t>(xs.size())});
  for (std::size_t i = 0; i < xs.size(); ++i) x.data<float>()[i] = xs[i];
  std::vector<std::pair<std::string, std::function<double(double)>>> const cases = {
      {"Floor", [](double v) { return std::floor(v); }},
      {"Ceil", [](double v) { return std::ceil(v); }},
      {"Sign", [](double v) { return v > 0   ? 1.0
                                     : v < 0 ? -1.0
                                             : 0.0; }},
  };
  for (auto const& [type, f] : cases) {
    SCOPED_TRACE(type);
    OneOp o = make_op(type, {}, {{"x", x, kIn}});
    std::vector<double> ref;
    for (float v : xs) ref.push_back(f(v));
    expect_near(run_forward(be, o)[0], ref);
  }
  // Round: half to even, as ONNX specifies.
  OneOp r = make_op("Round", {}, {{"x", x, kIn}});
  expect_near(run_forward(be, r)[0], {-2, -2, -0, -0, 0, 0, 2, 2, 3, -4});
  for (char const* type : {"Floor", "Ceil", "Sign", "Round"}) {
    OneOp o = make_op(type, {}, {{"x", x, kIn}});
    Saved saved;
    run_forward(be, o, true, 7, &saved);
    Tensor dy(x.shape());
    dy.fill(1.f);
    std::vector<Tensor> grads;
    OpCall call{o.the_op(), o.graph, true, 7};
    ASSERT_TRUE(be.backward_input(call, saved, {dy}, {true}, grads).is_ok());
    expect_near(grads.at(0), std::vector<double>(xs.size(), 0.0));
  }
}

// ONNX's node tests of these ops use opsets below 7, which the importer refuses (and so the
// conformance suite cannot run them): their reference data runs through the kernels directly, with
// the attributes of each test's model.
TEST(OpsActivation, OnnxReferenceDataOfOldOpsetNodeTests) {
  std::filesystem::path const root = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "libonnx-testdata is not installed (" << root << ")";
  using A = graph::ActivationAttrs;
  float const sa = static_cast<float>(kSeluAlpha), sg = static_cast<float>(kSeluGamma);
  std::vector<std::tuple<std::string, std::string, graph::OpAttrs>> const cases = {
      {"test_elu", "Elu", A{2.f, 0, 0}},
      {"test_elu_default", "Elu", A{1.f, 0, 0}},
      {"test_elu_example", "Elu", A{2.f, 0, 0}},
      {"test_selu", "Selu", A{2.f, 0, 3.f}},
      {"test_selu_default", "Selu", A{sa, 0, sg}},
      {"test_selu_example", "Selu", A{2.f, 0, 3.f}},
      {"test_hardsigmoid", "HardSigmoid", A{0.5f, 0.6f, 0}},
      {"test_hardsigmoid_default", "HardSigmoid", A{0.2f, 0.5f, 0}},
      {"test_hardsigmoid_example", "HardSigmoid", A{0.5f, 0.6f, 0}},
      {"test_softplus", "Softplus", {}},
      {"test_softplus_example", "Softplus", {}},
      {"test_softsign", "Softsign", {}},
      {"test_softsign_example", "Softsign", {}},
  };
  CpuBackend be;
  for (auto const& [test, type, attrs] : cases) {
    SCOPED_TRACE(test);
    auto in = graph::load_tensor_pb((root / test / "test_data_set_0" / "input_0.pb").string());
    auto want = graph::load_tensor_pb((root / test / "test_data_set_0" / "output_0.pb").string());
    ASSERT_TRUE(in.is_ok() && want.is_ok());
    OneOp o = make_op(type, attrs, {{"x", Tensor::from_data(in->data), kIn}});
    Tensor const got = run_forward(be, o)[0];
    ASSERT_EQ(got.numel(), want->data.numel());
    for (int64_t i = 0; i < got.numel(); ++i) {
      double const e = want->data.as<float>()[i];
      ASSERT_NEAR(at(got, i), e, 1e-5 + 1e-4 * std::fabs(e)) << "element " << i;
    }
  }
}

// ---- Clip ----

TEST(OpsActivation, ClipStaticBounds) {
  CpuBackend be;
  Tensor x = spread({4, 6}, 7, -8.f, 8.f, {0.f, 6.f});
  OneOp relu6 = make_op("Clip", graph::ClipAttrs{0.f, 6.f}, {{"x", x, kIn}});
  std::vector<double> ref;
  for (int64_t i = 0; i < x.numel(); ++i) ref.push_back(std::min(6.0, std::max(0.0, at(x, i))));
  expect_near(run_forward(be, relu6)[0], ref);
  expect_grads_ok(grad_check(be, relu6));
  // An absent bound is ±infinity.
  OneOp upper = make_op("Clip", graph::ClipAttrs{-std::numeric_limits<float>::infinity(), 1.f}, {{"x", x, kIn}});
  ref.clear();
  for (int64_t i = 0; i < x.numel(); ++i) ref.push_back(std::min(1.0, at(x, i)));
  expect_near(run_forward(be, upper)[0], ref);
}

TEST(OpsActivation, ClipRunTimeBoundsWithGradients) {
  CpuBackend be;
  Tensor x = spread({3, 8}, 8, -3.f, 3.f, {-1.f, 1.5f});
  Tensor lo(std::vector<int64_t>{}), hi(std::vector<int64_t>{});
  lo.fill(-1.f);
  hi.fill(1.5f);
  OneOp o = make_op("Clip", graph::ClipAttrs{}, {{"x", x, kIn}, {"min", lo, kIn}, {"max", hi, kIn}});
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
  std::vector<double> ref;
  for (int64_t i = 0; i < x.numel(); ++i) ref.push_back(std::min(1.5, std::max(-1.0, at(x, i))));
  expect_near(run_forward(be, o)[0], ref);
  expect_grads_ok(grad_check(be, o));
  // Only max given at run time; min from the attributes.
  OneOp m = make_op("Clip", graph::ClipAttrs{-0.5f, std::numeric_limits<float>::infinity()},
                    {{"x", x, kIn}, {"min", Tensor(), kIn}, {"max", hi, kIn}});
  ref.clear();
  for (int64_t i = 0; i < x.numel(); ++i) ref.push_back(std::min(1.5, std::max(-0.5, at(x, i))));
  expect_near(run_forward(be, m)[0], ref);
}

// ---- PRelu ----

TEST(OpsActivation, PReluBroadcastSlope) {
  CpuBackend be;
  Tensor x = random_tensor({2, 3, 4}, 9);
  Tensor slope = random_tensor({3, 1}, 10, 0.1f, 0.9f);
  OneOp o = make_op("PRelu", {}, {{"x", x, kIn}, {"slope", slope, kW}});
  std::vector<double> ref;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t w = 0; w < 4; ++w) {
        double const v = at(x, (n * 3 + c) * 4 + w);
        ref.push_back(v < 0 ? at(slope, c) * v : v);
      }
  expect_near(run_forward(be, o)[0], ref);
  expect_grads_ok(grad_check(be, o));
}

TEST(OpsActivation, PReluSlopeShapes) {
  CpuBackend be;
  OneOp trailing = make_op("PRelu", {}, {{"x", random_tensor({3, 5}, 11), kIn}, {"slope", random_tensor({5}, 12), kW}});
  expect_grads_ok(grad_check(be, trailing));
  OneOp full = make_op("PRelu", {}, {{"x", random_tensor({2, 3}, 13), kIn}, {"slope", random_tensor({2, 3}, 14), kIn}});
  expect_grads_ok(grad_check(be, full));
  OneOp bad = make_op("PRelu", {}, {{"x", random_tensor({2, 3}, 15), kIn}, {"slope", random_tensor({2}, 16), kW}});
  std::vector<Tensor> out;
  OpCall call{bad.the_op(), bad.graph, true, 7};
  Status const s = be.forward(call, bad.inputs, out, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("does not broadcast"), std::string::npos) << s.message();
}

// ---- Min, Max, Sum, Mean ----

TEST(OpsActivation, VariadicForwardBroadcasts) {
  CpuBackend be;
  Tensor a = random_tensor({2, 3}, 17), b = random_tensor({3}, 18), c = random_tensor({2, 1}, 19);
  for (char const* type : {"Min", "Max", "Sum", "Mean"}) {
    SCOPED_TRACE(type);
    OneOp o = make_op(type, {}, {{"a", a, kIn}, {"b", b, kIn}, {"c", c, kIn}});
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
    std::vector<double> ref;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        double const va = at(a, i * 3 + j), vb = at(b, j), vc = at(c, i);
        std::string const t = type;
        ref.push_back(t == "Min"   ? std::min({va, vb, vc})
                      : t == "Max" ? std::max({va, vb, vc})
                      : t == "Sum" ? va + vb + vc
                                   : (va + vb + vc) / 3);
      }
    expect_near(run_forward(be, o)[0], ref);
    OneOp one = make_op(type, {}, {{"a", a, kIn}});
    std::vector<double> same;
    for (int64_t i = 0; i < a.numel(); ++i) same.push_back(at(a, i));
    expect_near(run_forward(be, one)[0], same);
  }
}

TEST(OpsActivation, VariadicGradients) {
  CpuBackend be;
  for (char const* type : {"Min", "Max", "Sum", "Mean"}) {
    SCOPED_TRACE(type);
    // Distinct values keep the selection of Min/Max stable under the finite-difference steps.
    Tensor all = distinct_tensor({12}, 20, 0.05f);
    Tensor a({2, 3}), b({3}), c({2, 1}, DType::kFloat32);
    for (int64_t i = 0; i < 6; ++i) a.data<float>()[i] = all.data<float>()[i];
    for (int64_t i = 0; i < 3; ++i) b.data<float>()[i] = all.data<float>()[6 + i];
    for (int64_t i = 0; i < 2; ++i) c.data<float>()[i] = all.data<float>()[9 + i];
    OneOp o = make_op(type, {}, {{"a", a, kIn}, {"b", b, kW}, {"c", c, kIn}});
    expect_grads_ok(grad_check(be, o));
  }
}

TEST(OpsActivation, MaxTiesGoToTheFirstInput) {
  CpuBackend be;
  Tensor a({3}), b({3});
  for (int64_t i = 0; i < 3; ++i) {
    a.data<float>()[i] = 1.f;
    b.data<float>()[i] = i == 1 ? 2.f : 1.f;
  }
  OneOp o = make_op("Max", {}, {{"a", a, kIn}, {"b", b, kIn}});
  Saved saved;
  run_forward(be, o, true, 7, &saved);
  Tensor dy({3});
  dy.fill(1.f);
  std::vector<Tensor> grads;
  OpCall call{o.the_op(), o.graph, true, 7};
  ASSERT_TRUE(be.backward_input(call, saved, {dy}, {true, true}, grads).is_ok());
  expect_near(grads.at(0), {1, 0, 1});
  expect_near(grads.at(1), {0, 1, 0});
}

TEST(OpsActivation, VariadicRefusesIntegerInputs) {
  CpuBackend be;
  OneOp o = make_op("Max", {}, {{"a", random_tensor({3}, 21), kIn}, {"b", int_tensor({3}, {1, 2, 3}), kIn}});
  Status const s = be.supports(o.the_op(), o.graph);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.message();
}

// Integer Max/Min (MaxViT's index arithmetic from the dynamo exporter, a Max of one input): exact,
// broadcast, folded over every input in order, one input copied; mixed dtypes are refused.
TEST(OpsActivation, IntegerMaxAndMinAreExactAndBroadcast) {
  CpuBackend be;
  int64_t const big = std::numeric_limits<int64_t>::max(), low = std::numeric_limits<int64_t>::lowest();
  OneOp mx = make_op("Max", {},
                     {{"a", int_tensor({2, 3}, {big, -1, 5, low, 0, 7}), kIn},
                      {"b", int_tensor({3}, {1, 2, 3}), kIn},
                      {"c", int_tensor({2, 1}, {4, -9}), kIn}},
                     1, {DType::kInt64});
  ASSERT_TRUE(be.supports(mx.the_op(), mx.graph).is_ok()) << be.supports(mx.the_op(), mx.graph).message();
  std::vector<Tensor> y = run_forward(be, mx, false, 0);
  ASSERT_EQ(y.at(0).dtype(), DType::kInt64);
  ASSERT_EQ(y.at(0).shape(), (std::vector<int64_t>{2, 3}));
  std::vector<int64_t> const want_max{big, 4, 5, 1, 2, 7};
  for (std::size_t i = 0; i < want_max.size(); ++i) EXPECT_EQ(y[0].data<int64_t>()[i], want_max[i]) << i;
  OneOp mn =
      make_op("Min", {}, {{"a", int32_tensor({4}, {3, -7, 0, 2147483647}), kIn}, {"b", int32_tensor({1}, {1}), kIn}}, 1,
              {DType::kInt32});
  std::vector<Tensor> z = run_forward(be, mn, false, 0);
  std::vector<int32_t> const want_min{1, -7, 0, 1};
  for (std::size_t i = 0; i < want_min.size(); ++i) EXPECT_EQ(z.at(0).data<int32_t>()[i], want_min[i]) << i;
  OneOp one = make_op("Max", {}, {{"a", int_tensor({2}, {-1, 2}), kIn}}, 1, {DType::kInt64});
  ASSERT_TRUE(be.supports(one.the_op(), one.graph).is_ok());
  std::vector<Tensor> w = run_forward(be, one, false, 0);
  ASSERT_EQ(w.at(0).numel(), 2);
  EXPECT_EQ(w[0].data<int64_t>()[0], -1);
  EXPECT_EQ(w[0].data<int64_t>()[1], 2);
  OneOp mixed = make_op("Max", {}, {{"a", int_tensor({2}, {1, 2}), kIn}, {"b", int32_tensor({2}, {1, 2}), kIn}}, 1,
                        {DType::kInt64});
  EXPECT_FALSE(be.supports(mixed.the_op(), mixed.graph).is_ok());
}

// ---- import ----

std::string load_error(std::string const& text) {
  auto g = graph::load_onnx_text(text);
  return g.is_ok() ? "" : g.status().message();
}

graph::Op const& only_op(graph::OpGraph const& g) {
  EXPECT_EQ(g.num_ops(), 1u);
  return g.op(0);
}

TEST(OpsActivationImport, ClipBoundsFromAttributesAndInputs) {
  auto g6 = must_load(R"(<ir_version: 8, opset_import: ["" : 10]>
    net (float[N,4] x) => (float[N,4] y) { y = Clip<min = 0.0, max = 6.0>(x) })");
  auto const& a6 = std::get<graph::ClipAttrs>(only_op(g6).typed);
  EXPECT_EQ(a6.min, 0.f);
  EXPECT_EQ(a6.max, 6.f);
  EXPECT_EQ(only_op(g6).inputs.size(), 1u);

  auto g13 = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) {
      lo = Constant<value = float {0.0}>()
      hi = Constant<value = float {6.0}>()
      y = Clip(x, lo, hi)
    })");
  auto const& a13 = std::get<graph::ClipAttrs>(only_op(g13).typed);
  EXPECT_EQ(a13.min, 0.f);
  EXPECT_EQ(a13.max, 6.f);
  EXPECT_EQ(only_op(g13).inputs.size(), 1u);

  auto gmax = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) {
      hi = Constant<value = float {2.5}>()
      y = Clip(x, , hi)
    })");
  auto const& amax = std::get<graph::ClipAttrs>(only_op(gmax).typed);
  EXPECT_EQ(amax.min, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(amax.max, 2.5f);

  // A bound computed at run time stays an input.
  auto grt = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x, float lo) => (float[N,4] y) { y = Clip(x, lo) })");
  EXPECT_EQ(only_op(grt).inputs.size(), 2u);
  CpuBackend be;
  EXPECT_TRUE(be.supports(only_op(grt), grt).is_ok());

  std::string const e = load_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) {
      lo = Constant<value = float[2] {0.0, 1.0}>()
      y = Clip(x, lo)
    })");
  EXPECT_NE(e.find("must be scalars"), std::string::npos) << e;
}

TEST(OpsActivationImport, AttributeDefaultsFromTheSpec) {
  auto selu = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) { y = Selu(x) })");
  auto const& s = std::get<graph::ActivationAttrs>(only_op(selu).typed);
  EXPECT_FLOAT_EQ(s.alpha, 1.67326319f);
  EXPECT_FLOAT_EQ(s.gamma, 1.05070102f);
  auto hs = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) { y = HardSigmoid(x) })");
  auto const& h = std::get<graph::ActivationAttrs>(only_op(hs).typed);
  EXPECT_FLOAT_EQ(h.alpha, 0.2f);
  EXPECT_FLOAT_EQ(h.beta, 0.5f);
  auto elu = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) { y = Elu<alpha = 0.3>(x) })");
  EXPECT_FLOAT_EQ(std::get<graph::ActivationAttrs>(only_op(elu).typed).alpha, 0.3f);
  std::string const e = load_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) { y = Celu<alpha = 0.0>(x) })");
  EXPECT_NE(e.find("alpha must not be 0"), std::string::npos) << e;
}

TEST(OpsActivationImport, PReluSlopeIsAWeight) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 16]>
    net (float[N,3,4,4] x) => (float[N,3,4,4] y) <float[3,1,1] slope = {0.25, 0.25, 0.25}> {
      y = PRelu(x, slope)
    })");
  graph::Op const& op = only_op(g);
  ASSERT_EQ(op.inputs.size(), 2u);
  EXPECT_EQ(g.tensor(op.inputs[1]).role, graph::TensorRole::kWeight);
  std::string const e = load_error(R"(<ir_version: 8, opset_import: ["" : 16]>
    net (float[N,3,4,4] x) => (float[N,3,4,4] y) <float[2] slope = {0.25, 0.25}> { y = PRelu(x, slope) })");
  EXPECT_NE(e.find("does not broadcast to x"), std::string::npos) << e;
}

TEST(OpsActivationImport, VariadicShapes) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,3,4] a) => (float[N,3,4] y) <float[4] b = {1, 2, 3, 4}, float[3,1] c = {1, 2, 3}> {
      y = Max(a, b, c)
    })");
  graph::Op const& op = only_op(g);
  EXPECT_EQ(op.inputs.size(), 3u);
  EXPECT_EQ(g.tensor(op.outputs[0]).shape.dims, (std::vector<int64_t>{graph::kBatch, 3, 4}));
  for (char const* t : {"Min", "Sum", "Mean"}) {
    auto h = must_load(std::string(R"(<ir_version: 8, opset_import: ["" : 13]>
      net (float[N,3] a) => (float[N,3] y) { y = )") +
                       t + "(a) }");
    EXPECT_EQ(only_op(h).type, t);
  }
}

// ---- tanh-GELU fusion ----

// torch 1.13's export of nn.GELU(approximate='tanh') (opset 17, training, no constant folding).
std::string const kTorchTanhGelu = R"(<ir_version: 8, opset_import: ["" : 17]>
    net (float[N,16] x) => (float[N,16] y) {
      x2 = Mul(x, x)
      x3 = Mul(x, x2)
      c0 = Constant<value = float {0.044715}>()
      k = Mul(c0, x3)
      s = Add(x, k)
      c1 = Constant<value = float {0.7978846}>()
      t = Mul(c1, s)
      th = Tanh(t)
      one = Constant<value = float {1.0}>()
      a = Add(one, th)
      m = Mul(x, a)
      half = Constant<value = float {0.5}>()
      y = Mul(half, m)
    })";

TEST(OpsActivationImport, FusesTorchTanhGelu) {
  auto g = must_load(kTorchTanhGelu);
  graph::Op const& op = only_op(g);
  EXPECT_EQ(op.type, "Gelu");
  EXPECT_TRUE(std::get<graph::GeluAttrs>(op.typed).tanh_approx);
  EXPECT_EQ(g.tensor(op.inputs[0]).name, "x");
  EXPECT_EQ(g.tensor(op.outputs[0]).name, "y");
  // The fused op computes the decomposition.
  CpuBackend be;
  Tensor x = random_tensor({2, 16}, 22, 0.05f, 3.f);
  OpCall call{op, g, false, 0};
  std::vector<Tensor> out;
  ASSERT_TRUE(be.forward(call, {x}, out, nullptr).is_ok());
  std::vector<double> ref;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double const v = at(x, i);
    ref.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v))));
  }
  expect_near(out[0], ref, 1e-5);
}

TEST(OpsActivationImport, FusesTanhGeluVariants) {
  // x³ as Pow, the 0.5 applied to x first, operands in the other order.
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,16] x) => (float[N,16] y) {
      three = Constant<value = float {3.0}>()
      x3 = Pow(x, three)
      c0 = Constant<value = float {0.044715}>()
      k = Mul(x3, c0)
      s = Add(k, x)
      c1 = Constant<value = float {0.7978846}>()
      t = Mul(s, c1)
      th = Tanh(t)
      one = Constant<value = float {1.0}>()
      a = Add(th, one)
      half = Constant<value = float {0.5}>()
      hx = Mul(x, half)
      y = Mul(hx, a)
    })");
  EXPECT_EQ(only_op(g).type, "Gelu");
  EXPECT_TRUE(std::get<graph::GeluAttrs>(only_op(g).typed).tanh_approx);
}

TEST(OpsActivationImport, LeavesOtherTanhChainsAlone) {
  // A different cubic coefficient is not GELU.
  std::string text = kTorchTanhGelu;
  text.replace(text.find("0.044715"), 8, "0.05");
  auto g = must_load(text);
  EXPECT_GT(g.num_ops(), 1u);
  for (graph::Op const& op : g.ops()) EXPECT_NE(op.type, "Gelu");
  // An intermediate value used elsewhere (tanh's output, also a graph output) keeps the chain.
  std::string shared = kTorchTanhGelu;
  shared.replace(shared.find("(float[N,16] y)"), 15, "(float[N,16] y, float[N,16] th)");
  auto h = must_load(shared);
  for (graph::Op const& op : h.ops()) EXPECT_NE(op.type, "Gelu");
}

// The real exporter: torch 1.13's nn.GELU(approximate='tanh') becomes one Gelu after import.
TEST(OpsActivationImport, TorchExportedTanhGeluFuses) {
  namespace fs = std::filesystem;
  fs::path const dir = fs::temp_directory_path() / ("gp_tanh_gelu_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path const model = dir / "gelu_tanh.onnx";
  std::string const script =
      "import torch\n"
      "class M(torch.nn.Module):\n"
      "    def __init__(s):\n"
      "        super().__init__(); s.l = torch.nn.Linear(8, 8); s.g = torch.nn.GELU(approximate='tanh')\n"
      "    def forward(s, x): return s.g(s.l(x))\n"
      "torch.onnx.export(M(), torch.randn(2, 8), '" +
      model.string() + "', opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)\n";
  fs::path const py = dir / "export.py";
  {
    FILE* f = std::fopen(py.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(script.c_str(), f);
    std::fclose(f);
  }
  int const rc = std::system(("/usr/bin/python3 " + py.string() + " >/dev/null 2>&1").c_str());
  if (rc != 0 || !fs::exists(model)) {
    fs::remove_all(dir);
    GTEST_SKIP() << "/usr/bin/python3 cannot export with torch (apt-get install python3-torch)";
  }
  auto g = graph::load_onnx(model.string());
  fs::remove_all(dir);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  std::vector<std::string> types;
  for (graph::Op const& op : g->ops()) types.push_back(op.type);
  ASSERT_EQ(types, (std::vector<std::string>{"Gemm", "Gelu"}));
  EXPECT_TRUE(std::get<graph::GeluAttrs>(g->op(1).typed).tanh_approx);
}

}  // namespace
}  // namespace gp::exec::testing
