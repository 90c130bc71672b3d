// Host twins of the CUDA math kernels: the GP_HD functions of kernels/hd/ (eltwise, broadcast,
// norm, dropout, loss, optim) run in host loops that follow each kernel's structure (one thread
// per element, per output or per column; a block's partial sums combined by the kernels' shuffle
// tree), compared with the CPU backend (one-op graphs) and with kernels/. Tolerance: |got − ref| ≤
// abs + rel·|ref|, stated per test. Helpers in tests/cuda/hd_twin.h.
#include <cmath>
#include <limits>

#include "core/hash.h"
#include "exec/op_kernels.h"
#include "exec/seeds.h"
#include "kernels/view.h"
#include "kernels/hd/binary.h"
#include "kernels/hd/view.h"
#include "kernels/hd/activation.h"
#include "kernels/hd/logic.h"
#include "kernels/hd/loss.h"
#include "kernels/hd/norm.h"
#include "kernels/hd/optim.h"
#include "kernels/loss.h"
#include "kernels/optim.h"
#include "tests/cuda/hd_twin.h"

namespace gp::exec::testing {
namespace {

namespace hd = kernels::hd;
using graph::TensorRole;

// A captured Dropout's or random op's kernel reads the micro-batch seed from a slot and salts it
// (hd::seed_of): the seed the host launches an eager kernel with (exec/op_kernels.h's random_seed,
// the op's seed attribute mixed in).
TEST(HdMath, TheDevicesSaltedSeedIsTheHostsOpSeed) {
  graph::RandomAttrs with_seed, without;
  with_seed.has_seed = true;
  with_seed.seed = 3.f;
  ASSERT_NE(exec::random_seed_mix(with_seed), 0u);
  for (uint64_t step = 0; step < 5; ++step)
    for (uint64_t m = 0; m < 3; ++m) {
      uint64_t const mb = exec::micro_batch_seed(42, static_cast<int64_t>(step), static_cast<int64_t>(m));
      for (uint64_t id : {0ull, 1ull, 7ull, 1000ull}) {
        EXPECT_EQ(hd::salted_seed(mb, exec::op_seed_salt(id)), exec::op_seed(mb, id));
        EXPECT_EQ(hd::dropout_base(exec::op_seed(mb, id)), splitmix64(exec::op_seed(mb, id)));
        for (graph::RandomAttrs const* a : {&with_seed, &without}) {
          uint64_t const mix = exec::random_seed_mix(*a);
          uint64_t const host = exec::op_seed(mb, id) ^ mix;
          EXPECT_EQ(hd::seed_of({.seed = host}), host);
          EXPECT_EQ(hd::seed_of({.seed = 0, .slot = &mb, .salt = exec::op_seed_salt(id), .mix = mix}), host);
        }
      }
      EXPECT_EQ(hd::mix64(mb), mix64(mb));
    }
}

TEST(HdMath, ComparisonRejectsAPerturbedResult) {
  Vec const ref{1.f, -2.f, 1e4f, 0.f};
  Tol const tol{1e-5, 1e-5};
  EXPECT_TRUE(close(ref, ref, tol));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    Vec bad = ref;
    bad[i] += static_cast<float>(4 * (tol.abs + tol.rel * std::fabs(ref[i])));
    EXPECT_FALSE(close(bad, ref, tol)) << "element " << i;
  }
  Vec nan = ref;
  nan[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(close(nan, ref, tol));
  EXPECT_FALSE(close(Vec{1.f}, ref, tol));
}

// ---- activations, Pow (tolerance 1e-6 + 2e-5·|ref|, Log 5e-6 + 2e-5·|ref|: oneDNN's vectorised
// exp/log/tanh against libm) ----

struct UnaryCase {
  std::string type;
  graph::OpAttrs attrs;
  hd::UnaryKind kind;
  float alpha = 0.f;
  bool positive = false;  // Sqrt, Log and fractional powers need x > 0
  float exponent = 0.f;   // Pow
  double abs_tol = 1e-6;  // oneDNN's log is off by up to 3.5e-6 near x = 1, where log x ≈ 0
};

TEST(HdMath, UnaryTwinsMatchCpuForwardAndBackward) {
  using K = hd::UnaryKind;
  std::vector<UnaryCase> const cases{
      {"Relu", {}, K::kRelu},
      {"LeakyRelu", graph::LeakyReluAttrs{0.2f}, K::kLeakyRelu, 0.2f},
      {"Sigmoid", {}, K::kSigmoid},
      {"Tanh", {}, K::kTanh},
      {"Gelu", graph::GeluAttrs{false}, K::kGeluErf},
      {"Gelu", graph::GeluAttrs{true}, K::kGeluTanh},
      {"Sqrt", {}, K::kSqrt, 0.f, true},
      {"Erf", {}, K::kErf},
      {"Exp", {}, K::kExp},
      {"Log", {}, K::kLog, 0.f, true, 0.f, 5e-6},
      {"Abs", {}, K::kAbs},
      {"Neg", {}, K::kNeg},
      {"Pow", {}, K::kPow, 2.f, false, 2.f},
      {"Pow", {}, K::kPow, 3.f, false, 3.f},
      {"Pow", {}, K::kPow, 0.5f, true, 0.5f},
      {"Pow", {}, K::kPow, -1.f, true, -1.f},
  };
  for (UnaryCase const& c : cases) {
    Tol const tol{c.abs_tol, 2e-5};
    SCOPED_TRACE(c.type + " kind " + std::to_string(static_cast<int>(c.kind)));
    Tensor x = random_tensor({3, 37}, 11, 0.05f, 3.f, c.positive);
    In const xin{"x", x, TensorRole::kInput};
    OneOp o = c.type == "Pow" ? make_op(c.type, c.attrs,
                                        {xin, {"e", Tensor::from_floats({1}, {c.exponent}), TensorRole::kConstant}})
                              : make_op(c.type, c.attrs, {xin});
    CpuRun r = run_cpu(o);
    Vec const xv = values(x), dy = values(r.dy);
    Vec y(xv.size()), dx(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) y[i] = hd::unary_forward(c.kind, c.alpha, xv[i]);
    Vec const& kept = hd::unary_backward_uses_output(c.kind) ? y : xv;
    for (std::size_t i = 0; i < xv.size(); ++i) dx[i] = hd::unary_backward(c.kind, c.alpha, kept[i], dy[i]);
    EXPECT_TRUE(close(y, values(r.out[0]), tol));
    EXPECT_TRUE(close(dx, values(r.gin.at(0)), tol));
  }
}

// The other activations (hd::Pointwise). The CPU runs most of them through the same functions
// (kernels/activation.cc's loops), so for those this checks the attributes reach them alike; Clip,
// HardSwish, Softplus, Reciprocal and Elu run on the CPU through oneDNN eltwise, an independent
// implementation. Inputs inside each function's domain; tolerance 1e-6 + 2e-5·|ref|.
struct PointwiseCase {
  std::string type;
  graph::OpAttrs attrs;
  hd::Pointwise f;
  hd::PointwiseParams p{};
  float lo = 0.05f, hi = 3.f;
  bool positive = false;
};

TEST(HdMath, PointwiseTwinsMatchCpuForwardAndBackward) {
  using P = hd::Pointwise;
  std::vector<PointwiseCase> const cases{
      {"Selu", graph::ActivationAttrs{1.6733f, 0.f, 1.0507f}, P::kSelu, {1.6733f, 0.f, 1.0507f}},
      {"Celu", graph::ActivationAttrs{0.7f}, P::kCelu, {0.7f}},
      {"Softsign", {}, P::kSoftsign},
      {"HardSigmoid", graph::ActivationAttrs{0.2f, 0.5f}, P::kHardSigmoid, {0.2f, 0.5f}},
      {"ThresholdedRelu", graph::ActivationAttrs{0.5f}, P::kThresholdedRelu, {0.5f}},
      {"Shrink", graph::ActivationAttrs{0.5f, 0.2f}, P::kShrink, {0.5f, 0.2f}},
      {"Sin", {}, P::kSin},
      {"Cos", {}, P::kCos},
      {"Tan", {}, P::kTan, {}, 0.05f, 1.2f},
      {"Asin", {}, P::kAsin, {}, 0.05f, 0.9f},
      {"Acos", {}, P::kAcos, {}, 0.05f, 0.9f},
      {"Atan", {}, P::kAtan},
      {"Sinh", {}, P::kSinh},
      {"Cosh", {}, P::kCosh},
      {"Asinh", {}, P::kAsinh},
      {"Acosh", {}, P::kAcosh, {}, 1.1f, 3.f, true},
      {"Atanh", {}, P::kAtanh, {}, 0.05f, 0.9f},
      {"Sign", {}, P::kSign},
      {"Floor", {}, P::kFloor},
      {"Ceil", {}, P::kCeil},
      {"Round", {}, P::kRound},
      {"Clip", graph::ClipAttrs{-0.5f, 1.5f}, P::kClip, {-0.5f, 1.5f}},
      {"HardSwish", {}, P::kHardSwish, {}, 0.05f, 4.5f},
      {"Softplus", {}, P::kSoftplus},
      {"Reciprocal", {}, P::kReciprocal, {}, 0.3f, 3.f},
      {"Elu", graph::ActivationAttrs{0.8f}, P::kElu, {0.8f}},
  };
  Tol const tol{1e-6, 2e-5};
  for (PointwiseCase const& c : cases) {
    SCOPED_TRACE(c.type);
    Tensor x = random_tensor({3, 37}, 12, c.lo, c.hi, c.positive);
    CpuRun r = run_cpu(make_op(c.type, c.attrs, {{"x", x, TensorRole::kInput}}));
    Vec const xv = values(x), dy = values(r.dy);
    Vec y(xv.size()), dx(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) {
      y[i] = hd::pointwise_forward(c.f, c.p, xv[i]);
      dx[i] = hd::pointwise_backward(c.f, c.p, xv[i], dy[i]);
    }
    EXPECT_TRUE(close(y, values(r.out[0]), tol));
    EXPECT_TRUE(close(dx, values(r.gin.at(0)), tol));
  }
}

// ---- the logic family: comparisons, boolean operators, Where (exact: bytes, and Where's picks) ----

// op(a, b) over the broadcast of a and b into `out`, one thread per element as the broadcasting
// kernels (binary.cu, logic.cu) index it.
template <typename F>
Vec broadcast_twin(Vec const& a, std::vector<int64_t> const& as, Vec const& b, std::vector<int64_t> const& bs,
                   std::vector<int64_t> const& out, F op) {
  hd::BinaryIndex p;
  EXPECT_TRUE(hd::make_binary_index(out, as, bs, p));
  Vec y(static_cast<std::size_t>(p.numel));
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = op(a[oa], b[ob]);
  }
  return y;
}

Vec logic_twin(hd::LogicKind k, Vec const& a, std::vector<int64_t> const& as, Vec const& b,
               std::vector<int64_t> const& bs, std::vector<int64_t> const& out) {
  return broadcast_twin(a, as, b, bs, out, [k](float x, float z) { return static_cast<float>(hd::logic_op(k, x, z)); });
}

TEST(HdMath, LogicTwinsMatchCpuComparisonsAndBooleanOps) {
  using K = hd::LogicKind;
  Tensor a = random_tensor({2, 3, 4}, 31), b = random_tensor({3, 1}, 32);
  a.data<float>()[5] = b.data<float>()[1];  // a tie
  std::pair<char const*, K> const cmp[] = {{"Equal", K::kEqual},
                                           {"Less", K::kLess},
                                           {"Greater", K::kGreater},
                                           {"LessOrEqual", K::kLessOrEqual},
                                           {"GreaterOrEqual", K::kGreaterOrEqual}};
  for (auto const& [type, kind] : cmp) {
    SCOPED_TRACE(type);
    CpuBackend be;
    auto out = run_forward(be, make_op(type, {}, {{"a", a, TensorRole::kInput}, {"b", b, TensorRole::kInput}}));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(close(logic_twin(kind, values(a), a.shape(), values(b), b.shape(), {2, 3, 4}), values(out[0]), {0, 0}));
  }
  Tensor m({2, 3}, DType::kBool), n({3}, DType::kBool);
  uint8_t const mv[] = {1, 0, 1, 0, 1, 1}, nv[] = {1, 1, 0};
  std::copy(mv, mv + 6, m.data<uint8_t>());
  std::copy(nv, nv + 3, n.data<uint8_t>());
  std::pair<char const*, K> const boolean[] = {{"And", K::kAnd}, {"Or", K::kOr}, {"Xor", K::kXor}};
  for (auto const& [type, kind] : boolean) {
    SCOPED_TRACE(type);
    CpuBackend be;
    auto out = run_forward(be, make_op(type, {}, {{"a", m, TensorRole::kInput}, {"b", n, TensorRole::kInput}}));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(close(logic_twin(kind, values(m), m.shape(), values(n), n.shape(), {2, 3}), values(out[0]), {0, 0}));
  }
}

TEST(HdMath, WhereTwinPicksAndRoutesGradientsLikeCpu) {
  Tensor c({3, 1}, DType::kBool);
  uint8_t const cv[] = {1, 0, 1};
  std::copy(cv, cv + 3, c.data<uint8_t>());
  Tensor x = random_tensor({2, 3, 4}, 33), y = random_tensor({4}, 34);
  CpuRun r = run_cpu(
      make_op("Where", {}, {{"c", c, TensorRole::kInput}, {"x", x, TensorRole::kInput}, {"y", y, TensorRole::kInput}}));
  std::vector<int64_t> const out{2, 3, 4};
  hd::BinaryIndex cx, yy, cd;
  ASSERT_TRUE(hd::make_binary_index(out, c.shape(), x.shape(), cx));
  ASSERT_TRUE(hd::make_binary_index(out, y.shape(), y.shape(), yy));
  ASSERT_TRUE(hd::make_binary_index(out, c.shape(), out, cd));
  Vec const xv = values(x), yv = values(y), dy = values(r.dy);
  std::vector<uint8_t> const cb(cv, cv + 3);
  Vec got(24), gx(24), gy_full(24);
  for (int64_t i = 0; i < 24; ++i) {
    int64_t oc = 0, ox = 0, oy = 0, unused = 0, od = 0;
    hd::binary_offsets(cx, i, oc, ox);
    hd::binary_offsets(yy, i, oy, unused);
    got[i] = hd::where_value(cb[oc], xv[ox], yv[oy]);
    hd::binary_offsets(cd, i, oc, od);
    gx[i] = hd::where_grad(cb[oc], dy[od], true);
    gy_full[i] = hd::where_grad(cb[oc], dy[od], false);
  }
  EXPECT_TRUE(close(got, values(r.out[0]), {0, 0}));
  EXPECT_TRUE(close(gx, values(r.gin.at(1)), {0, 0}));
  Vec gy(4, 0.f);  // summed down to y's [4] (the kernel's sum_to; exact here: few terms)
  for (int64_t i = 0; i < 24; ++i) gy[i % 4] += gy_full[i];
  EXPECT_TRUE(close(gy, values(r.gin.at(2)), {1e-6, 1e-6}));
}

// ---- Add, Sub, Mul, Div with broadcasting (tolerance 1e-6 + 1e-5·|ref|: sum orders differ) ----

Vec binary_twin(hd::BinaryKind k, Vec const& a, std::vector<int64_t> const& as, Vec const& b,
                std::vector<int64_t> const& bs, std::vector<int64_t> const& out) {
  return broadcast_twin(a, as, b, bs, out, [k](float x, float z) { return hd::binary_op(k, x, z); });
}

TEST(HdMath, BinaryTwinsBroadcastBothWaysAndSumGradientsLikeCpu) {
  using Shape = std::vector<int64_t>;
  std::vector<std::pair<Shape, Shape>> const shapes{{{2, 3, 4}, {3, 1}}, {{3, 1}, {2, 1, 4}}, {{2, 3, 4}, {2, 3, 4}},
                                                    {{4}, {2, 3, 4}},    {{1}, {5, 1, 2}},    {{6, 300}, {300}}};
  std::vector<std::pair<std::string, hd::BinaryKind>> const kinds{{"Add", hd::BinaryKind::kAdd},
                                                                  {"Sub", hd::BinaryKind::kSub},
                                                                  {"Mul", hd::BinaryKind::kMul},
                                                                  {"Div", hd::BinaryKind::kDiv}};
  Tol const tol{1e-6, 1e-5};
  for (auto const& [type, kind] : kinds)
    for (auto const& [as, bs] : shapes)
      for (bool per_block : {false, true}) {
        SCOPED_TRACE(type + " " + std::to_string(as.size()) + "-d a, " + std::to_string(bs.size()) + "-d b" +
                     (per_block ? ", block sums" : ", thread sums"));
        Tensor a = random_tensor(as, 21), b = random_tensor(bs, 22, 0.2f, 1.f);
        OneOp o = make_op(type, {}, {{"a", a, TensorRole::kInput}, {"b", b, TensorRole::kInput}});
        CpuRun r = run_cpu(o);
        Shape out;
        ASSERT_TRUE(hd::broadcast_shape(as, bs, out));
        Vec const av = values(a), bv = values(b), dy = values(r.dy);
        Vec const y = binary_twin(kind, av, as, bv, bs, out);
        EXPECT_TRUE(close(y, values(r.out[0]), tol));
        // As exec/cuda/ops_math.cc: the full-shape gradient, then summed down to each input.
        Vec da, db;
        if (kind == hd::BinaryKind::kAdd || kind == hd::BinaryKind::kSub) {
          da = sum_twin(dy, out, as, 1.f, per_block);
          db = sum_twin(dy, out, bs, kind == hd::BinaryKind::kSub ? -1.f : 1.f, per_block);
        } else if (kind == hd::BinaryKind::kMul) {
          da = sum_twin(binary_twin(hd::BinaryKind::kMul, dy, out, bv, bs, out), out, as, 1.f, per_block);
          db = sum_twin(binary_twin(hd::BinaryKind::kMul, dy, out, av, as, out), out, bs, 1.f, per_block);
        } else {
          Vec const dy_b = binary_twin(hd::BinaryKind::kDiv, dy, out, bv, bs, out);
          da = sum_twin(dy_b, out, as, 1.f, per_block);
          db = sum_twin(binary_twin(hd::BinaryKind::kMul, dy_b, out, y, out, out), out, bs, -1.f, per_block);
        }
        EXPECT_TRUE(close(da, values(r.gin.at(0)), tol));
        EXPECT_TRUE(close(db, values(r.gin.at(1)), tol));
      }
}

TEST(HdMath, IndexPlannersMergeContiguousDimsAndRejectTooMany) {
  hd::BinaryIndex p;
  ASSERT_TRUE(hd::make_binary_index({2, 3, 4, 5, 1, 2, 3, 2, 2, 2}, {2, 3, 4, 5, 1, 2, 3, 2, 2, 2}, {1}, p));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.numel, 5760);
  // Dims alternating between broadcast and not cannot merge: 10 output dims, 10 kept dims.
  std::vector<int64_t> full(20, 2), alternating(20, 2);
  for (std::size_t i = 1; i < 20; i += 2) alternating[i] = 1;
  EXPECT_FALSE(hd::make_binary_index(std::vector<int64_t>(full.begin(), full.begin() + 10),
                                     std::vector<int64_t>(full.begin(), full.begin() + 10),
                                     std::vector<int64_t>(alternating.begin(), alternating.begin() + 10), p));
  hd::SumIndex s;
  EXPECT_FALSE(hd::make_sum_index(full, alternating, s));
  ASSERT_TRUE(hd::make_sum_index({4, 5, 6}, {4, 1, 1}, s));
  EXPECT_EQ(s.kept.rank, 1);
  EXPECT_EQ(s.summed.rank, 1);
  EXPECT_EQ(s.summed_count, 30);
}

