// Finite-difference gradient checks of every operator of the CPU backend: backward_input for data
// inputs, backward_weight (accumulating) for weights; each check also shows that a gradient 10% off
// or with a flipped sign would fail it.
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;
constexpr TensorRole kConst = TensorRole::kConstant;

void check(OneOp o, GradCheckOptions const& opt = {}) {
  CpuBackend be;
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
  expect_grads_ok(grad_check(be, o, opt), opt.rtol);
}

TEST(GradCheck, ConvWithBias) {
  check(make_op("Conv", graph::ConvAttrs{{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, true},
                {{"x", random_tensor({2, 3, 5, 5}, 1), kIn},
                 {"w", random_tensor({4, 3, 3, 3}, 2), kW},
                 {"b", random_tensor({4}, 3), kW}}));
}

TEST(GradCheck, ConvGroupedStridedDilated) {
  check(make_op("Conv", graph::ConvAttrs{{3, 3}, {2, 2}, {2, 1}, {2, 1, 1, 0}, 2, false},
                {{"x", random_tensor({1, 4, 7, 6}, 4), kIn}, {"w", random_tensor({4, 2, 3, 3}, 5), kW}}));
}

// MobileNetV2's depthwise convolutions: one channel per group, stride 1 and 2, padded.
TEST(GradCheck, ConvDepthwise) {
  for (int64_t stride : {1, 2})
    check(make_op("Conv", graph::ConvAttrs{{3, 3}, {stride, stride}, {1, 1}, {1, 1, 1, 1}, 6, false},
                  {{"x", random_tensor({2, 6, 4, 4}, 90 + static_cast<uint32_t>(stride)), kIn},
                   {"w", random_tensor({6, 1, 3, 3}, 92), kW}}));
  for (int64_t stride : {1, 2}) {
    OneOp o = make_op("Conv", graph::ConvAttrs{{3, 3}, {stride, stride}, {1, 1}, {1, 1, 1, 1}, 6, false},
                      {{"x", random_tensor({2, 6, 4, 4}, 93), kIn}, {"w", random_tensor({6, 1, 3, 3}, 94), kW}});
    expect_one_pass_equals_split(o);
  }
}

TEST(GradCheck, ConvWeightIsAnActivation) {
  check(make_op("Conv", graph::ConvAttrs{{3}, {1}, {1}, {0, 0}, 1, false},
                {{"x", random_tensor({2, 2, 6}, 6), kIn}, {"w", random_tensor({3, 2, 3}, 7), kIn}}));
}

TEST(GradCheck, GemmTransBAlphaBeta) {
  check(make_op(
      "Gemm", graph::GemmAttrs{0.7f, 1.3f, false, true, true},
      {{"a", random_tensor({3, 4}, 8), kIn}, {"b", random_tensor({5, 4}, 9), kW}, {"c", random_tensor({5}, 10), kW}}));
}

TEST(GradCheck, GemmTransABiasMatrix) {
  check(make_op("Gemm", graph::GemmAttrs{1.f, 1.f, true, false, true},
                {{"a", random_tensor({4, 3}, 11), kIn},
                 {"b", random_tensor({4, 5}, 12), kIn},
                 {"c", random_tensor({3, 5}, 13), kIn}}));
}

TEST(GradCheck, GemmBiasFastPath) {
  check(make_op("Gemm", graph::GemmAttrs{1.f, 1.f, false, true, true},
                {{"a", random_tensor({3, 4}, 14), kIn},
                 {"b", random_tensor({2, 4}, 15), kW},
                 {"c", random_tensor({2}, 16), kW}}));
}

TEST(GradCheck, MatMulWeight) {
  check(make_op("MatMul", graph::MatMulAttrs{},
                {{"a", random_tensor({2, 3, 4}, 17), kIn}, {"b", random_tensor({4, 5}, 18), kW}}));
}

TEST(GradCheck, MatMulBatchedBroadcast) {
  check(make_op("MatMul", graph::MatMulAttrs{},
                {{"a", random_tensor({2, 1, 3, 4}, 19), kIn}, {"b", random_tensor({3, 4, 2}, 20), kIn}}));
}

TEST(GradCheck, MatMulVectors) {
  check(make_op("MatMul", graph::MatMulAttrs{},
                {{"a", random_tensor({4}, 21), kIn}, {"b", random_tensor({2, 4, 3}, 22), kIn}}));
  check(make_op("MatMul", graph::MatMulAttrs{},
                {{"a", random_tensor({2, 3, 4}, 23), kIn}, {"b", random_tensor({4}, 24), kIn}}));
}

// An operand stored transposed and a scale (MatMulAttrs, the importer's fold of attention's Kᵀ and
// 1/sqrt(d)): B transposed where A's batch dims fold into rows; both transposed with broadcast batch
// dims; A transposed against a plain matrix B (which cannot fold: A's rows are not contiguous).
TEST(GradCheck, MatMulTransposedAndScaled) {
  check(make_op("MatMul", graph::MatMulAttrs{false, true, 0.7f},
                {{"a", random_tensor({2, 3, 4}, 26), kIn}, {"b", random_tensor({5, 4}, 27), kW}}));
  check(make_op("MatMul", graph::MatMulAttrs{true, true, -1.3f},
                {{"a", random_tensor({2, 1, 4, 3}, 28), kIn}, {"b", random_tensor({3, 2, 4}, 29), kIn}}));
  check(make_op("MatMul", graph::MatMulAttrs{true, false, 1.f},
                {{"a", random_tensor({2, 4, 3}, 30), kIn}, {"b", random_tensor({4, 5}, 31), kW}}));
}

TEST(GradCheck, MaxPool) {
  check(make_op("MaxPool", graph::PoolAttrs{graph::PoolKind::kMax, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false, {}},
                {{"x", distinct_tensor({1, 2, 5, 5}, 25), kIn}}));
}

TEST(GradCheck, MaxPoolCeilMode) {
  check(make_op("MaxPool", graph::PoolAttrs{graph::PoolKind::kMax, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, true, {}},
                {{"x", distinct_tensor({1, 2, 5, 5}, 26), kIn}}));
}

TEST(GradCheck, AveragePool) {
  check(make_op("AveragePool",
                graph::PoolAttrs{graph::PoolKind::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false, {}},
                {{"x", random_tensor({2, 2, 5, 5}, 27), kIn}}));
  check(make_op("AveragePool",
                graph::PoolAttrs{graph::PoolKind::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, false, {}},
                {{"x", random_tensor({2, 2, 5, 5}, 28), kIn}}));
}

TEST(GradCheck, DilatedPooling) {
  using graph::PoolKind;
  check(make_op("MaxPool", graph::PoolAttrs{PoolKind::kMax, {2, 3}, {1, 2}, {1, 0, 0, 2}, false, false, {2, 2}},
                {{"x", distinct_tensor({1, 2, 5, 7}, 35), kIn}}));
  check(make_op("AveragePool", graph::PoolAttrs{PoolKind::kAverage, {2, 2}, {2, 1}, {1, 1, 1, 1}, false, true, {3, 2}},
                {{"x", random_tensor({2, 2, 6, 5}, 36), kIn}}));
  check(make_op("AveragePool", graph::PoolAttrs{PoolKind::kAverage, {2}, {1}, {1, 1}, true, false, {3}},
                {{"x", random_tensor({2, 3, 7}, 37), kIn}}));
}

// count_include_pad with ceil_mode windows past the end pad (their divisor counts fewer taps).
TEST(GradCheck, AveragePoolCountingPadsInCeilMode) {
  check(make_op("AveragePool",
                graph::PoolAttrs{graph::PoolKind::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, true, {}},
                {{"x", random_tensor({1, 2, 6, 7}, 38), kIn}}));
}

TEST(GradCheck, GlobalAveragePool) {
  check(make_op("GlobalAveragePool", graph::PoolAttrs{graph::PoolKind::kGlobalAverage, {}, {}, {}, false, false, {}},
                {{"x", random_tensor({2, 3, 4, 3}, 29), kIn}}));
}

TEST(GradCheck, BatchNormTraining) {
  check(make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
                {{"x", random_tensor({3, 2, 2, 3}, 30), kIn},
                 {"s", random_tensor({2}, 31), kW},
                 {"b", random_tensor({2}, 32), kW},
                 {"m", random_tensor({2}, 33), kConst},
                 {"v", random_tensor({2}, 34, 0.5f, 1.f, true), kConst}}),
        {.skip_inputs = {3, 4}});
}

