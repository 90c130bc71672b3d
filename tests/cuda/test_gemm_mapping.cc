// The row-major → cuBLASLt mapping (exec/cuda/gemm_mapping.h), checked without a GPU: a naive
// column-major GEMM executes the mapped calls exactly as cuBLASLt documents them, and its result
// must equal a naive row-major reference written from the ONNX definitions.
#include "exec/cuda/gemm_mapping.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>

namespace gp::exec::cuda {
namespace {

using Bufs = std::map<Buf, std::vector<float>>;
float const kNaN = std::numeric_limits<float>::quiet_NaN();

float& at(std::vector<float>& v, int64_t i) {
  if (i < 0 || i >= static_cast<int64_t>(v.size())) throw std::out_of_range("buffer index " + std::to_string(i));
  return v[static_cast<std::size_t>(i)];
}

// cuBLASLt's column-major semantics (see gemm_mapping.h), with bounds-checked buffers.
void run_call(LtCall const& c, Bufs& bufs) {
  if (c.kind == LtKind::kAxpby) {
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        float v = c.alpha * at(bufs[c.a], c.offset_a + i + j * c.lda);
        if (c.c != Buf::kNone && c.beta != 0.f) v += c.beta * at(bufs[c.c], c.offset_c + i + j * c.ldc);
        at(bufs[c.d], c.offset_c + i + j * c.ldc) = v;
      }
    return;
  }
  // cuBLASLt requires ld >= the stored rows.
  if (c.lda < (c.op_a == LtOp::kN ? c.m : c.k) || c.ldb < (c.op_b == LtOp::kN ? c.k : c.n) || c.ldc < c.m)
    throw std::invalid_argument("leading dimension below the stored rows: " + describe(c));
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t const oa = c.offset_a + b * c.stride_a, ob = c.offset_b + b * c.stride_b, oc = c.offset_c + b * c.stride_c;
    auto opa = [&](int64_t i, int64_t l) {
      return at(bufs[c.a], oa + (c.op_a == LtOp::kN ? i + l * c.lda : l + i * c.lda));
    };
    auto opb = [&](int64_t l, int64_t j) {
      return at(bufs[c.b], ob + (c.op_b == LtOp::kN ? l + j * c.ldb : j + l * c.ldb));
    };
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        double s = 0;
        for (int64_t l = 0; l < c.k; ++l) s += static_cast<double>(opa(i, l)) * opb(l, j);
        float v = c.alpha * static_cast<float>(s);
        if (c.beta != 0.f) v += c.beta * at(bufs[c.c], oc + i + j * c.ldc);
        if (c.epilogue == LtEpilogue::kBias) v += at(bufs[c.bias], i);
        at(bufs[c.d], oc + i + j * c.ldc) = v;
      }
    if (c.epilogue == LtEpilogue::kBgradA)
      for (int64_t i = 0; i < c.m; ++i) {
        double s = 0;
        for (int64_t l = 0; l < c.k; ++l) s += opa(i, l);
        at(bufs[c.bias], i) = static_cast<float>(s);
      }
    if (c.epilogue == LtEpilogue::kBgradB)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < c.k; ++l) s += opb(l, j);
        at(bufs[c.bias], j) = static_cast<float>(s);
      }
  }
}

void run_plan(GemmPlan const& plan, Bufs& bufs) {
  bufs[Buf::kOnes].assign(static_cast<std::size_t>(plan.ones), 1.f);
  bufs[Buf::kTmp].assign(static_cast<std::size_t>(plan.tmp), kNaN);  // a read before a write shows
  for (LtCall const& c : plan.calls) run_call(c, bufs);
  if (plan.add_tmp_into_dc)
    for (std::size_t i = 0; i < bufs[Buf::kDC].size(); ++i) bufs[Buf::kDC][i] += bufs[Buf::kTmp].at(i);
}

std::vector<float> random_vec(int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = u(g);
  return v;
}

int64_t numel(std::vector<int64_t> const& s) {
  int64_t p = 1;
  for (int64_t v : s) p *= v;
  return p;
}

::testing::AssertionResult near(std::vector<float> const& got, std::vector<float> const& want,
                                std::string const& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f + 1e-4f * std::fabs(want[i])))
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

// ---- Gemm reference (row-major, straight from the ONNX definition) ----
struct GemmCase {
  int64_t m = 3, n = 4, k = 5;
  bool ta = false, tb = false;
  float alpha = 1.f, beta = 1.f;
  std::vector<int64_t> c_shape;
  bool has_c = false;
};

