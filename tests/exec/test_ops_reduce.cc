// The reduce family on the CPU backend: Reduce* (forward against a plain-loop reference, gradients
// by finite differences, ties, zeros, empty reductions, noop_with_empty_axes), LogSoftmax, Hardmax,
// CumSum, ArgMax/ArgMin, TopK; and their import from small ONNX text models.
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "exec/autodiff.h"
#include "graph/onnx_import.h"
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

using graph::ReduceAttrs;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<float> values(Tensor const& t) { return t.to_vector(); }

// Every reduction as a fold over the elements of one output (plain double arithmetic).
double reference(std::string const& type, std::vector<double> const& v) {
  double acc = 0;
  if (type == "ReduceSum" || type == "ReduceMean" || type == "ReduceLogSum") {
    for (double x : v) acc += x;
    if (type == "ReduceMean") return acc / static_cast<double>(v.size());
    return type == "ReduceLogSum" ? std::log(acc) : acc;
  }
  if (type == "ReduceMax") {
    acc = -kInf;
    for (double x : v) acc = std::max(acc, x);
    return acc;
  }
  if (type == "ReduceMin") {
    acc = kInf;
    for (double x : v) acc = std::min(acc, x);
    return acc;
  }
  if (type == "ReduceProd") {
    acc = 1;
    for (double x : v) acc *= x;
    return acc;
  }
  if (type == "ReduceL1") {
    for (double x : v) acc += std::fabs(x);
    return acc;
  }
  if (type == "ReduceL2" || type == "ReduceSumSquare") {
    for (double x : v) acc += x * x;
    return type == "ReduceL2" ? std::sqrt(acc) : acc;
  }
  if (type == "ReduceLogSumExp") {
    for (double x : v) acc += std::exp(x);
    return std::log(acc);
  }
  ADD_FAILURE() << "no reference for " << type;
  return 0;
}

// The reduction of x (shape {d0, d1, d2}) over `axes` by brute force: for every output position,
// collect the input elements that map to it.
std::vector<double> reference_reduce(std::string const& type, Tensor const& x, std::vector<int64_t> const& axes) {
  auto const& s = x.shape();
  auto reduced = [&](int64_t i) { return axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end(); };
  std::vector<double> out;
  for (int64_t a = 0; a < (reduced(0) ? 1 : s[0]); ++a)
    for (int64_t b = 0; b < (reduced(1) ? 1 : s[1]); ++b)
      for (int64_t c = 0; c < (reduced(2) ? 1 : s[2]); ++c) {
        std::vector<double> v;
        for (int64_t i = 0; i < s[0]; ++i)
          for (int64_t j = 0; j < s[1]; ++j)
            for (int64_t k = 0; k < s[2]; ++k)
              if ((reduced(0) || i == a) && (reduced(1) || j == b) && (reduced(2) || k == c))
                v.push_back(x.data<float>()[(i * s[1] + j) * s[2] + k]);
        out.push_back(reference(type, v));
      }
  return out;
}

std::vector<std::string> const kReductions = {"ReduceSum",    "ReduceMean",     "ReduceMax", "ReduceMin",
                                              "ReduceProd",   "ReduceL1",       "ReduceL2",  "ReduceSumSquare",
                                              "ReduceLogSum", "ReduceLogSumExp"};

