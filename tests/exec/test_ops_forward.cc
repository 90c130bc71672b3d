// Forward outputs of the CPU backend against plain float64 reference loops, one test per op family.
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;

TEST(OpsForward, ConvMatchesDirectLoops) {
  Tensor x = random_tensor({2, 4, 6, 5}, 1), w = random_tensor({6, 2, 3, 2}, 2), b = random_tensor({6}, 3);
  int64_t const group = 2, sh = 2, sw = 1, dh = 1, dw = 2, ph0 = 1, pw0 = 1, ph1 = 0, pw1 = 1;
  OneOp o = make_op("Conv", graph::ConvAttrs{{3, 2}, {sh, sw}, {dh, dw}, {ph0, pw0, ph1, pw1}, group, true},
                    {{"x", x, kIn}, {"w", w, kW}, {"b", b, kW}});
  CpuBackend be;
  Tensor y = run_forward(be, o)[0];
  int64_t const N = 2, C = 4, H = 6, W = 5, O = 6, KH = 3, KW = 2;
  int64_t const OH = (H + ph0 + ph1 - (dh * (KH - 1) + 1)) / sh + 1,
                OW = (W + pw0 + pw1 - (dw * (KW - 1) + 1)) / sw + 1;
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{N, O, OH, OW}));
  std::vector<double> ref;
  int64_t const cg = C / group, og = O / group;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = at(b, oc);
          int64_t const g = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t const ih = oh * sh - ph0 + kh * dh, iw = ow * sw - pw0 + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += at(x, ((n * C + g * cg + ic) * H + ih) * W + iw) * at(w, ((oc * cg + ic) * KH + kh) * KW + kw);
              }
          ref.push_back(acc);
        }
  expect_near(y, ref);
}

TEST(OpsForward, GemmAndMatMulMatchLoops) {
  Tensor a = random_tensor({4, 3}, 4), b = random_tensor({5, 4}, 5), c = random_tensor({3, 1}, 6);
  OneOp o = make_op("Gemm", graph::GemmAttrs{0.5f, 2.f, true, true, true}, {{"a", a, kIn}, {"b", b, kW}, {"c", c, kW}});
  CpuBackend be;
  Tensor y = run_forward(be, o)[0];
  std::vector<double> ref;
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 5; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < 4; ++k) acc += at(a, k * 3 + m) * at(b, n * 4 + k);
      ref.push_back(0.5 * acc + 2.0 * at(c, m));
    }
  expect_near(y, ref);

  Tensor p = random_tensor({2, 1, 3, 4}, 7), q = random_tensor({3, 4, 2}, 8);
  OneOp mm = make_op("MatMul", graph::MatMulAttrs{}, {{"p", p, kIn}, {"q", q, kIn}});
  Tensor z = run_forward(be, mm)[0];
  ASSERT_EQ(z.shape(), (std::vector<int64_t>{2, 3, 3, 2}));
  ref.clear();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t n = 0; n < 2; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < 4; ++k) acc += at(p, (i * 3 + m) * 4 + k) * at(q, (j * 4 + k) * 2 + n);
          ref.push_back(acc);
        }
  expect_near(z, ref);
}

TEST(OpsForward, PoolingMatchesLoops) {
  Tensor x = random_tensor({1, 2, 5, 5}, 9);
  CpuBackend be;
  for (bool is_max : {true, false}) {
    for (bool include_pad : {false, true}) {
      OneOp o = make_op(is_max ? "MaxPool" : "AveragePool",
                        graph::PoolAttrs{is_max ? graph::PoolKind::kMax : graph::PoolKind::kAverage,
                                         {3, 3},
                                         {2, 2},
                                         {1, 1, 1, 1},
                                         include_pad,
                                         false,
                                         {}},
                        {{"x", x, kIn}});
      Tensor y = run_forward(be, o)[0];
      std::vector<double> ref;
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t oh = 0; oh < 3; ++oh)
          for (int64_t ow = 0; ow < 3; ++ow) {
            double best = -1e30, sum = 0;
            int count = 0;
            for (int64_t kh = 0; kh < 3; ++kh)
              for (int64_t kw = 0; kw < 3; ++kw) {
                int64_t const ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
                if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
                double const v = at(x, (c * 5 + ih) * 5 + iw);
                best = std::max(best, v);
                sum += v;
                ++count;
              }
            ref.push_back(is_max ? best : sum / (include_pad ? 9 : count));
          }
      expect_near(y, ref);
    }
  }
}