float c_at(std::vector<float> const& c, std::vector<int64_t> const& shape, int64_t i, int64_t j) {
  if (numel(shape) == 1) return c[0];
  if (shape.size() == 1) return c[static_cast<std::size_t>(j)];
  return c[static_cast<std::size_t>((shape[0] == 1 ? 0 : i) * shape[1] + (shape[1] == 1 ? 0 : j))];
}

struct GemmData {
  std::vector<float> a, b, c, dy;
};

GemmData gemm_data(GemmCase const& t) {
  return {random_vec(t.m * t.k, 1), random_vec(t.k * t.n, 2),
          t.has_c ? random_vec(numel(t.c_shape), 3) : std::vector<float>{}, random_vec(t.m * t.n, 4)};
}

float opa(GemmCase const& t, std::vector<float> const& a, int64_t i, int64_t l) {
  return t.ta ? a[static_cast<std::size_t>(l * t.m + i)] : a[static_cast<std::size_t>(i * t.k + l)];
}
float opb(GemmCase const& t, std::vector<float> const& b, int64_t l, int64_t j) {
  return t.tb ? b[static_cast<std::size_t>(j * t.k + l)] : b[static_cast<std::size_t>(l * t.n + j)];
}

std::vector<float> gemm_ref(GemmCase const& t, GemmData const& d) {
  std::vector<float> y(static_cast<std::size_t>(t.m * t.n));
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < t.k; ++l) s += static_cast<double>(opa(t, d.a, i, l)) * opb(t, d.b, l, j);
      y[static_cast<std::size_t>(i * t.n + j)] =
          t.alpha * static_cast<float>(s) + (t.has_c ? t.beta * c_at(d.c, t.c_shape, i, j) : 0.f);
    }
  return y;
}

// dA, dB, dC from the definition: dop(A) = α dY op(B)ᵀ, dop(B) = α op(A)ᵀ dY, dC = β Σ over broadcast.
void gemm_grad_ref(GemmCase const& t, GemmData const& d, std::vector<float>& da, std::vector<float>& db,
                   std::vector<float>& dc) {
  da.assign(static_cast<std::size_t>(t.m * t.k), 0.f);
  db.assign(static_cast<std::size_t>(t.k * t.n), 0.f);
  dc.assign(static_cast<std::size_t>(t.has_c ? numel(t.c_shape) : 0), 0.f);
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      float const g = d.dy[static_cast<std::size_t>(i * t.n + j)];
      for (int64_t l = 0; l < t.k; ++l) {
        da[static_cast<std::size_t>(t.ta ? l * t.m + i : i * t.k + l)] += t.alpha * g * opb(t, d.b, l, j);
        db[static_cast<std::size_t>(t.tb ? j * t.k + l : l * t.n + j)] += t.alpha * g * opa(t, d.a, i, l);
      }
      if (!t.has_c) continue;
      std::vector<int64_t> const& s = t.c_shape;
      std::size_t idx = 0;
      if (numel(s) == 1)
        idx = 0;
      else if (s.size() == 1)
        idx = static_cast<std::size_t>(j);
      else
        idx = static_cast<std::size_t>((s[0] == 1 ? 0 : i) * s[1] + (s[1] == 1 ? 0 : j));
      dc[idx] += t.beta * g;
    }
}

Result<GemmProblem> problem_of(GemmCase const& t) {
  std::vector<int64_t> const a = t.ta ? std::vector<int64_t>{t.k, t.m} : std::vector<int64_t>{t.m, t.k};
  std::vector<int64_t> const b = t.tb ? std::vector<int64_t>{t.n, t.k} : std::vector<int64_t>{t.k, t.n};
  ASSIGN_OR_RETURN(GemmProblem p, gemm_problem(a, b, t.ta, t.tb, t.alpha, t.beta));
  if (t.has_c) {
    ASSIGN_OR_RETURN(p.bias, gemm_bias_kind(t.c_shape, t.m, t.n));
  }
  return p;
}

