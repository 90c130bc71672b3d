// Host twins of the CUDA BatchNormalization kernels (kernels/cuda/norm.cu), per-channel sums split
// over a 256-thread block as the kernels split them and combined by their shuffle tree, against
// the CPU backend (oneDNN):
// - the inference-mode backward: hd::bn_infer_grad_input one thread per element, against the
//   backward with training = false (use_global_stats). Tolerance 1e-6 + 1e-5·|ref| for dx,
//   1e-5 + 1e-5·|ref| for the sums (another order);
// - the training kernels (each channel split over blocks, hd::bn_split): forward (y and the
//   running statistics), training backward (dx, dscale, dbias), and the inference forward, on
//   shapes including the two cuDNN refused on an H100 ([3,2,2,3] and [2,3,2,2]). Tolerances in
//   the tests.
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

// The training kernels' per-channel sums: each block's threads' partials (f(b, t, first, second))
// combined by the shuffle tree into scratch[(b·C + ch)·2 + {0, 1}], as bn_stats_kernel and
// bn_grad_kernel write it.
template <typename F>
Vec block_partials(hd::BnSplit const& sp, int64_t channels, F f) {
  Vec scratch(static_cast<std::size_t>(2 * channels * sp.blocks()));
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t b = 0; b < sp.blocks(); ++b) {
      Vec first(kBlock), second(kBlock);
      for (int t = 0; t < kBlock; ++t) f(ch, b, t, first[t], second[t]);
      scratch[(b * channels + ch) * 2] = tree(first, false);
      scratch[(b * channels + ch) * 2 + 1] = tree(second, false);
    }
  return scratch;
}

struct BnTrainTwin {
  Vec y, mean, inv, next_mean, next_var;
};

// batchnorm_train_forward's kernels in their order (statistics, their totals, y); `shift_zero`
// drops the shift (the unshifted sums a test shows to cancel), `correction` replaces
// hd::bn_unbias where a test breaks it.
BnTrainTwin bn_train_twin(Vec const& x, Vec const& scale, Vec const& bias, Vec const& rmean, Vec const& rvar, float eps,
                          float momentum, Shape const& shape, double const* correction = nullptr,
                          bool shift_zero = false, bool relu = false, Vec const* z = nullptr) {
  Dims const d = dims_of(shape);
  int64_t const count = d.n * d.sp;
  hd::BnSplit const sp = hd::bn_split(d.n, d.c, d.sp, kBlock);
  auto shift = [&](int64_t ch) { return shift_zero ? 0.f : x[ch * d.sp]; };
  Vec const scratch = block_partials(sp, d.c, [&](int64_t ch, int64_t b, int t, float& s, float& q) {
    hd::bn_stats_slice(x.data(), sp, d.n, d.c, d.sp, kBlock, ch, b, t, shift(ch), s, q);
  });
  BnTrainTwin t;
  t.y.resize(x.size());
  for (int64_t ch = 0; ch < d.c; ++ch) {
    float s = 0.f, q = 0.f;
    hd::bn_totals(scratch.data(), sp.blocks(), d.c, ch, s, q);
    float const mu = shift(ch) + s / static_cast<float>(count);
    float const var = hd::bn_shifted_variance(s, q, count);
    float const inv = hd::bn_inv_std(var, eps);
    for (int64_t k = 0; k < count; ++k) {
      int64_t const o = hd::bn_channel_offset(k, ch, d.c, d.sp);
      t.y[o] = hd::bn_value(x[o], mu, inv, scale[ch], bias[ch], relu, z ? (*z)[o] : 0.f);
    }
    t.mean.push_back(mu);
    t.inv.push_back(inv);
    t.next_mean.push_back(hd::bn_running_update(rmean[ch], mu, 1.0, momentum));
    t.next_var.push_back(
        hd::bn_running_update(rvar[ch], var, correction ? *correction : hd::bn_unbias(count), momentum));
  }
  return t;
}

