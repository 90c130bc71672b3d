// Host twins of the CUDA BatchNormalization kernels (kernels/cuda/norm.cu), per-channel sums split
// over a 256-thread block as the kernels split them and combined by their shuffle tree, against
// the CPU backend (oneDNN):
// - the inference-mode backward: hd::bn_infer_grad_input one thread per element, against the
//   backward with training = false (use_global_stats). Tolerance 1e-6 + 1e-5·|ref| for dx,
//   1e-5 + 1e-5·|ref| for the sums (another order);
// - the kernels that run where cuDNN refuses a shape: training forward (y and the running
//   statistics), inference forward, training backward (dx, dscale, dbias), on shapes including
//   the two cuDNN refused on an H100 ([3,2,2,3] and [2,3,2,2]). Tolerances in the tests.
#include <cmath>

#include "core/units.h"
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

// ---- the kernels that run where cuDNN refuses the shape ----

struct Dims {
  int64_t n, c, sp;
};
Dims dims_of(Shape const& shape) {
  Dims d{shape[0], shape[1], 1};
  for (std::size_t i = 2; i < shape.size(); ++i) d.sp *= shape[i];
  return d;
}

// Channel ch's total of f(k0, step) split over a 256-thread block, combined by the shuffle tree.
template <typename F>
float block_total(F f) {
  Vec part(kBlock);
  for (int th = 0; th < kBlock; ++th) part[th] = f(th, kBlock);
  return tree(part, false);
}

struct BnTrainTwin {
  Vec y, mean, inv, next_mean, next_var;
};

// bn_train_forward_kernel in its order; `correction` replaces hd::bn_unbias where a test breaks it.
BnTrainTwin bn_train_twin(Vec const& x, Vec const& scale, Vec const& bias, Vec const& rmean, Vec const& rvar, float eps,
                          float momentum, Shape const& shape, double const* correction = nullptr) {
  Dims const d = dims_of(shape);
  int64_t const count = d.n * d.sp;
  BnTrainTwin t;
  t.y.resize(x.size());
  for (int64_t ch = 0; ch < d.c; ++ch) {
    float const mu = hd::bn_mean(block_total([&](int64_t k0, int64_t step) {
                                   return hd::bn_sum_partial(x.data(), ch, d.c, d.sp, count, k0, step);
                                 }),
                                 count);
    float const var = hd::bn_variance(block_total([&](int64_t k0, int64_t step) {
                                        return hd::bn_sq_partial(x.data(), mu, ch, d.c, d.sp, count, k0, step);
                                      }),
                                      count);
    float const inv = hd::bn_inv_std(var, eps);
    for (int64_t k = 0; k < count; ++k) {
      int64_t const o = hd::bn_channel_offset(k, ch, d.c, d.sp);
      t.y[o] = hd::bn_value(x[o], mu, inv, scale[ch], bias[ch]);
    }
    t.mean.push_back(mu);
    t.inv.push_back(inv);
    t.next_mean.push_back(hd::bn_running_update(rmean[ch], mu, 1.0, momentum));
    t.next_var.push_back(
        hd::bn_running_update(rvar[ch], var, correction ? *correction : hd::bn_unbias(count), momentum));
  }
  return t;
}

// bn_train_backward_kernel in its order: dscale and dbias, then dx with them.
BnTwin bn_train_backward_twin(Vec const& x, Vec const& dy, Vec const& scale, Vec const& mean, Vec const& inv,
                              Shape const& shape) {
  Dims const d = dims_of(shape);
  int64_t const count = d.n * d.sp;
  BnTwin t;
  t.dx.resize(x.size());
  for (int64_t ch = 0; ch < d.c; ++ch) {
    Vec ds(kBlock), db(kBlock);
    for (int th = 0; th < kBlock; ++th)
      hd::bn_infer_param_partial(x.data(), dy.data(), mean[ch], inv[ch], ch, d.c, d.sp, count, th, kBlock, ds[th],
                                 db[th]);
    float const ds_total = tree(ds, false), db_total = tree(db, false);
    for (int64_t k = 0; k < count; ++k) {
      int64_t const o = hd::bn_channel_offset(k, ch, d.c, d.sp);
      t.dx[o] = hd::bn_train_grad_input(dy[o], x[o], mean[ch], inv[ch], scale[ch], ds_total, db_total, count);
    }
    t.dscale.push_back(ds_total);
    t.dbias.push_back(db_total);
  }
  return t;
}

