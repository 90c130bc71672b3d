// Elementwise activations and unary math: import-time inference (graph/ops/infer.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_plain_unary(InferContext const& c) {
  Inferred k;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

Result<Inferred> infer_leaky_relu(InferContext const& c) {
  Inferred k;
  k.typed = LeakyReluAttrs{static_cast<float>(c.attr_float("alpha", 0.01))};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

Result<Inferred> infer_gelu(InferContext const& c) {
  Inferred k;
  k.typed = GeluAttrs{c.attr_string("approximate", "none") == "tanh"};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

}  // namespace

void register_activation_ops(OpTable& t) {
  define(t, "Relu", infer_plain_unary);
  define(t, "Sigmoid", infer_plain_unary);
  define(t, "Tanh", infer_plain_unary);
  define(t, "Sqrt", infer_plain_unary);
  define(t, "LeakyRelu", infer_leaky_relu);
  define(t, "Gelu", infer_gelu);
}

}  // namespace gp::graph::ops