TEST(ReduceOps, ForwardMatchesPlainLoops) {
  CpuBackend be;
  Tensor const x = random_tensor({2, 3, 4}, 11, 0.5f, 1.5f, /*positive=*/true);
  Tensor const signed_x = random_tensor({2, 3, 4}, 12, 0.5f, 1.5f);
  struct Case {
    std::vector<int64_t> axes;
    bool keepdims;
    std::vector<int64_t> shape;
  };
  std::vector<Case> const cases = {{{1}, true, {2, 1, 4}}, {{1}, false, {2, 4}}, {{0, 2}, true, {1, 3, 1}},
                                   {{0, 2}, false, {3}},   {{2}, false, {2, 3}}, {{0, 1, 2}, false, {}},
                                   {{}, true, {1, 1, 1}}};
  for (std::string const& type : kReductions)
    for (Case const& c : cases) {
      Tensor const& in = type == "ReduceLogSum" ? x : signed_x;  // log of a positive sum
      Tensor y = run_forward(be, make_op(type, ReduceAttrs{c.axes, c.keepdims}, {{"x", in, kIn}}))[0];
      ASSERT_EQ(y.shape(), c.shape) << type;
      std::vector<double> const want = reference_reduce(type, in, c.axes);
      ASSERT_EQ(static_cast<std::size_t>(y.numel()), want.size()) << type;
      for (std::size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(y.data<float>()[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << type << " element " << i;
    }
}

TEST(ReduceOps, NegativeAxesInHandBuiltAttributes) {
  CpuBackend be;
  Tensor const x = random_tensor({2, 3, 4}, 13);
  Tensor y = run_forward(be, make_op("ReduceMax", ReduceAttrs{{-1}, false}, {{"x", x, kIn}}))[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  std::vector<double> const want = reference_reduce("ReduceMax", x, {2});
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], static_cast<float>(want[i]));
}

TEST(ReduceOps, LogSumExpIsStableForLargeInputs) {
  CpuBackend be;
  Tensor x = Tensor::from_floats({1, 3}, {1000.f, 1000.f, 990.f});
  Tensor y = run_forward(be, make_op("ReduceLogSumExp", ReduceAttrs{{1}, false}, {{"x", x, kIn}}))[0];
  EXPECT_NEAR(y.data<float>()[0], 1000.0 + std::log(2.0 + std::exp(-10.0)), 1e-3);
}

TEST(ReduceOps, EmptyReductionsGiveTheIdentityElement) {
  CpuBackend be;
  Tensor const x({2, 0, 3});
  std::map<std::string, float> const want = {
      {"ReduceSum", 0.f},       {"ReduceMax", -INFINITY},    {"ReduceMin", INFINITY},
      {"ReduceProd", 1.f},      {"ReduceL1", 0.f},           {"ReduceL2", 0.f},
      {"ReduceSumSquare", 0.f}, {"ReduceLogSum", -INFINITY}, {"ReduceLogSumExp", -INFINITY}};
  for (auto const& [type, v] : want) {
    Tensor y = run_forward(be, make_op(type, ReduceAttrs{{1}, true}, {{"x", x, kIn}}))[0];
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 1, 3})) << type;
    for (float got : values(y)) EXPECT_EQ(got, v) << type;
  }
  Tensor mean = run_forward(be, make_op("ReduceMean", ReduceAttrs{{1}, false}, {{"x", x, kIn}}))[0];
  ASSERT_EQ(mean.shape(), (std::vector<int64_t>{2, 3}));
  for (float got : values(mean)) EXPECT_TRUE(std::isnan(got));
}

void check_grads(OneOp o, GradCheckOptions const& opt = {}) {
  CpuBackend be;
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
  expect_grads_ok(grad_check(be, o, opt), opt.rtol);
}

TEST(ReduceOps, GradientsMatchFiniteDifferences) {
  for (std::string const& type : kReductions) {
    SCOPED_TRACE(type);
    // Max/Min: distinct values, so that the extremum does not move under the perturbation; LogSum:
    // a positive sum.
    bool const extremum = type == "ReduceMax" || type == "ReduceMin";
    auto input = [&](uint32_t seed) {
      return extremum ? distinct_tensor({2, 3, 4}, seed, 0.05f)
                      : random_tensor({2, 3, 4}, seed, 0.3f, 1.2f, type == "ReduceLogSum");
    };
    check_grads(make_op(type, ReduceAttrs{{1}, true}, {{"x", input(21), kIn}}));
    check_grads(make_op(type, ReduceAttrs{{0, 2}, false}, {{"x", input(22), kIn}}));
    check_grads(make_op(type, ReduceAttrs{{0, 1, 2}, false}, {{"x", input(23), kIn}}));
  }
}

// Returns d(sum of out)/dx with a gradient of ones.
std::vector<float> ones_gradient(OneOp const& o) {
  CpuBackend be;
  Saved saved;
  std::vector<Tensor> out = run_forward(be, o, true, 7, &saved);
  Tensor g(out[0].shape());
  g.fill(1.f);
  std::vector<Tensor> grads;
  OpCall call{o.the_op(), o.graph, true, 7};
  Status const s = be.backward_input(call, saved, {g}, {true}, grads);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return grads.empty() || !grads[0].defined() ? std::vector<float>{} : values(grads[0]);
}