std::vector<GemmCase> gemm_cases() {
  std::vector<std::pair<bool, std::vector<int64_t>>> const cs = {{false, {}},    {true, {4}},    {true, {1, 4}},
                                                                 {true, {3, 1}}, {true, {3, 4}}, {true, {1}},
                                                                 {true, {}},     {true, {1, 1}}};
  std::vector<GemmCase> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float alpha : {1.f, 0.5f})
        for (float beta : {1.f, 0.25f, 0.f})
          for (auto const& [has_c, shape] : cs) {
            GemmCase t;
            t.ta = ta, t.tb = tb, t.alpha = alpha, t.beta = beta, t.has_c = has_c, t.c_shape = shape;
            out.push_back(t);
          }
  return out;
}

std::string name_of(GemmCase const& t) {
  std::string s = "ta=" + std::to_string(t.ta) + " tb=" + std::to_string(t.tb) + " alpha=" + std::to_string(t.alpha) +
                  " beta=" + std::to_string(t.beta) + " C=";
  if (!t.has_c) return s + "none";
  for (int64_t v : t.c_shape) s += std::to_string(v) + ",";
  return s + "(rank " + std::to_string(t.c_shape.size()) + ")";
}

TEST(GemmMapping, ForwardEqualsRowMajorReferenceForEveryTransposeScaleAndBiasKind) {
  for (GemmCase const& t : gemm_cases()) {
    SCOPED_TRACE(name_of(t));
    auto p = problem_of(t);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    GemmData const d = gemm_data(t);
    Bufs bufs{{Buf::kA, d.a}, {Buf::kB, d.b}, {Buf::kC, d.c}, {Buf::kY, std::vector<float>(12, kNaN)}};
    run_plan(gemm_forward_plan(*p), bufs);
    EXPECT_TRUE(near(bufs[Buf::kY], gemm_ref(t, d), "Y"));
  }
}

TEST(GemmMapping, BackwardEqualsReferenceFreshAndAccumulated) {
  for (GemmCase const& t : gemm_cases())
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(name_of(t) + " accumulate=" + std::to_string(accumulate));
      auto p = problem_of(t);
      ASSERT_TRUE(p.is_ok()) << p.status().message();
      GemmData const d = gemm_data(t);
      std::vector<float> da, db, dc;
      gemm_grad_ref(t, d, da, db, dc);
      std::vector<float> const ia = random_vec(static_cast<int64_t>(da.size()), 5),
                               ib = random_vec(static_cast<int64_t>(db.size()), 6),
                               ic = random_vec(static_cast<int64_t>(dc.size()), 7);
      Bufs bufs{{Buf::kA, d.a}, {Buf::kB, d.b}, {Buf::kDY, d.dy}};
      bufs[Buf::kDA] = accumulate ? ia : std::vector<float>(da.size(), kNaN);
      bufs[Buf::kDB] = accumulate ? ib : std::vector<float>(db.size(), kNaN);
      bufs[Buf::kDC] = accumulate ? ic : std::vector<float>(dc.size(), kNaN);
      if (accumulate)
        for (std::size_t i = 0; i < da.size(); ++i) da[i] += ia[i];
      if (accumulate)
        for (std::size_t i = 0; i < db.size(); ++i) db[i] += ib[i];
      if (accumulate)
        for (std::size_t i = 0; i < dc.size(); ++i) dc[i] += ic[i];
      run_plan(gemm_backward_plan(*p, true, true, t.has_c, accumulate), bufs);
      EXPECT_TRUE(near(bufs[Buf::kDA], da, "dA"));
      EXPECT_TRUE(near(bufs[Buf::kDB], db, "dB"));
      EXPECT_TRUE(near(bufs[Buf::kDC], dc, "dC"));
    }
}

TEST(GemmMapping, BiasUsesTheBiasEpilogueAndItsGradientBgradWhenNothingScalesThem) {
  GemmCase t;
  t.has_c = true, t.c_shape = {4};
  for (bool tb : {false, true}) {
    t.tb = tb;
    auto p = problem_of(t);
    ASSERT_TRUE(p.is_ok());
    GemmPlan const f = gemm_forward_plan(*p);
    ASSERT_EQ(f.calls.size(), 1u);
    EXPECT_EQ(f.calls[0].epilogue, LtEpilogue::kBias);
    EXPECT_EQ(f.calls[0].m, t.n);  // column-major D is Yᵀ: bias length = D rows = N
    GemmPlan const b = gemm_backward_plan(*p, false, true, true, false);
    ASSERT_EQ(b.calls.size(), 1u);
    EXPECT_EQ(b.calls[0].epilogue, tb ? LtEpilogue::kBgradB : LtEpilogue::kBgradA);
  }
}