// ---- ReduceSum, ReduceMean (tolerance 1e-6 + 1e-5·|ref|) ----

TEST(HdMath, ReduceTwinsMatchCpuForEveryAxisSetAndKeepdims) {
  std::vector<int64_t> const shape{2, 3, 4, 5};
  std::vector<std::vector<int64_t>> const axes_list{{1}, {0, 2}, {-1}, {}, {1, 3}};
  Tol const tol{1e-6, 1e-5};
  for (char const* type : {"ReduceSum", "ReduceMean"})
    for (auto const& axes : axes_list)
      for (bool keepdims : {true, false}) {
        SCOPED_TRACE(std::string(type) + " " + std::to_string(axes.size()) + " axes, keepdims " +
                     std::to_string(keepdims));
        Tensor x = random_tensor(shape, 31);
        OneOp o = make_op(type, graph::ReduceAttrs{axes, keepdims}, {{"x", x, TensorRole::kInput}});
        CpuRun r = run_cpu(o);
        std::vector<int64_t> keep = shape;
        for (int64_t i = 0; i < 4; ++i)
          if (axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end() ||
              std::find(axes.begin(), axes.end(), i - 4) != axes.end())
            keep[i] = 1;
        int64_t kept = 1;
        for (int64_t d : keep) kept *= d;
        bool const mean = std::string(type) == "ReduceMean";
        float const scale = mean ? static_cast<float>(static_cast<double>(kept) / 120.0) : 1.f;
        for (bool per_block : {false, true})
          EXPECT_TRUE(close(sum_twin(values(x), shape, keep, scale, per_block), values(r.out[0]), tol));
        hd::BinaryIndex p;
        ASSERT_TRUE(hd::make_binary_index(shape, keep, keep, p));
        Vec const dy = values(r.dy);
        Vec dx(120);
        for (int64_t i = 0; i < 120; ++i) {
          int64_t oa = 0, ob = 0;
          hd::binary_offsets(p, i, oa, ob);
          dx[i] = scale * dy[oa];
        }
        EXPECT_TRUE(close(dx, values(r.gin.at(0)), tol));
      }
}

