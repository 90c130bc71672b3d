// Pad, Tile, Trilu, GatherElements, ScatterElements, Resize: forward values worked out by hand or
// with plain loops, finite-difference gradients, import (shapes, folded attributes, the errors for
// what graphpipe refuses). ONNX's node tests of these ops (their static inputs fixed at import) run
// in OnnxNodeConformance.
#include <cmath>
#include <limits>
#include <tuple>

#include "exec/stage_executor.h"
#include "graph/onnx_import.h"
#include "tests/exec/op_harness.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;

Tensor floats(std::vector<int64_t> shape, std::vector<float> const& v) { return Tensor::from_floats(shape, v); }

Tensor iota_tensor(std::vector<int64_t> shape, float start = 1.f) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

std::vector<float> forward1(OneOp const& o) {
  CpuBackend be;
  Status const s = be.supports(o.the_op(), o.graph);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<Tensor> out = run_forward(be, o);
  if (out.empty() || !out[0].defined()) return {};
  return out[0].to_vector();
}

void expect_values(std::vector<float> const& got, std::vector<float> const& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

void check_index_grads(OneOp o) {
  CpuBackend be;
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
  expect_grads_ok(grad_check(be, o));
}

OneOp pad_op(Tensor x, graph::PadMode mode, std::vector<int64_t> pads, float value = 0.f, TensorRole role = kIn) {
  return make_op("Pad", graph::PadAttrs{mode, std::move(pads), value}, {{"x", std::move(x), role}});
}

// ---- Pad ----
TEST(IndexOps, PadModesMatchNumpy) {
  Tensor const x = floats({1, 4}, {1, 2, 3, 4});
  std::vector<int64_t> const pads{0, 2, 0, 3};
  expect_values(forward1(pad_op(x, graph::PadMode::kReflect, pads)), {3, 2, 1, 2, 3, 4, 3, 2, 1});
  expect_values(forward1(pad_op(x, graph::PadMode::kEdge, pads)), {1, 1, 1, 2, 3, 4, 4, 4, 4});
  expect_values(forward1(pad_op(x, graph::PadMode::kWrap, pads)), {3, 4, 1, 2, 3, 4, 1, 2, 3});
  expect_values(forward1(pad_op(x, graph::PadMode::kConstant, pads, 7.5f)), {7.5, 7.5, 1, 2, 3, 4, 7.5, 7.5, 7.5});
  // Pads longer than the axis: numpy reflects again (period 2 (n - 1)) and wraps around.
  Tensor const y = floats({1, 3}, {1, 2, 3});
  expect_values(forward1(pad_op(y, graph::PadMode::kReflect, {0, 5, 0, 0})), {2, 1, 2, 3, 2, 1, 2, 3});
  expect_values(forward1(pad_op(y, graph::PadMode::kWrap, {0, 4, 0, 1})), {3, 1, 2, 3, 1, 2, 3, 1});
}

TEST(IndexOps, PadConstantCropsWithNegativePads) {
  // Rows: one padded before; columns: the first cropped, one padded after.
  Tensor const x = floats({2, 3}, {1, 2, 3, 4, 5, 6});
  OneOp o = pad_op(x, graph::PadMode::kConstant, {1, -1, 0, 1}, 9.f);
  expect_values(forward1(o), {9, 9, 9, 2, 3, 9, 5, 6, 9});
  CpuBackend be;
  std::vector<Tensor> out = run_forward(be, o);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 3}));
}

TEST(IndexOps, PadComposesAxesLikeAPerElementLoop) {
  Tensor const x = random_tensor({2, 3, 4}, 1);
  std::vector<int64_t> const pads{0, 2, -1, 0, 3, 2};
  for (graph::PadMode mode : {graph::PadMode::kConstant, graph::PadMode::kEdge, graph::PadMode::kWrap}) {
    std::vector<float> const got = forward1(pad_op(x, mode, pads, -3.f));
    std::vector<float> want;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 8; ++b)
        for (int64_t c = 0; c < 5; ++c) {
          int64_t i = b - 2, j = c + 1;
          bool const out = i < 0 || i >= 3 || j < 0 || j >= 4;
          if (mode == graph::PadMode::kConstant && out) {
            want.push_back(-3.f);
            continue;
          }
          if (mode == graph::PadMode::kEdge) i = std::clamp<int64_t>(i, 0, 2), j = std::clamp<int64_t>(j, 0, 3);
          if (mode == graph::PadMode::kWrap) i = (i + 3) % 3, j = j % 4;
          want.push_back(x.data<float>()[(a * 3 + i) * 4 + j]);
        }
    expect_values(got, want);
  }
}

TEST(IndexOps, PadGradients) {
  check_index_grads(pad_op(random_tensor({2, 3, 4}, 2), graph::PadMode::kConstant, {0, 1, -1, 0, 2, 1}, 0.5f));
  check_index_grads(pad_op(random_tensor({2, 3, 4}, 3), graph::PadMode::kReflect, {0, 4, 2, 0, 3, 5}));
  check_index_grads(pad_op(random_tensor({2, 3, 4}, 4), graph::PadMode::kEdge, {1, 2, 0, 0, 1, 3}));
  check_index_grads(pad_op(random_tensor({2, 3, 4}, 5), graph::PadMode::kWrap, {0, 5, -2, 0, 1, 6}));
  // A weight's gradient accumulates (the harness starts it at 0.25).
  check_index_grads(pad_op(random_tensor({3, 4}, 6), graph::PadMode::kReflect, {2, 1, 1, 3}, 0.f, kW));
}

TEST(IndexOps, PadAndTileCopyIntegers) {
  CpuBackend be;
  OneOp p = pad_op(int_tensor({2, 2}, {5, 6, 7, 8}), graph::PadMode::kConstant, {0, 1, 0, 2}, 3.f);
  std::vector<Tensor> out = run_forward(be, p);
  ASSERT_EQ(out[0].dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(out[0].data<int64_t>(), out[0].data<int64_t>() + out[0].numel()),
            (std::vector<int64_t>{3, 5, 6, 3, 3, 3, 7, 8, 3, 3}));
  OneOp t = make_op("Tile", graph::TileAttrs{{2, 1}}, {{"x", int_tensor({1, 3}, {1, 2, 3})}});
  out = run_forward(be, t);
  EXPECT_EQ(std::vector<int64_t>(out[0].data<int64_t>(), out[0].data<int64_t>() + out[0].numel()),
            (std::vector<int64_t>{1, 2, 3, 1, 2, 3}));
  OneOp d = pad_op(Tensor({2}, DType::kFloat64), graph::PadMode::kEdge, {1, 1});
  EXPECT_NE(be.supports(d.the_op(), d.graph).message().find("float32, int64, int32 or bool only"), std::string::npos);
}