TEST(GemmMapping, BgradFallbackProductEqualsTheEpilogue) {
  GemmCase t;
  t.has_c = true, t.c_shape = {4};
  for (bool tb : {false, true}) {
    t.tb = tb;
    auto p = problem_of(t);
    ASSERT_TRUE(p.is_ok());
    GemmData const d = gemm_data(t);
    LtCall const fused = gemm_backward_plan(*p, false, true, true, false).calls.at(0);
    ASSERT_NE(fused.epilogue, LtEpilogue::kNone);
    Bufs with{{Buf::kA, d.a},
              {Buf::kB, d.b},
              {Buf::kDY, d.dy},
              {Buf::kDB, std::vector<float>(20)},
              {Buf::kDC, std::vector<float>(4, kNaN)}};
    run_call(fused, with);
    Bufs without = with;
    without[Buf::kDC].assign(4, kNaN);
    without[Buf::kOnes].assign(static_cast<std::size_t>(fused.k), 1.f);
    run_call(bgrad_as_matmul(fused), without);
    EXPECT_TRUE(near(without[Buf::kDC], with[Buf::kDC], "dC"));
    without[Buf::kDC][1] += 1e-2f;
    EXPECT_FALSE(near(without[Buf::kDC], with[Buf::kDC], "dC"));
  }
}

TEST(GemmMapping, BroadcastCThatDoesNotFitTheOutputIsRejected) {
  EXPECT_FALSE(gemm_bias_kind({3}, 3, 4).is_ok());
  EXPECT_FALSE(gemm_bias_kind({2, 4}, 3, 4).is_ok());
  EXPECT_FALSE(gemm_problem({3, 5}, {4, 4}, false, false, 1.f, 1.f).is_ok());
}

// ---- MatMul reference: numpy matmul, gradients summed over broadcast batch dims ----
struct MatMulRef {
  std::vector<float> y, da, db;
};

MatMulRef matmul_ref(MatMulShapes const& s, std::vector<float> const& a, std::vector<float> const& b,
                     std::vector<float> const& dy) {
  std::size_t const r = s.y.size();
  int64_t const m = s.a[r - 2], k = s.a[r - 1], n = s.b[r - 1];
  std::vector<int64_t> const batch(s.y.begin(), s.y.end() - 2);
  MatMulRef out{std::vector<float>(static_cast<std::size_t>(numel(s.y))), std::vector<float>(a.size(), 0.f),
                std::vector<float>(b.size(), 0.f)};
  for (int64_t flat = 0; flat < numel(batch); ++flat) {
    int64_t ia = 0, ib = 0, rem = flat, sa = 1, sb = 1;
    for (std::size_t i = batch.size(); i-- > 0;) {
      int64_t const idx = rem % batch[i];
      rem /= batch[i];
      ia += (s.a[i] == 1 ? 0 : idx) * sa;
      ib += (s.b[i] == 1 ? 0 : idx) * sb;
      sa *= s.a[i];
      sb *= s.b[i];
    }
    float const* pa = a.data() + ia * m * k;
    float const* pb = b.data() + ib * k * n;
    float* pda = out.da.data() + ia * m * k;
    float* pdb = out.db.data() + ib * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        float const g = dy[static_cast<std::size_t>((flat * m + i) * n + j)];
        for (int64_t l = 0; l < k; ++l) {
          acc += static_cast<double>(pa[i * k + l]) * pb[l * n + j];
          pda[i * k + l] += g * pb[l * n + j];
          pdb[l * n + j] += g * pa[i * k + l];
        }
        out.y[static_cast<std::size_t>((flat * m + i) * n + j)] = static_cast<float>(acc);
      }
  }
  return out;
}

std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> matmul_cases() {
  return {{{3, 4}, {4, 5}},
          {{2, 3, 4}, {4, 5}},
          {{4}, {4}},
          {{3, 4}, {4}},
          {{4}, {2, 4, 5}},
          {{3, 4}, {2, 4, 5}},
          {{2, 3, 4}, {2, 4, 5}},
          {{2, 1, 3, 4}, {1, 5, 4, 6}},
          {{1, 3, 3, 4}, {2, 1, 4, 5}},
          {{2, 3, 2, 4}, {3, 4, 5}},
          {{2, 2, 3, 4}, {2, 1, 4, 5}}};
}

