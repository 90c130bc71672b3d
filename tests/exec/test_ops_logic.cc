// Comparisons, boolean ops, bitwise ops, Where and Mod on the CPU backend: forward against plain reference
// loops with numpy broadcasting, finite-difference gradients of Where and Mod, dtype errors, and a
// model whose bool mask feeds Where (Where(Less(h, 0), h, 0 * h)) training through the executor.
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "exec/autodiff.h"
#include "exec/stage_executor.h"
#include "graph/onnx_builder.h"
#include "graph/ops/common.h"
#include "tests/exec/op_harness.h"

namespace gp::exec {
namespace {

using testing::In;
using testing::make_op;
using testing::random_tensor;

// Element of `in` that numpy broadcasting reads at element k of `out`.
int64_t source_index(int64_t k, std::vector<int64_t> const& out, std::vector<int64_t> const& in) {
  int64_t idx = 0, stride = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::size_t const o = out.size() - 1 - i;
    int64_t const coord = k % out[o];
    k /= out[o];
    if (i < in.size()) {
      int64_t const dim = in[in.size() - 1 - i];
      if (dim != 1) idx += coord * stride;
      stride *= dim;
    }
  }
  return idx;
}

// Small values with many ties, as `dt`.
Tensor small_values(std::vector<int64_t> shape, DType dt, uint32_t seed) {
  Tensor t(std::move(shape), dt);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int const v = static_cast<int>(rng() % 5) - 2;
    if (dt == DType::kFloat32) t.data<float>()[i] = 0.5f * static_cast<float>(v);
    if (dt == DType::kInt64) t.data<int64_t>()[i] = v;
    if (dt == DType::kInt32) t.data<int32_t>()[i] = v;
    if (dt == DType::kInt8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
    if (dt == DType::kBool) t.data<uint8_t>()[i] = static_cast<uint8_t>(v > 0);
  }
  return t;
}

double value_at(Tensor const& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[i];
    case DType::kInt64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kInt32:
      return t.data<int32_t>()[i];
    case DType::kInt8:
      return t.data<int8_t>()[i];
    default:
      return t.data<uint8_t>()[i];
  }
}

struct Shapes {
  std::vector<int64_t> a, b, out;
};
std::vector<Shapes> const kBinaryShapes = {
    {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}, {2, 3, 4}}, {{4}, {2, 3, 1}, {2, 3, 4}}, {{}, {3}, {3}}};

TEST(LogicOps, ComparisonsMatchReference) {
  CpuBackend be;
  std::map<std::string, std::function<bool(double, double)>> const ref = {
      {"Equal", std::equal_to<double>()},
      {"Less", std::less<double>()},
      {"Greater", std::greater<double>()},
      {"LessOrEqual", std::less_equal<double>()},
      {"GreaterOrEqual", std::greater_equal<double>()}};
  for (auto const& [type, cmp] : ref)
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kInt8})
      for (Shapes const& s : kBinaryShapes) {
        SCOPED_TRACE(type + " " + graph::dtype_name(dt) + " " + graph::ops::dims_string(s.a) + " vs " +
                     graph::ops::dims_string(s.b));
        Tensor const a = small_values(s.a, dt, 1), b = small_values(s.b, dt, 2);
        auto o = make_op(type, {}, {{"a", a}, {"b", b}});
        ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
        Tensor const y = testing::run_forward(be, o).at(0);
        ASSERT_EQ(y.dtype(), DType::kBool);
        ASSERT_EQ(y.shape(), s.out);
        int trues = 0;
        for (int64_t k = 0; k < y.numel(); ++k) {
          bool const want = cmp(value_at(a, source_index(k, s.out, s.a)), value_at(b, source_index(k, s.out, s.b)));
          EXPECT_EQ(y.data<uint8_t>()[k], want ? 1 : 0) << "element " << k;
          trues += want;
        }
        if (s.out.size() == 3) {  // the data exercises both outcomes
          EXPECT_GT(trues, 0);
          EXPECT_LT(trues, y.numel());
        }
      }
}