// ---- Tile ----
TEST(IndexOps, TileForward) {
  Tensor const x = floats({2, 2}, {1, 2, 3, 4});
  expect_values(forward1(make_op("Tile", graph::TileAttrs{{1, 2}}, {{"x", x}})), {1, 2, 1, 2, 3, 4, 3, 4});
  Tensor const y = random_tensor({2, 1, 3}, 7);
  std::vector<float> want;
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 6; ++c) want.push_back(y.data<float>()[(a % 2) * 3 + c % 3]);
  expect_values(forward1(make_op("Tile", graph::TileAttrs{{2, 3, 2}}, {{"x", y}})), want);
}

TEST(IndexOps, TileGradients) {
  check_index_grads(make_op("Tile", graph::TileAttrs{{2, 1, 3}}, {{"x", random_tensor({2, 3, 2}, 8)}}));
  check_index_grads(make_op("Tile", graph::TileAttrs{{3, 2}}, {{"x", random_tensor({1, 4}, 9), kW}}));
}

// ---- Trilu ----
TEST(IndexOps, TriluForward) {
  Tensor const x = iota_tensor({3, 4});
  expect_values(forward1(make_op("Trilu", graph::TriluAttrs{true, 0}, {{"x", x}})),
                {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  expect_values(forward1(make_op("Trilu", graph::TriluAttrs{false, -1}, {{"x", x}})),
                {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  expect_values(forward1(make_op("Trilu", graph::TriluAttrs{true, 2}, {{"x", x}})),
                {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0});
  Tensor const b = random_tensor({2, 3, 4, 5}, 10);
  std::vector<float> want(b.to_vector());
  for (int64_t m = 0; m < 6; ++m)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 5; ++j)
        if (j - i > 1) want[(m * 4 + i) * 5 + j] = 0.f;
  expect_values(forward1(make_op("Trilu", graph::TriluAttrs{false, 1}, {{"x", b}})), want);
}

TEST(IndexOps, TriluGradients) {
  check_index_grads(make_op("Trilu", graph::TriluAttrs{true, -1}, {{"x", random_tensor({2, 4, 3}, 11)}}));
  check_index_grads(make_op("Trilu", graph::TriluAttrs{false, 1}, {{"x", random_tensor({3, 5}, 12)}}));
}

// ---- GatherElements, ScatterElements ----

TEST(IndexOps, GatherElementsOnnxExamples) {
  expect_values(forward1(make_op("GatherElements", graph::GatherElementsAttrs{1},
                                 {{"x", floats({2, 2}, {1, 2, 3, 4})}, {"i", int_tensor({2, 2}, {0, 0, 1, 0})}})),
                {1, 1, 4, 3});
  Tensor const x = iota_tensor({3, 3});
  expect_values(forward1(make_op("GatherElements", graph::GatherElementsAttrs{0},
                                 {{"x", x}, {"i", int32_tensor({2, 3}, {1, 2, 0, 2, 0, 0})}})),
                {4, 8, 3, 7, 2, 3});
  expect_values(forward1(make_op("GatherElements", graph::GatherElementsAttrs{0},
                                 {{"x", x}, {"i", int_tensor({2, 3}, {-1, -2, 0, -3, 0, 2})}})),
                {7, 5, 3, 1, 2, 9});
}

TEST(IndexOps, GatherElementsRejectsOutOfRangeAndBadDtypes) {
  CpuBackend be;
  OneOp o = make_op("GatherElements", graph::GatherElementsAttrs{1},
                    {{"x", floats({2, 2}, {1, 2, 3, 4})}, {"i", int_tensor({2, 1}, {0, 2})}});
  std::vector<Tensor> out;
  Status const s = be.forward(OpCall{o.the_op(), o.graph}, o.inputs, out, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("index 2 is out of range for axis 1 of size 2"), std::string::npos) << s.message();
  OneOp f = make_op("GatherElements", graph::GatherElementsAttrs{1},
                    {{"x", floats({2, 2}, {1, 2, 3, 4})}, {"i", floats({2, 1}, {0, 1})}});
  Status const d = be.supports(f.the_op(), f.graph);
  EXPECT_NE(d.message().find("indices have dtype float32"), std::string::npos) << d.message();
}

// Integer data (HF RoBERTa's token_type_ids buffer) is gathered as it is.
TEST(IndexOps, GatherElementsOfIntegerData) {
  CpuBackend be;
  OneOp o =
      make_op("GatherElements", graph::GatherElementsAttrs{1},
              {{"t", int_tensor({1, 4}, {7, 8, 9, 10})}, {"i", int_tensor({1, 3}, {3, 0, 3})}}, 1, {DType::kInt64});
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
  Tensor y = run_forward(be, o).at(0);
  ASSERT_EQ(y.dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 3), (std::vector<int64_t>{10, 7, 10}));
}

// ---- OneHot ----

OneOp one_hot_op(Tensor idx, graph::OneHotAttrs a, DType out = DType::kFloat32) {
  return make_op("OneHot", a, {{"i", std::move(idx), kIn}}, 1, {out});
}

TEST(IndexOps, OneHotAxesNegativeAndOutOfRangeIndices) {
  CpuBackend be;
  Tensor const idx = int_tensor({2, 2}, {1, -1, 3, 7});  // -1 is the last position; 7 is off everywhere
  Tensor y = run_forward(be, one_hot_op(idx, {2, 4, 0.5, 2.0}))[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 4}));
  expect_values(y.to_vector(), {0.5, 2, 0.5, 0.5, 0.5, 0.5, 0.5, 2, 0.5, 0.5, 0.5, 2, 0.5, 0.5, 0.5, 0.5});
  y = run_forward(be, one_hot_op(idx, {1, 4, 0.5, 2.0}))[0];  // the depth axis between the two
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 4, 2}));
  expect_values(y.to_vector(), {0.5, 0.5, 2, 0.5, 0.5, 0.5, 0.5, 2, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 2, 0.5});
  // torch's F.one_hot: int64 values out; int32 and float32 indices (truncated) in.
  Tensor const ids = int32_tensor({3}, {2, 0, -3});
  OneOp ints = one_hot_op(ids, {1, 3, 0, 1}, DType::kInt64);
  ASSERT_TRUE(be.supports(ints.the_op(), ints.graph).is_ok());
  Tensor const z = run_forward(be, ints)[0];
  ASSERT_EQ(z.dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(z.data<int64_t>(), z.data<int64_t>() + z.numel()),
            (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 0, 0}));
  Tensor const f = run_forward(be, one_hot_op(Tensor::from_floats({2}, {2.7f, -0.5f}), {1, 3, 0, 1}))[0];
  expect_values(f.to_vector(), {0, 0, 1, 1, 0, 0});
  // Float indices may depend on weights: OneHot is constant in them, so their gradient is zero.
  OneOp fo = one_hot_op(Tensor::from_floats({2}, {2.7f, -0.5f}), {1, 3, 0, 1});
  Saved saved;
  run_forward(be, fo, true, 7, &saved);
  std::vector<Tensor> grads;
  ASSERT_TRUE(be.backward_input(OpCall{fo.the_op(), fo.graph, true, 7}, saved,
                                {Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6})}, {true}, grads));
  ASSERT_TRUE(grads.at(0).defined());
  expect_values(grads[0].to_vector(), {0, 0});
  // Outputs other than float32, int64 and int32 are refused before anything runs.
  OneOp bytes = one_hot_op(idx, {2, 4, 0, 1}, DType::kUInt8);
  EXPECT_FALSE(be.supports(bytes.the_op(), bytes.graph).is_ok());
}