// ---- Softmax (tolerance 1e-6 + 1e-5·|ref|) ----

// As norm.cu: a contiguous row on one block of `block` threads; a strided axis one thread per
// column with hd::softmax_row.
void softmax_twin(Vec const& x, Vec const& dy, int64_t outer, int64_t axis, int64_t inner, int block, Vec& y, Vec& dx) {
  y.assign(x.size(), 0.f);
  dx.assign(x.size(), 0.f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t const base = o * axis * inner + i;
      if (inner > 1) {
        hd::softmax_row(x.data() + base, axis, inner, y.data() + base);
        hd::softmax_backward_row(y.data() + base, dy.data() + base, axis, inner, dx.data() + base);
        continue;
      }
      float const* xr = x.data() + base;
      float const mx = block_row(block, axis, true, [&](int64_t c) { return xr[c]; });
      float const sum = block_row(block, axis, false, [&](int64_t c) { return hd::softmax_exp(xr[c], mx); });
      for (int64_t c = 0; c < axis; ++c) y[base + c] = hd::softmax_value(xr[c], mx, 1.f / sum);
      float const dot = block_row(block, axis, false, [&](int64_t c) { return y[base + c] * dy[base + c]; });
      for (int64_t c = 0; c < axis; ++c) dx[base + c] = hd::softmax_grad(y[base + c], dy[base + c], dot);
    }
}