TEST(ReduceOps, MaxAndMinSendTheGradientToTheFirstExtremumOnTies) {
  Tensor x = Tensor::from_floats({2, 3}, {1.f, 5.f, 5.f, -2.f, -2.f, 0.f});
  EXPECT_EQ(ones_gradient(make_op("ReduceMax", ReduceAttrs{{1}, false}, {{"x", x, kIn}})),
            (std::vector<float>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(ones_gradient(make_op("ReduceMin", ReduceAttrs{{1}, false}, {{"x", x, kIn}})),
            (std::vector<float>{1, 0, 0, 1, 0, 0}));
}

TEST(ReduceOps, ProdGradientIsExactAtZeros) {
  Tensor x = Tensor::from_floats({3, 3}, {0.f, 2.f, 3.f, 0.f, 0.f, 4.f, 1.5f, 2.f, -1.f});
  EXPECT_EQ(ones_gradient(make_op("ReduceProd", ReduceAttrs{{1}, false}, {{"x", x, kIn}})),
            (std::vector<float>{6, 0, 0, 0, 0, 0, -2, -1.5f, 3}));
  // Prod is linear in each element, so finite differences hold at a zero too.
  check_grads(make_op("ReduceProd", ReduceAttrs{{1}, false}, {{"x", x, kIn}}));
}

TEST(ReduceOps, NoopWithEmptyAxesIsTheIdentity) {
  CpuBackend be;
  Tensor const x = random_tensor({2, 3}, 31);
  for (std::string const& type : kReductions) {
    OneOp o = make_op(type, ReduceAttrs{{}, true, true}, {{"x", x, kIn}});
    Tensor y = run_forward(be, o)[0];
    EXPECT_EQ(y.shape(), x.shape()) << type;
    EXPECT_EQ(values(y), values(x)) << type;
    EXPECT_EQ(ones_gradient(o), std::vector<float>(6, 1.f)) << type;
  }
  check_grads(make_op("ReduceSum", ReduceAttrs{{}, true, true}, {{"x", random_tensor({2, 3}, 32), kIn}}));
}

// ---- LogSoftmax, Hardmax ----

TEST(LogSoftmax, MatchesPlainLoopsOnEveryAxis) {
  CpuBackend be;
  Tensor const x = random_tensor({2, 3, 4}, 41, 0.1f, 3.f);
  auto at = [&](int64_t i, int64_t j, int64_t k) { return static_cast<double>(x.data<float>()[(i * 3 + j) * 4 + k]); };
  for (int64_t axis = 0; axis < 3; ++axis) {
    Tensor y = run_forward(be, make_op("LogSoftmax", graph::SoftmaxAttrs{axis}, {{"x", x, kIn}}))[0];
    int64_t const dim = x.shape()[axis];
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          double sum = 0;
          for (int64_t t = 0; t < dim; ++t)
            sum += std::exp(axis == 0 ? at(t, j, k) : axis == 1 ? at(i, t, k) : at(i, j, t));
          EXPECT_NEAR(y.data<float>()[(i * 3 + j) * 4 + k], at(i, j, k) - std::log(sum), 1e-5) << "axis " << axis;
        }
  }
}

TEST(LogSoftmax, IsStableForLargeInputs) {
  CpuBackend be;
  Tensor x = Tensor::from_floats({1, 3}, {10000.f, 10001.f, 10002.f});
  Tensor y = run_forward(be, make_op("LogSoftmax", graph::SoftmaxAttrs{1}, {{"x", x, kIn}}))[0];
  double const lse = std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  std::vector<double> const want = {-2 - lse, -1 - lse, -lse};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(y.data<float>()[i], want[i], 1e-4);
}

TEST(LogSoftmax, GradientsMatchFiniteDifferences) {
  for (int64_t axis : {0, 1, 2})
    check_grads(make_op("LogSoftmax", graph::SoftmaxAttrs{axis},
                        {{"x", random_tensor({2, 3, 4}, 50 + static_cast<uint32_t>(axis)), kIn}}));
}

TEST(Hardmax, OneAtTheFirstMaximumAndNoGradient) {
  CpuBackend be;
  Tensor x = Tensor::from_floats({2, 3}, {1.f, 3.f, 3.f, -1.f, -2.f, -3.f});
  OneOp o = make_op("Hardmax", graph::SoftmaxAttrs{1}, {{"x", x, kIn}});
  EXPECT_EQ(values(run_forward(be, o)[0]), (std::vector<float>{0, 1, 0, 1, 0, 0}));
  OneOp cols = make_op("Hardmax", graph::SoftmaxAttrs{0}, {{"x", x, kIn}});
  EXPECT_EQ(values(run_forward(be, cols)[0]), (std::vector<float>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(ones_gradient(o), std::vector<float>(6, 0.f));
}

// ---- CumSum ----

TEST(CumSum, ExclusiveAndReverseByHand) {
  CpuBackend be;
  Tensor x = Tensor::from_floats({5}, {1, 2, 3, 4, 5});
  auto run = [&](bool exclusive, bool reverse) {
    return values(run_forward(be, make_op("CumSum", graph::CumSumAttrs{0, exclusive, reverse}, {{"x", x, kIn}}))[0]);
  };
  EXPECT_EQ(run(false, false), (std::vector<float>{1, 3, 6, 10, 15}));
  EXPECT_EQ(run(true, false), (std::vector<float>{0, 1, 3, 6, 10}));
  EXPECT_EQ(run(false, true), (std::vector<float>{15, 14, 12, 9, 5}));
  EXPECT_EQ(run(true, true), (std::vector<float>{14, 12, 9, 5, 0}));
  Tensor m = Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values(run_forward(be, make_op("CumSum", graph::CumSumAttrs{0}, {{"x", m, kIn}}))[0]),
            (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(values(run_forward(be, make_op("CumSum", graph::CumSumAttrs{1}, {{"x", m, kIn}}))[0]),
            (std::vector<float>{1, 3, 6, 4, 9, 15}));
}

// HF RoBERTa's position ids: cumsum(mask) · mask + padding_idx over int32/int64 ids, exact; a
// bool input has no kernel.
TEST(CumSum, IntegersSumExactlyAndBytesAreRefused) {
  CpuBackend be;
  Tensor m = int_tensor({2, 4}, {1, 1, 1, 0, 1, 0, 1, 1});
  OneOp o = make_op("CumSum", graph::CumSumAttrs{1}, {{"m", m, kIn}}, 1, {DType::kInt64});
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
  Tensor y = run_forward(be, o).at(0);
  ASSERT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 8),
            (std::vector<int64_t>{1, 2, 3, 3, 1, 1, 2, 3}));
  Tensor big = int_tensor({2}, {std::numeric_limits<int64_t>::max(), 1});
  Tensor w = run_forward(be, make_op("CumSum", graph::CumSumAttrs{0}, {{"b", big, kIn}}, 1, {DType::kInt64})).at(0);
  EXPECT_EQ(w.data<int64_t>()[1], std::numeric_limits<int64_t>::lowest()) << "wraps, as two's complement";
  OneOp bytes = make_op("CumSum", graph::CumSumAttrs{0}, {{"b", Tensor({3}, DType::kUInt8), kIn}});
  Status const s = be.supports(bytes.the_op(), bytes.graph);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("uint8"), std::string::npos) << s.message();
}

TEST(CumSum, GradientsMatchFiniteDifferences) {
  uint32_t seed = 60;
  for (int64_t axis : {0, 1, 2})
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true})
        check_grads(make_op("CumSum", graph::CumSumAttrs{axis, exclusive, reverse},
                            {{"x", random_tensor({2, 3, 4}, seed++), kIn}}));
}