TEST(IndexOps, GatherElementsGradients) {
  // Duplicate and negative indices: their gradients add up.
  check_index_grads(make_op("GatherElements", graph::GatherElementsAttrs{1},
                            {{"x", random_tensor({2, 4, 3}, 13)},
                             {"i", int_tensor({2, 3, 3}, {0, 1, 3, -1, 0, 0, 2, 2, 2, 1, 1, 1, 3, -4, 0, 0, 1, 2})}}));
  check_index_grads(
      make_op("GatherElements", graph::GatherElementsAttrs{0},
              {{"x", random_tensor({3, 2}, 14), kW}, {"i", int32_tensor({4, 2}, {0, 1, 2, 2, 1, 0, 0, 0})}}));
}

OneOp scatter_op(graph::ScatterReduction red, int64_t axis, Tensor data, Tensor idx, Tensor upd) {
  return make_op("ScatterElements", graph::ScatterElementsAttrs{axis, red},
                 {{"data", std::move(data)}, {"i", std::move(idx)}, {"u", std::move(upd)}});
}

TEST(IndexOps, ScatterElementsOnnxExamples) {
  using R = graph::ScatterReduction;
  expect_values(forward1(scatter_op(R::kNone, 0, Tensor::zeros({3, 3}), int_tensor({2, 3}, {1, 0, 2, 0, 2, 1}),
                                    floats({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f}))),
                {2.0f, 1.1f, 0.0f, 1.0f, 0.0f, 2.2f, 0.0f, 2.1f, 1.2f});
  Tensor const row = floats({1, 5}, {1, 2, 3, 4, 5});
  expect_values(forward1(scatter_op(R::kNone, 1, row, int_tensor({1, 2}, {1, -2}), floats({1, 2}, {1.1f, 2.1f}))),
                {1, 1.1f, 3, 2.1f, 5});
  expect_values(forward1(scatter_op(R::kAdd, 1, row, int_tensor({1, 2}, {1, 1}), floats({1, 2}, {1.1f, 2.1f}))),
                {1, 5.2f, 3, 4, 5});
  expect_values(forward1(scatter_op(R::kMul, 1, row, int_tensor({1, 3}, {1, 1, 4}), floats({1, 3}, {3, -2, 0.5f}))),
                {1, -12, 3, 4, 2.5f});
  // ONNX's max and min examples (opset 18).
  expect_values(forward1(scatter_op(R::kMax, 1, row, int_tensor({1, 2}, {1, 1}), floats({1, 2}, {1.1f, 2.1f}))),
                {1, 2.1f, 3, 4, 5});
  expect_values(forward1(scatter_op(R::kMin, 1, row, int_tensor({1, 2}, {1, 1}), floats({1, 2}, {1.1f, 2.1f}))),
                {1, 1.1f, 3, 4, 5});
}

TEST(IndexOps, ScatterElementsGradients) {
  using R = graph::ScatterReduction;
  // Duplicates: with none the last update wins (only it gets a gradient); add and mul combine them.
  Tensor const idx = int_tensor({2, 3}, {1, 0, 3, 1, -4, 2});
  for (R red : {R::kNone, R::kAdd, R::kMul, R::kMax, R::kMin})
    check_index_grads(scatter_op(red, 1, random_tensor({2, 4}, 15), idx, random_tensor({2, 3}, 16)));
  check_index_grads(scatter_op(R::kNone, 0, random_tensor({3, 2, 2}, 17), int_tensor({2, 2, 1}, {2, 0, 2, 2}),
                               random_tensor({2, 2, 1}, 18)));
}

TEST(IndexOps, ScatterNoneGradientGoesToTheLastWriter) {
  CpuBackend be;
  OneOp o = scatter_op(graph::ScatterReduction::kNone, 1, floats({1, 3}, {1, 2, 3}), int_tensor({1, 2}, {1, 1}),
                       floats({1, 2}, {5, 6}));
  Saved saved;
  std::vector<Tensor> out = run_forward(be, o, true, 7, &saved);
  expect_values(out[0].to_vector(), {1, 6, 3});
  std::vector<Tensor> grads;
  OpCall call{o.the_op(), o.graph};
  ASSERT_TRUE(be.backward_input(call, saved, {floats({1, 3}, {10, 20, 30})}, {true, false, true}, grads).is_ok());
  expect_values(grads[0].to_vector(), {10, 0, 30});
  expect_values(grads[2].to_vector(), {0, 20});
}