TEST(LogicOps, BooleanOpsMatchReference) {
  CpuBackend be;
  std::map<std::string, std::function<bool(bool, bool)>> const ref = {
      {"And", std::logical_and<bool>()}, {"Or", std::logical_or<bool>()}, {"Xor", std::not_equal_to<bool>()}};
  for (auto const& [type, op] : ref)
    for (Shapes const& s : kBinaryShapes) {
      SCOPED_TRACE(type + " " + graph::ops::dims_string(s.a) + " vs " + graph::ops::dims_string(s.b));
      Tensor const a = small_values(s.a, DType::kBool, 3), b = small_values(s.b, DType::kBool, 4);
      auto o = make_op(type, {}, {{"a", a}, {"b", b}});
      ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
      Tensor const y = testing::run_forward(be, o).at(0);
      ASSERT_EQ(y.shape(), s.out);
      for (int64_t k = 0; k < y.numel(); ++k) {
        bool const want = op(a.data<uint8_t>()[source_index(k, s.out, s.a)] != 0,
                             b.data<uint8_t>()[source_index(k, s.out, s.b)] != 0);
        EXPECT_EQ(y.data<uint8_t>()[k], want ? 1 : 0) << "element " << k;
      }
    }
  Tensor const a = small_values({3, 4}, DType::kBool, 5);
  auto o = make_op("Not", {}, {{"a", a}});
  Tensor const y = testing::run_forward(be, o).at(0);
  for (int64_t k = 0; k < y.numel(); ++k) EXPECT_EQ(y.data<uint8_t>()[k], a.data<uint8_t>()[k] ? 0 : 1);
}

TEST(LogicOps, WhereMatchesReference) {
  CpuBackend be;
  std::vector<std::vector<int64_t>> const shapes[] = {
      {{2, 3}, {2, 3}, {2, 3}, {2, 3}}, {{3}, {2, 1}, {}, {2, 3}}, {{2, 1, 4}, {3, 1}, {1, 4}, {2, 3, 4}}};
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32})
    for (auto const& s : shapes) {
      SCOPED_TRACE(std::string(graph::dtype_name(dt)) + " cond " + graph::ops::dims_string(s[0]));
      Tensor const c = small_values(s[0], DType::kBool, 6), x = small_values(s[1], dt, 7),
                   y = small_values(s[2], dt, 8);
      auto o = make_op("Where", {}, {{"c", c}, {"x", x}, {"y", y}});
      ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
      Tensor const out = testing::run_forward(be, o).at(0);
      ASSERT_EQ(out.dtype(), dt);
      ASSERT_EQ(out.shape(), s[3]);
      for (int64_t k = 0; k < out.numel(); ++k) {
        double const want = c.data<uint8_t>()[source_index(k, s[3], s[0])] ? value_at(x, source_index(k, s[3], s[1]))
                                                                           : value_at(y, source_index(k, s[3], s[2]));
        EXPECT_EQ(value_at(out, k), want) << "element " << k;
      }
    }
}

TEST(LogicOps, WhereGradientsMatchFiniteDifferences) {
  CpuBackend be;
  std::vector<std::vector<int64_t>> const shapes[] = {{{2, 3}, {2, 3}, {2, 3}}, {{2, 1, 4}, {3, 1}, {1, 4}}};
  for (auto const& s : shapes) {
    SCOPED_TRACE(graph::ops::dims_string(s[1]) + " and " + graph::ops::dims_string(s[2]));
    auto o = make_op(
        "Where", {},
        {{"c", small_values(s[0], DType::kBool, 6)}, {"x", random_tensor(s[1], 1)}, {"y", random_tensor(s[2], 2)}});
    testing::expect_grads_ok(testing::grad_check(be, o));
  }
}