// ---- ArgMax, ArgMin ----

std::vector<int64_t> indices(Tensor const& t) {
  EXPECT_EQ(t.dtype(), DType::kInt64);
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

TEST(ArgReduce, KeepdimsAxesAndTies) {
  CpuBackend be;
  Tensor x = Tensor::from_floats({2, 3}, {2.f, 7.f, 7.f, -1.f, -1.f, -5.f});
  auto run = [&](std::string const& type, graph::ArgReduceAttrs a) {
    Tensor y = run_forward(be, make_op(type, a, {{"x", x, kIn}}))[0];
    return std::make_pair(y.shape(), indices(y));
  };
  EXPECT_EQ(run("ArgMax", {1, true, false}), std::make_pair(std::vector<int64_t>{2, 1}, std::vector<int64_t>{1, 0}));
  EXPECT_EQ(run("ArgMax", {1, false, true}), std::make_pair(std::vector<int64_t>{2}, std::vector<int64_t>{2, 1}));
  EXPECT_EQ(run("ArgMin", {1, false, false}), std::make_pair(std::vector<int64_t>{2}, std::vector<int64_t>{0, 2}));
  EXPECT_EQ(run("ArgMin", {0, true, false}), std::make_pair(std::vector<int64_t>{1, 3}, std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(run("ArgMax", {0, false, false}), std::make_pair(std::vector<int64_t>{3}, std::vector<int64_t>{0, 0, 0}));
}

// Integers run (HF GPT-2's last non-padding position: ArgMax over position · mask); bytes do not.
TEST(ArgReduce, RunsIntegersAndRefusesBytesAndAnEmptyAxis) {
  CpuBackend be;
  OneOp ints = make_op("ArgMax", graph::ArgReduceAttrs{0, false}, {{"x", int_tensor({4}, {1, 7, 3, 7}), kIn}});
  ASSERT_TRUE(be.supports(ints.the_op(), ints.graph).is_ok());
  std::vector<Tensor> got = run_forward(be, ints);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data<int64_t>()[0], 1);  // the first of the two maxima
  OneOp bytes = make_op("ArgMax", graph::ArgReduceAttrs{0}, {{"x", Tensor({3}, DType::kUInt8), kIn}});
  Status const s = be.supports(bytes.the_op(), bytes.graph);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("uint8"), std::string::npos) << s.message();
  OneOp empty = make_op("ArgMax", graph::ArgReduceAttrs{1}, {{"x", Tensor({2, 0}), kIn}});
  std::vector<Tensor> out;
  OpCall call{empty.the_op(), empty.graph, false, 0};
  Status const e = be.forward(call, empty.inputs, out, nullptr);
  EXPECT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("size 0"), std::string::npos) << e.message();
}

// ---- TopK ----

