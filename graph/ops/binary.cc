// Broadcasting arithmetic: import-time inference (graph/ops/infer.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_broadcast(InferContext const& c) {
  Inferred k;
  Dims out;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(out, broadcast_dims(out, c.dims(i)));
  }
  DType const dt = c.type == "Equal" ? DType::kBool : c.type == "Where" ? c.dtype(1) : c.dtype(0);
  k.data_inputs = all_slots(c);
  k.outs.push_back({dt, out});
  return k;
}

}  // namespace

void register_binary_ops(OpTable& t) {
  define(t, "Add", infer_broadcast);
  define(t, "Sub", infer_broadcast);
  define(t, "Mul", infer_broadcast);
  define(t, "Div", infer_broadcast);
  define(t, "Pow", infer_broadcast);
}

}  // namespace gp::graph::ops