TEST(MatMulMapping, ForwardAndBackwardEqualReferenceWithBroadcastBatchDimsAndVectors) {
  for (auto const& [ash, bsh] : matmul_cases())
    for (bool accumulate : {false, true}) {
      auto s = matmul_shapes(ash, bsh);
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      SCOPED_TRACE("A " + std::to_string(ash.size()) + "-D numel " + std::to_string(numel(ash)) + ", B numel " +
                   std::to_string(numel(bsh)) + ", first plan call " +
                   (matmul_forward_plan(*s).calls.empty() ? "" : describe(matmul_forward_plan(*s).calls[0])) +
                   " accumulate=" + std::to_string(accumulate));
      std::vector<float> const a = random_vec(numel(ash), 11), b = random_vec(numel(bsh), 12),
                               dy = random_vec(numel(s->out), 13);
      MatMulRef ref = matmul_ref(*s, a, b, dy);
      Bufs bufs{{Buf::kA, a}, {Buf::kB, b}, {Buf::kY, std::vector<float>(ref.y.size(), kNaN)}};
      run_plan(matmul_forward_plan(*s), bufs);
      EXPECT_TRUE(near(bufs[Buf::kY], ref.y, "Y"));
      std::vector<float> const ia = random_vec(numel(ash), 14), ib = random_vec(numel(bsh), 15);
      bufs[Buf::kDY] = dy;
      bufs[Buf::kDA] = accumulate ? ia : std::vector<float>(a.size(), kNaN);
      bufs[Buf::kDB] = accumulate ? ib : std::vector<float>(b.size(), kNaN);
      if (accumulate)
        for (std::size_t i = 0; i < a.size(); ++i) ref.da[i] += ia[i];
      if (accumulate)
        for (std::size_t i = 0; i < b.size(); ++i) ref.db[i] += ib[i];
      run_plan(matmul_backward_plan(*s, true, true, accumulate), bufs);
      EXPECT_TRUE(near(bufs[Buf::kDA], ref.da, "dA"));
      EXPECT_TRUE(near(bufs[Buf::kDB], ref.db, "dB"));
    }
}

std::vector<int64_t> transpose_shape(std::vector<int64_t> d) {
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return d;
}

// Row-major [..., r, c] data as [..., c, r].
std::vector<float> transpose_last_two(std::vector<float> const& v, std::vector<int64_t> const& dims) {
  int64_t const r = dims[dims.size() - 2], c = dims.back();
  std::vector<float> out(v.size());
  for (int64_t b = 0; b < numel(dims) / (r * c); ++b)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        out[static_cast<std::size_t>((b * c + j) * r + i)] = v[static_cast<std::size_t>((b * r + i) * c + j)];
  return out;
}