void check_softmax(float lo, float hi) {
  std::vector<int64_t> const shape{3, 5, 70};
  Tol const tol{1e-6, 1e-5};
  for (int64_t axis = 0; axis < 3; ++axis)
    for (int block : {32, 256}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + ", block " + std::to_string(block));
      Tensor x = random_tensor(shape, 41, lo, hi);
      OneOp o = make_op("Softmax", graph::SoftmaxAttrs{axis}, {{"x", x, TensorRole::kInput}});
      CpuRun r = run_cpu(o);
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < 3; ++i) {
        if (i < axis) outer *= shape[i];
        if (i > axis) inner *= shape[i];
      }
      Vec y, dx;
      softmax_twin(values(x), values(r.dy), outer, shape[axis], inner, block, y, dx);
      EXPECT_TRUE(close(y, values(r.out[0]), tol));
      EXPECT_TRUE(close(dx, values(r.gin.at(0)), tol));
    }
}

TEST(HdMath, SoftmaxTwinMatchesCpuOnEveryAxis) { check_softmax(0.1f, 3.f); }
TEST(HdMath, SoftmaxTwinIsStableForLogitsOfMagnitude1e4) { check_softmax(1e3f, 1e4f); }

// ---- LayerNormalization (tolerance 1e-5 + 1e-4·|ref| for y, InvStdDev and the scale/bias
// gradients; the Mean output's absolute part scales with the input magnitude, dx's with 1/magnitude) ----