// ONNX's test_mod_mixed_sign_* values: np.mod (fmod = 0, the sign of b) and np.fmod (the sign of a).
TEST(LogicOps, ModMatchesReference) {
  CpuBackend be;
  std::vector<int64_t> const a = {-4, 7, 5, 4, -7, 8}, b = {2, -3, 8, -2, 3, 5};
  std::vector<int64_t> const floor_mod = {0, -2, 5, 0, 2, 3}, trunc_mod = {0, 1, 5, 0, -1, 3};
  for (DType dt : {DType::kInt64, DType::kInt32, DType::kInt8})
    for (bool fmod : {false, true}) {
      SCOPED_TRACE(std::string(graph::dtype_name(dt)) + (fmod ? " fmod" : " mod"));
      Tensor ta({6}, dt), tb({6}, dt);
      for (int i = 0; i < 6; ++i) {
        if (dt == DType::kInt64) ta.data<int64_t>()[i] = a[i], tb.data<int64_t>()[i] = b[i];
        if (dt == DType::kInt32) ta.data<int32_t>()[i] = static_cast<int32_t>(a[i]), tb.data<int32_t>()[i] = b[i];
        if (dt == DType::kInt8) ta.data<int8_t>()[i] = static_cast<int8_t>(a[i]), tb.data<int8_t>()[i] = b[i];
      }
      auto o = make_op("Mod", graph::ModAttrs{fmod}, {{"a", ta}, {"b", tb}});
      ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
      Tensor const y = testing::run_forward(be, o).at(0);
      ASSERT_EQ(y.dtype(), dt);
      for (int i = 0; i < 6; ++i) EXPECT_EQ(value_at(y, i), (fmod ? trunc_mod : floor_mod)[i]) << "element " << i;
    }
  // float32 with broadcasting: a [2, 3] against b [3].
  Tensor const fa = random_tensor({2, 3}, 3, 0.5f, 9.f), fb = random_tensor({3}, 4, 0.5f, 3.f);
  for (bool fmod : {false, true}) {
    auto o = make_op("Mod", graph::ModAttrs{fmod}, {{"a", fa}, {"b", fb}});
    Tensor const y = testing::run_forward(be, o).at(0);
    for (int64_t k = 0; k < 6; ++k) {
      double const x = fa.data<float>()[k], m = fb.data<float>()[k % 3];
      double const want = x - m * (fmod ? std::trunc(x / m) : std::floor(x / m));
      EXPECT_NEAR(y.data<float>()[k], want, 1e-5) << (fmod ? "fmod " : "mod ") << k;
    }
  }
  Tensor zero = testing::int_tensor({2}, {3, 0});
  auto o = make_op("Mod", graph::ModAttrs{}, {{"a", testing::int_tensor({2}, {5, 5})}, {"b", zero}});
  std::vector<Tensor> out;
  Status const s = be.forward(OpCall{o.the_op(), o.graph}, o.inputs, out, nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("division by zero at output element 1"), std::string::npos) << s.message();
}

// a = b · (q + f) with the fraction f in [0.2, 0.8]: far from Mod's jumps.
TEST(LogicOps, ModGradientsMatchFiniteDifferences) {
  CpuBackend be;
  Tensor const b = random_tensor({3}, 5, 0.5f, 2.f);
  Tensor a({2, 3});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> frac(0.2f, 0.8f);
  for (int64_t k = 0; k < 6; ++k)
    a.data<float>()[k] = b.data<float>()[k % 3] * (static_cast<float>(static_cast<int>(k) - 3) + frac(rng));
  for (bool fmod : {false, true}) {
    SCOPED_TRACE(fmod ? "fmod" : "mod");
    auto o = make_op("Mod", graph::ModAttrs{fmod}, {{"a", a}, {"b", b}});
    testing::expect_grads_ok(testing::grad_check(be, o));
  }
}

