// Host twin of the CUDA BatchNormalization inference-mode backward (kernels/cuda/norm.cu):
// hd::bn_infer_grad_input one thread per element, the per-channel sums split over a 256-thread
// block as the kernel splits them and combined by its shuffle tree, against the CPU backend's
// backward with training = false (oneDNN, use_global_stats). Tolerance 1e-6 + 1e-5·|ref| for dx,
// 1e-5 + 1e-5·|ref| for the sums (another order).
#include <cmath>

#include "kernels/hd/norm.h"
#include "tests/cuda/hd_twin.h"

namespace gp::exec::testing {
namespace {

namespace hd = kernels::hd;
using graph::TensorRole;
using Shape = std::vector<int64_t>;

constexpr int kBlock = 256;  // norm.cu's BatchNorm block

struct BnTwin {
  Vec dx, dscale, dbias;
};

BnTwin bn_twin(Vec const& x, Vec const& dy, Vec const& scale, Vec const& mean, Vec const& var, float eps,
               Shape const& shape, bool per_block) {
  int64_t const n = shape[0], c = shape[1];
  int64_t sp = 1;
  for (std::size_t i = 2; i < shape.size(); ++i) sp *= shape[i];
  Vec inv(static_cast<std::size_t>(c));
  for (int64_t k = 0; k < c; ++k) inv[k] = 1.f / std::sqrt(var[k] + eps);  // exec/cuda/ops_dnn.cc's inv_std
  BnTwin t;
  t.dx.resize(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t const ch = hd::bn_channel(i, c, sp);
    t.dx[i] = hd::bn_infer_grad_input(dy[i], scale[ch], inv[ch]);
  }
  t.dscale.resize(c);
  t.dbias.resize(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    if (!per_block) {
      hd::bn_infer_param_partial(x.data(), dy.data(), mean[ch], inv[ch], ch, c, sp, n * sp, 0, 1, t.dscale[ch],
                                 t.dbias[ch]);
      continue;
    }
    Vec ds(kBlock), db(kBlock);
    for (int th = 0; th < kBlock; ++th)
      hd::bn_infer_param_partial(x.data(), dy.data(), mean[ch], inv[ch], ch, c, sp, n * sp, th, kBlock, ds[th], db[th]);
    t.dscale[ch] = tree(ds, false);
    t.dbias[ch] = tree(db, false);
  }
  return t;
}

Vec scaled(Vec v, float s) {
  for (float& x : v) x *= s;
  return v;
}

TEST(HdBatchNorm, InferenceBackwardTwinMatchesCpuForEveryRank) {
  std::vector<Shape> const shapes{{2, 3, 2, 2}, {4, 5}, {3, 2, 7, 11}, {2, 4, 16, 20}, {2, 3, 2, 3, 4}, {1, 2, 5}};
  float const eps = 1e-5f;
  Tol const tol_dx{1e-6, 1e-5}, tol_sum{1e-5, 1e-5};
  for (Shape const& shape : shapes)
    for (bool per_block : {false, true}) {
      SCOPED_TRACE(std::to_string(shape.size()) + "-d, " + std::to_string(shape[1]) + " channels" +
                   (per_block ? ", block sums" : ", thread sums"));
      int64_t const c = shape[1];
      Tensor x = random_tensor(shape, 131, 0.1f, 3.f), scale = random_tensor({c}, 132, 0.5f, 1.5f),
             bias = random_tensor({c}, 133), mean = random_tensor({c}, 134),
             var = random_tensor({c}, 135, 0.5f, 2.f, true);
      OneOp o = make_op("BatchNormalization", graph::BatchNormAttrs{eps, 0.9f, false},
                        {{"x", x, TensorRole::kInput},
                         {"s", scale, TensorRole::kWeight},
                         {"b", bias, TensorRole::kWeight},
                         {"m", mean, TensorRole::kConstant},
                         {"v", var, TensorRole::kConstant}});
      CpuRun r = run_cpu(o, false);
      BnTwin const t =
          bn_twin(values(x), values(r.dy), values(scale), values(mean), values(var), eps, shape, per_block);
      Vec const want_dx = values(r.gin.at(0)), want_ds = values(r.gw.at(1)), want_db = values(r.gw.at(2));
      EXPECT_TRUE(close(t.dx, want_dx, tol_dx));
      EXPECT_TRUE(close(t.dscale, want_ds, tol_sum));
      EXPECT_TRUE(close(t.dbias, want_db, tol_sum));
      // The comparison can fail: 1% off, a flipped sign, the scale left out of dx.
      EXPECT_FALSE(close(scaled(t.dscale, 1.01f), want_ds, tol_sum));
      EXPECT_FALSE(close(scaled(t.dbias, -1.f), want_db, tol_sum));
      BnTwin const unscaled = bn_twin(values(x), values(r.dy), Vec(static_cast<std::size_t>(c), 1.f), values(mean),
                                      values(var), eps, shape, per_block);
      EXPECT_FALSE(close(unscaled.dx, want_dx, tol_dx));
    }
}

TEST(HdBatchNorm, ChannelOffsetsVisitEachChannelsElementsOnce) {
  int64_t const n = 3, c = 4, sp = 5;
  std::vector<int> seen(static_cast<std::size_t>(n * c * sp), 0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t k = 0; k < n * sp; ++k) {
      int64_t const o = hd::bn_channel_offset(k, ch, c, sp);
      ASSERT_LT(o, n * c * sp);
      EXPECT_EQ(hd::bn_channel(o, c, sp), ch);
      ++seen[o];
    }
  EXPECT_EQ(seen, std::vector<int>(seen.size(), 1));
}

}  // namespace
}  // namespace gp::exec::testing