void check_layernorm(float lo, float hi, Tol tol) {
  std::vector<int64_t> const shape{4, 3, 40};
  for (int64_t axis : {1, 2})
    for (bool bias : {true, false}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + (bias ? ", bias" : ", no bias"));
      int64_t const total = 480, rows = axis == 1 ? 4 : 12, cols = total / rows;
      Tensor x = random_tensor(shape, 51, lo, hi), scale = random_tensor({cols}, 52, 0.5f, 1.5f),
             shift = random_tensor({cols}, 53);
      In const xin{"x", x, TensorRole::kInput}, sin{"scale", scale, TensorRole::kWeight};
      graph::LayerNormAttrs const attrs{axis, 1e-5f, bias};
      OneOp o = bias ? make_op("LayerNormalization", attrs, {xin, sin, {"bias", shift, TensorRole::kWeight}}, 3)
                     : make_op("LayerNormalization", attrs, {xin, sin}, 3);
      CpuRun r = run_cpu(o);
      Vec const xv = values(x), sv = values(scale), bv = values(shift), dy = values(r.dy);
      Vec y(total), mean(rows), rstd(rows), dx(total);
      int const block = 32;
      for (int64_t row = 0; row < rows; ++row) {
        float const* xr = xv.data() + row * cols;
        float const mu = block_row(block, cols, false, [&](int64_t c) { return xr[c]; }) / cols;
        float const var = block_row(block, cols, false, [&](int64_t c) { return (xr[c] - mu) * (xr[c] - mu); }) / cols;
        mean[row] = mu;
        rstd[row] = hd::layernorm_rstd(var, 1e-5f);
        for (int64_t c = 0; c < cols; ++c)
          y[row * cols + c] = hd::layernorm_value(xr[c], mu, rstd[row], sv[c], bias ? bv.data() : nullptr, c);
        float const* dr = dy.data() + row * cols;
        auto xhat = [&](int64_t c) { return hd::layernorm_xhat(xr[c], mu, rstd[row]); };
        float const mg = block_row(block, cols, false, [&](int64_t c) { return dr[c] * sv[c]; }) / cols;
        float const mgx = block_row(block, cols, false, [&](int64_t c) { return dr[c] * sv[c] * xhat(c); }) / cols;
        for (int64_t c = 0; c < cols; ++c)
          dx[row * cols + c] = hd::layernorm_grad<float>(xhat(c), dr[c] * sv[c], mg, mgx, rstd[row]);
      }
      // The serial row functions agree with the block form.
      Vec y_serial(total);
      float m0 = 0.f, r0 = 0.f;
      hd::layernorm_row(xv.data(), sv.data(), bias ? bv.data() : nullptr, cols, 1e-5f, y_serial.data(), m0, r0);
      EXPECT_TRUE(close(Vec(y_serial.begin(), y_serial.begin() + cols), Vec(y.begin(), y.begin() + cols), tol));
      // Parameter gradients: chunk sums, then the chunks in order.
      Vec dscale(cols, 0.f), dbias(cols, 0.f);
      int64_t const per = hd::layernorm_chunk_rows(rows);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t k = 0; k < hd::layernorm_chunks(rows); ++k) {
          float ds = 0.f, db = 0.f;
          hd::layernorm_param_sums(xv.data(), dy.data(), mean.data(), rstd.data(), cols, c, k * per,
                                   std::min(rows, (k + 1) * per), ds, db);
          dscale[c] += ds;
          dbias[c] += db;
        }
      EXPECT_TRUE(close(y, values(r.out[0]), tol));
      EXPECT_TRUE(close(mean, values(r.out[1]), {tol.abs * hi, tol.rel}));
      EXPECT_TRUE(close(rstd, values(r.out[2]), tol));
      EXPECT_TRUE(close(dx, values(r.gin.at(0)), {tol.abs / lo, tol.rel}));
      EXPECT_TRUE(close(dscale, values(r.gw.at(1)), tol));
      if (bias) {
        EXPECT_TRUE(close(dbias, values(r.gw.at(2)), tol));
      }
    }
}

