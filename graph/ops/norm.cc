// Normalisations: import-time inference (graph/ops/infer.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_batch_norm(InferContext const& c) {
  Inferred k;
  BatchNormAttrs a;
  a.epsilon = static_cast<float>(c.attr_float("epsilon", 1e-5));
  a.momentum = static_cast<float>(c.attr_float("momentum", 0.9));
  std::size_t named_outputs = 0;
  for (auto const& o : c.outputs) named_outputs += !o.empty();
  a.training = c.opset >= 14 ? c.attr_int("training_mode", 0) != 0 : named_outputs > 1;
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

Result<Inferred> infer_layer_norm(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  LayerNormAttrs a;
  ASSIGN_OR_RETURN(a.axis, checked_axis(c.attr_int("axis", -1), r0));
  a.epsilon = static_cast<float>(c.attr_float("epsilon", 1e-5));
  a.has_bias = c.has(2);
  for (int64_t d = a.axis; d < r0; ++d)
    if (c.dims(0)[d] < 0) return unsupported("normalising over the batch dimension");
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

}  // namespace

void register_norm_ops(OpTable& t) {
  define(t, "BatchNormalization", infer_batch_norm);
  define(t, "LayerNormalization", infer_layer_norm);
}

}  // namespace gp::graph::ops
