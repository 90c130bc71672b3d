// Small models and helpers for the mixed-precision tests of every backend (tests/exec and
// tests/cuda): a ResNet-style block that exercises each op the policy runs in 16 bits, the
// rewritten graph of a model, one training step's values by name on any backend, and the relative
// difference the format's tolerance bounds.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/backend.h"
#include "exec/stage_executor.h"
#include "graph/onnx_builder.h"
#include "graph/precision.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec::testing {

inline constexpr int64_t kMixedSamples = 4;  // the batch a step runs

inline double rel_l2(std::vector<float> const& got, std::vector<float> const& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// A gradient that vanishes in exact arithmetic (a convolution's bias in front of BatchNorm, which
// removes the mean: float32 gives rounding noise of 1e-8, bf16 of 1e-4) has no relative error to
// check; the models' other values are O(1) (N(0, 1) inputs, weights of 0.1-1).
inline bool vanishes(std::vector<float> const& v) {
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  return std::sqrt(sq / std::max<double>(1.0, double(v.size()))) < 1e-5;
}

using NamedValues = std::map<std::string, std::vector<float>>;

// Every value of `want` is in `got` with its length and, unless it vanishes, within `bound` in
// relative L2 (each failure names the value); returns the worst difference checked.
inline double expect_within(NamedValues const& got, NamedValues const& want, double bound) {
  double worst = 0;
  for (auto const& [name, w] : want) {
    auto const it = got.find(name);
    if (it == got.end() || it->second.size() != w.size()) {
      ADD_FAILURE() << name << ": missing, or " << (it == got.end() ? 0 : it->second.size()) << " values for "
                    << w.size();
      continue;
    }
    if (vanishes(w)) continue;
    double const e = rel_l2(it->second, w);
    worst = std::max(worst, e);
    EXPECT_LE(e, bound) << name;
  }
  return worst;
}

// Conv, ReLU, max pooling, a residual Add of two bf16 tensors, a broadcasting bf16 Add, average and
// global pooling, Flatten and Gemm: every op the CPU runs in bf16. With `bn`, BatchNorm after each
// convolution (float32 under the policy: the conv's output is cast up for it).
inline graph::OnnxModelBuilder tiny_resnet_block(bool bn, uint64_t seed = 6) {
  using graph::InitRule;
  graph::OnnxModelBuilder b(bn ? "tiny_resnet_block_bn" : "tiny_resnet_block", 17, seed);
  auto x = b.add_input("x", {kBatch, 3, 8, 8});
  auto w1 = b.add_initializer("conv1.w", {8, 3, 3, 3}, InitRule::uniform(0.4));
  auto b1 = b.add_initializer("conv1.b", {8}, InitRule::uniform(0.1));
  auto w2 = b.add_initializer("conv2.w", {8, 8, 3, 3}, InitRule::uniform(0.2));
  auto fw = b.add_initializer("fc.w", {5, 8}, InitRule::uniform(0.5));
  auto fb = b.add_initializer("fc.b", {5}, InitRule::uniform(0.1));
  graph::Attributes const same{{"kernel_shape", std::vector<int64_t>{3, 3}},
                               {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  graph::Attributes const half{{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
  graph::Attributes const bn_attrs{{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", int64_t{1}}};
  // conv -> (BatchNorm) -> `out`
  auto conv_bn = [&](int i, std::vector<std::string> const& conv_inputs, std::string const& out) {
    std::string const c = "c" + std::to_string(i);
    b.add_node("Conv", conv_inputs, {bn ? c : out}, same);
    if (!bn) return;
    std::string const p = "bn" + std::to_string(i);
    b.add_node("BatchNormalization",
               {c, b.add_initializer(p + ".scale", {8}, InitRule::uniform(1.0)),
                b.add_initializer(p + ".bias", {8}, InitRule::uniform(0.2)),
                b.add_initializer(p + ".mean", {8}, InitRule::zeros(), false),
                b.add_initializer(p + ".var", {8}, InitRule::ones(), false)},
               {out}, bn_attrs);
  };
  conv_bn(1, {x, w1, b1}, "n1");
  b.add_node("Relu", {"n1"}, {"r1"});
  b.add_node("MaxPool", {"r1"}, {"p1"}, half);
  conv_bn(2, {"p1", w2}, "n2");
  b.add_node("Add", {"n2", "p1"}, {"s"});  // the residual
  b.add_node("Relu", {"s"}, {"r2"});
  b.add_node("GlobalAveragePool", {"r2"}, {"g"});
  b.add_node("Add", {"r2", "g"}, {"bc"});  // broadcast over H and W
  b.add_node("AveragePool", {"bc"}, {"ap"}, half);
  b.add_node("GlobalAveragePool", {"ap"}, {"g2"});
  b.add_node("Flatten", {"g2"}, {"f"}, {{"axis", int64_t{1}}});
  b.add_node("Gemm", {"f", fw, fb}, {"y"}, {{"transB", int64_t{1}}});
  b.add_output("y", {kBatch, 5});
  return b;
}

// A GPT block as torch exports it: LayerNorm, a fused q/k/v linear layer (Transpose(W) -> MatMul ->
// Add(bias), which the importer turns into one Gemm over the rows), Split into q, k and v,
// attention, an MLP with erf GELU (fused into Gelu on import), the residual and a head. Under the
// policy the Gemms, the Split, the head transposes and the Gelu run in 16 bits.
inline graph::OnnxModelBuilder tiny_gpt_block(uint64_t seed = 12) {
  using graph::InitRule;
  int64_t const t = 4, d = 8;
  graph::OnnxModelBuilder b("tiny_gpt_block", 17, seed);
  auto x = b.add_input("x", {kBatch, t, d});
  auto constant = [&](std::string const& name, float v) {
    return b.add_initializer(name, graph::TensorData::from_floats({}, {v}), false);
  };
  auto linear = [&](std::string const& name, std::string const& in, int64_t n_in, int64_t n_out,
                    std::string const& out) {
    auto w = b.add_initializer(name + ".weight", {n_out, n_in}, InitRule::uniform(0.5));
    auto bias = b.add_initializer(name + ".bias", {n_out}, InitRule::uniform(0.2));
    b.add_node("Transpose", {w}, {name + ".wt"}, {{"perm", std::vector<int64_t>{1, 0}}});
    b.add_node("MatMul", {in, name + ".wt"}, {name + ".mm"});
    b.add_node("Add", {bias, name + ".mm"}, {out});
  };
  b.add_node("LayerNormalization",
             {x, b.add_initializer("ln.scale", {d}, InitRule::uniform(1.0)),
              b.add_initializer("ln.bias", {d}, InitRule::uniform(0.1))},
             {"ln"}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  linear("qkv", "ln", d, 3 * d, "qkv");
  auto sizes = b.add_initializer("split", graph::TensorData::from_int64s({3}, {d, d, d}), false);
  b.add_node("Split", {"qkv", sizes}, {"q", "k", "v"}, {{"axis", int64_t{-1}}});
  b.add_node("Transpose", {"k"}, {"kt"}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  b.add_node("MatMul", {"q", "kt"}, {"s"});
  b.add_node("Mul", {"s", constant("scale", 1.f / std::sqrt(float(d)))}, {"ss"});
  b.add_node("Softmax", {"ss"}, {"att"}, {{"axis", int64_t{-1}}});
  b.add_node("MatMul", {"att", "v"}, {"o"});
  linear("fc1", "o", d, 2 * d, "h");
  // erf GELU as torch 1.13 writes it: h * 0.5 * (1 + erf(h / sqrt(2)))
  b.add_node("Div", {"h", constant("sqrt2", std::sqrt(2.f))}, {"h_s"});
  b.add_node("Erf", {"h_s"}, {"h_e"});
  b.add_node("Add", {"h_e", constant("one", 1.f)}, {"h_1"});
  b.add_node("Mul", {"h", "h_1"}, {"h_m"});
  b.add_node("Mul", {"h_m", constant("half", 0.5f)}, {"a"});
  linear("fc2", "a", 2 * d, d, "f");
  b.add_node("Add", {"f", x}, {"r"});  // the residual: a 16-bit and a float32 input
  b.add_node("MatMul", {"r", b.add_initializer("head", {d, 5}, InitRule::uniform(0.4))}, {"y"});
  b.add_output("y", {kBatch, t, 5});
  return b;
}

// Two attention heads as torch exports them after a head split: q and v permuted [N,T,H,D] ->
// [N,H,T,D], k to [N,H,D,T] (perm 0,2,3,1), q scaled before the product (Mul by a constant) and the
// scores after it (Div), and a second product attᵀ·v through a Transpose of att's last two axes.
// The importer folds k's and att's Transposes and both scales into the MatMuls (MatMulAttrs): k is
// read transposed through a Transpose by 0,2,1,3, att in place, and the scales become alpha.
inline graph::OnnxModelBuilder tiny_attention_heads(uint64_t seed = 21) {
  using graph::InitRule;
  int64_t const t = 4, d = 8, heads = 2;
  graph::OnnxModelBuilder b("tiny_attention_heads", 17, seed);
  auto x = b.add_input("x", {kBatch, t, d});
  auto constant = [&](std::string const& name, float v) {
    return b.add_initializer(name, graph::TensorData::from_floats({}, {v}), false);
  };
  auto split = b.add_initializer("split_heads", graph::TensorData::from_int64s({4}, {0, 0, heads, d / heads}), false);
  for (std::string const n : {"q", "k", "v"}) {
    b.add_node("MatMul", {x, b.add_initializer("w" + n, {d, d}, InitRule::uniform(0.5))}, {n});
    b.add_node("Reshape", {n, split}, {n + "4"});
    b.add_node("Transpose", {n + "4"}, {n + "h"},
               {{"perm", n == "k" ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3}}});
  }
  b.add_node("Mul", {"qh", constant("q_scale", 0.5f)}, {"qs"});
  b.add_node("MatMul", {"qs", "kh"}, {"s"});
  b.add_node("Div", {"s", constant("s_scale", 0.75f)}, {"ss"});
  b.add_node("Softmax", {"ss"}, {"att"}, {{"axis", int64_t{-1}}});
  b.add_node("MatMul", {"att", "vh"}, {"o"});
  b.add_node("Transpose", {"att"}, {"att_t"}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  b.add_node("MatMul", {"att_t", "vh"}, {"o2"});
  b.add_node("Add", {"o", "o2"}, {"o3"});
  b.add_node("Transpose", {"o3"}, {"ot"}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  b.add_node("Reshape", {"ot", b.add_initializer("merge", graph::TensorData::from_int64s({3}, {0, 0, d}), false)},
             {"r"});
  b.add_node("MatMul", {"r", b.add_initializer("head", {d, 5}, InitRule::uniform(0.4))}, {"y"});
  b.add_output("y", {kBatch, t, 5});
  return b;
}

inline graph::OpGraph graph_in(graph::OnnxModelBuilder const& b, graph::Precision p) {
  graph::ImportOptions o;
  o.precision = p;
  auto g = b.to_graph(o);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::move(g).value();
}

// One training forward and backward of `g` on `be` with fixed inputs and output gradient (drawn on
// the host, copied to the backend's device): the output, the input gradients and every weight
// gradient, by name, read back as float32.
inline NamedValues one_step(graph::OpGraph const& g, Backend& be) {
  auto ex = StageExecutor::create(g, be);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  if (!ex.is_ok()) return {};
  TensorMap in, out, gin, gout;
  for (graph::TensorId t : g.inputs()) {
    auto d = be.to_device(normal_tensor(g.tensor(t).shape.concrete(kMixedSamples), 11 + t));
    EXPECT_TRUE(d.is_ok()) << d.status().message();
    if (!d.is_ok()) return {};
    in.emplace(t, std::move(d).value());
  }
  Status s = (*ex)->forward(0, in, out, true, 1);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (!s.is_ok()) return {};
  graph::TensorId const y = g.outputs()[0];
  auto dy = be.to_device(normal_tensor(out.at(y).shape(), 99));
  EXPECT_TRUE(dy.is_ok()) << dy.status().message();
  if (!dy.is_ok()) return {};
  gout.emplace(y, std::move(dy).value());
  s = (*ex)->backward(0, gout, gin);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = be.synchronize();
  EXPECT_TRUE(s.is_ok()) << s.message();
  std::map<std::string, std::vector<float>> r;
  r["output"] = out.at(y).to_vector();
  for (auto const& [t, grad] : gin) r["d" + g.tensor(t).name] = grad.to_vector();
  for (auto const& [name, grad] : (*ex)->gradients()) r["d" + name] = grad.to_vector();
  return r;
}

}  // namespace gp::exec::testing