// max and min: the gradient goes to the values equal to the extremum, shared evenly among ties
// (data's own element among them), as torch's scatter_reduce amax and amin share it.
TEST(IndexOps, ScatterExtremumGradientIsSharedByTheValuesEqualToIt) {
  CpuBackend be;
  using R = graph::ScatterReduction;
  // Position 1: data 2, updates 5 and 5 (a tie); position 2: data 3 beats update 1 (max), loses (min).
  for (R red : {R::kMax, R::kMin}) {
    OneOp o =
        scatter_op(red, 1, floats({1, 4}, {1, 2, 3, 4}), int_tensor({1, 3}, {1, 1, 2}), floats({1, 3}, {5, 5, 1}));
    Saved saved;
    std::vector<Tensor> out = run_forward(be, o, true, 7, &saved);
    std::vector<Tensor> grads;
    OpCall call{o.the_op(), o.graph};
    ASSERT_TRUE(be.backward_input(call, saved, {floats({1, 4}, {10, 20, 30, 40})}, {true, false, true}, grads).is_ok());
    if (red == R::kMax) {
      expect_values(out[0].to_vector(), {1, 5, 3, 4});
      expect_values(grads[0].to_vector(), {10, 0, 30, 40});
      expect_values(grads[2].to_vector(), {10, 10, 0});
    } else {
      expect_values(out[0].to_vector(), {1, 2, 1, 4});
      expect_values(grads[0].to_vector(), {10, 20, 0, 40});
      expect_values(grads[2].to_vector(), {0, 0, 30});
    }
  }
  // data equal to the updates' maximum: three ways.
  OneOp o = scatter_op(R::kMax, 1, floats({1, 2}, {7, 0}), int_tensor({1, 2}, {0, 0}), floats({1, 2}, {7, 7}));
  Saved saved;
  run_forward(be, o, true, 7, &saved);
  std::vector<Tensor> grads;
  OpCall call{o.the_op(), o.graph};
  ASSERT_TRUE(be.backward_input(call, saved, {floats({1, 2}, {3, 1})}, {true, false, true}, grads).is_ok());
  expect_values(grads[0].to_vector(), {1, 1});
  expect_values(grads[2].to_vector(), {1, 1});
}

// ---- Resize ----
graph::ResizeAttrs resize_attrs(graph::ResizeMode mode, graph::ResizeCoord coord, std::vector<float> scales,
                                std::vector<int64_t> sizes = {}) {
  graph::ResizeAttrs a;
  a.mode = mode;
  a.coord = coord;
  a.scales = std::move(scales);
  a.sizes = std::move(sizes);
  return a;
}

