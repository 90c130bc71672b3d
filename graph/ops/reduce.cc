// Reductions and softmax: import-time inference (graph/ops/infer.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_reduce(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ReduceAttrs a;
  a.keepdims = c.attr_int("keepdims", 1) != 0;
  Dims axes;
  if (auto v = c.attr_ints("axes"))
    axes = *v;
  else {
    ASSIGN_OR_RETURN(axes, c.static_ints(1, "axes"));
  }
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) return unsupported("noop_with_empty_axes=1");
    axes.resize(static_cast<std::size_t>(r0));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& ax : axes) {
    ASSIGN_OR_RETURN(ax, checked_axis(ax, r0));
  }
  std::sort(axes.begin(), axes.end());
  Dims out;
  for (int64_t i = 0; i < r0; ++i) {
    bool const reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced)
      out.push_back(c.dims(0)[i]);
    else if (a.keepdims)
      out.push_back(1);
  }
  a.axes = axes;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_softmax(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", c.opset < 13 ? 1 : -1), r0));
  if (c.opset < 13 && axis != r0 - 1)
    return unsupported("Softmax before opset 13 normalises over all axes from " + std::to_string(axis) +
                       " together; graphpipe supports one axis: re-export with opset 13 or later");
  k.typed = SoftmaxAttrs{axis};
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

}  // namespace

void register_reduce_ops(OpTable& t) {
  define(t, "ReduceMean", infer_reduce);
  define(t, "ReduceSum", infer_reduce);
  define(t, "Softmax", infer_softmax);
}

}  // namespace gp::graph::ops