// TopK of x (float32) along `axis` by brute force: each line's (value, position) pairs stably
// sorted, NaN above every number, the first k kept.
std::pair<std::vector<float>, std::vector<int64_t>> topk_reference(Tensor const& x, int64_t axis, int64_t k,
                                                                   bool largest) {
  auto const& d = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= d[i];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < d.size(); ++i) inner *= d[i];
  int64_t const dim = d[axis];
  std::vector<float> v(static_cast<std::size_t>(outer * k * inner));
  std::vector<int64_t> ix(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      std::vector<std::pair<float, int64_t>> line;
      for (int64_t t = 0; t < dim; ++t) line.push_back({x.data<float>()[(o * dim + t) * inner + j], t});
      auto key = [&](float a) { return std::isnan(a) ? (largest ? -kInf : kInf) : (largest ? -a : a); };
      std::stable_sort(line.begin(), line.end(),
                       [&](auto const& a, auto const& b) { return key(a.first) < key(b.first); });
      for (int64_t t = 0; t < k; ++t) {
        std::size_t const e = static_cast<std::size_t>((o * k + t) * inner + j);
        v[e] = line[static_cast<std::size_t>(t)].first;
        ix[e] = line[static_cast<std::size_t>(t)].second;
      }
    }
  return {v, ix};
}

OneOp topk_op(Tensor x, int64_t axis, int64_t k, bool largest) {
  return make_op("TopK", graph::TopKAttrs{axis, k, largest}, {{"x", std::move(x), kIn}}, 2,
                 {DType::kFloat32, DType::kInt64});
}