TEST(IndexOps, ResizeByHand) {
  using M = graph::ResizeMode;
  using C = graph::ResizeCoord;
  Tensor const x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  // Bilinear, half pixel: output pixel centres at input coordinates -0.25, 0.25, 0.75, 1.25.
  expect_values(forward1(make_op("Resize", resize_attrs(M::kLinear, C::kHalfPixel, {1, 1, 2, 2}), {{"x", x}})),
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // Nearest, asymmetric, sizes: the batch entry -1 keeps the input's.
  expect_values(
      forward1(make_op("Resize", resize_attrs(M::kNearest, C::kAsymmetric, {1, 1, 1.5, 1}, {-1, 1, 3, 2}), {{"x", x}})),
      {1, 2, 3, 4, 3, 4});
}

TEST(IndexOps, ResizeGradients) {
  using M = graph::ResizeMode;
  using C = graph::ResizeCoord;
  Tensor const x = random_tensor({1, 2, 3, 4}, 19);
  check_index_grads(make_op("Resize", resize_attrs(M::kLinear, C::kHalfPixel, {1, 1, 2, 1.5f}), {{"x", x}}));
  check_index_grads(make_op("Resize", resize_attrs(M::kLinear, C::kAlignCorners, {1, 1, 0.7f, 2}), {{"x", x}}));
  check_index_grads(
      make_op("Resize", resize_attrs(M::kLinear, C::kPytorchHalfPixel, {1, 1, 1, 1}, {1, 2, 5, 3}), {{"x", x}}));
  check_index_grads(make_op("Resize", resize_attrs(M::kNearest, C::kAsymmetric, {1, 1, 2.5f, 0.5f}), {{"x", x}}));
  // Scales whose output lengths round (3 * 1.7 = 5.1 -> 5): half_pixel_symmetric's shift is nonzero.
  check_index_grads(
      make_op("Resize", resize_attrs(M::kLinear, C::kHalfPixelSymmetric, {1, 1, 1.7f, 0.6f}), {{"x", x}}));
  // Antialiased downsampling (opset 18): linear and cubic filters widened by 1/scale.
  Tensor const wide = random_tensor({1, 2, 7, 9}, 23);
  graph::ResizeAttrs aa = resize_attrs(M::kLinear, C::kHalfPixel, {1, 1, 0.45f, 0.6f});
  aa.antialias = true;
  check_index_grads(make_op("Resize", aa, {{"x", wide}}));
  aa.mode = M::kCubic;
  aa.exclude_outside = true;
  check_index_grads(make_op("Resize", aa, {{"x", wide}}));
  graph::ResizeAttrs cubic = resize_attrs(M::kCubic, C::kHalfPixel, {1, 1, 1.7f, 2});
  check_index_grads(make_op("Resize", cubic, {{"x", x}}));
  cubic.exclude_outside = true;
  cubic.cubic_coeff_a = -0.5f;
  check_index_grads(make_op("Resize", cubic, {{"x", x, kW}}));
}

// ---- import ----
graph::Op const& last_op(graph::OpGraph const& g) {
  static graph::Op const none;
  return g.ops().empty() ? none : g.ops().back();
}

void expect_import_error(std::string const& text, std::string const& fragment) {
  auto g = graph::load_onnx_text(text);
  ASSERT_FALSE(g.is_ok()) << "imported: " << text;
  EXPECT_NE(g.status().message().find(fragment), std::string::npos) << g.status().message();
}

std::string one_node(std::string const& in, std::string const& out, std::string const& body, int opset = 13) {
  return graph::model_text(in, out, {}, body, opset);
}

TEST(IndexImport, PadFoldsPadsAndValue) {
  auto g = must_load(one_node("float[N,3,4] x", "float[N,4,7] y", R"(
      p = Constant<value = int64[6] {0, 1, 2, 0, 0, 1}>()
      v = Constant<value = float {2.5}>()
      y = Pad<mode = "reflect">(x, p, v))"));
  graph::Op const& op = last_op(g);
  ASSERT_EQ(op.type, "Pad");
  auto const& a = std::get<graph::PadAttrs>(op.typed);
  EXPECT_EQ(a.mode, graph::PadMode::kReflect);
  EXPECT_EQ(a.pads, (std::vector<int64_t>{0, 1, 2, 0, 0, 1}));
  EXPECT_FLOAT_EQ(a.value, 2.5f);
  EXPECT_EQ(op.inputs.size(), 1u);
  EXPECT_EQ(g.tensor(op.outputs[0]).shape.dims, (std::vector<int64_t>{N, 4, 7}));
  // Before opset 11 the pads and the value are attributes.
  auto g10 = must_load(
      one_node("float[N,3] x", "float[N,6] y", "y = Pad<pads = [0, 1, 0, 2], mode = \"edge\", value = 1.0>(x)", 10));
  EXPECT_EQ(std::get<graph::PadAttrs>(last_op(g10).typed).pads, (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(std::get<graph::PadAttrs>(last_op(g10).typed).mode, graph::PadMode::kEdge);
  expect_import_error(one_node("float[N,3] x", "float[M,3] y", R"(
      p = Constant<value = int64[4] {1, 0, 0, 0}>()
      y = Pad(x, p))"),
                      "padding the batch dimension (axis 0)");
  expect_import_error(one_node("float[N,3] x, int64[4] p", "float[N,M] y", "y = Pad(x, p)"),
                      "pads ('p') is computed at run time");
  expect_import_error(one_node("float[N,3] x", "float[N,M] y", R"(
      p = Constant<value = int64[4] {0, 1, 0, 0}>()
      y = Pad<mode = "mirror">(x, p))"),
                      "mode 'mirror' is not one of constant, reflect, edge, wrap");
}

TEST(IndexImport, TileTriluResize) {
  auto t = must_load(one_node("float[N,2,3] x", "float[N,4,9] y", R"(
      r = Constant<value = int64[3] {1, 2, 3}>()
      y = Tile(x, r))"));
  EXPECT_EQ(std::get<graph::TileAttrs>(last_op(t).typed).repeats, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(t.tensor(last_op(t).outputs[0]).shape.dims, (std::vector<int64_t>{N, 4, 9}));
  expect_import_error(one_node("float[N,2] x", "float[M,2] y", R"(
      r = Constant<value = int64[2] {2, 1}>()
      y = Tile(x, r))"),
                      "tiling the batch dimension (axis 0) 2 times");

  auto u = must_load(one_node("float[N,3,4] x", "float[N,3,4] y", R"(
      k = Constant<value = int64 {-1}>()
      y = Trilu<upper = 0>(x, k))",
                              14));
  auto const& tr = std::get<graph::TriluAttrs>(last_op(u).typed);
  EXPECT_FALSE(tr.upper);
  EXPECT_EQ(tr.k, -1);
  expect_import_error(one_node("float[N,4] x", "float[N,4] y", "y = Trilu(x)", 14),
                      "the batch is one of the matrix dimensions");

  auto r = must_load(one_node("float[N,3,4,5] x", "float[N,3,8,10] y", R"(
      s = Constant<value = float[4] {1.0, 1.0, 2.0, 2.0}>()
      y = Resize<mode = "linear", coordinate_transformation_mode = "align_corners">(x, , s))"));
  auto const& ra = std::get<graph::ResizeAttrs>(last_op(r).typed);
  EXPECT_EQ(ra.mode, graph::ResizeMode::kLinear);
  EXPECT_EQ(ra.coord, graph::ResizeCoord::kAlignCorners);
  EXPECT_EQ(ra.scales, (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(r.tensor(last_op(r).outputs[0]).shape.dims, (std::vector<int64_t>{N, 3, 8, 10}));
  expect_import_error(one_node("float[N,3,4,5] x", "float[M,3,8,10] y", R"(
      s = Constant<value = float[4] {2.0, 1.0, 2.0, 2.0}>()
      y = Resize(x, , s))"),
                      "resizing the batch dimension (axis 0");
  expect_import_error(one_node("float[N,3,4,5] x", "float[N,3,8,10] y", R"(
      s = Constant<value = float[4] {1.0, 1.0, 2.0, 2.0}>()
      y = Resize<coordinate_transformation_mode = "tf_crop_and_resize">(x, , s))"),
                      "coordinate_transformation_mode 'tf_crop_and_resize'");
}

TEST(IndexImport, GatherAndScatterElements) {
  auto g =
      must_load(one_node("float[N,4,3] x, int64[N,2,3] i", "float[N,2,3] y", "y = GatherElements<axis = -2>(x, i)"));
  EXPECT_EQ(std::get<graph::GatherElementsAttrs>(last_op(g).typed).axis, 1);
  EXPECT_EQ(g.tensor(last_op(g).outputs[0]).shape.dims, (std::vector<int64_t>{N, 2, 3}));
  expect_import_error(one_node("float[N,4] x, int64[N,4] i", "float[N,4] y", "y = GatherElements(x, i)"),
                      "indexing along the batch dimension (axis 0)");
  auto s = must_load(one_node("float[N,5] x, int64[N,2] i, float[N,2] u", "float[N,5] y",
                              "y = ScatterElements<axis = 1, reduction = \"add\">(x, i, u)", 16));
  auto const& sa = std::get<graph::ScatterElementsAttrs>(last_op(s).typed);
  EXPECT_EQ(sa.axis, 1);
  EXPECT_EQ(sa.reduction, graph::ScatterReduction::kAdd);
  EXPECT_EQ(last_op(s).inputs.size(), 3u);
  expect_import_error(
      one_node("float[N,5] x, int64[N,2] i, float[N,3] u", "float[N,5] y", "y = ScatterElements<axis = 1>(x, i, u)"),
      "differ in shape");
}

// Depth and values constants at import; the depth axis may not come before the batch.
TEST(IndexImport, OneHotFoldsDepthAndValues) {
  auto g = must_load(one_node("int64[N,3] ids", "float[N,3,5] y", R"(
      depth = Constant<value = int64 {5}>()
      values = Constant<value = float[2] {0.1, 0.9}>()
      y = OneHot<axis = -1>(ids, depth, values))"));
  auto const& a = std::get<graph::OneHotAttrs>(last_op(g).typed);
  EXPECT_EQ(a.axis, 2);
  EXPECT_EQ(a.depth, 5);
  EXPECT_NEAR(a.on, 0.9, 1e-7);
  EXPECT_EQ(last_op(g).inputs.size(), 1u);
  EXPECT_EQ(g.tensor(last_op(g).outputs[0]).shape.dims, (std::vector<int64_t>{N, 3, 5}));
  expect_import_error(one_node("int64[N,3] ids", "float[5,N,3] y", R"(
      depth = Constant<value = int64 {5}>()
      values = Constant<value = float[2] {0, 1}>()
      y = OneHot<axis = 0>(ids, depth, values))"),
                      "move the batch out of the first dimension");
  expect_import_error(one_node("int64[N,3] ids, int64 depth", "float[N,3,5] y", R"(
      values = Constant<value = float[2] {0, 1}>()
      y = OneHot(ids, depth, values))"),
                      "computed at run time");
}

// A learned row tiled to the batch (repeats [N, 1] from Shape): symbolic at import, N rows at run
// time for every micro-batch size, and its gradient is the sum over the rows.
TEST(IndexTile, RepeatsThatHoldTheBatch) {
  auto g = graph::load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
net (float[N,3] x) => (float[N,3] y)
<float[1,3] row = {1.0, 2.0, 3.0}> {
  s = Shape(x)
  zero = Constant<value = int64[1] {0}>()
  one = Constant<value = int64[1] {1}>()
  end = Constant<value = int64[1] {1}>()
  n = Slice(s, zero, end)
  reps = Concat<axis = 0>(n, one)
  t = Tile(row, reps)
  y = Add(x, t)
})");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  graph::Op const* tile = nullptr;
  for (graph::Op const& op : g->ops())
    if (op.type == "Tile") tile = &op;
  ASSERT_NE(tile, nullptr);
  EXPECT_EQ(g->tensor(tile->outputs[0]).shape.dims, (std::vector<int64_t>{graph::kBatch, 3}));
  CpuBackend be;
  auto ex = StageExecutor::create(*g, be);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  for (int64_t batch : {2, 5}) {
    TensorMap inputs, outputs;
    inputs.emplace(g->inputs()[0], Tensor({batch, 3}));
    inputs.at(g->inputs()[0]).fill(0.5f);
    ASSERT_TRUE((*ex)->forward(batch, inputs, outputs, true, 1).is_ok());
    Tensor const& y = outputs.at(g->outputs()[0]);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{batch, 3}));
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(y.data<float>()[r * 3 + c], 0.5f + static_cast<float>(c + 1));
    Tensor gy({batch, 3});
    gy.fill(1.f);
    TensorMap grads;
    EXPECT_TRUE((*ex)->zero_grads().is_ok());
    ASSERT_TRUE((*ex)->backward(batch, {{g->outputs()[0], gy}}, grads).is_ok());
    auto it = (*ex)->gradients().find("row");
    ASSERT_NE(it, (*ex)->gradients().end()) << "the tiled row is trained";
    for (int64_t c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(it->second.data<float>()[c], static_cast<float>(batch));
  }
}

// ---- GatherND ----

TEST(IndexOps, GatherNdOnnxExamples) {
  // ONNX's examples (batch_dims 0): whole rows, single elements, and a rank-3 index tensor.
  expect_values(
      forward1(make_op("GatherND", graph::GatherNDAttrs{},
                       {{"d", floats({2, 2}, {0, 1, 2, 3}), kIn}, {"i", int_tensor({2, 2}, {0, 0, 1, 1}), kIn}})),
      {0, 3});
  expect_values(forward1(make_op("GatherND", graph::GatherNDAttrs{},
                                 {{"d", floats({2, 2}, {0, 1, 2, 3}), kIn}, {"i", int_tensor({2, 1}, {1, 0}), kIn}})),
                {2, 3, 0, 1});
  expect_values(
      forward1(make_op("GatherND", graph::GatherNDAttrs{},
                       {{"d", iota_tensor({2, 2, 2}, 0.f), kIn}, {"i", int_tensor({2, 1, 2}, {0, 1, 1, 0}), kIn}})),
      {2, 3, 4, 5});
  // Negative indices count from the end.
  expect_values(forward1(make_op("GatherND", graph::GatherNDAttrs{},
                                 {{"d", floats({2, 2}, {0, 1, 2, 3}), kIn}, {"i", int_tensor({1, 2}, {-1, -2}), kIn}})),
                {2});
}

TEST(IndexOps, GatherNdRejectsIndicesOutOfRange) {
  OneOp o = make_op("GatherND", graph::GatherNDAttrs{},
                    {{"d", floats({2, 2}, {0, 1, 2, 3}), kIn}, {"i", int_tensor({1, 2}, {0, 2}), kIn}});
  CpuBackend be;
  std::vector<Tensor> out;
  OpCall call{o.the_op(), o.graph, true, 7};
  Status const s = be.forward(call, o.inputs, out, nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("index 2 is out of range for axis 1 of size 2"), std::string::npos) << s.message();
}

TEST(IndexOps, GatherNdGradientsIncludingRepeatedIndices) {
  check_index_grads(
      make_op("GatherND", graph::GatherNDAttrs{},
              {{"d", random_tensor({3, 4, 2}, 301), kW}, {"i", int_tensor({3, 2}, {2, 1, 0, 3, 2, 1}), kIn}}));
  check_index_grads(make_op("GatherND", graph::GatherNDAttrs{},
                            {{"d", random_tensor({3, 4}, 302), kW}, {"i", int_tensor({2, 1}, {1, 1}), kIn}}));
}

// ---- ScatterND ----

OneOp scatter_nd_op(graph::ScatterReduction red, Tensor data, Tensor idx, Tensor upd) {
  return make_op("ScatterND", graph::ScatterNDAttrs{red},
                 {{"data", std::move(data)}, {"i", std::move(idx)}, {"u", std::move(upd)}});
}

TEST(IndexOps, ScatterNdByHand) {
  using R = graph::ScatterReduction;
  // ONNX's first example: single elements of a vector.
  expect_values(forward1(scatter_nd_op(R::kNone, iota_tensor({8}, 1.f), int_tensor({4, 1}, {4, 3, 1, 7}),
                                       floats({4}, {9, 10, 11, 12}))),
                {1, 11, 3, 10, 9, 6, 7, 12});
  // A whole slice (K = 1 into a rank-3 tensor), and tuples of 2 with a negative index.
  expect_values(forward1(scatter_nd_op(R::kNone, iota_tensor({2, 2, 2}, 0.f), int_tensor({1, 1}, {1}),
                                       floats({1, 2, 2}, {10, 11, 12, 13}))),
                {0, 1, 2, 3, 10, 11, 12, 13});
  expect_values(forward1(scatter_nd_op(R::kNone, iota_tensor({2, 3}, 0.f), int_tensor({2, 2}, {0, -1, 1, 0}),
                                       floats({2}, {7, 8}))),
                {0, 1, 7, 8, 4, 5});
  // Duplicates combine in index order under every reduction.
  Tensor const data = floats({4}, {1, 2, 3, 4});
  Tensor const idx = int_tensor({3, 1}, {1, 1, 3});
  expect_values(forward1(scatter_nd_op(R::kAdd, data, idx, floats({3}, {10, 20, 30}))), {1, 32, 3, 34});
  expect_values(forward1(scatter_nd_op(R::kMul, data, idx, floats({3}, {10, 20, 30}))), {1, 400, 3, 120});
  expect_values(forward1(scatter_nd_op(R::kMax, data, idx, floats({3}, {10, -5, 0}))), {1, 10, 3, 4});
  expect_values(forward1(scatter_nd_op(R::kMin, data, idx, floats({3}, {10, -5, 0}))), {1, -5, 3, 0});
  expect_values(forward1(scatter_nd_op(R::kNone, data, idx, floats({3}, {10, 20, 30}))), {1, 20, 3, 30});
}

TEST(IndexOps, ScatterNdRejectsIndicesOutOfRangeAndUpdatesThatDoNotFit) {
  CpuBackend be;
  for (auto [idx, upd, fragment] :
       {std::tuple{int_tensor({1, 2}, {0, 3}), floats({1}, {1}), "index 3 is out of range for axis 1 of size 3"},
        std::tuple{int_tensor({2, 1}, {0, 1}), floats({2, 2}, {1, 2, 3, 4}),
                   "updates [2,2] do not fit indices [2,1]"}}) {
    OneOp o = scatter_nd_op(graph::ScatterReduction::kNone, Tensor::zeros({2, 3}), idx, upd);
    std::vector<Tensor> out;
    OpCall call{o.the_op(), o.graph, true, 7};
    Status const s = be.forward(call, o.inputs, out, nullptr);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  }
}

// Finite differences through every reduction, with a tuple given twice (slices of 2) and a
// negative index; under none the last writer takes the gradient, as for ScatterElements.
TEST(IndexOps, ScatterNdGradients) {
  using R = graph::ScatterReduction;
  for (R red : {R::kNone, R::kAdd, R::kMul, R::kMax, R::kMin}) {
    check_index_grads(scatter_nd_op(red, random_tensor({3, 4, 2}, 310), int_tensor({3, 2}, {2, 1, 0, -1, 2, 1}),
                                    random_tensor({3, 2}, 311)));
    check_index_grads(
        scatter_nd_op(red, random_tensor({3, 2}, 312), int_tensor({2, 1}, {1, 1}), random_tensor({2, 2}, 313)));
  }
}

TEST(IndexImport, ScatterNdRunsWhereTheBatchIsInTheSlicesOrTheIndicesFollowIt) {
  // The dynamo exporter's index assignment `h[:, idx] = v`: the indexed axis moved to the front,
  // the batch in the slices.
  auto a = must_load(one_node("float[N,6,8] x, float[N,2,8] u", "float[6,N,8] y", R"(
      i = Constant<value = int64[2,1] {1, 3}>()
      xt = Transpose<perm = [1, 0, 2]>(x)
      ut = Transpose<perm = [1, 0, 2]>(u)
      y = ScatterND(xt, i, ut))",
                              16));
  EXPECT_EQ(std::get<graph::ScatterNDAttrs>(last_op(a).typed).reduction, graph::ScatterReduction::kNone);
  EXPECT_EQ(a.tensor(last_op(a).outputs[0]).shape.dims, (std::vector<int64_t>{6, N, 8}));
  // index_put over (rows, positions): tuples that follow the micro-batch address its rows.
  auto b = must_load(one_node("float[N,6,8] x, int64[N,3,2] i, float[N,3,8] u", "float[N,6,8] y",
                              "y = ScatterND<reduction = \"add\">(x, i, u)", 16));
  EXPECT_EQ(std::get<graph::ScatterNDAttrs>(last_op(b).typed).reduction, graph::ScatterReduction::kAdd);
  expect_import_error(one_node("float[N,6] x", "float[N,6] y", R"(
      i = Constant<value = int64[2,2] {0, 1, 1, 2}>()
      u = Constant<value = float[2] {1, 2}>()
      y = ScatterND(x, i, u))"),
                      "address the batch axis of data [N,6] but do not follow the micro-batch");
  // Rows of the batch scattered into a buffer without it: every micro-batch would write the same rows.
  expect_import_error(one_node("int64[N,1] i, float[N,2] u", "float[3,2] y", R"(
      x = Constant<value = float[3,2] {0, 0, 0, 0, 0, 0}>()
      y = ScatterND(x, i, u))"),
                      "follow the batch but address data [3,2] outside its batch axis");
  expect_import_error(one_node("float[N,6] x", "float[6,N] y", R"(
      i = Constant<value = int64[2,1] {1, 3}>()
      u = Constant<value = float[2,4] {1, 2, 3, 4, 5, 6, 7, 8}>()
      xt = Transpose<perm = [1, 0]>(x)
      y = ScatterND(xt, i, u))"),
                      "updates [2,4] do not fit indices [2,1] into data [6,N] (expected [2,N])");
  expect_import_error(one_node("float[N,6] x, int64[N,1] i, float[N,6] u", "float[N,6] y",
                               "y = ScatterND<reduction = \"sum\">(x, i, u)", 18),
                      "reduction 'sum' is not one of none, add, mul, max, min");
}

TEST(IndexImport, GatherNdShapesAndWhatIsRefused) {
  auto g = must_load(one_node("float[N,8,4] x, int64[N,2] i", "float[N,4] y", "y = GatherND(x, i)", 13));
  EXPECT_EQ(g.tensor(last_op(g).outputs[0]).shape.dims, (std::vector<int64_t>{N, 4}));
  expect_import_error(
      one_node("float[N,8,4] x, int64[N,2] i", "float[N,4] y", "y = GatherND<batch_dims = 1>(x, i)", 13),
      "GatherND with batch_dims 1 (graphpipe supports 0)");
  expect_import_error(one_node("float[N,8,4] x", "float[4] y", R"(
      i = Constant<value = int64[1,2] {0, 3}>()
      y = GatherND(x, i))",
                               13),
                      "do not follow the micro-batch");
}

// ---- indices computed per micro-batch: HF GPT2ForSequenceClassification's last token ----
// The logits of each row's last non-padding position, as both exporters write it: the position
// is ArgMax over (positions · int32 mask of ids != pad); the row comes from Range(0, N) (kept
// as an op: N is the micro-batch's size). TorchScript flattens the logits to [T·N, C] and gathers
// row · T + position; dynamo pairs (row, position) with Concat and uses GatherND.
std::string last_token_model(bool dynamo) {
  std::string const common = R"(<ir_version: 8, opset_import: ["" : 17]>
net (int64[N,4] ids, float[N,4,2] x) => (float[N,3] y)
<float[2,3] w = {0.5, -1.0, 2.0, 1.5, 0.25, -0.75}> {
  logits = MatMul(x, w)
  s = Shape(ids)
  zero = Constant<value = int64 {0}>()
  n = Gather<axis = 0>(s, zero)
  pad = Constant<value = int64 {0}>()
  is_pad = Equal(ids, pad)
  real = Not(is_pad)
  mask = Cast<to = 6>(real)
  positions = Constant<value = int32[4] {0, 1, 2, 3}>()
  scored = Mul(positions, mask)
  last = ArgMax<axis = -1, keepdims = 0>(scored)
  step = Constant<value = int64 {1}>()
  rows = Range(zero, n, step)
)";
  if (dynamo)
    return common + R"(  axis = Constant<value = int64[1] {-1}>()
  r2 = Unsqueeze(rows, axis)
  l2 = Unsqueeze(last, axis)
  pairs = Concat<axis = -1>(r2, l2)
  y = GatherND(logits, pairs)
})";
  return common + R"(  length = Constant<value = int64 {4}>()
  base = Mul(rows, length)
  flat_index = Add(last, base)
  flat = Flatten<axis = 2>(logits)
  y = Gather<axis = 0>(flat, flat_index)
})";
}

TEST(BatchIndices, LastTokenLogitsForEveryMicroBatchSizeAndTheirGradient) {
  float const w[2][3] = {{0.5f, -1.f, 2.f}, {1.5f, 0.25f, -0.75f}};
  for (bool dynamo : {false, true}) {
    SCOPED_TRACE(dynamo ? "dynamo form (GatherND)" : "TorchScript form (Gather over [T·N, C])");
    auto g = graph::load_onnx_text(last_token_model(dynamo));
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    bool range_kept = false;
    for (graph::Op const& op : g->ops()) range_kept = range_kept || op.type == "Range";
    EXPECT_TRUE(range_kept) << "Range over the batch runs per micro-batch";
    CpuBackend be;
    auto ex = StageExecutor::create(*g, be);
    ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
    for (int64_t batch : {2, 5}) {
      Tensor ids({batch, 4}, DType::kInt64);
      Tensor x({batch, 4, 2});
      std::vector<int64_t> last(static_cast<std::size_t>(batch));
      for (int64_t b = 0; b < batch; ++b) {
        last[b] = 3 - b % 4;  // row b ends in b % 4 padding ids
        for (int64_t t = 0; t < 4; ++t) ids.data<int64_t>()[b * 4 + t] = t <= last[b] ? 7 + t : 0;
        for (int64_t k = 0; k < 8; ++k) x.data<float>()[b * 8 + k] = 0.1f * static_cast<float>(b + 1) + 0.01f * k;
      }
      TensorMap inputs{{g->inputs()[0], ids}, {g->inputs()[1], x}}, outputs;
      ASSERT_TRUE((*ex)->forward(batch, inputs, outputs, true, 1).is_ok());
      Tensor const& y = outputs.at(g->outputs()[0]);
      ASSERT_EQ(y.shape(), (std::vector<int64_t>{batch, 3}));
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t c = 0; c < 3; ++c) {
          float const* xr = x.data<float>() + (b * 4 + last[b]) * 2;
          EXPECT_FLOAT_EQ(y.data<float>()[b * 3 + c], xr[0] * w[0][c] + xr[1] * w[1][c]) << "row " << b;
        }
      // d Σy / d w[k][c] = Σ_b x[b, last_b, k]: only the picked positions.
      Tensor gy({batch, 3});
      gy.fill(1.f);
      TensorMap grads;
      ASSERT_TRUE((*ex)->zero_grads().is_ok());
      ASSERT_TRUE((*ex)->backward(batch, {{g->outputs()[0], gy}}, grads).is_ok());
      auto it = (*ex)->gradients().find("w");
      ASSERT_NE(it, (*ex)->gradients().end());
      for (int64_t k = 0; k < 2; ++k) {
        float want = 0;
        for (int64_t b = 0; b < batch; ++b) want += x.data<float>()[(b * 4 + last[b]) * 2 + k];
        for (int64_t c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(it->second.data<float>()[k * 3 + c], want);
      }
    }
  }
}

TEST(BatchIndices, RangeOverTheBatchThatIsNotAMultipleOfItIsRefused) {
  expect_import_error(R"(<ir_version: 8, opset_import: ["" : 17]>
net (float[N,3] x) => (int64[M] y) {
  s = Shape(x)
  zero = Constant<value = int64 {0}>()
  one = Constant<value = int64 {1}>()
  n = Gather<axis = 0>(s, zero)
  y = Range(one, n, one)
})",
                      "graphpipe keeps Range(s, s + k·N, d) with d dividing k");
}