// Dilated windows (taps 2 apart along H, 3 along W) and ceil_mode's extra windows, clipped by the
// pads: the maximum, and the average over the taps inside the input or, with count_include_pad,
// inside the padded input (ONNX's and PyTorch's divisor: not the whole kernel where a ceil_mode
// window reaches past the end pad).
TEST(OpsForward, DilatedAndCeilModePoolingMatchesLoops) {
  struct Window {
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;
    bool ceil;
  };
  int64_t const H = 7, W = 8;
  Tensor x = random_tensor({1, 2, H, W}, 19);
  CpuBackend be;
  for (Window const& c : {Window{3, 2, 2, 1, 2, 3, 1, 2, false}, Window{3, 3, 2, 2, 1, 1, 1, 1, true},
                          Window{2, 3, 2, 3, 3, 1, 1, 1, true}}) {
    auto const outs = [&](int64_t in, int64_t k, int64_t st, int64_t d, int64_t pd) {
      int64_t const span = in + 2 * pd - ((k - 1) * d + 1);
      int64_t o = (c.ceil ? (span + st - 1) / st : span / st) + 1;
      if (c.ceil && (o - 1) * st >= in + pd) --o;
      return o;
    };
    int64_t const oh_n = outs(H, c.kh, c.sh, c.dh, c.ph), ow_n = outs(W, c.kw, c.sw, c.dw, c.pw);
    for (bool is_max : {true, false}) {
      for (bool include_pad : {false, true}) {
        graph::PoolAttrs a{is_max ? graph::PoolKind::kMax : graph::PoolKind::kAverage,
                           {c.kh, c.kw},
                           {c.sh, c.sw},
                           {c.ph, c.pw, c.ph, c.pw},
                           include_pad,
                           c.ceil,
                           {c.dh, c.dw}};
        SCOPED_TRACE(std::string(is_max        ? "max"
                                 : include_pad ? "average, pads counted"
                                               : "average") +
                     (c.ceil ? ", ceil_mode" : "") + ", kernel " + std::to_string(c.kh) + "x" + std::to_string(c.kw));
        Tensor y = run_forward(be, make_op(is_max ? "MaxPool" : "AveragePool", a, {{"x", x, kIn}}))[0];
        ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 2, oh_n, ow_n}));
        std::vector<double> ref;
        for (int64_t ch = 0; ch < 2; ++ch)
          for (int64_t oh = 0; oh < oh_n; ++oh)
            for (int64_t ow = 0; ow < ow_n; ++ow) {
              double best = -1e30, sum = 0;
              int inside = 0, padded = 0;
              for (int64_t kh = 0; kh < c.kh; ++kh)
                for (int64_t kw = 0; kw < c.kw; ++kw) {
                  int64_t const ih = oh * c.sh - c.ph + kh * c.dh, iw = ow * c.sw - c.pw + kw * c.dw;
                  if (ih < H + c.ph && iw < W + c.pw) ++padded;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  double const v = at(x, (ch * H + ih) * W + iw);
                  best = std::max(best, v);
                  sum += v;
                  ++inside;
                }
              ref.push_back(is_max ? best : sum / (include_pad ? padded : inside));
            }
        expect_near(y, ref);
      }
    }
  }
}

// MaxPool's Indices (torch's return_indices, which MaxUnpool scatters by): each output's arg-max,
// the first largest element of its window, as an index into the whole input flattened (ONNX's
// storage_order 0), for every image and channel, dilated and padded windows too.
TEST(OpsForward, MaxPoolIndicesIndexTheWholeInput) {
  int64_t const N = 2, C = 2, H = 5, W = 6;
  Tensor x = random_tensor({N, C, H, W}, 23);
  x.data<float>()[7] = x.data<float>()[8] = 10.f;  // a tie in row 1's first window: the first wins
  CpuBackend be;
  graph::PoolAttrs const a{graph::PoolKind::kMax, {2, 3}, {2, 2}, {1, 0, 0, 1}, false, false, {2, 1}};
  std::vector<Tensor> const out =
      run_forward(be, make_op("MaxPool", a, {{"x", x, kIn}}, 2, {DType::kFloat32, DType::kInt64}));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].dtype(), DType::kInt64);
  ASSERT_EQ(out[1].shape(), out[0].shape());
  int64_t const OH = out[0].dim(2), OW = out[0].dim(3);
  std::vector<int64_t> want;
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t arg = -1;
        for (int64_t kh = 0; kh < 2; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            int64_t const ih = oh * 2 - 1 + kh * 2, iw = ow * 2 + kw;
            if (ih < 0 || ih >= H || iw >= W) continue;
            int64_t const flat = (p * H + ih) * W + iw;
            if (arg < 0 || x.data<float>()[flat] > x.data<float>()[arg]) arg = flat;
          }
        want.push_back(arg);
      }
  std::vector<int64_t> const got(out[1].data<int64_t>(), out[1].data<int64_t>() + out[1].numel());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got[static_cast<std::size_t>(OW)], 7);  // plane 0, output row 1 (input rows 1 and 3), column 0
  for (int64_t e = 0; e < out[0].numel(); ++e)
    EXPECT_EQ(out[0].data<float>()[e], x.data<float>()[got[static_cast<std::size_t>(e)]]) << e;
}