TEST(GradCheck, BatchNormInference) {
  check(make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, false},
                {{"x", random_tensor({2, 3, 2, 2}, 35), kIn},
                 {"s", random_tensor({3}, 36), kW},
                 {"b", random_tensor({3}, 37), kW},
                 {"m", random_tensor({3}, 38), kConst},
                 {"v", random_tensor({3}, 39, 0.5f, 1.f, true), kConst}}),
        {.training = false, .skip_inputs = {3, 4}});
}

// A Relu fused into the normalisation (BatchNormAttrs::relu, the importer's BatchNorm+Relu): y is
// max(0, ·), and backward masks dy by y > 0. Both modes, 4 channels of 2x3x3 values each, about
// half of them clipped.
TEST(GradCheck, BatchNormWithAFusedRelu) {
  for (bool training : {true, false})
    check(make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, training, true},
                  {{"x", random_tensor({2, 4, 3, 3}, 43), kIn},
                   {"s", random_tensor({4}, 44, 0.5f, 1.5f), kW},
                   {"b", random_tensor({4}, 45), kW},
                   {"m", random_tensor({4}, 46), kConst},
                   {"v", random_tensor({4}, 47, 0.5f, 1.f, true), kConst}}),
          {.training = training, .skip_inputs = {3, 4}});
}