// Index arithmetic never hits undefined behaviour: int64 overflow wraps (two's complement), the
// lowest value divided by -1 wraps, division truncates toward zero (ONNX's reference), and a Cast
// of NaN or an out-of-range float to an integer gives 0 or the nearest bound.
TEST(BatchIndices, IntegerArithmeticWrapsAndCastsSaturate) {
  CpuBackend be;
  int64_t const big = std::numeric_limits<int64_t>::max(), low = std::numeric_limits<int64_t>::lowest();
  auto run = [&](char const* type, std::vector<int64_t> a, std::vector<int64_t> b) {
    OneOp o = make_op(type, {},
                      {{"a", int_tensor({static_cast<int64_t>(a.size())}, a), kIn},
                       {"b", int_tensor({static_cast<int64_t>(b.size())}, b), kIn}},
                      1, {DType::kInt64});
    EXPECT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
    std::vector<Tensor> out = run_forward(be, o);
    return std::vector<int64_t>(out.at(0).data<int64_t>(), out.at(0).data<int64_t>() + out.at(0).numel());
  };
  EXPECT_EQ(run("Add", {big, 1}, {1, 2}), (std::vector<int64_t>{low, 3}));
  EXPECT_EQ(run("Mul", {big, -3}, {2, 4}), (std::vector<int64_t>{-2, -12}));
  EXPECT_EQ(run("Div", {low, -7, 7}, {-1, 2, -2}), (std::vector<int64_t>{low, -3, -3}));
  Tensor x = Tensor::from_floats({4}, {std::nanf(""), 1e30f, -1e30f, -2.7f});
  OneOp cast = make_op("Cast", graph::CastAttrs{7}, {{"x", x, kIn}}, 1, {DType::kInt64});
  std::vector<Tensor> out = run_forward(be, cast);
  ASSERT_EQ(out.at(0).dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(out[0].data<int64_t>(), out[0].data<int64_t>() + 4),
            (std::vector<int64_t>{0, big, low, -2}));
}

}  // namespace
}  // namespace gp::exec::testing