// Ids and masks move as their bytes: XLNet transposes its int64 ids to [T, N], and HF's causal
// mask (transformers 5, TorchScript) is a bool tensor gathered by computed positions. Before
// 2026-12-03 both were refused ("input 0 has dtype bool (expected float32)", "no kernel for dtype
// int64").
TEST(OpsForward, TransposeAndGatherMoveIdsAndMasks) {
  CpuBackend be;
  std::vector<int64_t> ids(24);
  for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = 1000 + static_cast<int64_t>(k) * 7;
  Tensor x = int_tensor({2, 3, 4}, ids);
  Tensor t =
      run_forward(be, make_op("Transpose", graph::TransposeAttrs{{2, 0, 1}}, {{"x", x, kIn}}, 1, {DType::kInt64}))[0];
  ASSERT_EQ(t.dtype(), DType::kInt64);
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{4, 2, 3}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(t.data<int64_t>()[(c * 2 + a) * 3 + b], ids[static_cast<std::size_t>((a * 3 + b) * 4 + c)]);

  // A bool mask [2, 4, 3] gathered along axis 1 by [2, 2] indices (one negative): [2, 2, 2, 3].
  Tensor mask({2, 4, 3}, DType::kBool);
  for (int64_t k = 0; k < 24; ++k) static_cast<uint8_t*>(mask.raw())[k] = (k * 5 % 7) < 3 ? 1 : 0;
  std::vector<int64_t> const rows = {3, -1, 0, 2};
  Tensor g = run_forward(be, make_op("Gather", graph::GatherAttrs{1},
                                     {{"m", mask, kIn}, {"i", int_tensor({2, 2}, rows), kIn}}, 1, {DType::kBool}))[0];
  ASSERT_EQ(g.dtype(), DType::kBool);
  ASSERT_EQ(g.shape(), (std::vector<int64_t>{2, 2, 2, 3}));
  auto const* m = static_cast<uint8_t const*>(mask.raw());
  auto const* got = static_cast<uint8_t const*>(g.raw());
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 4; ++j) {
      int64_t const row = rows[static_cast<std::size_t>(j)] < 0 ? rows[static_cast<std::size_t>(j)] + 4
                                                                : rows[static_cast<std::size_t>(j)];
      for (int64_t w = 0; w < 3; ++w) EXPECT_EQ(got[(o * 4 + j) * 3 + w], m[(o * 4 + row) * 3 + w]) << o << j << w;
    }
  // int32 data by int32 indices; an index out of range is named.
  Tensor i32 = int32_tensor({3, 2}, {5, 6, 7, 8, 9, 10});
  Tensor r = run_forward(be, make_op("Gather", graph::GatherAttrs{0},
                                     {{"x", i32, kIn}, {"i", int32_tensor({2}, {2, 0}), kIn}}, 1, {DType::kInt32}))[0];
  EXPECT_EQ(std::vector<int32_t>(r.data<int32_t>(), r.data<int32_t>() + 4), (std::vector<int32_t>{9, 10, 5, 6}));
  OneOp bad =
      make_op("Gather", graph::GatherAttrs{0}, {{"x", i32, kIn}, {"i", int_tensor({1}, {3}), kIn}}, 1, {DType::kInt32});
  std::vector<Tensor> out;
  Status const s = be.forward(OpCall{bad.the_op(), bad.graph, true, 7}, bad.inputs, out, nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("index 3 (position 0) is out of range for axis 0 of [3,2]"), std::string::npos)
      << s.message();
}

