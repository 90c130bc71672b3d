// Tiny models built inline for the executor's tests: an MLP with a fanned-out hidden layer, an MLP
// with Dropout, an MLP with the random ops, a CNN with BatchNorm and pooling, and a single-head self-attention block
// with LayerNorm and a residual connection.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "exec/tensor.h"
#include "graph/onnx_builder.h"

namespace gp::exec::testing {

using graph::Attributes;
using graph::InitRule;
using graph::kBatch;

// A float32 tensor of N(0, 1) values drawn from `seed`.
inline Tensor normal_tensor(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

inline graph::OnnxModelBuilder tiny_mlp(uint64_t seed = 1) {
  graph::OnnxModelBuilder b("tiny_mlp", 17, seed);
  auto x = b.add_input("x", {kBatch, 8});
  auto w1 = b.add_initializer("w1", {16, 8}, InitRule::uniform(0.5));
  auto b1 = b.add_initializer("b1", {16}, InitRule::uniform(0.1));
  auto w2 = b.add_initializer("w2", {4, 16}, InitRule::uniform(0.4));
  auto b2 = b.add_initializer("b2", {4}, InitRule::uniform(0.1));
  auto w3 = b.add_initializer("w3", {16, 4}, InitRule::uniform(0.4));
  b.add_node("Gemm", {x, w1, b1}, {"h"}, {{"transB", int64_t{1}}});
  b.add_node("Tanh", {"h"}, {"a"});
  b.add_node("Gemm", {"a", w2, b2}, {"y1"}, {{"transB", int64_t{1}}});
  b.add_node("MatMul", {"a", w3}, {"y2"});  // `a` fans out: its gradient is a sum
  b.add_node("Add", {"y1", "y2"}, {"y"});
  b.add_output("y", {kBatch, 4});
  return b;
}

// Two Dropouts (ratios as opset-12+ inputs) between Gemms: masks depend on the forward's seed.
inline graph::OnnxModelBuilder tiny_dropout_mlp(uint64_t seed = 5) {
  graph::OnnxModelBuilder b("tiny_dropout_mlp", 17, seed);
  auto x = b.add_input("x", {kBatch, 8});
  auto w1 = b.add_initializer("w1", {16, 8}, InitRule::uniform(0.5));
  auto b1 = b.add_initializer("b1", {16}, InitRule::uniform(0.1));
  auto w2 = b.add_initializer("w2", {12, 16}, InitRule::uniform(0.4));
  auto w3 = b.add_initializer("w3", {12, 4}, InitRule::uniform(0.4));
  auto r1 = b.add_initializer("ratio1", graph::TensorData::from_floats({}, {0.3f}), false);
  auto r2 = b.add_initializer("ratio2", graph::TensorData::from_floats({}, {0.5f}), false);
  b.add_node("Gemm", {x, w1, b1}, {"h"}, {{"transB", int64_t{1}}});
  b.add_node("Relu", {"h"}, {"a"});
  b.add_node("Dropout", {"a", r1}, {"d1"});
  b.add_node("Gemm", {"d1", w2}, {"h2"}, {{"transB", int64_t{1}}});
  b.add_node("Tanh", {"h2"}, {"a2"});
  b.add_node("Dropout", {"a2", r2}, {"d2"});
  b.add_node("MatMul", {"d2", w3}, {"y"});
  b.add_output("y", {kBatch, 4});
  return b;
}

// The random ops in training: Gaussian input noise (with its own seed attribute), a Bernoulli
// keep mask on a hidden layer drawn from its Sigmoid, and a uniform gain in [0.5, 1.5).
inline graph::OnnxModelBuilder tiny_noisy_mlp(uint64_t seed = 6) {
  graph::OnnxModelBuilder b("tiny_noisy_mlp", 17, seed);
  auto x = b.add_input("x", {kBatch, 8});
  auto w1 = b.add_initializer("w1", {8, 16}, InitRule::uniform(0.5));
  auto b1 = b.add_initializer("b1", {16}, InitRule::uniform(0.1));
  auto w2 = b.add_initializer("w2", {16, 4}, InitRule::uniform(0.4));
  b.add_node("RandomNormalLike", {x}, {"noise"}, {{"scale", 0.1f}, {"seed", 3.f}});
  b.add_node("Add", {x, "noise"}, {"xn"});
  b.add_node("MatMul", {"xn", w1}, {"h0"});
  b.add_node("Add", {"h0", b1}, {"h"});
  b.add_node("Tanh", {"h"}, {"a"});
  b.add_node("Sigmoid", {"h"}, {"p"});
  b.add_node("Bernoulli", {"p"}, {"keep"}, {{"dtype", int64_t{1}}});
  b.add_node("Mul", {"a", "keep"}, {"kept"});
  b.add_node("RandomUniformLike", {"kept"}, {"gain"}, {{"low", 0.5f}, {"high", 1.5f}});
  b.add_node("Mul", {"kept", "gain"}, {"g"});
  b.add_node("MatMul", {"g", w2}, {"y"});
  b.add_output("y", {kBatch, 4});
  return b;
}

inline graph::OnnxModelBuilder tiny_cnn(uint64_t seed = 2) {
  graph::OnnxModelBuilder b("tiny_cnn", 17, seed);
  auto x = b.add_input("x", {kBatch, 2, 6, 6});
  auto w = b.add_initializer("conv.w", {4, 2, 3, 3}, InitRule::uniform(0.4));
  auto cb = b.add_initializer("conv.b", {4}, InitRule::uniform(0.1));
  auto s = b.add_initializer("bn.scale", {4}, InitRule::uniform(1.0));
  auto bb = b.add_initializer("bn.bias", {4}, InitRule::uniform(0.2));
  auto m = b.add_initializer("bn.mean", {4}, InitRule::zeros(), false);
  auto v = b.add_initializer("bn.var", {4}, InitRule::ones(), false);
  auto fw = b.add_initializer("fc.w", {3, 36}, InitRule::uniform(0.3));
  auto fb = b.add_initializer("fc.b", {3}, InitRule::uniform(0.1));
  b.add_node("Conv", {x, w, cb}, {"c"},
             {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.add_node("BatchNormalization", {"c", s, bb, m, v}, {"bn", "bn.mean_out", "bn.var_out"},
             {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", int64_t{1}}});
  b.add_node("Sigmoid", {"bn"}, {"act"});
  b.add_node("AveragePool", {"act"}, {"p"},
             {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  b.add_node("Flatten", {"p"}, {"f"}, {{"axis", int64_t{1}}});
  b.add_node("Gemm", {"f", fw, fb}, {"y"}, {{"transB", int64_t{1}}});
  b.add_output("y", {kBatch, 3});
  return b;
}

// Two convolutions in a row, so the second one's input needs a gradient (its unsplit backward
// computes data and weight gradients in one call), with BatchNorm and a residual fan-out.
inline graph::OnnxModelBuilder tiny_conv_stack(uint64_t seed = 4) {
  graph::OnnxModelBuilder b("tiny_conv_stack", 17, seed);
  auto x = b.add_input("x", {kBatch, 2, 5, 5});
  auto w1 = b.add_initializer("conv1.w", {3, 2, 3, 3}, InitRule::uniform(0.4));
  auto w2 = b.add_initializer("conv2.w", {3, 3, 3, 3}, InitRule::uniform(0.3));
  auto b2 = b.add_initializer("conv2.b", {3}, InitRule::uniform(0.1));
  auto s = b.add_initializer("bn.scale", {3}, InitRule::uniform(1.0));
  auto bb = b.add_initializer("bn.bias", {3}, InitRule::uniform(0.2));
  auto m = b.add_initializer("bn.mean", {3}, InitRule::zeros(), false);
  auto v = b.add_initializer("bn.var", {3}, InitRule::ones(), false);
  auto fw = b.add_initializer("fc.w", {2, 75}, InitRule::uniform(0.2));
  Attributes const same{{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  b.add_node("Conv", {x, w1}, {"c1"}, same);
  b.add_node("Tanh", {"c1"}, {"a1"});
  b.add_node("Conv", {"a1", w2, b2}, {"c2"}, same);
  b.add_node("BatchNormalization", {"c2", s, bb, m, v}, {"n2"},
             {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", int64_t{1}}});
  b.add_node("Add", {"n2", "a1"}, {"r"});  // a1 fans out: conv2's data gradient plus the skip
  b.add_node("Flatten", {"r"}, {"f"}, {{"axis", int64_t{1}}});
  b.add_node("Gemm", {"f", fw}, {"y"}, {{"transB", int64_t{1}}});
  b.add_output("y", {kBatch, 2});
  return b;
}

inline graph::OnnxModelBuilder tiny_attention(uint64_t seed = 3) {
  int64_t const t = 4, d = 8;
  graph::OnnxModelBuilder b("tiny_attention", 17, seed);
  auto x = b.add_input("x", {kBatch, t, d});
  auto g = b.add_initializer("ln.scale", {d}, InitRule::uniform(1.0));
  auto be = b.add_initializer("ln.bias", {d}, InitRule::uniform(0.1));
  auto wq = b.add_initializer("wq", {d, d}, InitRule::uniform(0.4));
  auto wk = b.add_initializer("wk", {d, d}, InitRule::uniform(0.4));
  auto wv = b.add_initializer("wv", {d, d}, InitRule::uniform(0.4));
  auto wo = b.add_initializer("wo", {d, 5}, InitRule::uniform(0.4));
  auto scale = b.add_initializer("scale", graph::TensorData::from_floats({}, {1.f / std::sqrt(float(d))}), false);
  b.add_node("LayerNormalization", {x, g, be}, {"ln"}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  b.add_node("MatMul", {"ln", wq}, {"q"});
  b.add_node("MatMul", {"ln", wk}, {"k"});
  b.add_node("MatMul", {"ln", wv}, {"v"});
  b.add_node("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  b.add_node("MatMul", {"q", "kt"}, {"s"});
  b.add_node("Mul", {"s", scale}, {"ss"});
  b.add_node("Softmax", {"ss"}, {"att"}, {{"axis", int64_t{-1}}});
  b.add_node("MatMul", {"att", "v"}, {"o"});
  b.add_node("Add", {"o", x}, {"r"});  // residual: x and ln(x) both reach the output
  b.add_node("MatMul", {"r", wo}, {"y"});
  b.add_output("y", {kBatch, t, 5});
  return b;
}

}  // namespace gp::exec::testing