// Operands stored transposed and alpha (MatMulAttrs): the plans equal the reference on the
// operands transposed back, scaled, with the gradients transposed as the operands are stored.
TEST(MatMulMapping, TransposedOperandsAndAlphaEqualTheReferenceOnTheOperandsTransposedBack) {
  struct Case {
    std::vector<int64_t> a, b;  // as stored
    bool ta, tb;
    float alpha;
  };
  for (Case const& c : std::vector<Case>{{{2, 3, 4}, {5, 4}, false, true, 0.7f},  // rows folded, B transposed
                                         {{4, 3}, {4, 5}, true, false, 1.f},
                                         {{2, 4, 3}, {4, 5}, true, false, -2.f},  // A transposed: no fold
                                         {{2, 1, 4, 3}, {3, 2, 4}, true, true, -1.3f},
                                         {{2, 2, 3, 4}, {2, 1, 5, 4}, false, true, 0.125f},
                                         {{1, 3, 4, 3}, {2, 1, 4, 5}, true, false, 3.f}})
    for (bool accumulate : {false, true}) {
      auto s = matmul_shapes(c.a, c.b, c.ta, c.tb);
      ASSERT_TRUE(s.is_ok()) << s.status().message();
      SCOPED_TRACE("A " + std::to_string(c.a.size()) + "-D numel " + std::to_string(numel(c.a)) +
                   " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " fold=" + std::to_string(s->fold) +
                   " accumulate=" + std::to_string(accumulate));
      EXPECT_EQ(s->stored_a().back(), c.a.back());
      std::vector<float> const a = random_vec(numel(c.a), 21), b = random_vec(numel(c.b), 22),
                               dy = random_vec(numel(s->out), 23);
      auto logical = matmul_shapes(c.ta ? transpose_shape(c.a) : c.a, c.tb ? transpose_shape(c.b) : c.b);
      ASSERT_TRUE(logical.is_ok());
      MatMulRef ref =
          matmul_ref(*logical, c.ta ? transpose_last_two(a, c.a) : a, c.tb ? transpose_last_two(b, c.b) : b, dy);
      if (c.ta) ref.da = transpose_last_two(ref.da, transpose_shape(c.a));
      if (c.tb) ref.db = transpose_last_two(ref.db, transpose_shape(c.b));
      for (auto* v : {&ref.y, &ref.da, &ref.db})
        for (float& x : *v) x *= c.alpha;
      Bufs bufs{{Buf::kA, a}, {Buf::kB, b}, {Buf::kY, std::vector<float>(ref.y.size(), kNaN)}};
      run_plan(matmul_forward_plan(*s, c.alpha), bufs);
      EXPECT_TRUE(near(bufs[Buf::kY], ref.y, "Y"));
      std::vector<float> const ia = random_vec(numel(c.a), 24), ib = random_vec(numel(c.b), 25);
      bufs[Buf::kDY] = dy;
      bufs[Buf::kDA] = accumulate ? ia : std::vector<float>(a.size(), kNaN);
      bufs[Buf::kDB] = accumulate ? ib : std::vector<float>(b.size(), kNaN);
      if (accumulate) {
        for (std::size_t i = 0; i < a.size(); ++i) ref.da[i] += ia[i];
        for (std::size_t i = 0; i < b.size(); ++i) ref.db[i] += ib[i];
      }
      run_plan(matmul_backward_plan(*s, true, true, accumulate, c.alpha), bufs);
      EXPECT_TRUE(near(bufs[Buf::kDA], ref.da, "dA"));
      EXPECT_TRUE(near(bufs[Buf::kDB], ref.db, "dB"));
    }
  EXPECT_FALSE(matmul_shapes({4}, {4, 5}, true, false).is_ok());  // a 1-D operand has no axes to swap
}

TEST(MatMulMapping, EvenlyBroadcastBatchesBecomeOneStridedCallAndMixedOnesSplit) {
  auto even = matmul_shapes({2, 3, 4}, {2, 4, 5});
  ASSERT_TRUE(even.is_ok());
  GemmPlan const p = matmul_forward_plan(*even);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].batch, 2);
  auto shared_b = matmul_shapes({3, 4}, {2, 4, 5});  // A broadcast: batch stride 0
  ASSERT_TRUE(shared_b.is_ok());
  GemmPlan const q = matmul_forward_plan(*shared_b);
  ASSERT_EQ(q.calls.size(), 1u);
  EXPECT_EQ(q.calls[0].stride_b, 0);
  auto mixed = matmul_shapes({2, 1, 3, 4}, {1, 5, 4, 6});
  ASSERT_TRUE(mixed.is_ok());
  EXPECT_EQ(matmul_forward_plan(*mixed).calls.size(), 2u);
  EXPECT_EQ(matmul_shapes({2, 3, 4}, {3, 4, 5}).is_ok(), false);
  EXPECT_EQ(matmul_shapes({3, 4}, {5, 6}).is_ok(), false);
}

// strided_rowmajor_call (the recurrent layers' per-step products): operands and result are
// blocks of wider row-major matrices; the rest of the result matrix stays untouched.
TEST(GemmMapping, StridedRowMajorCallReadsAndWritesBlocksOfWiderMatrices) {
  int64_t const m = 3, n = 4, k = 5, pad = 3;
  for (bool tx : {false, true})
    for (bool ty : {false, true})
      for (bool acc : {false, true}) {
        SCOPED_TRACE(std::string(tx ? "Xᵀ" : "X") + (ty ? "·Yᵀ" : "·Y") + (acc ? " accumulated" : ""));
        int64_t const x_rows = tx ? k : m, x_cols = tx ? m : k, y_rows = ty ? n : k, y_cols = ty ? k : n;
        int64_t const ldx = x_cols + pad, ldy = y_cols + pad + 1, ldd = n + pad + 2;
        std::vector<float> const x = random_vec(x_rows * ldx, 41), y = random_vec(y_rows * ldy, 42),
                                 d0 = random_vec(m * ldd, 43);
        std::vector<float> want = d0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = acc ? d0[i * ldd + j] : 0.0;
            for (int64_t l = 0; l < k; ++l)
              s += static_cast<double>(tx ? x[l * ldx + i] : x[i * ldx + l]) * (ty ? y[j * ldy + l] : y[l * ldy + j]);
            want[i * ldd + j] = static_cast<float>(s);
          }
        GemmPlan plan;
        plan.calls.push_back(strided_rowmajor_call(Buf::kA, tx, ldx, Buf::kB, ty, ldy, Buf::kY, ldd, m, n, k, acc));
        Bufs bufs{{Buf::kA, x}, {Buf::kB, y}, {Buf::kY, d0}};
        run_plan(plan, bufs);
        EXPECT_TRUE(near(bufs[Buf::kY], want, "D"));
      }
}

