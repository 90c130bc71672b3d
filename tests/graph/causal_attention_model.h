// A GPT-style causal self-attention block as torch exports it: the causal mask is a registered
// buffer, triu(full(-inf), 1), added to the scaled scores before the Softmax. The importer must
// keep that buffer out of training (an update turns -inf into NaN).
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "graph/onnx_builder.h"

namespace gp::testing {

struct CausalAttentionOptions {
  bool mask_first_row = false;      // -inf over all of row 0 too: its Softmax is NaN in every forward
  bool mask_is_float_ones = false;  // instead: a 0/1 float "bias" buffer compared with 0 (a Where mask)
};

inline graph::OnnxModelBuilder causal_attention(CausalAttentionOptions const& o = {}, uint64_t seed = 7) {
  using graph::InitRule;
  using graph::kBatch;
  int64_t const t = 4, d = 8, classes = 5;
  float const inf = std::numeric_limits<float>::infinity();
  graph::OnnxModelBuilder b("causal_attention", 17, seed);
  auto x = b.add_input("x", {kBatch, t, d});
  auto wq = b.add_initializer("attn.wq", {d, d}, InitRule::uniform(0.4));
  auto wk = b.add_initializer("attn.wk", {d, d}, InitRule::uniform(0.4));
  auto wv = b.add_initializer("attn.wv", {d, d}, InitRule::uniform(0.4));
  auto wo = b.add_initializer("head.w", {d, classes}, InitRule::uniform(0.4));
  auto scale = b.add_initializer("attn.scale", graph::TensorData::from_floats({}, {1.f / std::sqrt(float(d))}), false);
  b.add_node("MatMul", {x, wq}, {"q"});
  b.add_node("MatMul", {x, wk}, {"k"});
  b.add_node("MatMul", {x, wv}, {"v"});
  b.add_node("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, "attn/transpose_k");
  b.add_node("MatMul", {"q", "kt"}, {"scores"}, {}, "attn/scores");
  b.add_node("Mul", {"scores", scale}, {"scaled"}, {}, "attn/scale");
  std::vector<float> mask(static_cast<std::size_t>(t * t), 0.f);
  if (o.mask_is_float_ones) {
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j <= i; ++j) mask[static_cast<std::size_t>(i * t + j)] = 1.f;
    auto bias = b.add_initializer("attn.bias", graph::TensorData::from_floats({t, t}, mask), false);
    auto zero = b.add_initializer("attn.zero", graph::TensorData::from_floats({}, {0.f}), false);
    auto fill = b.add_initializer("attn.fill", graph::TensorData::from_floats({}, {-1e9f}), false);
    b.add_node("Expand",
               {bias, b.add_initializer("attn.mask_shape", graph::TensorData::from_int64s({2}, {t, t}), false)},
               {"bias_full"}, {}, "attn/expand_bias");
    b.add_node("Equal", {"bias_full", zero}, {"masked_out"}, {}, "attn/equal");
    b.add_node("Where", {"masked_out", fill, "scaled"}, {"masked"}, {}, "attn/where");
  } else {
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = i + 1; j < t; ++j) mask[static_cast<std::size_t>(i * t + j)] = -inf;
    if (o.mask_first_row) mask[0] = -inf;
    auto m = b.add_initializer("attn.mask", graph::TensorData::from_floats({t, t}, mask), false);
    b.add_node("Add", {"scaled", m}, {"masked"}, {}, "attn/add_mask");
  }
  b.add_node("Softmax", {"masked"}, {"probs"}, {{"axis", int64_t{-1}}}, "attn/softmax");
  b.add_node("MatMul", {"probs", "v"}, {"ctx"}, {}, "attn/context");
  b.add_node("MatMul", {"ctx", wo}, {"y"}, {}, "head");
  b.add_output("y", {kBatch, t, classes});
  return b;
}

}  // namespace gp::testing
