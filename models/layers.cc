#include "models/layers.h"

#include <cmath>

namespace gp::models {

using graph::Attributes;
using graph::InitRule;
using graph::TensorData;

double init_bound(int64_t fan_in, Act act) {
  double const gain = act == Act::kRelu ? 6.0 : 3.0;
  return std::sqrt(gain / static_cast<double>(fan_in));
}

std::string Layers::node(std::string const& op, std::vector<std::string> inputs, std::string const& out_prefix,
                         Attributes attrs) {
  std::string out = b_.fresh_name(out_prefix);
  b_.add_node(op, std::move(inputs), {out}, std::move(attrs));
  return out;
}

std::string Layers::scalar(float value) {
  return b_.add_constant(b_.fresh_name("const"), TensorData::from_floats({}, {value}));
}

std::string Layers::ints(std::vector<int64_t> const& values) {
  return b_.add_constant(b_.fresh_name("const"),
                         TensorData::from_int64s({static_cast<int64_t>(values.size())}, values));
}

std::string Layers::activation(std::string const& x, Act act, std::string const& prefix) {
  switch (act) {
    case Act::kNone:
      return x;
    case Act::kRelu:
      return node("Relu", {x}, prefix + ".relu");
    case Act::kGelu:
      return gelu(x, prefix);
  }
  return x;
}

std::string Layers::gelu(std::string const& x, std::string const& prefix) {
  // torch 1.13: Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
  std::string const div = node("Div", {x, scalar(1.4142135381698608f)}, prefix + ".gelu_div");
  std::string const erf = node("Erf", {div}, prefix + ".gelu_erf");
  std::string const add = node("Add", {erf, scalar(1.f)}, prefix + ".gelu_add");
  std::string const mul = node("Mul", {x, add}, prefix + ".gelu_mul");
  return node("Mul", {mul, scalar(0.5f)}, prefix + ".gelu");
}

std::string Layers::linear(std::string const& x, int64_t in, int64_t out, std::string const& prefix, Act act,
                           std::string const& out_name) {
  std::string const w = b_.add_initializer(prefix + ".weight", {out, in}, InitRule::uniform(init_bound(in, act)));
  std::string const bias = b_.add_initializer(prefix + ".bias", {out}, InitRule::zeros());
  std::string const y =
      node("Gemm", {x, w, bias}, out_name.empty() ? prefix + ".out" : out_name, {{"transB", int64_t{1}}});
  return activation(y, act, prefix);
}

std::string Layers::linear3d(std::string const& x, int64_t in, int64_t out, std::string const& prefix, Act act) {
  std::string const w = b_.add_initializer(prefix + ".weight", {in, out}, InitRule::uniform(init_bound(in, act)));
  std::string const bias = b_.add_initializer(prefix + ".bias", {out}, InitRule::zeros());
  std::string const mm = node("MatMul", {x, w}, prefix + ".matmul");
  std::string const y = node("Add", {mm, bias}, prefix + ".out");
  return activation(y, act, prefix);
}

std::string Layers::layer_norm(std::string const& x, int64_t width, std::string const& prefix) {
  std::string const scale = b_.add_initializer(prefix + ".weight", {width}, InitRule::ones());
  std::string const bias = b_.add_initializer(prefix + ".bias", {width}, InitRule::zeros());
  if (b_.opset() >= 17) {
    return node("LayerNormalization", {x, scale, bias}, prefix + ".out", {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  }
  // torch 1.13's decomposition below opset 17.
  Attributes const last_axis{{"axes", std::vector<int64_t>{-1}}};
  std::string const mean = node("ReduceMean", {x}, prefix + ".mean", last_axis);
  std::string const diff = node("Sub", {x, mean}, prefix + ".sub");
  std::string const sq = node("Pow", {diff, scalar(2.f)}, prefix + ".pow");
  std::string const var = node("ReduceMean", {sq}, prefix + ".var", last_axis);
  std::string const eps = node("Add", {var, scalar(1e-5f)}, prefix + ".add_eps");
  std::string const std_dev = node("Sqrt", {eps}, prefix + ".sqrt");
  std::string const norm = node("Div", {diff, std_dev}, prefix + ".div");
  std::string const scaled = node("Mul", {norm, scale}, prefix + ".mul");
  return node("Add", {scaled, bias}, prefix + ".out");
}

std::string Layers::encoder_layer(std::string const& x, int64_t seq, int64_t hidden, int64_t heads, int64_t ffn,
                                  std::string const& prefix) {
  (void)seq;  // shapes are copied with Reshape's 0, so the layer works for any sequence length
  int64_t const head_dim = hidden / heads;
  std::string const h = layer_norm(x, hidden, prefix + ".ln1");
  auto split_heads = [&](std::string const& t, std::vector<int64_t> perm, std::string const& name) {
    std::string const r = node("Reshape", {t, ints({0, 0, heads, head_dim})}, prefix + "." + name + "_heads");
    return node("Transpose", {r}, prefix + "." + name + "_t", {{"perm", std::move(perm)}});
  };
  std::string const q = split_heads(linear3d(h, hidden, hidden, prefix + ".attn.q", Act::kNone), {0, 2, 1, 3}, "q");
  std::string const k = split_heads(linear3d(h, hidden, hidden, prefix + ".attn.k", Act::kNone), {0, 2, 3, 1}, "k");
  std::string const v = split_heads(linear3d(h, hidden, hidden, prefix + ".attn.v", Act::kNone), {0, 2, 1, 3}, "v");
  std::string const scores = node("MatMul", {q, k}, prefix + ".attn.scores");
  std::string const scaled =
      node("Div", {scores, scalar(std::sqrt(static_cast<float>(head_dim)))}, prefix + ".attn.scaled");
  std::string const probs = node("Softmax", {scaled}, prefix + ".attn.probs", {{"axis", int64_t{-1}}});
  std::string const ctx = node("MatMul", {probs, v}, prefix + ".attn.ctx");
  std::string const ctx_t =
      node("Transpose", {ctx}, prefix + ".attn.ctx_t", {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  std::string const merged = node("Reshape", {ctx_t, ints({0, 0, hidden})}, prefix + ".attn.merged");
  std::string const attn = linear3d(merged, hidden, hidden, prefix + ".attn.out", Act::kNone);
  std::string const x1 = node("Add", {x, attn}, prefix + ".res1");

  std::string const h2 = layer_norm(x1, hidden, prefix + ".ln2");
  std::string const f1 = linear3d(h2, hidden, ffn, prefix + ".ffn.fc1", Act::kGelu);
  std::string const f2 = linear3d(f1, ffn, hidden, prefix + ".ffn.fc2", Act::kNone);
  return node("Add", {x1, f2}, prefix + ".res2");
}

std::string Layers::conv_bn_relu(std::string const& x, int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride,
                                 std::string const& prefix) {
  int64_t const fan_in = in_ch * kernel * kernel;
  std::string const w = b_.add_initializer(prefix + ".conv.weight", {out_ch, in_ch, kernel, kernel},
                                           InitRule::uniform(init_bound(fan_in, Act::kRelu)));
  int64_t const pad = kernel / 2;
  std::string const conv = node("Conv", {x, w}, prefix + ".conv",
                                {{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
                                 {"strides", std::vector<int64_t>{stride, stride}},
                                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}}});
  std::string const scale = b_.add_initializer(prefix + ".bn.weight", {out_ch}, InitRule::ones());
  std::string const bias = b_.add_initializer(prefix + ".bn.bias", {out_ch}, InitRule::zeros());
  std::string const mean = b_.add_initializer(prefix + ".bn.running_mean", {out_ch}, InitRule::zeros(), false);
  std::string const var = b_.add_initializer(prefix + ".bn.running_var", {out_ch}, InitRule::ones(), false);
  std::string const y = b_.fresh_name(prefix + ".bn");
  Attributes attrs{{"epsilon", 1e-5}, {"momentum", 0.9}};
  // Training mode: from opset 14 the training_mode attribute with three outputs (as torch
  // exports it); before, implied by asking for the running and saved statistics (1 or 5 outputs).
  std::vector<std::string> outputs{y, b_.fresh_name(prefix + ".bn.running_mean_out"),
                                   b_.fresh_name(prefix + ".bn.running_var_out")};
  if (b_.opset() >= 14) {
    attrs["training_mode"] = int64_t{1};
  } else {
    outputs.push_back(b_.fresh_name(prefix + ".bn.saved_mean"));
    outputs.push_back(b_.fresh_name(prefix + ".bn.saved_var"));
  }
  b_.add_node("BatchNormalization", {conv, scale, bias, mean, var}, std::move(outputs), std::move(attrs));
  return node("Relu", {y}, prefix + ".relu");
}

std::string Layers::max_pool(std::string const& x, int64_t kernel, int64_t stride, int64_t pad,
                             std::string const& prefix) {
  return node("MaxPool", {x}, prefix,
              {{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
               {"strides", std::vector<int64_t>{stride, stride}},
               {"pads", std::vector<int64_t>{pad, pad, pad, pad}}});
}

}  // namespace gp::models