// The comparison can fail: a mapping with a wrong leading dimension, a dropped transpose or a
// perturbed output is caught by the same check the tests above rely on.
TEST(GemmMapping, AWrongMappingIsDetected) {
  GemmCase t;
  t.has_c = true, t.c_shape = {3, 4};
  auto p = problem_of(t);
  ASSERT_TRUE(p.is_ok());
  GemmData const d = gemm_data(t);
  std::vector<float> const want = gemm_ref(t, d);
  auto run = [&](GemmPlan const& plan) {
    Bufs bufs{{Buf::kA, d.a}, {Buf::kB, d.b}, {Buf::kC, d.c}, {Buf::kY, std::vector<float>(12, kNaN)}};
    run_plan(plan, bufs);
    return bufs[Buf::kY];
  };
  GemmPlan good = gemm_forward_plan(*p);
  ASSERT_TRUE(near(run(good), want, "Y"));

  GemmPlan swapped_ld = good;  // lda and ldb swapped: K=5 vs N=4
  std::swap(swapped_ld.calls[0].lda, swapped_ld.calls[0].ldb);
  bool caught = false;
  try {
    caught = !near(run(swapped_ld), want, "Y");
  } catch (std::exception const&) {
    caught = true;  // an ld below the stored rows or an out-of-bounds read
  }
  EXPECT_TRUE(caught);

  GemmPlan swapped_operands = good;  // forgetting the row-major swap
  std::swap(swapped_operands.calls[0].a, swapped_operands.calls[0].b);
  caught = false;
  try {
    caught = !near(run(swapped_operands), want, "Y");
  } catch (std::exception const&) {
    caught = true;
  }
  EXPECT_TRUE(caught);

  std::vector<float> perturbed = run(good);
  perturbed[5] += 1e-2f;
  EXPECT_FALSE(near(perturbed, want, "Y"));
}

// ---- Binding: the pointers the CUDA ops give each plan (gemm_mapping.h's forward_buffers and
// backward_buffers, which exec/cuda/linalg.cc and conv.cc call) reach every buffer the plan's calls
// read or write. The first H100 run found every output and gradient unbound (std::bind captured a
// free `bind` through ADL); check_bound is what run_gemm_plan asks before cuBLASLt is reached.

// Distinct fake device pointers: never dereferenced.
void* fake(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 * (i + 1))); }

// What run_gemm_plan adds before it runs a plan: its own ones and tmp buffers.
GemmBuffers with_scratch(GemmBuffers b, GemmPlan const& plan) {
  bool bgrad = false;
  for (LtCall const& c : plan.calls)
    bgrad = bgrad || c.epilogue == LtEpilogue::kBgradA || c.epilogue == LtEpilogue::kBgradB;
  if (plan.ones > 0 || bgrad) b.set(Buf::kOnes, fake(20));
  if (plan.tmp > 0) b.set(Buf::kTmp, fake(21));
  return b;
}