// Clip of integers (token ids clamped into a vocabulary; DeBERTa's relative position buckets in a
// TorchScript export of SEW-D, which stopped there with "input 0 has dtype int64 (expected
// float32)"): each bound optional and exact (int64 bounds past float32's 2^24), a lower bound above
// the upper gives the upper, and int32, int8 and uint8 alike.
TEST(OpsForward, ClipOfIntegersClampsWithExactOptionalBounds) {
  constexpr graph::TensorRole kC = graph::TensorRole::kConstant;
  CpuBackend be;
  auto clip = [&](Tensor const& x, Tensor const& lo, Tensor const& hi) {
    return run_forward(
        be, make_op("Clip", graph::ClipAttrs{}, {{"x", x, kIn}, {"lo", lo, kC}, {"hi", hi, kC}}, 1, {x.dtype()}))[0];
  };
  int64_t const big = (int64_t{1} << 40) + 1;  // float32 would round it to 2^40
  Tensor x = int_tensor({2, 3}, {-5, 0, big + 9, 7, big, -(big + 3)});
  Tensor y = clip(x, int_tensor({}, {-big}), int_tensor({}, {big}));
  EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 6),
            (std::vector<int64_t>{-5, 0, big, 7, big, -big}));
  Tensor upper = clip(x, Tensor(), int_tensor({}, {3}));  // no lower bound
  EXPECT_EQ(std::vector<int64_t>(upper.data<int64_t>(), upper.data<int64_t>() + 6),
            (std::vector<int64_t>{-5, 0, 3, 3, 3, -(big + 3)}));
  Tensor crossed = clip(x, int_tensor({}, {4}), int_tensor({}, {2}));  // lo > hi: every element is hi
  EXPECT_EQ(std::vector<int64_t>(crossed.data<int64_t>(), crossed.data<int64_t>() + 6), (std::vector<int64_t>(6, 2)));
  Tensor y32 = clip(int32_tensor({4}, {-9, 1, 5, 12}), int32_tensor({}, {0}), int32_tensor({}, {10}));
  EXPECT_EQ(std::vector<int32_t>(y32.data<int32_t>(), y32.data<int32_t>() + 4), (std::vector<int32_t>{0, 1, 5, 10}));
  auto bytes = [](DType d, std::vector<int> const& v) {
    Tensor t({static_cast<int64_t>(v.size())}, d);
    for (std::size_t k = 0; k < v.size(); ++k) static_cast<uint8_t*>(t.raw())[k] = static_cast<uint8_t>(v[k]);
    return t;
  };
  Tensor y8 = clip(bytes(DType::kInt8, {-128, -3, 4, 127}), bytes(DType::kInt8, {-4}), bytes(DType::kInt8, {100}));
  auto const* i8 = static_cast<int8_t const*>(y8.raw());
  EXPECT_EQ(std::vector<int>(i8, i8 + 4), (std::vector<int>{-4, -3, 4, 100}));
  Tensor yu8 = clip(bytes(DType::kUInt8, {0, 3, 200, 255}), bytes(DType::kUInt8, {2}), bytes(DType::kUInt8, {250}));
  auto const* u8 = static_cast<uint8_t const*>(yu8.raw());
  EXPECT_EQ(std::vector<int>(u8, u8 + 4), (std::vector<int>{2, 3, 200, 250}));
  // A bound of another dtype is refused by name, before any kernel runs.
  OneOp mixed = make_op("Clip", graph::ClipAttrs{},
                        {{"x", x, kIn}, {"lo", int32_tensor({}, {0}), kC}, {"hi", Tensor(), kC}}, 1, {DType::kInt64});
  Status const s = be.supports(mixed.the_op(), mixed.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("has a bound of dtype int32 for int64 values"), std::string::npos) << s.message();
}