TEST(HdMath, LayerNormTwinMatchesCpuWithAndWithoutBias) { check_layernorm(0.1f, 3.f, {1e-5, 1e-4}); }
TEST(HdMath, LayerNormTwinIsStableForInputsOfMagnitude1e4) { check_layernorm(1e3f, 1e4f, {1e-5, 1e-4}); }

// ---- Dropout: bit for bit ----

TEST(HdMath, DropoutTwinMaskEqualsCpuKernelBitForBit) {
  int64_t const n = 10007;
  float const ratio = 0.3f;
  uint64_t const seed = 0x1234abcdULL;
  Tensor x = random_tensor({n}, 61);
  Vec const xv = values(x);
  Vec y_cpu(n), y_hd(n), dx_cpu(n), dx_hd(n);
  std::vector<uint8_t> m_cpu(n), m_hd(n);
  kernels::dropout_forward(xv.data(), n, ratio, seed, y_cpu.data(), m_cpu.data());
  uint64_t const base = hd::dropout_base(seed);
  float const scale = hd::dropout_scale(ratio);
  for (int64_t i = 0; i < n; ++i) {
    bool const keep = hd::dropout_keep(base, i, ratio);
    m_hd[i] = keep ? 1 : 0;
    y_hd[i] = hd::dropout_apply(xv[i], keep, scale);
  }
  EXPECT_EQ(m_hd, m_cpu);
  EXPECT_EQ(y_hd, y_cpu);
  kernels::dropout_backward(xv.data(), m_cpu.data(), n, ratio, dx_cpu.data());
  for (int64_t i = 0; i < n; ++i) dx_hd[i] = hd::dropout_apply(xv[i], m_hd[i] != 0, scale);
  EXPECT_EQ(dx_hd, dx_cpu);
  // The CPU backend's op draws the same mask from OpCall::rng_seed.
  OneOp o = make_op("Dropout", graph::DropoutAttrs{ratio, true}, {{"x", x, TensorRole::kInput}}, 2);
  CpuRun r = run_cpu(o, true, seed);
  Tensor const& mask = r.out.at(1);
  EXPECT_EQ(std::vector<uint8_t>(mask.data<uint8_t>(), mask.data<uint8_t>() + n), m_hd);
  Vec dy = values(r.dy), want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = hd::dropout_apply(dy[i], m_hd[i] != 0, scale);
  EXPECT_EQ(values(r.gin.at(0)), want);
}