// batchnorm_train_backward's kernels in their order: the sums, dscale and dbias, then dx; `y` a
// fused Relu's output (masks dy), or null.
BnTwin bn_train_backward_twin(Vec const& x, Vec const& dy, Vec const& scale, Vec const& mean, Vec const& inv,
                              Shape const& shape, Vec const* y = nullptr, Vec* dz = nullptr) {
  float const* yp = y ? y->data() : nullptr;
  Dims const d = dims_of(shape);
  int64_t const count = d.n * d.sp;
  hd::BnSplit const sp = hd::bn_split(d.n, d.c, d.sp, kBlock);
  Vec const scratch = block_partials(sp, d.c, [&](int64_t ch, int64_t b, int t, float& s, float& q) {
    hd::bn_grad_slice(x.data(), dy.data(), yp, mean[ch], sp, d.n, d.c, d.sp, kBlock, ch, b, t, s, q);
  });
  BnTwin t;
  t.dx.resize(x.size());
  for (int64_t ch = 0; ch < d.c; ++ch) {
    float db = 0.f, dyx = 0.f;
    hd::bn_totals(scratch.data(), sp.blocks(), d.c, ch, db, dyx);
    float const ds = dyx * inv[ch];
    for (int64_t k = 0; k < count; ++k) {
      int64_t const o = hd::bn_channel_offset(k, ch, d.c, d.sp);
      t.dx[o] = hd::bn_train_grad_input(hd::bn_masked_dy(dy.data(), yp, o), x[o], mean[ch], inv[ch], scale[ch], ds, db,
                                        count);
      if (dz) (*dz)[o] = hd::bn_masked_dy(dy.data(), yp, o);
    }
    t.dscale.push_back(ds);
    t.dbias.push_back(db);
  }
  return t;
}