TEST(GemmBinding, EveryGemmPlanHasEveryBufferItUsesBound) {
  struct Case {
    std::vector<int64_t> a, b, c;
    bool ta, tb;
  };
  std::vector<Case> const cases = {{{3, 4}, {4, 5}, {}, false, false},     {{4, 3}, {4, 5}, {5}, true, false},
                                   {{3, 4}, {5, 4}, {1}, false, true},     {{4, 3}, {5, 4}, {3, 1}, true, true},
                                   {{3, 4}, {4, 5}, {3, 5}, false, false}, {{3, 4}, {4, 5}, {1, 5}, false, false}};
  int plans = 0;
  for (Case const& t : cases) {
    auto p = gemm_problem(t.a, t.b, t.ta, t.tb, 1.f, 1.f);
    ASSERT_TRUE(p.is_ok());
    if (!t.c.empty()) {
      auto kind = gemm_bias_kind(t.c, p->m, p->n);
      ASSERT_TRUE(kind.is_ok());
      p->bias = *kind;
    }
    void const* c = t.c.empty() ? nullptr : fake(2);
    GemmPlan const fwd = gemm_forward_plan(*p);
    Status s = check_bound(fwd, with_scratch(forward_buffers(fake(0), fake(1), c, fake(3)), fwd));
    EXPECT_TRUE(s.is_ok()) << s.message();
    ++plans;
    for (int mask = 1; mask < 8; ++mask)
      for (bool accumulate : {false, true}) {
        bool const wa = mask & 1, wb = mask & 2, wc = (mask & 4) && c;
        GemmPlan const bwd = gemm_backward_plan(*p, wa, wb, wc, accumulate);
        GemmBuffers const b = backward_buffers(fake(0), fake(1), fake(4), wa ? fake(5) : nullptr,
                                               wb ? fake(6) : nullptr, wc ? fake(7) : nullptr);
        s = check_bound(bwd, with_scratch(b, bwd));
        EXPECT_TRUE(s.is_ok()) << s.message();
        ++plans;
      }
  }
  for (auto const& [a, b] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{3, 4}, {4, 5}},
           {{2, 3, 4}, {2, 4, 5}},
           {{3, 4}, {2, 4, 5}},
           {{2, 1, 3, 4}, {1, 3, 4, 5}},
           {{4}, {4, 5}},
           {{3, 4}, {4}}}) {
    auto s = matmul_shapes(a, b);
    ASSERT_TRUE(s.is_ok());
    GemmPlan const fwd = matmul_forward_plan(*s);
    Status st = check_bound(fwd, with_scratch(forward_buffers(fake(0), fake(1), nullptr, fake(3)), fwd));
    EXPECT_TRUE(st.is_ok()) << st.message();
    for (int mask = 1; mask < 4; ++mask)
      for (bool accumulate : {false, true}) {
        bool const wa = mask & 1, wb = mask & 2;
        GemmPlan const bwd = matmul_backward_plan(*s, wa, wb, accumulate);
        GemmBuffers const buf =
            backward_buffers(fake(0), fake(1), fake(4), wa ? fake(5) : nullptr, wb ? fake(6) : nullptr, nullptr);
        st = check_bound(bwd, with_scratch(buf, bwd));
        EXPECT_TRUE(st.is_ok()) << st.message();
        ++plans;
      }
  }
  GemmPlan const bias = conv_bias_forward_plan(2, 3, 5);
  Status st = check_bound(bias, with_scratch(forward_buffers(nullptr, nullptr, fake(2), fake(3)), bias));
  EXPECT_TRUE(st.is_ok()) << st.message();
  for (bool accumulate : {false, true}) {
    GemmPlan const grad = conv_bias_grad_plan(2, 3, 5, accumulate);
    st = check_bound(grad, with_scratch(backward_buffers(nullptr, nullptr, fake(4), nullptr, nullptr, fake(7)), grad));
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  EXPECT_GT(plans, 100);
}

// Each buffer a plan needs and does not get is named, before any device call: an output, a
// gradient, the scratch buffers.
TEST(GemmBinding, AnUnboundBufferIsNamed) {
  auto p = gemm_problem({3, 4}, {4, 5}, false, false, 1.f, 1.f);
  ASSERT_TRUE(p.is_ok());
  GemmPlan const fwd = gemm_forward_plan(*p);
  Status s = check_bound(fwd, forward_buffers(fake(0), fake(1), nullptr, nullptr));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("buffer Y"), std::string::npos) << s.message();
  GemmPlan const bwd = gemm_backward_plan(*p, true, true, false, false);
  s = check_bound(bwd, backward_buffers(fake(0), fake(1), fake(4), fake(5), nullptr, nullptr));
  EXPECT_NE(s.message().find("buffer dB"), std::string::npos) << s.message();
  GemmPlan const grad = conv_bias_grad_plan(2, 3, 5, false);
  s = check_bound(grad, backward_buffers(nullptr, nullptr, fake(4), nullptr, nullptr, fake(7)));
  EXPECT_NE(s.message().find("not bound"), std::string::npos) << s.message();
  // A buffer set through a non-const pointer stays set (what the free-function bind lost).
  GemmBuffers b;
  void* y = fake(3);
  b.set(Buf::kY, y);
  EXPECT_EQ(b.get(Buf::kY), y);
}

}  // namespace
}  // namespace gp::exec::cuda