// A residual block's tail fused into the normalisation (BatchNormAttrs::residual): y = max(0,
// BatchNorm(x) + z), z's gradient the masked dy. Both modes.
TEST(GradCheck, BatchNormWithAFusedResidualAndRelu) {
  for (bool training : {true, false})
    check(make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, training, true, true},
                  {{"x", random_tensor({2, 4, 3, 3}, 48), kIn},
                   {"s", random_tensor({4}, 49, 0.5f, 1.5f), kW},
                   {"b", random_tensor({4}, 50), kW},
                   {"m", random_tensor({4}, 51), kConst},
                   {"v", random_tensor({4}, 52, 0.5f, 1.f, true), kConst},
                   {"z", random_tensor({2, 4, 3, 3}, 53), kIn}}),
          {.training = training, .skip_inputs = {3, 4}});
}

TEST(GradCheck, LayerNorm) {
  check(make_op("LayerNormalization", graph::LayerNormAttrs{2, 1e-5f, true},
                {{"x", random_tensor({2, 3, 5}, 40), kIn},
                 {"s", random_tensor({5}, 41), kW},
                 {"b", random_tensor({5}, 42), kW}}));
  check(make_op("LayerNormalization", graph::LayerNormAttrs{1, 1e-5f, false},
                {{"x", random_tensor({2, 3, 2}, 43), kIn}, {"s", random_tensor({3, 2}, 44), kW}}));
}

TEST(GradCheck, Softmax) {
  check(make_op("Softmax", graph::SoftmaxAttrs{1}, {{"x", random_tensor({2, 4, 3}, 45), kIn}}));
  check(make_op("Softmax", graph::SoftmaxAttrs{2}, {{"x", random_tensor({2, 4, 3}, 46), kIn}}));
}

