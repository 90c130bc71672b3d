// cuDNN graph construction on the host: validate() alone infers a convolution's output dims (no
// handle, no GPU), and they must equal ONNX's output-shape rule as conv_shape() computes it.
#include "exec/cuda/cudnn_graphs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

namespace gp::exec::cuda {
namespace {

struct Case {
  std::vector<int64_t> x, w, stride, dilation, pads;
  int64_t group = 1;
};

graph::ConvAttrs attrs_of(Case const& c) {
  graph::ConvAttrs a;
  a.kernel.assign(c.w.begin() + 2, c.w.end());
  a.strides = c.stride;
  a.dilations = c.dilation;
  a.pads = c.pads;
  a.group = c.group;
  return a;
}

std::vector<Case> cases() {
  return {
      {{8, 3, 56, 56}, {32, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1},  // same padding
      {{2, 4, 17, 19}, {6, 4, 3, 5}, {2, 3}, {1, 1}, {0, 1, 2, 0}, 1},   // strides, asymmetric pads
      {{2, 4, 20, 20}, {8, 1, 3, 3}, {1, 1}, {2, 3}, {2, 3, 2, 3}, 4},   // depthwise-style groups, dilation
      {{1, 6, 9, 11}, {4, 3, 2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 2},    // grouped, stride 2
      {{3, 2, 31}, {5, 2, 4}, {3}, {2}, {1, 2}, 1},                      // 1-D
      {{1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 0, 2}, 1},  // 3-D
  };
}

std::string dims(std::vector<int64_t> const& v) {
  std::string s;
  for (int64_t d : v) s += std::to_string(d) + " ";
  return s;
}

TEST(CudnnGraphs, ValidateInfersOnnxConvOutputDims) {
  for (Case const& c : cases()) {
    auto s = conv_shape(c.x, c.w, attrs_of(c));
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    SCOPED_TRACE(s->describe());
    auto got = cudnn_conv_output_dims(*s);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(dims(*got), dims(s->y));
  }
}

// The weight gradient runs on symmetric padding (symmetric_padding): x grows by the difference on
// the side with more padding and cuDNN infers the same output from the grown x; a symmetric conv is
// left alone.
TEST(CudnnGraphs, AsymmetricPaddingBecomesSymmetricOnAGrownInputWithTheSameOutput) {
  for (Case const& c : cases()) {
    auto s = conv_shape(c.x, c.w, attrs_of(c));
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    SCOPED_TRACE(s->describe());
    std::optional<SymmetricConv> const sym = symmetric_padding(*s);
    ASSERT_EQ(sym.has_value(), s->pad_begin != s->pad_end);
    if (!sym) continue;
    EXPECT_EQ(sym->shape.pad_begin, sym->shape.pad_end);
    for (std::size_t i = 0; i + 2 < c.x.size(); ++i) {
      int64_t const b = s->pad_begin[i], e = s->pad_end[i];
      EXPECT_EQ(sym->shape.x[i + 2], c.x[i + 2] + std::max(b, e) - std::min(b, e)) << "axis " << i;
      EXPECT_EQ(sym->x_at[i + 2], b - std::min(b, e)) << "axis " << i;
      EXPECT_EQ(sym->shape.pad_begin[i], std::min(b, e));
    }
    EXPECT_EQ(sym->x_at[0], 0);
    EXPECT_EQ(sym->x_at[1], 0);
    auto got = cudnn_conv_output_dims(sym->shape);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(dims(*got), dims(s->y));
  }
  // The ConvTranspose whose weight gradient was wrong on the H200: its conv has pads [0,0] [1,0].
  graph::ConvTransposeAttrs const a{{3, 3}, {2, 1}, {1, 1}, {-1, 0, 1, -2}, {0, 0}, 1, true};
  auto t = conv_transpose_shape({1, 2, 3, 3}, {2, 3, 3, 3}, a);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  std::optional<SymmetricConv> const sym = symmetric_padding(*t);
  ASSERT_TRUE(sym.has_value());
  EXPECT_EQ(dims(sym->shape.x), dims({1, 3, 7, 5}));
  EXPECT_EQ(dims(sym->x_at), dims({0, 0, 0, 0}));
  EXPECT_EQ(dims(sym->shape.pad_begin), dims({0, 0}));
  EXPECT_EQ(dims(sym->shape.pad_end), dims({0, 0}));
  auto got = cudnn_conv_output_dims(sym->shape);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(dims(*got), dims({1, 2, 3, 3}));
}

TEST(CudnnGraphs, OnnxRuleGivesTheKnownResNetStemShape) {
  graph::ConvAttrs a;
  a.strides = {2, 2}, a.dilations = {1, 1}, a.pads = {3, 3, 3, 3};
  auto s = conv_shape({8, 3, 224, 224}, {64, 3, 7, 7}, a);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->y, (std::vector<int64_t>{8, 64, 112, 112}));
}

// The comparison can fail: the same conv with one pad changed has different cuDNN dims.
TEST(CudnnGraphs, ADifferentPadGivesDifferentDims) {
  Case c = cases()[1];
  auto s = conv_shape(c.x, c.w, attrs_of(c));
  ASSERT_TRUE(s.is_ok());
  ConvShape other = *s;
  other.pad_end[0] += 3;
  auto got = cudnn_conv_output_dims(other);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_NE(dims(*got), dims(s->y));
}

TEST(CudnnGraphs, MismatchedChannelsOrGroupsAreRejectedBeforeCudnn) {
  graph::ConvAttrs a;
  a.group = 2;
  EXPECT_FALSE(conv_shape({1, 6, 8, 8}, {4, 2, 3, 3}, a).is_ok());  // 6 != 2·2
  a.group = 1;
  EXPECT_FALSE(conv_shape({1, 3, 2, 2}, {4, 3, 5, 5}, a).is_ok());  // kernel larger than input
  EXPECT_FALSE(conv_shape({1, 3, 8}, {4, 3, 3, 3}, a).is_ok());     // ranks differ
}

// ConvTranspose runs as the adjoint conv: cuDNN, validating that conv over the transpose's output
// shape, must infer exactly the transpose's input shape (else its dgrad could not produce the
// output), and the output shape is ONNX's rule.
TEST(CudnnGraphs, ConvTransposeIsTheAdjointOfAConvCudnnAccepts) {
  struct Deconv {
    std::vector<int64_t> x, w, want;
    graph::ConvTransposeAttrs a;  // kernel, strides, dilations, pads, output_padding, group, has_bias
  };
  std::vector<Deconv> const cases = {
      {{2, 3, 5}, {3, 2, 3}, {2, 2, 11}, {{3}, {2}, {1}, {1, 0}, {1}, 1, true}},
      {{2, 4, 4, 3}, {4, 3, 3, 2}, {2, 6, 9, 4}, {{3, 2}, {2, 1}, {1, 2}, {1, 0, 0, 1}, {1, 0}, 2, true}},
      {{1, 2, 3, 2, 3},
       {2, 2, 2, 3, 2},
       {1, 2, 4, 5, 3},
       {{2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {0, 1, 0, 0, 0, 1}, {0, 1, 0}, 1, true}},
      {{2, 8, 6, 6}, {8, 4, 2, 2}, {2, 4, 12, 12}, {{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, false}},
  };
  for (Deconv const& c : cases) {
    auto s = conv_transpose_shape(c.x, c.w, c.a);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    SCOPED_TRACE(s->describe());
    EXPECT_EQ(dims(s->x), dims(c.want));
    EXPECT_EQ(dims(s->y), dims(c.x));
    auto got = cudnn_conv_output_dims(*s);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(dims(*got), dims(c.x));
  }
  for (Deconv const& c : cases) EXPECT_TRUE(conv_transpose_shape(c.x, c.w, c.a)->embedding.empty());
  // What no conv maps back whole, negative pads and output_padding at the stride: the conv of the
  // part that receives contributions, embedded in the output (the CPU's rule, which ONNX's
  // conformance tests check there). Negative pads: rows 0 and 7 beyond the full output's 7 (after
  // cropping 1 at the end), columns 5 and 6 past the full 5.
  struct Embedded {
    std::vector<int64_t> x, w;
    graph::ConvTransposeAttrs a;
    std::vector<int64_t> computed, output, offset;
  };
  std::vector<Embedded> const embedded = {
      {{1, 2, 3, 3},
       {2, 3, 3, 3},
       {{3, 3}, {2, 1}, {1, 1}, {-1, 0, 1, -2}, {0, 0}, 1, true},
       {1, 3, 6, 5},
       {1, 3, 7, 7},
       {0, 0, 1, 0}},
      {{2, 2, 4}, {2, 4, 2}, {{2}, {1}, {2}, {0, 0}, {1}, 2, true}, {2, 8, 6}, {2, 8, 7}, {0, 0, 0}},
  };
  for (Embedded const& c : embedded) {
    auto s = conv_transpose_shape(c.x, c.w, c.a);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    SCOPED_TRACE(s->describe());
    EXPECT_EQ(dims(s->x), dims(c.computed));
    EXPECT_EQ(dims(s->embedding), dims(c.output));
    EXPECT_EQ(dims(s->offset), dims(c.offset));
    auto got = cudnn_conv_output_dims(*s);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(dims(*got), dims(c.x));
  }
  EXPECT_FALSE(conv_transpose_shape({2, 3, 5}, {4, 2, 3}, cases[0].a).is_ok());  // channels 3 vs weight 4
}

}  // namespace
}  // namespace gp::exec::cuda