TEST(LogicOps, ComparisonGradientIsZero) {
  CpuBackend be;
  auto o = make_op("Less", {}, {{"a", random_tensor({2, 3}, 1)}, {"b", random_tensor({3}, 2)}});
  Saved saved;
  testing::run_forward(be, o, true, 7, &saved);
  std::vector<Tensor> grads;
  Tensor const g = random_tensor({2, 3}, 3);
  ASSERT_TRUE(be.backward_input(OpCall{o.the_op(), o.graph}, saved, {g}, {true, true}, grads).is_ok());
  ASSERT_EQ(grads[1].shape(), std::vector<int64_t>{3});
  for (std::size_t i = 0; i < 2; ++i)
    for (float v : grads[i].to_vector()) EXPECT_EQ(v, 0.f);
}

TEST(LogicOps, UnsupportedDtypesAreNamed) {
  CpuBackend be;
  auto expect_refused = [&](testing::OneOp const& o, std::string const& what) {
    Status const s = be.supports(o.the_op(), o.graph);
    ASSERT_FALSE(s.is_ok()) << o.the_op().type;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  Tensor const d({3}, DType::kFloat64);
  expect_refused(make_op("Less", {}, {{"a", d}, {"b", d}}), "float64");
  expect_refused(make_op("Less", {}, {{"a", random_tensor({3}, 1)}, {"b", testing::int_tensor({3}, {1, 2, 3})}}),
                 "they must match");
  expect_refused(
      make_op("Greater", {}, {{"a", small_values({3}, DType::kBool, 1)}, {"b", small_values({3}, DType::kBool, 2)}}),
      "dtype bool");
  expect_refused(make_op("And", {}, {{"a", random_tensor({3}, 1)}, {"b", random_tensor({3}, 2)}}), "bool only");
  expect_refused(
      make_op("Where", {}, {{"c", random_tensor({3}, 1)}, {"x", random_tensor({3}, 2)}, {"y", random_tensor({3}, 3)}}),
      "the condition is bool");
  expect_refused(make_op("Mod", {}, {{"a", random_tensor({3}, 1)}, {"b", random_tensor({3}, 2)}}),
                 "no typed attributes");
}

// The bitwise family against numpy's values (np.bitwise_and, ..., np.left_shift of uint8, which
// gives 0 for a shift by 8 or more), broadcast, in every integer dtype the kernels take.
TEST(LogicOps, BitwiseOpsMatchNumpy) {
  CpuBackend be;
  auto run = [&](std::string const& type, graph::OpAttrs attrs, std::vector<testing::In> const& ins) {
    auto o = make_op(type, std::move(attrs), ins);
    Status const s = be.supports(o.the_op(), o.graph);
    EXPECT_TRUE(s.is_ok()) << type << ": " << s.to_string();
    return testing::run_forward(be, o).at(0);
  };
  auto values = [](Tensor const& t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(value_at(t, i));
    return v;
  };
  // int32 at its edges: -6 is ...11111010, 0x7fffffff ^ -1 the lowest value.
  Tensor const a = testing::int32_tensor({4}, {5, -6, 2147483647, -1}), b = testing::int32_tensor({4}, {3, 3, -1, 0});
  EXPECT_EQ(values(run("BitwiseAnd", {}, {{"a", a}, {"b", b}})), (std::vector<double>{1, 2, 2147483647, 0}));
  EXPECT_EQ(values(run("BitwiseOr", {}, {{"a", a}, {"b", b}})), (std::vector<double>{7, -5, -1, -1}));
  EXPECT_EQ(values(run("BitwiseXor", {}, {{"a", a}, {"b", b}})), (std::vector<double>{6, -7, -2147483648.0, -1}));
  EXPECT_EQ(values(run("BitwiseNot", {}, {{"a", a}})), (std::vector<double>{-6, 5, -2147483648.0, 0}));
  // int64 [2, 3] & [3]: the second operand broadcast along the first axis.
  Tensor const y =
      run("BitwiseAnd", {},
          {{"a", testing::int_tensor({2, 3}, {12, 13, 14, -1, -2, -3})}, {"b", testing::int_tensor({3}, {4, 5, 6})}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{4, 5, 6, 4, 4, 4}));
  // uint8 shifts: bits shifted out are lost, a shift by the width or more gives 0.
  Tensor const x8 = testing::typed_tensor<uint8_t>({4}, DType::kUInt8, {16, 4, 1, 255});
  Tensor const s8 = testing::typed_tensor<uint8_t>({4}, DType::kUInt8, {1, 2, 8, 7});
  EXPECT_EQ(values(run("BitShift", graph::BitShiftAttrs{true}, {{"x", x8}, {"s", s8}})),
            (std::vector<double>{32, 16, 0, 128}));
  EXPECT_EQ(values(run("BitShift", graph::BitShiftAttrs{false}, {{"x", x8}, {"s", s8}})),
            (std::vector<double>{8, 1, 0, 1}));
  EXPECT_EQ(values(run("BitwiseNot", {}, {{"x", x8}})), (std::vector<double>{239, 251, 254, 0}));
  // int32 by 31, 32 and 33 (x86 would shift by the count mod 32; numpy's 0): a logical shift of the bits.
  Tensor const x32 = testing::int32_tensor({3}, {1, -1, 1}), s32 = testing::int32_tensor({3}, {31, 32, 33});
  EXPECT_EQ(values(run("BitShift", graph::BitShiftAttrs{true}, {{"x", x32}, {"s", s32}})),
            (std::vector<double>{-2147483648.0, 0, 0}));
  EXPECT_EQ(values(run("BitShift", graph::BitShiftAttrs{false}, {{"x", x32}, {"s", s32}})),
            (std::vector<double>{0, 0, 0}));
  Tensor const i8 = testing::typed_tensor<int8_t>({2}, DType::kInt8, {-128, 127});
  EXPECT_EQ(values(run("BitwiseNot", {}, {{"x", i8}})), (std::vector<double>{127, -128}));
  EXPECT_EQ(values(run("BitwiseXor", {}, {{"x", i8}, {"y", i8}})), (std::vector<double>{0, 0}));
  // Floats, mixed dtypes and a BitShift without its direction are refused by name.
  auto refused = [&](testing::OneOp const& o) { return be.supports(o.the_op(), o.graph); };
  Status s = refused(make_op("BitwiseAnd", {}, {{"a", random_tensor({3}, 1)}, {"b", random_tensor({3}, 2)}}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("float32"), std::string::npos) << s.message();
  s = refused(make_op("BitwiseOr", {}, {{"a", a}, {"b", testing::int_tensor({4}, {1, 2, 3, 4})}}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("they must match"), std::string::npos) << s.message();
  s = refused(make_op("BitShift", {}, {{"x", x8}, {"s", s8}}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("typed attributes"), std::string::npos) << s.message();
}

// Hashed ids (ids & 7) pick embedding rows: the bitwise op runs in the executor's graph, gets no
// gradient, and the table's gradient is the probe summed into the rows the buckets picked.
TEST(LogicOps, HashedIdsPickEmbeddingRowsAndTrain) {
  graph::OnnxModelBuilder b("hashed_embedding", 18, 5);
  auto ids = b.add_input("ids", {graph::kBatch}, DType::kInt64);
  auto table = b.add_initializer("table", {8, 3}, graph::InitRule::uniform(0.8));
  auto mask = b.add_constant("mask", graph::TensorData::from_int64s({}, {7}));
  b.add_node("BitwiseAnd", {ids, mask}, {"bucket"});
  b.add_node("Gather", {table, "bucket"}, {"y"});
  b.add_output("y", {graph::kBatch, 3});
  auto g = b.to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->tensor(*g->find_tensor("bucket")).dtype, DType::kInt64);
  CpuBackend be;
  auto ex = StageExecutor::create(*g, be);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  std::vector<int64_t> const id_values = {3, 11, 8, -1, 1000, 19};  // buckets 3, 3, 0, 7, 0, 3
  std::vector<int64_t> const bucket = {3, 3, 0, 7, 0, 3};
  TensorMap inputs;
  inputs.emplace(g->inputs()[0], testing::int_tensor({6}, id_values));
  graph::TensorId const out = g->outputs()[0];
  Tensor const probe = random_tensor({6, 3}, 9);
  TensorMap outs, in_grads;
  ASSERT_TRUE((*ex)->zero_grads().is_ok());
  ASSERT_TRUE((*ex)->forward(0, inputs, outs, true, 1).is_ok());
  ASSERT_TRUE((*ex)->backward(0, {{out, probe}}, in_grads).is_ok());
  Tensor const& w = (*ex)->parameters().at("table");
  Tensor const& grad = (*ex)->gradients().at("table");
  std::vector<double> want(24, 0.0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(outs.at(out).data<float>()[i * 3 + j], w.data<float>()[bucket[i] * 3 + j]) << i << "," << j;
      want[bucket[i] * 3 + j] += probe.data<float>()[i * 3 + j];
    }
  for (int k = 0; k < 24; ++k) EXPECT_NEAR(grad.data<float>()[k], want[k], 1e-6) << "table[" << k << "]";
}

// The ReLU of h written with a mask: the bool tensor gets no gradient, Where's does, and the
// executor's weight gradients match finite differences.
TEST(LogicOps, ModelWithMaskTrains) {
  graph::OnnxModelBuilder b("masked_relu", 17, 5);
  auto x = b.add_input("x", {graph::kBatch, 5});
  auto w = b.add_initializer("w", {4, 5}, graph::InitRule::uniform(0.8));
  auto zero = b.add_constant("zero", graph::TensorData::from_floats({}, {0.f}));
  b.add_node("Gemm", {x, w}, {"h"}, {{"transB", int64_t{1}}});
  b.add_node("Less", {"h", zero}, {"neg"});
  b.add_node("Mul", {zero, "h"}, {"zeros"});
  b.add_node("Where", {"neg", "zeros", "h"}, {"y"});
  b.add_output("y", {graph::kBatch, 4});
  auto g = b.to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->tensor(*g->find_tensor("neg")).dtype, DType::kBool);
  auto plan = plan_autodiff(*g, {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_FALSE(plan->requires_grad[*g->find_tensor("neg")]);
  EXPECT_TRUE(plan->requires_grad[*g->find_tensor("y")]);
  CpuBackend be;
  auto ex = StageExecutor::create(*g, be);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  TensorMap inputs;
  inputs.emplace(g->inputs()[0], random_tensor({6, 5}, 8, 0.2f, 1.f));
  graph::TensorId const out = g->outputs()[0];
  Tensor const probe = random_tensor({6, 4}, 9, 0.2f, 1.f);
  auto objective = [&]() {
    TensorMap outs;
    EXPECT_TRUE((*ex)->forward(100, inputs, outs, true, 1).is_ok());
    (*ex)->discard(100);
    double s = 0;
    for (int64_t i = 0; i < probe.numel(); ++i) s += double(outs.at(out).data<float>()[i]) * probe.data<float>()[i];
    return s;
  };
  TensorMap outs, in_grads;
  EXPECT_TRUE((*ex)->zero_grads().is_ok());
  ASSERT_TRUE((*ex)->forward(0, inputs, outs, true, 1).is_ok());
  ASSERT_TRUE((*ex)->backward(0, {{out, probe}}, in_grads).is_ok());
  Tensor& p = (*ex)->parameters().at("w");
  Tensor const& grad = (*ex)->gradients().at("w");
  double gnorm = 0;
  for (int64_t i = 0; i < p.numel(); ++i) {
    float* v = p.data<float>() + i;
    float const orig = *v, h = 1e-3f;
    *v = orig + h;
    double const up = objective();
    *v = orig - h;
    double const down = objective();
    *v = orig;
    double const fd = (up - down) / (2.0 * h);
    gnorm += fd * fd;
    EXPECT_NEAR(grad.data<float>()[i], fd, 1e-2 * std::abs(fd) + 1e-3) << "w[" << i << "]";
  }
  EXPECT_GT(gnorm, 0.0);  // some unit is active
}

}  // namespace
}  // namespace gp::exec