TEST(HdMath, DropoutMaskIsTheOneTheCpuDrewBeforeTheHashMoved) {
  // Mask bits of 64 elements at ratio 0.5, computed with kernels/view.cc before the hash moved
  // to kernels/hd/view.h.
  for (auto [seed, golden] : {std::pair<uint64_t, uint64_t>{11, 0x2b9fd29cb8f7f2f3ULL},
                              std::pair<uint64_t, uint64_t>{0xdeadbeef, 0x8633176861dfa888ULL}}) {
    Vec x(64, 1.f), y(64);
    std::vector<uint8_t> m(64);
    kernels::dropout_forward(x.data(), 64, 0.5f, seed, y.data(), m.data());
    uint64_t bits = 0, twin = 0;
    for (int i = 0; i < 64; ++i) {
      bits |= static_cast<uint64_t>(m[i]) << i;
      twin |= static_cast<uint64_t>(hd::dropout_keep(hd::dropout_base(seed), i, 0.5f)) << i;
    }
    EXPECT_EQ(bits, golden);
    EXPECT_EQ(twin, golden);
  }
}

// ---- losses (tolerance 1e-6 + 1e-5·|ref|; the row loss 1e-4 relative: kernels/loss.cc sums in
// double) ----

void check_cross_entropy(float lo, float hi) {
  int64_t const rows = 6, classes = 37;
  Vec const x = values(random_tensor({rows, classes}, 71, lo, hi));
  std::vector<int64_t> labels{0, 36, 5, 17, 3, 9};
  float const scale = 1.f / 16;
  Vec grad(rows * classes), ref_grad(rows * classes);
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r)
    loss += hd::cross_entropy_row(x.data() + r * classes, classes, labels[r], scale, grad.data() + r * classes);
  int64_t bad = 0;
  double const ref = kernels::softmax_cross_entropy_forward(x.data(), labels.data(), rows, classes, &bad);
  kernels::softmax_cross_entropy_backward(x.data(), labels.data(), rows, classes, scale, ref_grad.data());
  EXPECT_EQ(bad, -1);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, ref, 1e-4 * std::fabs(ref) + 1e-5);
  EXPECT_TRUE(close(grad, ref_grad, {1e-6, 1e-5}));
}

