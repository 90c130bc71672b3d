// Host twin of the CUDA Pow with a tensor exponent (kernels/cuda/binary.cu): hd::pow_value and
// hd::pow_grad over hd::BinaryIndex, one thread per output element as the kernels run, the
// gradients summed down by sum_to's twin (thread and block form), against the CPU backend's Pow
// on broadcast shape pairs, with the exponent an input or a weight. Tolerance 1e-6 + 1e-5·|ref|
// (the same libm pow/log; sums in another order).
#include "kernels/hd/binary.h"
#include "tests/cuda/hd_twin.h"

namespace gp::exec::testing {
namespace {

namespace hd = kernels::hd;
using graph::TensorRole;
using Shape = std::vector<int64_t>;

Vec pow_forward_twin(Vec const& a, Vec const& b, hd::BinaryIndex const& p) {
  Vec y(static_cast<std::size_t>(p.numel));
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = hd::pow_value(a[oa], b[ob]);
  }
  return y;
}

// pow_backward_kernel: one operand's full-shape gradient.
Vec pow_full_twin(hd::PowOperand wrt, Vec const& a, Vec const& b, Vec const& y, Vec const& dy,
                  hd::BinaryIndex const& p) {
  Vec full(static_cast<std::size_t>(p.numel));
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    full[i] = hd::pow_grad(wrt, a[oa], b[ob], y[i], dy[i]);
  }
  return full;
}

Vec scaled(Vec v, float s) {
  for (float& x : v) x *= s;
  return v;
}

struct PowCase {
  Shape base, exponent;
  TensorRole exponent_role = TensorRole::kInput;
};

TEST(HdPow, TensorExponentTwinMatchesCpuForwardAndBothGradients) {
  std::vector<PowCase> const cases{
      {{2, 3}, {3}},       {{3}, {2, 3}, TensorRole::kWeight},
      {{2, 1, 4}, {3, 1}}, {{2, 3, 4}, {2, 3, 4}, TensorRole::kWeight},
      {{1}, {5, 1, 2}},    {{4, 1}, {1, 5}, TensorRole::kWeight},
      {{6, 300}, {300}},
  };
  Tol const tol{1e-6, 1e-5};
  for (PowCase const& c : cases)
    for (bool per_block : {false, true}) {
      SCOPED_TRACE(std::to_string(c.base.size()) + "-d base, " + std::to_string(c.exponent.size()) + "-d exponent" +
                   (c.exponent_role == TensorRole::kWeight ? " (weight)" : "") +
                   (per_block ? ", block sums" : ", thread sums"));
      // ln a needs a > 0; exponents of both signs.
      Tensor a = random_tensor(c.base, 121, 0.5f, 2.f, true), b = random_tensor(c.exponent, 122, 0.2f, 2.f);
      OneOp o = make_op("Pow", {}, {{"a", a, TensorRole::kInput}, {"e", b, c.exponent_role}});
      CpuRun r = run_cpu(o);
      Shape out;
      ASSERT_TRUE(hd::broadcast_shape(c.base, c.exponent, out));
      hd::BinaryIndex p;
      ASSERT_TRUE(hd::make_binary_index(out, c.base, c.exponent, p));
      Vec const av = values(a), bv = values(b), dy = values(r.dy);
      Vec const y = pow_forward_twin(av, bv, p);
      EXPECT_TRUE(close(y, values(r.out.at(0)), tol));
      // As exec/cuda/ops_math.cc: the full-shape gradient, then summed down to the operand's shape.
      Vec const da = sum_twin(pow_full_twin(hd::PowOperand::kBase, av, bv, y, dy, p), out, c.base, 1.f, per_block);
      Vec const db =
          sum_twin(pow_full_twin(hd::PowOperand::kExponent, av, bv, y, dy, p), out, c.exponent, 1.f, per_block);
      Vec const want_da = values(r.gin.at(0));
      Vec const want_db = values(c.exponent_role == TensorRole::kWeight ? r.gw.at(1) : r.gin.at(1));
      EXPECT_TRUE(close(da, want_da, tol));
      EXPECT_TRUE(close(db, want_db, tol));
      // The comparison can fail: 1% off, a flipped sign, or the operands' formulas swapped.
      EXPECT_FALSE(close(scaled(da, 1.01f), want_da, tol));
      EXPECT_FALSE(close(scaled(db, -1.f), want_db, tol));
      if (c.base == c.exponent) {
        EXPECT_FALSE(
            close(sum_twin(pow_full_twin(hd::PowOperand::kBase, av, bv, y, dy, p), out, c.exponent, 1.f, per_block),
                  want_db, tol));
      }
    }
}

TEST(HdPow, GradientsFollowTheCpuConventionsAtTheEdges) {
  // b = 0: y = 1 and da = 0; b = 1: da = dy; a = 1: db = 0 (ln 1); a < 0 gives NaN for db as on the CPU.
  EXPECT_EQ(hd::pow_value(3.f, 0.f), 1.f);
  EXPECT_EQ(hd::pow_grad(hd::PowOperand::kBase, 3.f, 0.f, 1.f, 0.5f), 0.f);
  EXPECT_EQ(hd::pow_grad(hd::PowOperand::kBase, 3.f, 1.f, 3.f, 0.5f), 0.5f);
  EXPECT_EQ(hd::pow_grad(hd::PowOperand::kExponent, 1.f, 2.5f, 1.f, 0.5f), 0.f);
  EXPECT_TRUE(std::isnan(hd::pow_grad(hd::PowOperand::kExponent, -2.f, 2.f, 4.f, 1.f)));
}

}  // namespace
}  // namespace gp::exec::testing