TEST(TopK, OnnxExamplesTiesAndEdgeCounts) {
  CpuBackend be;
  Tensor const x = Tensor::from_floats({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8});
  auto run = [&](Tensor const& in, int64_t axis, int64_t k, bool largest) {
    std::vector<Tensor> y = run_forward(be, topk_op(in, axis, k, largest));
    EXPECT_EQ(y.size(), 2u);
    return std::make_pair(values(y[0]), indices(y[1]));
  };
  auto largest = run(x, 1, 3, true);
  EXPECT_EQ(largest.first, (std::vector<float>{3, 2, 1, 7, 6, 5, 11, 10, 9}));
  EXPECT_EQ(largest.second, (std::vector<int64_t>{3, 2, 1, 3, 2, 1, 0, 1, 2}));
  auto smallest = run(x, -1, 3, false);  // ONNX's test_top_k_smallest
  EXPECT_EQ(smallest.first, (std::vector<float>{0, 1, 2, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(smallest.second, (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 2, 1}));
  // Along axis 0 (lines `inner` apart); ties keep the lower index first in both orders.
  Tensor const t = Tensor::from_floats({4, 2}, {5, 1, 7, 1, 5, 0, 7, 2});
  EXPECT_EQ(run(t, 0, 2, true).second, (std::vector<int64_t>{1, 3, 3, 0}));
  EXPECT_EQ(run(t, 0, 3, false).second, (std::vector<int64_t>{0, 2, 2, 0, 1, 1}));
  // k = 0 gives empty outputs; k = dim sorts the whole line.
  auto none = run_forward(be, topk_op(x, 1, 0, true));
  EXPECT_EQ(none[0].shape(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(run(x, 1, 4, true).second, (std::vector<int64_t>{3, 2, 1, 0, 3, 2, 1, 0, 0, 1, 2, 3}));
  // NaN sorts above every number (torch's order).
  float const nan = std::numeric_limits<float>::quiet_NaN();
  Tensor const withnan = Tensor::from_floats({1, 4}, {1, nan, 3, 2});
  EXPECT_EQ(run(withnan, 1, 2, true).second, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(run(withnan, 1, 3, false).second, (std::vector<int64_t>{0, 3, 2}));
}

TEST(TopK, MatchesASortOnRandomLinesWithTies) {
  CpuBackend be;
  uint32_t seed = 40;
  for (std::vector<int64_t> const& shape : {std::vector<int64_t>{2, 9, 3}, std::vector<int64_t>{5, 17}})
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis)
      for (bool largest : {true, false})
        for (int64_t k : {int64_t{1}, shape[axis] / 2, shape[axis]}) {
          SCOPED_TRACE(::testing::PrintToString(shape) + " axis " + std::to_string(axis) + " k " + std::to_string(k) +
                       (largest ? " largest" : " smallest"));
          Tensor x = random_tensor(shape, seed++, 0.1f, 1.f);
          for (int64_t i = 0; i < x.numel(); i += 3) x.data<float>()[i] = 0.5f;  // ties
          auto const [v, ix] = topk_reference(x, axis, k, largest);
          std::vector<Tensor> y = run_forward(be, topk_op(x, axis, k, largest));
          EXPECT_EQ(values(y[0]), v);
          EXPECT_EQ(indices(y[1]), ix);
        }
}

TEST(TopK, IntegersRunAndTheGradientGoesBackToThePicks) {
  CpuBackend be;
  OneOp ints = make_op("TopK", graph::TopKAttrs{1, 2, true}, {{"x", int_tensor({2, 3}, {4, -1, 9, 0, 0, -7}), kIn}}, 2,
                       {DType::kInt64, DType::kInt64});
  ASSERT_TRUE(be.supports(ints.the_op(), ints.graph).is_ok());
  std::vector<Tensor> y = run_forward(be, ints);
  EXPECT_EQ(indices(y[0]), (std::vector<int64_t>{9, 4, 0, 0}));
  EXPECT_EQ(indices(y[1]), (std::vector<int64_t>{2, 0, 0, 1}));
  OneOp bytes = make_op("TopK", graph::TopKAttrs{0, 1}, {{"x", Tensor({3}, DType::kUInt8), kIn}}, 2,
                        {DType::kUInt8, DType::kInt64});
  EXPECT_FALSE(be.supports(bytes.the_op(), bytes.graph).is_ok());
  // An exact gradient: dy at the picked positions, 0 elsewhere; a k past the axis is refused.
  Tensor const x = Tensor::from_floats({2, 3}, {0.3f, 0.9f, 0.1f, 0.2f, 0.8f, 0.5f});
  OneOp o = topk_op(x, 1, 2, true);
  Saved saved;
  run_forward(be, o, true, 7, &saved);
  OpCall call{o.the_op(), o.graph, true, 7};
  std::vector<Tensor> grads;
  ASSERT_TRUE(be.backward_input(call, saved, {Tensor::from_floats({2, 2}, {1, 2, 3, 4}), Tensor()}, {true}, grads));
  EXPECT_EQ(values(grads.at(0)), (std::vector<float>{2, 1, 0, 0, 3, 4}));
  OneOp too_many = topk_op(x, 1, 4, true);
  std::vector<Tensor> out;
  Status const e = be.forward(OpCall{too_many.the_op(), too_many.graph, false, 0}, too_many.inputs, out, nullptr);
  EXPECT_FALSE(e.is_ok());
  EXPECT_NE(e.message().find("k = 4 is outside [0, 3]"), std::string::npos) << e.message();
}

TEST(TopK, GradientsByFiniteDifferences) {
  for (int64_t axis : {0, 1, 2})
    for (bool largest : {true, false}) {
      OneOp o = topk_op(distinct_tensor({3, 4, 5}, 60 + static_cast<uint32_t>(axis)), axis, 2, largest);
      check_grads(o);
    }
}

// ---- import ----

graph::Op const& op_named(graph::OpGraph const& g, std::string const& type) {
  for (auto const& op : g.ops())
    if (op.type == type) return op;
  ADD_FAILURE() << "no op of type " << type;
  static graph::Op const none;
  return none;
}

std::vector<int64_t> out_dims(graph::OpGraph const& g, std::string const& type) {
  return g.tensor(op_named(g, type).outputs.at(0)).shape.dims;
}

TEST(ReduceImport, AttributesAxesInputsAndShapes) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,5,8] x) => (float[N,5] a, float[N,1,1] b, float[N,5,8] c, float[N,5,8] d,
                                             float[N,5,8] e, int64[N,8] f, float[1,1,1] h, float[N,5,8] k) {
      a = ReduceMax<axes = [-1], keepdims = 0>(x)
      b = ReduceL2<axes = [2, 1]>(x)
      none = Constant<value = int64[0] {}>()
      c = ReduceSum<noop_with_empty_axes = 1>(x, none)
      d = LogSoftmax<axis = 1>(x)
      ax = Constant<value = int64 {-1}>()
      e = CumSum<exclusive = 1, reverse = 1>(x, ax)
      f = ArgMax<axis = 1, keepdims = 0, select_last_index = 1>(x)
      h = ReduceLogSumExp(x)
      k = Hardmax(x)
    })");
  EXPECT_EQ(out_dims(g, "ReduceMax"), (std::vector<int64_t>{N, 5}));
  EXPECT_EQ(std::get<ReduceAttrs>(op_named(g, "ReduceMax").typed).axes, (std::vector<int64_t>{2}));
  EXPECT_EQ(std::get<ReduceAttrs>(op_named(g, "ReduceL2").typed).axes, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(out_dims(g, "ReduceL2"), (std::vector<int64_t>{N, 1, 1}));
  auto const& noop = std::get<ReduceAttrs>(op_named(g, "ReduceSum").typed);
  EXPECT_TRUE(noop.noop);
  EXPECT_EQ(op_named(g, "ReduceSum").inputs.size(), 1u);
  EXPECT_EQ(out_dims(g, "ReduceSum"), (std::vector<int64_t>{N, 5, 8}));
  EXPECT_EQ(std::get<graph::SoftmaxAttrs>(op_named(g, "LogSoftmax").typed).axis, 1);
  auto const& cs = std::get<graph::CumSumAttrs>(op_named(g, "CumSum").typed);
  EXPECT_EQ(cs.axis, 2);
  EXPECT_TRUE(cs.exclusive);
  EXPECT_TRUE(cs.reverse);
  EXPECT_EQ(op_named(g, "CumSum").inputs.size(), 1u);
  auto const& am = std::get<graph::ArgReduceAttrs>(op_named(g, "ArgMax").typed);
  EXPECT_EQ(am.axis, 1);
  EXPECT_FALSE(am.keepdims);
  EXPECT_TRUE(am.select_last_index);
  EXPECT_EQ(g.tensor(op_named(g, "ArgMax").outputs[0]).dtype, DType::kInt64);
  EXPECT_EQ(out_dims(g, "ArgMax"), (std::vector<int64_t>{N, 8}));
  EXPECT_EQ(std::get<ReduceAttrs>(op_named(g, "ReduceLogSumExp").typed).axes, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(std::get<graph::SoftmaxAttrs>(op_named(g, "Hardmax").typed).axis, 2);
  CpuBackend be;
  for (auto const& op : g.ops()) EXPECT_TRUE(be.supports(op, g).is_ok()) << be.supports(op, g).to_string();
}

// ONNX's own models feed an empty axes tensor as a graph input: its value is known from its shape.
TEST(ReduceImport, EmptyAxesInputFedAtRunTime) {
  graph::ImportOptions opts;
  opts.first_dim_is_batch = false;
  auto g = graph::load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[3,2] x, int64[0] axes) => (float[1,1] all, float[3,2] same) {
      all = ReduceSum(x, axes)
      same = ReduceSum<noop_with_empty_axes = 1>(x, axes)
    })",
                                 opts);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  ASSERT_EQ(g->ops().size(), 2u);
  EXPECT_EQ(std::get<ReduceAttrs>(g->ops()[0].typed).axes, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(std::get<ReduceAttrs>(g->ops()[0].typed).noop);
  EXPECT_TRUE(std::get<ReduceAttrs>(g->ops()[1].typed).noop);
  EXPECT_EQ(g->tensor(g->ops()[1].outputs[0]).shape.dims, (std::vector<int64_t>{3, 2}));
}

