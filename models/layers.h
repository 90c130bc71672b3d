// Building blocks shared by the generators, emitted the way torch.onnx.export writes them (so
// the importer sees the same patterns as from real exports): Linear as Gemm(transB) on 2-D inputs
// and MatMul + Add on 3-D ones, LayerNorm as one node at opset 17 and decomposed below, GELU as
// its Erf pattern, scalars/axes/shapes as Constant nodes (one per use).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/onnx_builder.h"

namespace gp::models {

enum class Act : uint8_t { kNone, kRelu, kGelu };

class Layers {
 public:
  explicit Layers(graph::OnnxModelBuilder& builder) : b_(builder) {}
  graph::OnnxModelBuilder& builder() { return b_; }

  std::string scalar(float value);                       // Constant of rank 0
  std::string ints(std::vector<int64_t> const& values);  // Constant int64 vector

  // y = act(x W^T + b), x [N, in]; weights "<prefix>.weight" [out, in], "<prefix>.bias" [out].
  // `out_name` names the result (for a graph output); empty: derived from the prefix.
  std::string linear(std::string const& x, int64_t in, int64_t out, std::string const& prefix, Act act,
                     std::string const& out_name = {});
  // y = act(x W + b), x [N, S, in]; weight [in, out] (torch's export of Linear on 3-D input).
  std::string linear3d(std::string const& x, int64_t in, int64_t out, std::string const& prefix, Act act);
  std::string activation(std::string const& x, Act act, std::string const& prefix);
  std::string gelu(std::string const& x, std::string const& prefix);
  std::string layer_norm(std::string const& x, int64_t width, std::string const& prefix);
  // Pre-norm transformer encoder layer over x [N, seq, hidden]: x + MHA(LN(x)), then + FFN(LN(.)).
  std::string encoder_layer(std::string const& x, int64_t seq, int64_t hidden, int64_t heads, int64_t ffn,
                            std::string const& prefix);
  // Conv (no bias) + BatchNormalization (training mode) + Relu; square kernel, "same" padding.
  std::string conv_bn_relu(std::string const& x, int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride,
                           std::string const& prefix);
  std::string max_pool(std::string const& x, int64_t kernel, int64_t stride, int64_t pad, std::string const& prefix);

  std::string node(std::string const& op, std::vector<std::string> inputs, std::string const& out_prefix,
                   graph::Attributes attrs = {});

 private:
  graph::OnnxModelBuilder& b_;
};

// Kaiming-uniform bound for a layer followed by ReLU, LeCun-uniform otherwise (unit variance).
double init_bound(int64_t fan_in, Act act);

}  // namespace gp::models