TEST(HdMath, CrossEntropyTwinMatchesLossKernel) { check_cross_entropy(0.1f, 3.f); }
TEST(HdMath, CrossEntropyTwinIsStableForLogitsOfMagnitude1e4) { check_cross_entropy(1e3f, 1e4f); }

TEST(HdMath, CrossEntropyTwinGivesABadLabelsRowZeroLossAndNoOneHot) {
  Vec const x = values(random_tensor({2, 5}, 72));
  std::vector<int64_t> labels{1, 7};
  Vec grad(10), ref_grad(10);
  EXPECT_GT(hd::cross_entropy_row(x.data(), 5, labels[0], 1.f, grad.data()), 0.f);
  EXPECT_EQ(hd::cross_entropy_row(x.data() + 5, 5, labels[1], 1.f, grad.data() + 5), 0.f);
  int64_t bad = -1;
  kernels::softmax_cross_entropy_forward(x.data(), labels.data(), 2, 5, &bad);
  EXPECT_EQ(bad, 1);
  kernels::softmax_cross_entropy_backward(x.data(), labels.data(), 2, 5, 1.f, ref_grad.data());
  EXPECT_TRUE(close(grad, ref_grad, {1e-6, 1e-5}));
}

TEST(HdMath, MseTwinMatchesLossKernel) {
  int64_t const n = 257;
  Vec const p = values(random_tensor({n}, 73)), t = values(random_tensor({n}, 74));
  Vec grad(n), ref_grad(n);
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    loss += hd::squared_error(p[i], t[i]);
    grad[i] = hd::squared_error_grad(p[i], t[i], 0.25f);
  }
  double const ref = kernels::mse_forward(p.data(), t.data(), n);
  kernels::mse_backward(p.data(), t.data(), n, 0.25f, ref_grad.data());
  EXPECT_NEAR(loss, ref, 1e-5 * ref);
  EXPECT_TRUE(close(grad, ref_grad, {1e-7, 1e-6}));
}

// ---- optimizers, five steps (tolerance 1e-7 + 1e-6·|ref|) ----

TEST(HdMath, SgdTwinMatchesOptimKernelWithAndWithoutMomentum) {
  int64_t const n = 129;
  for (float momentum : {0.f, 0.9f}) {
    Vec w = values(random_tensor({n}, 81)), w_ref = w, buf(n, 0.f), buf_ref(n, 0.f);
    for (int step = 0; step < 5; ++step) {
      Vec const g = values(random_tensor({n}, 90 + step));
      for (int64_t i = 0; i < n; ++i)
        hd::sgd_step(w[i], g[i], momentum == 0.f ? nullptr : &buf[i], 0.1f, momentum, 0.01f);
      kernels::sgd_update(w_ref.data(), g.data(), buf_ref.data(), n, 0.1f, momentum, 0.01f);
    }
    EXPECT_TRUE(close(w, w_ref, {1e-7, 1e-6})) << "momentum " << momentum;
  }
}

TEST(HdMath, AdamAndAdamWTwinsMatchOptimKernel) {
  int64_t const n = 129;
  for (bool decoupled : {false, true}) {
    Vec w = values(random_tensor({n}, 82)), w_ref = w, m(n, 0.f), v(n, 0.f), m_ref = m, v_ref = v;
    kernels::AdamParams p;
    p.lr = 0.01f;
    p.weight_decay = 0.05f;
    p.decoupled = decoupled;
    for (int step = 1; step <= 5; ++step) {
      p.step = step;
      Vec const g = values(random_tensor({n}, 100 + step));
      hd::AdamCoeffs const c = hd::adam_coeffs(p);
      for (int64_t i = 0; i < n; ++i) hd::adam_step(w[i], g[i], m[i], v[i], c);
      kernels::adam_update(w_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, p);
    }
    EXPECT_TRUE(close(w, w_ref, {1e-7, 1e-6})) << (decoupled ? "AdamW" : "Adam");
    EXPECT_TRUE(close(m, m_ref, {1e-7, 1e-6}));
    EXPECT_TRUE(close(v, v_ref, {1e-9, 1e-6}));
  }
}

}  // namespace
}  // namespace gp::exec::testing