std::string import_error(std::string const& text) {
  auto g = graph::load_onnx_text(text);
  EXPECT_FALSE(g.is_ok()) << text;
  return g.is_ok() ? std::string() : g.status().message();
}

TEST(ReduceImport, ClearErrors) {
  std::string e = import_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x, int32 axis) => (float[N,4] y) { y = CumSum(x, axis) })");
  EXPECT_NE(e.find("axis ('axis') is computed at run time"), std::string::npos) << e;
  e = import_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4,3] x) => (float[N] y) { y = ReduceMin<axes = [1, -1, 2], keepdims = 0>(x) })");
  EXPECT_NE(e.find("axis 2 twice"), std::string::npos) << e;
  e = import_error(R"(<ir_version: 8, opset_import: ["" : 11]>
    net (float[N,4,3] x) => (float[N,4,3] y) { y = LogSoftmax<axis = 1>(x) })");
  EXPECT_NE(e.find("LogSoftmax before opset 13"), std::string::npos) << e;
}

// Reductions of constants fold at import (BEiT's relative position index sums coordinates before
// a ScatterND): a Reshape whose shape comes out of one imports only if it folded.
TEST(ReduceImport, ReductionsOfConstantsFold) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,6] x) => (float[N,2,3] a, float[N,2,3] b, float[N,2,3] c, float[N,2,3] d, float[N,6] e) {
      m = Constant<value = int64[2,3] {0, 2, 1, 0, 1, 3}>()
      sa = ReduceMax<axes = [0], keepdims = 0>(m)
      a = Reshape(x, sa)
      ones = Constant<value = int64[3,2] {0, 0, 1, 1, 2, 1}>()
      ax = Constant<value = int64[1] {-1}>()
      sb = ReduceSum<keepdims = 0>(ones, ax)
      b = Reshape(x, sb)
      n = Constant<value = int64[3,1] {0, 2, 3}>()
      sc = ReduceMin<axes = [1], keepdims = 0>(n)
      c = Reshape(x, sc)
      p = Constant<value = int64[2,3] {0, 1, 3, 1, 2, 1}>()
      sd = ReduceProd<axes = [0], keepdims = 0>(p)
      d = Reshape(x, sd)
      f = Constant<value = float[2,2] {1.0, 2.0, 3.5, 4.0}>()
      mean = ReduceMean<keepdims = 1>(f)
      e = Add(x, mean)
    })");
  for (auto const& op : g.ops()) EXPECT_EQ(op.type.rfind("Reduce", 0), std::string::npos) << op.type << " left to run";
  for (char const* t : {"a", "b", "c", "d"}) {
    bool found = false;
    for (auto const& op : g.ops())
      if (g.tensor(op.outputs[0]).name == t) {
        found = true;
        EXPECT_EQ(g.tensor(op.outputs[0]).shape.dims, (std::vector<int64_t>{N, 2, 3})) << t;
      }
    EXPECT_TRUE(found) << t;
  }
  CpuBackend be;
  Tensor const x = Tensor::from_floats({1, 6}, {0, 1, 2, 3, 4, 5});
  for (auto const& op : g.ops()) {
    if (op.type != "Add") continue;
    std::vector<Tensor> ins;
    for (graph::TensorId t : op.inputs) ins.push_back(g.tensor(t).data ? Tensor::from_data(*g.tensor(t).data) : x);
    std::vector<Tensor> out;
    ASSERT_TRUE(be.forward(OpCall{op, g, false, 0}, ins, out, nullptr).is_ok());
    EXPECT_EQ(values(out[0]), (std::vector<float>{2.625f, 3.625f, 4.625f, 5.625f, 6.625f, 7.625f}));
  }
  std::string const e = import_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,6] x) => (float[N,6] y) {
      big = Constant<value = int64[3] {4294967296, 4294967296, 4}>()
      p = ReduceProd<keepdims = 0>(big)
      s = Reshape(x, p)
      y = Identity(x)
    })");
  EXPECT_NE(e.find("integer overflow"), std::string::npos) << e;
}