TEST(GradCheck, Activations) {
  for (char const* t : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Abs", "Neg"})
    check(make_op(t, {}, {{"x", random_tensor({3, 7}, 47), kIn}}));
  check(make_op("LeakyRelu", graph::LeakyReluAttrs{0.2f}, {{"x", random_tensor({3, 7}, 48), kIn}}));
  check(make_op("Gelu", graph::GeluAttrs{false}, {{"x", random_tensor({3, 7}, 49), kIn}}));
  check(make_op("Gelu", graph::GeluAttrs{true}, {{"x", random_tensor({3, 7}, 50), kIn}}));
  for (char const* t : {"Sqrt", "Log"}) check(make_op(t, {}, {{"x", random_tensor({3, 7}, 51, 0.5f, 2.f, true), kIn}}));
}

TEST(GradCheck, PowConstantExponent) {
  for (float e : {2.f, 3.f, 0.5f})
    check(
        make_op("Pow", {},
                {{"x", random_tensor({2, 5}, 52, 0.5f, 2.f, true), kIn}, {"e", Tensor::from_floats({}, {e}), kConst}}));
}

TEST(GradCheck, PowTensorExponent) {
  check(
      make_op("Pow", {}, {{"x", random_tensor({2, 3}, 79, 0.5f, 2.f, true), kIn}, {"e", random_tensor({3}, 80), kIn}}));
  check(
      make_op("Pow", {}, {{"x", random_tensor({3}, 81, 0.5f, 2.f, true), kW}, {"e", random_tensor({2, 3}, 82), kIn}}));
}

TEST(GradCheck, BinaryBroadcast) {
  for (char const* t : {"Add", "Sub", "Mul", "Div"}) {
    check(make_op(t, {}, {{"a", random_tensor({2, 3, 4}, 53), kIn}, {"b", random_tensor({3, 1}, 54, 0.5f, 1.f), kIn}}));
    check(make_op(t, {}, {{"a", random_tensor({4}, 55), kIn}, {"b", random_tensor({2, 3, 4}, 56, 0.5f, 1.f), kIn}}));
    check(make_op(t, {}, {{"a", random_tensor({2, 1, 4}, 57), kIn}, {"b", random_tensor({3, 1}, 58, 0.5f, 1.f), kW}}));
  }
}

TEST(GradCheck, Dropout) {
  check(make_op("Dropout", graph::DropoutAttrs{0.3f, true}, {{"x", random_tensor({4, 6}, 59), kIn}}, 2));
  check(make_op("Dropout", graph::DropoutAttrs{0.3f, false}, {{"x", random_tensor({4, 6}, 60), kIn}}),
        {.training = false});
}

TEST(GradCheck, Views) {
  check(make_op("Reshape", graph::ReshapeAttrs{{0, -1}, false}, {{"x", random_tensor({2, 3, 2}, 61), kIn}}));
  check(make_op("Flatten", graph::FlattenAttrs{2}, {{"x", random_tensor({2, 3, 2}, 62), kIn}}));
  check(make_op("Squeeze", graph::SqueezeAttrs{{1}}, {{"x", random_tensor({2, 1, 3}, 63), kIn}}));
  check(make_op("Unsqueeze", graph::UnsqueezeAttrs{{0, 3}}, {{"x", random_tensor({2, 3}, 64), kIn}}));
  check(make_op("Identity", {}, {{"x", random_tensor({2, 3}, 65), kIn}}));
  check(make_op("Cast", graph::CastAttrs{1}, {{"x", random_tensor({2, 3}, 66), kIn}}));
}

TEST(GradCheck, ExpandTranspose) {
  check(make_op("Expand", graph::ExpandAttrs{{2, 3, 4}}, {{"x", random_tensor({3, 1}, 67), kIn}}));
  check(make_op("Transpose", graph::TransposeAttrs{{2, 0, 1}}, {{"x", random_tensor({2, 3, 4}, 68), kIn}}));
}

TEST(GradCheck, ConcatSplit) {
  check(make_op("Concat", graph::ConcatAttrs{1},
                {{"a", random_tensor({2, 1, 3}, 69), kIn},
                 {"b", random_tensor({2, 3, 3}, 70), kW},
                 {"c", random_tensor({2, 2, 3}, 71), kIn}}));
  check(make_op("Split", graph::SplitAttrs{1, {1, 3, 2}}, {{"x", random_tensor({2, 6, 2}, 72), kIn}}, 3));
}

TEST(GradCheck, SliceWithSteps) {
  check(make_op("Slice", graph::SliceAttrs{{1, -1}, {100, 0}, {0, 2}, {2, -2}},
                {{"x", random_tensor({5, 2, 6}, 73), kIn}}));
}

TEST(GradCheck, GatherEmbeddingAndAxis) {
  check(make_op("Gather", graph::GatherAttrs{0},
                {{"table", random_tensor({5, 3}, 74), kW}, {"idx", int_tensor({2, 3}, {0, 4, 4, -1, 2, 0}), kIn}}));
  check(make_op("Gather", graph::GatherAttrs{1},
                {{"x", random_tensor({2, 4, 3}, 75), kIn}, {"idx", int_tensor({2}, {3, 1}), kIn}}));
}

TEST(GradCheck, Reductions) {
  check(make_op("ReduceMean", graph::ReduceAttrs{{1}, true}, {{"x", random_tensor({2, 3, 4}, 76), kIn}}));
  check(make_op("ReduceSum", graph::ReduceAttrs{{0, 2}, false}, {{"x", random_tensor({2, 3, 4}, 77), kIn}}));
  check(make_op("ReduceMean", graph::ReduceAttrs{{}, false}, {{"x", random_tensor({2, 3}, 78), kIn}}));
}

}  // namespace
}  // namespace gp::exec::testing