// Neg, Abs and Sign of integers (relative positions computed per micro-batch; SEW-D's TorchScript
// file had an int64 Neg before its positions folded): two's complement, so the most negative value
// negates to itself, as torch and ONNX Runtime give it.
TEST(OpsForward, NegAbsAndSignOfIntegers) {
  CpuBackend be;
  auto run = [&](char const* op, Tensor const& x) {
    return run_forward(be, make_op(op, {}, {{"x", x, kIn}}, 1, {x.dtype()}))[0];
  };
  int64_t const lowest = std::numeric_limits<int64_t>::min();
  Tensor x = int_tensor({5}, {-7, 0, 3, lowest, std::numeric_limits<int64_t>::max()});
  auto values = [](Tensor const& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()); };
  EXPECT_EQ(values(run("Neg", x)), (std::vector<int64_t>{7, 0, -3, lowest, -std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(values(run("Abs", x)), (std::vector<int64_t>{7, 0, 3, lowest, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(values(run("Sign", x)), (std::vector<int64_t>{-1, 0, 1, -1, 1}));
  Tensor s32 = run("Sign", int32_tensor({3}, {-2, 0, 9}));
  EXPECT_EQ(std::vector<int32_t>(s32.data<int32_t>(), s32.data<int32_t>() + 3), (std::vector<int32_t>{-1, 0, 1}));
  Tensor i8({3}, DType::kInt8);
  int8_t const in8[3] = {-128, -5, 6};
  std::memcpy(i8.raw(), in8, 3);
  Tensor a8 = run("Abs", i8);
  auto const* got8 = static_cast<int8_t const*>(a8.raw());
  EXPECT_EQ(std::vector<int>(got8, got8 + 3), (std::vector<int>{-128, 5, 6}));
  Tensor u8({2}, DType::kUInt8);
  uint8_t const inu[2] = {0, 200};
  std::memcpy(u8.raw(), inu, 2);
  Tensor su = run("Sign", u8);
  auto const* gotu = static_cast<uint8_t const*>(su.raw());
  EXPECT_EQ(std::vector<int>(gotu, gotu + 2), (std::vector<int>{0, 1}));
}

// ReduceSum, ReduceProd, ReduceMax and ReduceMin of integers (XLM's and FlauBERT's sequence
// lengths, `(ids != pad).sum(1)`, stopped training with "input 0 has dtype int64 (expected
// float32)"): exact past float32's 2^24, wrapping as two's complement, over any axes, with and
// without keepdims; Max and Min of bool are any and all; an empty reduction gives the identity.
TEST(OpsForward, IntegerReductions) {
  CpuBackend be;
  auto run = [&](char const* op, graph::ReduceAttrs a, Tensor const& x) {
    return run_forward(be, make_op(op, a, {{"x", x, kIn}}, 1, {x.dtype()}))[0];
  };
  auto values = [](Tensor const& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()); };
  int64_t const big = (int64_t{1} << 40) + 1;
  // [2, 3]: rows {1, big, -4} and {7, 0, 2}
  Tensor x = int_tensor({2, 3}, {1, big, -4, 7, 0, 2});
  Tensor sum1 = run("ReduceSum", graph::ReduceAttrs{{1}, false}, x);
  EXPECT_EQ(sum1.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(sum1), (std::vector<int64_t>{big - 3, 9}));
  Tensor sum0 = run("ReduceSum", graph::ReduceAttrs{{0}, true}, x);
  EXPECT_EQ(sum0.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values(sum0), (std::vector<int64_t>{8, big, -2}));
  EXPECT_EQ(values(run("ReduceMax", graph::ReduceAttrs{{1}, false}, x)), (std::vector<int64_t>{big, 7}));
  EXPECT_EQ(values(run("ReduceMin", graph::ReduceAttrs{{0, 1}, false}, x)), (std::vector<int64_t>{-4}));
  EXPECT_EQ(values(run("ReduceProd", graph::ReduceAttrs{{0}, false}, x)), (std::vector<int64_t>{7, 0, -8}));
  // Axes 0 and 2 of [2, 2, 3] (not adjacent), int32.
  Tensor x3 = int32_tensor({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor s3 = run("ReduceSum", graph::ReduceAttrs{{0, 2}, false}, x3);
  EXPECT_EQ(std::vector<int32_t>(s3.data<int32_t>(), s3.data<int32_t>() + 2), (std::vector<int32_t>{30, 48}));
  // Wrap-around: int32's largest plus one is its lowest.
  Tensor w =
      run("ReduceSum", graph::ReduceAttrs{{0}, false}, int32_tensor({2}, {std::numeric_limits<int32_t>::max(), 1}));
  EXPECT_EQ(w.data<int32_t>()[0], std::numeric_limits<int32_t>::min());
  // bool: Max is any, Min is all, per row of [2, 3].
  Tensor mask({2, 3}, DType::kBool);
  uint8_t const bits[6] = {0, 1, 0, 1, 1, 1};
  std::memcpy(mask.raw(), bits, 6);
  Tensor any = run("ReduceMax", graph::ReduceAttrs{{1}, false}, mask);
  Tensor all = run("ReduceMin", graph::ReduceAttrs{{1}, false}, mask);
  EXPECT_EQ(any.dtype(), DType::kBool);
  auto const* a8 = static_cast<uint8_t const*>(any.raw());
  auto const* l8 = static_cast<uint8_t const*>(all.raw());
  EXPECT_EQ(std::vector<int>(a8, a8 + 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(std::vector<int>(l8, l8 + 2), (std::vector<int>{0, 1}));
  // An empty axis: the identities 0, 1, the lowest and the highest value.
  Tensor empty = int_tensor({2, 0}, {});
  EXPECT_EQ(values(run("ReduceSum", graph::ReduceAttrs{{1}, false}, empty)), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(values(run("ReduceProd", graph::ReduceAttrs{{1}, false}, empty)), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(values(run("ReduceMax", graph::ReduceAttrs{{1}, false}, empty))[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(values(run("ReduceMin", graph::ReduceAttrs{{1}, false}, empty))[0], std::numeric_limits<int64_t>::max());
  // noop_with_empty_axes: the input itself.
  EXPECT_EQ(values(run("ReduceSum", graph::ReduceAttrs{{}, true, true}, x)), values(x));
}

TEST(OpsForward, NormsAndSoftmaxMatchFormulas) {
  CpuBackend be;
  Tensor x = random_tensor({3, 2, 4}, 10), s = random_tensor({2}, 11), b = random_tensor({2}, 12);
  Tensor m = Tensor::from_floats({2}, {0.1f, -0.2f}), v = Tensor::from_floats({2}, {1.f, 2.f});
  OneOp bn = make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
                     {{"x", x, kIn},
                      {"s", s, kW},
                      {"b", b, kW},
                      {"m", m, graph::TensorRole::kConstant},
                      {"v", v, graph::TensorRole::kConstant}},
                     3);
  std::vector<Tensor> out = run_forward(be, bn, true);
  std::vector<double> ref(24), run_mean, run_var;
  for (int64_t c = 0; c < 2; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 4; ++i) mean += at(x, (n * 2 + c) * 4 + i) / 12;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 4; ++i) var += std::pow(at(x, (n * 2 + c) * 4 + i) - mean, 2) / 12;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 4; ++i)
        ref[(n * 2 + c) * 4 + i] = (at(x, (n * 2 + c) * 4 + i) - mean) / std::sqrt(var + 1e-5) * at(s, c) + at(b, c);
    run_mean.push_back(at(m, c) * 0.9 + mean * 0.1);
    run_var.push_back(at(v, c) * 0.9 + var * 12 / 11 * 0.1);  // torch: the unbiased batch variance
  }
  expect_near(out[0], ref, 1e-4);
  expect_near(out[1], run_mean);
  expect_near(out[2], run_var);
  // The updated running statistics come back even when the graph names only output 0 (as the
  // importer builds it), so the executor can store them.
  OneOp bn1 = make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
                      {{"x", x, kIn},
                       {"s", s, kW},
                       {"b", b, kW},
                       {"m", m, graph::TensorRole::kConstant},
                       {"v", v, graph::TensorRole::kConstant}});
  out = run_forward(be, bn1, true);
  ASSERT_EQ(out.size(), 3u);
  expect_near(out[1], run_mean);
  expect_near(out[2], run_var);

  // Inference uses the given statistics.
  out = run_forward(be, bn, false);
  for (int64_t i = 0; i < 24; ++i) {
    int64_t const c = (i / 4) % 2;
    ref[i] = (at(x, i) - at(m, c)) / std::sqrt(at(v, c) + 1e-5) * at(s, c) + at(b, c);
  }
  expect_near(out[0], ref, 1e-4);

  Tensor g = random_tensor({4}, 13), h = random_tensor({4}, 14);
  OneOp ln =
      make_op("LayerNormalization", graph::LayerNormAttrs{2, 1e-5f, true}, {{"x", x, kIn}, {"g", g, kW}, {"h", h, kW}});
  Tensor y = run_forward(be, ln)[0];
  for (int64_t r = 0; r < 6; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < 4; ++i) mean += at(x, r * 4 + i) / 4;
    for (int64_t i = 0; i < 4; ++i) var += std::pow(at(x, r * 4 + i) - mean, 2) / 4;
    for (int64_t i = 0; i < 4; ++i)
      ref[r * 4 + i] = (at(x, r * 4 + i) - mean) / std::sqrt(var + 1e-5) * at(g, i) + at(h, i);
  }
  expect_near(y, ref, 1e-4);

  OneOp sm = make_op("Softmax", graph::SoftmaxAttrs{1}, {{"x", x, kIn}});
  y = run_forward(be, sm)[0];
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t i = 0; i < 4; ++i) {
      double const e0 = std::exp(at(x, (n * 2) * 4 + i)), e1 = std::exp(at(x, (n * 2 + 1) * 4 + i));
      ref[(n * 2) * 4 + i] = e0 / (e0 + e1);
      ref[(n * 2 + 1) * 4 + i] = e1 / (e0 + e1);
    }
  expect_near(y, ref);
}

TEST(OpsForward, ElementwiseMatchesStdMath) {
  CpuBackend be;
  Tensor x = random_tensor({3, 5}, 15, 0.1f, 2.f);
  Tensor pos = random_tensor({3, 5}, 16, 0.1f, 2.f, true);
  struct Case {
    char const* type;
    graph::OpAttrs attrs;
    Tensor const* in;
    double (*f)(double);
  };
  std::vector<Case> const cases = {
      {"Relu", {}, &x, [](double v) { return v > 0 ? v : 0; }},
      {"LeakyRelu", graph::LeakyReluAttrs{0.1f}, &x, [](double v) { return v > 0 ? v : 0.1 * v; }},
      {"Sigmoid", {}, &x, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"Tanh", {}, &x, [](double v) { return std::tanh(v); }},
      {"Gelu", graph::GeluAttrs{false}, &x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"Erf", {}, &x, [](double v) { return std::erf(v); }},
      {"Sqrt", {}, &pos, [](double v) { return std::sqrt(v); }},
      {"Exp", {}, &x, [](double v) { return std::exp(v); }},
      {"Log", {}, &pos, [](double v) { return std::log(v); }},
      {"Abs", {}, &x, [](double v) { return std::fabs(v); }},
      {"Neg", {}, &x, [](double v) { return -v; }},
  };
  for (Case const& c : cases) {
    SCOPED_TRACE(c.type);
    Tensor y = run_forward(be, make_op(c.type, c.attrs, {{"x", *c.in, kIn}}))[0];
    std::vector<double> ref;
    for (int64_t i = 0; i < c.in->numel(); ++i) ref.push_back(c.f(at(*c.in, i)));
    expect_near(y, ref);
  }
  Tensor y = run_forward(
      be,
      make_op("Pow", {}, {{"x", pos, kIn}, {"e", Tensor::from_floats({1}, {1.5f}), graph::TensorRole::kConstant}}))[0];
  std::vector<double> ref;
  for (int64_t i = 0; i < pos.numel(); ++i) ref.push_back(std::pow(at(pos, i), 1.5));
  expect_near(y, ref);
}

TEST(OpsForward, BinaryBroadcastsLikeNumpy) {
  CpuBackend be;
  Tensor a = random_tensor({3, 1}, 17), b = random_tensor({2, 1, 4}, 18, 0.5f, 1.f);
  for (char const* t : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(t);
    Tensor y = run_forward(be, make_op(t, {}, {{"a", a, kIn}, {"b", b, kIn}}))[0];
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 4}));
    std::vector<double> ref;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          double const u = at(a, j), v = at(b, i * 4 + k);
          std::string const s = t;
          ref.push_back(s == "Add" ? u + v : s == "Sub" ? u - v : s == "Mul" ? u * v : u / v);
        }
    expect_near(y, ref);
  }
}

TEST(OpsForward, DataMovementMatchesIndexing) {
  CpuBackend be;
  Tensor x = random_tensor({2, 3, 4}, 19);
  Tensor t = run_forward(be, make_op("Transpose", graph::TransposeAttrs{{2, 0, 1}}, {{"x", x, kIn}}))[0];
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{4, 2, 3}));
  std::vector<double> ref;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) ref.push_back(at(x, (i * 3 + j) * 4 + k));
  expect_near(t, ref);

  Tensor s =
      run_forward(be, make_op("Slice", graph::SliceAttrs{{-1, 1}, {-100, 4}, {2, 1}, {-2, 1}}, {{"x", x, kIn}}))[0];
  ASSERT_EQ(s.shape(), (std::vector<int64_t>{2, 2, 2}));
  ref.clear();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 1; j < 3; ++j)
      for (int64_t k = 3; k >= 0; k -= 2) ref.push_back(at(x, (i * 3 + j) * 4 + k));
  expect_near(s, ref);

  Tensor idx = int_tensor({2}, {2, -3});
  Tensor g = run_forward(be, make_op("Gather", graph::GatherAttrs{1}, {{"x", x, kIn}, {"i", idx, kIn}}))[0];
  ASSERT_EQ(g.shape(), (std::vector<int64_t>{2, 2, 4}));
  ref.clear();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j : {2, 0})
      for (int64_t k = 0; k < 4; ++k) ref.push_back(at(x, (i * 3 + j) * 4 + k));
  expect_near(g, ref);

  Tensor r = run_forward(be, make_op("ReduceMean", graph::ReduceAttrs{{0, 2}, false}, {{"x", x, kIn}}))[0];
  ASSERT_EQ(r.shape(), (std::vector<int64_t>{3}));
  ref.assign(3, 0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) ref[j] += at(x, (i * 3 + j) * 4 + k) / 8;
  expect_near(r, ref);

  Tensor y = random_tensor({2, 1, 4}, 20);
  Tensor c = run_forward(be, make_op("Concat", graph::ConcatAttrs{1}, {{"x", x, kIn}, {"y", y, kIn}}))[0];
  ASSERT_EQ(c.shape(), (std::vector<int64_t>{2, 4, 4}));
  ref.clear();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 4; ++k) ref.push_back(j < 3 ? at(x, (i * 3 + j) * 4 + k) : at(y, i * 4 + k));
  expect_near(c, ref);

  std::vector<Tensor> parts = run_forward(be, make_op("Split", graph::SplitAttrs{2, {}}, {{"x", x, kIn}}, 2));
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_EQ(parts[1].shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(parts[1].data<float>()[0], x.data<float>()[2]);

  Tensor e = run_forward(be, make_op("Expand", graph::ExpandAttrs{{2, 1, 1}}, {{"y", y.reshaped({2, 4}), kIn}}))[0];
  ASSERT_EQ(e.shape(), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(e.data<float>()[8 + 4 + 3], y.data<float>()[7]);
}

// Expand also broadcasts masks and indices (a bool causal mask and int64 token types over the
// micro-batch): bytes copied per element, the dtype kept.
TEST(OpsForward, ExpandCopiesBoolAndInt64) {
  CpuBackend be;
  Tensor mask({1, 2, 2}, DType::kBool);
  uint8_t const m[] = {1, 0, 1, 1};
  std::memcpy(mask.raw(), m, sizeof(m));
  Tensor e = run_forward(be, make_op("Expand", graph::ExpandAttrs{{3, 2, 2}}, {{"m", mask, kIn}}))[0];
  ASSERT_EQ(e.dtype(), DType::kBool);
  ASSERT_EQ(e.shape(), (std::vector<int64_t>{3, 2, 2}));
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(e.data<uint8_t>()[k], m[k % 4]) << k;
  Tensor ids({2, 1}, DType::kInt64);
  ids.data<int64_t>()[0] = 7;
  ids.data<int64_t>()[1] = -3000000000;
  Tensor f = run_forward(be, make_op("Expand", graph::ExpandAttrs{{2, 3}}, {{"i", ids, kIn}}))[0];
  ASSERT_EQ(f.dtype(), DType::kInt64);
  std::vector<int64_t> const got(f.data<int64_t>(), f.data<int64_t>() + f.numel());
  EXPECT_EQ(got, (std::vector<int64_t>{7, 7, 7, -3000000000, -3000000000, -3000000000}));
}

TEST(OpsForward, DropoutIsReproducibleAndScaled) {
  CpuBackend be;
  Tensor x = Tensor::from_floats({1000}, std::vector<float>(1000, 1.f));
  OneOp o = make_op("Dropout", graph::DropoutAttrs{0.25f, true}, {{"x", x, kIn}}, 2);
  Tensor a = run_forward(be, o, true, 11)[0], b = run_forward(be, o, true, 11)[0], c = run_forward(be, o, true, 12)[0];
  EXPECT_EQ(a.to_vector(), b.to_vector());
  EXPECT_NE(a.to_vector(), c.to_vector());
  int kept = 0;
  for (float v : a.to_vector()) {
    EXPECT_TRUE(v == 0.f || std::fabs(v - 1.f / 0.75f) < 1e-6);
    kept += v != 0.f;
  }
  EXPECT_NEAR(kept, 750, 60);
  EXPECT_EQ(run_forward(be, o, false)[0].to_vector(), x.to_vector());
}

TEST(CpuBackend, MissesNameOpNodeDtypeAndBackend) {
  CpuBackend be;
  OneOp o = make_op("Einsum", {}, {{"x", random_tensor({2}, 21), kIn}});
  Status const s = be.supports(o.the_op(), o.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  for (char const* part : {"Einsum", "Einsum_0", "float32", "cpu"})
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();

  OneOp pow = make_op("Pow", {}, {{"x", random_tensor({2}, 22), kIn}, {"e", int_tensor({2}, {1, 2}), kIn}});
  EXPECT_FALSE(be.supports(pow.the_op(), pow.graph).is_ok());
  OneOp conv =
      make_op("Conv", {}, {{"x", random_tensor({1, 1, 3, 3}, 24), kIn}, {"w", random_tensor({1, 1, 1, 1}, 25), kW}});
  Status const missing = be.supports(conv.the_op(), conv.graph);
  EXPECT_NE(missing.message().find("typed attributes"), std::string::npos) << missing.message();
  Tensor ints = int_tensor({2}, {1, 2});
  OneOp relu = make_op("Relu", {}, {{"x", ints, kIn}});
  EXPECT_NE(be.supports(relu.the_op(), relu.graph).message().find("int64"), std::string::npos);
  EXPECT_FALSE(CpuBackend::op_types().empty());
}

// A kernel resolved once (as StageExecutor does) runs exactly as the per-call lookup; a handle
// resolved by another backend is not trusted (that backend's table entry is not this one's), and
// resolve refuses what supports() refuses, with the same message.
TEST(CpuBackend, ResolvedKernelsRunAsLookedUpOnes) {
  CpuBackend be, other;
  OneOp o = make_op("Mul", {}, {{"a", random_tensor({2, 3}, 30), kIn}, {"b", random_tensor({3}, 31), kIn}});
  auto resolved = be.resolve(o.the_op(), o.graph);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  EXPECT_EQ(resolved->backend, &be);
  EXPECT_NE(resolved->entry, nullptr);
  std::vector<Tensor> looked_up, with_handle, foreign;
  ASSERT_TRUE(be.forward(OpCall{o.the_op(), o.graph}, o.inputs, looked_up, nullptr).is_ok());
  OpCall call{o.the_op(), o.graph};
  call.kernel = *resolved;
  ASSERT_TRUE(be.forward(call, o.inputs, with_handle, nullptr).is_ok());
  EXPECT_EQ(with_handle[0].to_vector(), looked_up[0].to_vector());
  // The Add entry's handle given to a Mul call on another backend: the other backend looks Mul up.
  OneOp add = make_op("Add", {}, {{"a", random_tensor({2, 3}, 30), kIn}, {"b", random_tensor({3}, 31), kIn}});
  auto add_kernel = be.resolve(add.the_op(), add.graph);
  ASSERT_TRUE(add_kernel.is_ok());
  OpCall mul_call{o.the_op(), o.graph};
  mul_call.kernel = *add_kernel;
  ASSERT_TRUE(other.forward(mul_call, o.inputs, foreign, nullptr).is_ok());
  EXPECT_EQ(foreign[0].to_vector(), looked_up[0].to_vector());

  OneOp relu = make_op("Relu", {}, {{"x", int_tensor({2}, {1, 2}), kIn}});
  auto refused = be.resolve(relu.the_op(), relu.graph);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), be.supports(relu.the_op(), relu.graph).message());
  EXPECT_NE(refused.status().message().find("no kernel for dtype int64"), std::string::npos)
      << refused.status().message();
}

TEST(CpuBackend, BadShapesAreErrorsNotCrashes) {
  CpuBackend be;
  OneOp o = make_op("Add", {}, {{"a", random_tensor({2, 3}, 26), kIn}, {"b", random_tensor({4}, 27), kIn}});
  OpCall call{o.the_op(), o.graph, true, 0};
  std::vector<Tensor> out;
  Status const s = be.forward(call, o.inputs, out, nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("broadcast"), std::string::npos) << s.message();
  OneOp g = make_op("Gather", graph::GatherAttrs{0},
                    {{"t", random_tensor({3, 2}, 28), kW}, {"i", int_tensor({1}, {5}), kIn}});
  OpCall gc{g.the_op(), g.graph, true, 0};
  EXPECT_FALSE(be.forward(gc, g.inputs, out, nullptr).is_ok());
}

}  // namespace
}  // namespace gp::exec::testing