// K from a constant input (opset 10 on) or the attribute (before); the batch axis, a K computed at
// run time and a K past the axis are refused by name.
TEST(ReduceImport, TopKReadsKAndRefusesWhatItCannotPlan) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,5,8] x) => (float[N,5,3] v, int64[N,5,3] i) {
      k = Constant<value = int64[1] {3}>()
      v, i = TopK<largest = 0>(x, k)
    })");
  auto const& a = std::get<graph::TopKAttrs>(op_named(g, "TopK").typed);
  EXPECT_EQ(a.axis, 2);
  EXPECT_EQ(a.k, 3);
  EXPECT_FALSE(a.largest);
  EXPECT_EQ(op_named(g, "TopK").inputs.size(), 1u);
  EXPECT_EQ(g.tensor(op_named(g, "TopK").outputs[1]).dtype, DType::kInt64);
  EXPECT_EQ(g.tensor(op_named(g, "TopK").outputs[1]).shape.dims, (std::vector<int64_t>{N, 5, 3}));
  auto old = must_load(R"(<ir_version: 4, opset_import: ["" : 9]>
    net (float[N,5,8] x) => (float[N,2,8] v, int64[N,2,8] i) { v, i = TopK<axis = 1, k = 2>(x) })");
  EXPECT_EQ(std::get<graph::TopKAttrs>(op_named(old, "TopK").typed).k, 2);
  std::string e = import_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,5] x) => (float[2,5] v, int64[2,5] i) {
      k = Constant<value = int64[1] {2}>()
      v, i = TopK<axis = 0>(x, k)
    })");
  EXPECT_NE(e.find("TopK along the batch dimension"), std::string::npos) << e;
  e = import_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,5] x, int64[1] k) => (float[N,2] v, int64[N,2] i) { v, i = TopK(x, k) })");
  EXPECT_NE(e.find("computed at run time"), std::string::npos) << e;
  e = import_error(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,5] x) => (float[N,6] v, int64[N,6] i) {
      k = Constant<value = int64[1] {6}>()
      v, i = TopK(x, k)
    })");
  EXPECT_NE(e.find("k = 6 is outside [0, 5]"), std::string::npos) << e;
}

// A mixture-of-experts router: the top-2 gate values train, their indices pick the experts' rows.
TEST(ReduceImport, TopKValuesTrainAndItsIndicesGetNoGradient) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N] loss) <float[4,3] w = {1,2,3,4,5,6,7,8,9,10,11,12}> {
      s = MatMul(x, w)
      k = Constant<value = int64[1] {2}>()
      v, i = TopK<axis = 1>(s, k)
      picked = GatherElements<axis = 1>(s, i)
      both = Mul(v, picked)
      ax = Constant<value = int64[1] {1}>()
      loss = ReduceSum<keepdims = 0>(both, ax)
    })");
  auto plan = plan_autodiff(g);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->runs_backward[op_named(g, "TopK").id]);
  EXPECT_FALSE(plan->requires_grad[op_named(g, "TopK").outputs[1]]);
  EXPECT_EQ(plan->weights.size(), 1u);
}

TEST(ReduceImport, ArgMaxNeedsNoBackwardInATrainedModel) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (int64[N] i, float[N] m) <float[4,3] w = {1,2,3,4,5,6,7,8,9,10,11,12}> {
      y = MatMul(x, w)
      i = ArgMax<axis = 1, keepdims = 0>(y)
      m = ReduceMax<axes = [1], keepdims = 0>(y)
    })");
  auto plan = plan_autodiff(g);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_FALSE(plan->runs_backward[op_named(g, "ArgMax").id]);
  EXPECT_TRUE(plan->runs_backward[op_named(g, "ReduceMax").id]);
  EXPECT_EQ(plan->weights.size(), 1u);
}

}  // namespace
}  // namespace gp::exec::testing