// bn_infer_forward_kernel: one thread per element, with the host's inv_std (exec/cuda/norm.cc).
Vec bn_infer_twin(Vec const& x, Vec const& scale, Vec const& bias, Vec const& mean, Vec const& var, float eps,
                  Shape const& shape, bool relu = false) {
  Dims const d = dims_of(shape);
  Vec y(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t const ch = hd::bn_channel(i, d.c, d.sp);
    y[i] = hd::bn_value(x[i], mean[ch], 1.f / std::sqrt(var[ch] + eps), scale[ch], bias[ch], relu);
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
OneOp bn_op(BnInputs const& in, float eps, float momentum, bool relu = false, Tensor const* z = nullptr) {
  std::vector<In> inputs{{"x", in.x, TensorRole::kInput},
                         {"s", in.scale, TensorRole::kWeight},
                         {"b", in.bias, TensorRole::kWeight},
                         {"m", in.mean, TensorRole::kConstant},
                         {"v", in.var, TensorRole::kConstant}};
  if (z) inputs.push_back({"z", *z, TensorRole::kInput});
  return make_op("BatchNormalization", graph::BatchNormAttrs{eps, momentum, false, relu, z != nullptr}, inputs);
}

// [3,2,2,3] and [2,3,2,2]: the shapes cuDNN refused on an H100; then every rank, a single
// element per channel (M = 1: no unbiasing), channels longer than the block, and channels split
// over many blocks across the samples and across each plane ([8,2,40,40]: 8 x 7 blocks; [64,3,7,7]:
// 16 blocks of 4 rows of 64 lanes).
std::vector<Shape> const kOwnKernelShapes{{3, 2, 2, 3},   {2, 3, 2, 2},    {4, 5},    {1, 3},         {2, 3, 7, 11},
                                          {2, 4, 16, 20}, {2, 3, 2, 3, 4}, {5, 2, 9}, {8, 2, 40, 40}, {64, 3, 7, 7}};

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

// The CPU's fused op (BatchNormAttrs::relu, and residual where z is given) and the kernels' twins
// (`relu`, `z`, `y`, `dz`), training forward and backward from the twin's saved statistics, compared
// on y, dx, dscale and dbias with the tolerances above; dz (z's gradient) returned for the caller.
struct FusedTwin {
  CpuRun r;
  BnTrainTwin f;
  BnTwin t;
  Vec dz;
};
FusedTwin fused_twin_matches_cpu(BnInputs const& in, Shape const& shape, float eps, float momentum,
                                 Tensor const* z = nullptr) {
  Tol const tol_y{1e-5, 1e-5}, tol_dx{1e-5, 1e-4}, tol_sum{1e-5, 1e-5};
  FusedTwin o;
  o.r = run_cpu(bn_op(in, eps, momentum, true, z), true);
  Vec const x = values(in.x), scale = values(in.scale), dy = values(o.r.dy);
  Vec const zv = z ? values(*z) : Vec{};
  o.f = bn_train_twin(x, scale, values(in.bias), values(in.mean), values(in.var), eps, momentum, shape, nullptr, false,
                      true, z ? &zv : nullptr);
  EXPECT_TRUE(close(o.f.y, values(o.r.out.at(0)), tol_y));
  o.dz.resize(x.size());
  o.t = bn_train_backward_twin(x, dy, scale, o.f.mean, o.f.inv, shape, &o.f.y, &o.dz);
  EXPECT_TRUE(close(o.t.dx, values(o.r.gin.at(0)), tol_dx));
  EXPECT_TRUE(close(o.t.dscale, values(o.r.gw.at(1)), tol_sum));
  EXPECT_TRUE(close(o.t.dbias, values(o.r.gw.at(2)), tol_sum));
  return o;
}

// A fused Relu (BatchNormAttrs::relu): training forward and backward (fused_twin_matches_cpu), and the
// inference forward, against the CPU's fused op (dy masked by y > 0). About half of y is clipped to
// 0, so leaving out the mask or the clip fails.
TEST(HdBatchNorm, AFusedReluTwinMatchesCpu) {
  float const eps = 1e-5f, momentum = 0.9f;
  Tol const tol_y{1e-5, 1e-5}, tol_sum{1e-5, 1e-5};
  for (Shape const& shape : kOwnKernelShapes) {
    SCOPED_TRACE("x " + dims_string(shape));
    BnInputs const in = bn_inputs(shape, 241);
    FusedTwin const o = fused_twin_matches_cpu(in, shape, eps, momentum);
    Vec const x = values(in.x), scale = values(in.scale), dy = values(o.r.dy);
    Dims const d = dims_of(shape);
    if (d.n * d.sp > 1) {  // one element per channel normalises to 0 (y = bias): nothing to mask apart
      BnTrainTwin const unclipped =
          bn_train_twin(x, scale, values(in.bias), values(in.mean), values(in.var), eps, momentum, shape);
      EXPECT_FALSE(close(unclipped.y, values(o.r.out.at(0)), tol_y));
      BnTwin const unmasked = bn_train_backward_twin(x, dy, scale, o.f.mean, o.f.inv, shape);
      EXPECT_FALSE(close(unmasked.dbias, values(o.r.gw.at(2)), tol_sum));
    }
    CpuRun const ri = run_cpu(bn_op(in, eps, momentum, true), false);
    Vec const yi = bn_infer_twin(x, scale, values(in.bias), values(in.mean), values(in.var), eps, shape, /*relu=*/true);
    EXPECT_TRUE(close(yi, values(ri.out.at(0)), Tol{1e-6, 1e-5}));
  }
}

// A fused residual block tail (BatchNormAttrs::residual: y = max(0, BatchNorm(x) + z)): training
// forward and backward (fused_twin_matches_cpu), and z's gradient, the masked dy itself; leaving z
// out of y, or out of the mask, fails the comparison.
TEST(HdBatchNorm, AFusedResidualTwinMatchesCpu) {
  float const eps = 1e-5f, momentum = 0.9f;
  for (Shape const& shape : kOwnKernelShapes) {
    SCOPED_TRACE("x " + dims_string(shape));
    BnInputs const in = bn_inputs(shape, 251);
    Tensor const z = random_tensor(shape, 257, -1.f, 1.f);
    FusedTwin const o = fused_twin_matches_cpu(in, shape, eps, momentum, &z);
    ASSERT_TRUE(o.r.gin.at(graph::kBatchNormResidualInput).defined());
    Vec const want_dz = values(o.r.gin.at(graph::kBatchNormResidualInput));
    EXPECT_TRUE(close(o.dz, want_dz, Tol{0, 0}));
    BnTrainTwin const no_z = bn_train_twin(values(in.x), values(in.scale), values(in.bias), values(in.mean),
                                           values(in.var), eps, momentum, shape, nullptr, false, true);
    EXPECT_FALSE(close(no_z.y, values(o.r.out.at(0)), Tol{1e-5, 1e-5}));
    EXPECT_FALSE(close(values(o.r.dy), want_dz, Tol{0, 0}));  // some of dy is masked out
  }
}

// Every element of a channel is in exactly one block's thread's slice, for splits across the
// samples, across each plane, both, and neither; and a large channel count gets one block each.
TEST(HdBatchNorm, TheSplitVisitsEachChannelsElementsOnce) {
  for (Shape const& s : std::vector<Shape>{
           {64, 64, 3136}, {64, 2048, 49}, {1, 3, 12544}, {4, 64, 200}, {3, 5, 1}, {1, 1, 1}, {200, 1, 3}}) {
    SCOPED_TRACE("x " + dims_string(s));
    hd::BnSplit const sp = hd::bn_split(s[0], s[1], s[2], kBlock);
    EXPECT_GE(sp.blocks(), 1);
    EXPECT_EQ(kBlock % sp.lanes, 0);
    int64_t const ch = s[1] - 1;  // the last channel
    std::vector<int> seen(static_cast<std::size_t>(s[0] * s[1] * s[2]), 0);
    for (int64_t b = 0; b < sp.blocks(); ++b)
      for (int t = 0; t < kBlock; ++t)
        hd::bn_for_slice(sp, s[0], s[1], s[2], kBlock, ch, b, t, [&](int64_t o) {
          ASSERT_LT(o, static_cast<int64_t>(seen.size()));
          EXPECT_EQ(hd::bn_channel(o, s[1], s[2]), ch);
          ++seen[o];
        });
    for (int64_t k = 0; k < s[0] * s[2]; ++k) EXPECT_EQ(seen[hd::bn_channel_offset(k, ch, s[1], s[2])], 1) << k;
  }
  EXPECT_GE(hd::bn_split(64, 64, 3136, kBlock).blocks(), 16);  // a small C still fills the GPU
  EXPECT_EQ(hd::bn_split(64, 2048, 49, kBlock).blocks(), 1);
}

// The elementwise passes' grid (hd::bn_planes, as the launchers size it) reaches every element
// exactly once, with its channel, for short planes (rows of 64 lanes), long ones, a batch of one,
// and more planes than the grid's 65,535 rows hold (the loop strides over the rest).
TEST(HdBatchNorm, ThePlaneGridVisitsEachElementOnceWithItsChannel) {
  for (Shape const& s : std::vector<Shape>{{64, 64, 49}, {2, 3, 3136}, {1, 5, 1}, {3, 2, 300}, {1, 600000, 1}}) {
    SCOPED_TRACE("x " + dims_string(s));
    int64_t const planes = s[0] * s[1];
    hd::BnPlanes const g = hd::bn_planes(planes, s[2], kBlock);
    EXPECT_EQ(kBlock % g.lanes, 0);
    std::vector<int> seen(static_cast<std::size_t>(planes * s[2]), 0);
    for (int64_t by = 0; by < g.across; ++by)
      for (int64_t bx = 0; bx < g.along; ++bx)
        for (int t = 0; t < kBlock; ++t)
          hd::bn_for_planes(g, planes, s[1], s[2], kBlock, bx, by, t, [&](int64_t o, int64_t c) {
            ASSERT_LT(o, static_cast<int64_t>(seen.size()));
            ASSERT_EQ(hd::bn_channel(o, s[1], s[2]), c);
            ++seen[o];
          });
    EXPECT_EQ(seen, std::vector<int>(seen.size(), 1));
  }
  EXPECT_EQ(hd::bn_planes(600000, 1, kBlock).across, 65535);  // capped: the loop covers the rest
}

// A channel whose mean is large against its spread (x = 1000 + U(-1, 1)): the shifted sums keep its
// variance to float32's precision, where unshifted ones (E[x²] − E[x]² of 10^6-sized terms) lose it.
TEST(HdBatchNorm, ShiftedSumsKeepTheVarianceOfALargeMean) {
  Shape const shape{16, 2, 30, 30};
  Tensor const x = random_tensor(shape, 5, 999.f, 1001.f, true);
  Vec const xv = values(x);
  Vec const ones(2, 1.f), zeros(2, 0.f);
  Dims const d = dims_of(shape);
  for (bool unshifted : {false, true}) {
    BnTrainTwin const t = bn_train_twin(xv, ones, zeros, zeros, ones, 0.f, 0.9f, shape, nullptr, unshifted);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t k = 0; k < d.n * d.sp; ++k) sum += xv[hd::bn_channel_offset(k, ch, d.c, d.sp)];
      double const mean = sum / static_cast<double>(d.n * d.sp);
      for (int64_t k = 0; k < d.n * d.sp; ++k) {
        double const v = xv[hd::bn_channel_offset(k, ch, d.c, d.sp)] - mean;
        sq += v * v;
      }
      double const var = sq / static_cast<double>(d.n * d.sp);
      double const got = 1.0 / (static_cast<double>(t.inv[ch]) * t.inv[ch]);
      if (unshifted)
        EXPECT_GT(std::fabs(got - var) / var, 1e-2) << "channel " << ch;
      else
        EXPECT_LT(std::fabs(got - var) / var, 1e-4) << "channel " << ch;
    }
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