// bn_infer_forward_kernel: one thread per element, with the host's inv_std (exec/cuda/norm.cc).
Vec bn_infer_twin(Vec const& x, Vec const& scale, Vec const& bias, Vec const& mean, Vec const& var, float eps,
                  Shape const& shape) {
  Dims const d = dims_of(shape);
  Vec y(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t const ch = hd::bn_channel(i, d.c, d.sp);
    y[i] = hd::bn_value(x[i], mean[ch], 1.f / std::sqrt(var[ch] + eps), scale[ch], bias[ch]);
  }
  return y;
}

struct BnInputs {
  Tensor x, scale, bias, mean, var;
};
BnInputs bn_inputs(Shape const& shape, uint32_t seed) {
  int64_t const c = shape[1];
  return {random_tensor(shape, seed, -2.f, 3.f), random_tensor({c}, seed + 1, 0.5f, 1.5f), random_tensor({c}, seed + 2),
          random_tensor({c}, seed + 3), random_tensor({c}, seed + 4, 0.5f, 2.f, true)};
}
OneOp bn_op(BnInputs const& in, float eps, float momentum) {
  return make_op("BatchNormalization", graph::BatchNormAttrs{eps, momentum, false},
                 {{"x", in.x, TensorRole::kInput},
                  {"s", in.scale, TensorRole::kWeight},
                  {"b", in.bias, TensorRole::kWeight},
                  {"m", in.mean, TensorRole::kConstant},
                  {"v", in.var, TensorRole::kConstant}});
}

// [3,2,2,3] and [2,3,2,2]: the shapes cuDNN refused on an H100; then every rank, a single
// element per channel (M = 1: no unbiasing), and channels longer than the block.
std::vector<Shape> const kOwnKernelShapes{{3, 2, 2, 3},  {2, 3, 2, 2},   {4, 5},          {1, 3},
                                          {2, 3, 7, 11}, {2, 4, 16, 20}, {2, 3, 2, 3, 4}, {5, 2, 9}};

// Training forward: y with the batch's statistics against the CPU's (oneDNN sums in another order:
// 1e-5 + 1e-5·|ref|), the running statistics against exec/cpu/norm.cc's rule (1e-6 + 1e-5·|ref|).
TEST(HdBatchNorm, TrainingForwardTwinMatchesCpu) {
  float const eps = 1e-5f, momentum = 0.9f;
  Tol const tol_y{1e-5, 1e-5}, tol_stat{1e-6, 1e-5};
  for (Shape const& shape : kOwnKernelShapes) {
    SCOPED_TRACE("x " + dims_string(shape));
    BnInputs const in = bn_inputs(shape, 211);
    CpuRun const r = run_cpu(bn_op(in, eps, momentum), true);
    BnTrainTwin const t = bn_train_twin(values(in.x), values(in.scale), values(in.bias), values(in.mean),
                                        values(in.var), eps, momentum, shape);
    Vec const want_y = values(r.out.at(0)), want_mean = values(r.out.at(1)), want_var = values(r.out.at(2));
    EXPECT_TRUE(close(t.y, want_y, tol_y));
    EXPECT_TRUE(close(t.next_mean, want_mean, tol_stat));
    EXPECT_TRUE(close(t.next_var, want_var, tol_stat));
    // The comparison can fail: y 1% off, the biased variance in the running statistic (where M > 1
    // makes a difference), cuDNN's factor taken for ONNX's momentum.
    EXPECT_FALSE(close(scaled(t.y, 1.01f), want_y, tol_y));
    Dims const d = dims_of(shape);
    if (d.n * d.sp > 1) {
      double const biased = 1.0;
      BnTrainTwin const b = bn_train_twin(values(in.x), values(in.scale), values(in.bias), values(in.mean),
                                          values(in.var), eps, momentum, shape, &biased);
      EXPECT_FALSE(close(b.next_var, want_var, tol_stat));
    }
    BnTrainTwin const f = bn_train_twin(values(in.x), values(in.scale), values(in.bias), values(in.mean),
                                        values(in.var), eps, 1.f - momentum, shape);
    EXPECT_FALSE(close(f.next_mean, want_mean, tol_stat));
  }
}

// Training backward from the twin's saved mean and inv_std against the CPU's training backward
// (its own saved statistics): dx 1e-5 + 1e-4·|ref| (a difference of sums of M terms, cancelling),
// the sums 1e-5 + 1e-5·|ref|.
TEST(HdBatchNorm, TrainingBackwardTwinMatchesCpu) {
  float const eps = 1e-5f, momentum = 0.9f;
  Tol const tol_dx{1e-5, 1e-4}, tol_sum{1e-5, 1e-5};
  for (Shape const& shape : kOwnKernelShapes) {
    SCOPED_TRACE("x " + dims_string(shape));
    BnInputs const in = bn_inputs(shape, 221);
    CpuRun const r = run_cpu(bn_op(in, eps, momentum), true);
    Vec const x = values(in.x), scale = values(in.scale), dy = values(r.dy);
    BnTrainTwin const f =
        bn_train_twin(x, scale, values(in.bias), values(in.mean), values(in.var), eps, momentum, shape);
    BnTwin const t = bn_train_backward_twin(x, dy, scale, f.mean, f.inv, shape);
    Vec const want_dx = values(r.gin.at(0)), want_ds = values(r.gw.at(1)), want_db = values(r.gw.at(2));
    EXPECT_TRUE(close(t.dx, want_dx, tol_dx));
    EXPECT_TRUE(close(t.dscale, want_ds, tol_sum));
    EXPECT_TRUE(close(t.dbias, want_db, tol_sum));
    // The comparison can fail: the inference-mode dx (no batch-statistics terms), dbias with the
    // wrong sign, dscale 1% off (where M > 1: with one element per channel x̂ and dscale are 0).
    Vec infer_dx(x.size());
    Dims const d = dims_of(shape);
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
      int64_t const ch = hd::bn_channel(i, d.c, d.sp);
      infer_dx[i] = hd::bn_infer_grad_input(dy[i], scale[ch], f.inv[ch]);
    }
    EXPECT_FALSE(close(infer_dx, want_dx, tol_dx));
    EXPECT_FALSE(close(scaled(t.dbias, -1.f), want_db, tol_sum));
    if (d.n * d.sp > 1) {
      EXPECT_FALSE(close(scaled(t.dscale, 1.01f), want_ds, tol_sum));
    }
  }
}

// Inference forward with the running statistics: 1e-6 + 1e-5·|ref|.
TEST(HdBatchNorm, InferenceForwardTwinMatchesCpu) {
  float const eps = 1e-5f;
  Tol const tol{1e-6, 1e-5};
  for (Shape const& shape : kOwnKernelShapes) {
    SCOPED_TRACE("x " + dims_string(shape));
    BnInputs const in = bn_inputs(shape, 231);
    CpuRun const r = run_cpu(bn_op(in, eps, 0.9f), false);
    Vec const y =
        bn_infer_twin(values(in.x), values(in.scale), values(in.bias), values(in.mean), values(in.var), eps, shape);
    Vec const want = values(r.out.at(0));
    EXPECT_TRUE(close(y, want, tol));
    // The comparison can fail: the bias left out.
    Vec const no_bias = bn_infer_twin(values(in.x), values(in.scale), Vec(in.bias.numel(), 0.f), values(in.mean),
                                      values(in.var), eps, shape);
    EXPECT_FALSE(close(no_bias, want, tol));
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
