#include "graph/ops/pool.h"

namespace gp::graph::ops {

Status pool_check(Op const& op, OpGraph const& graph) {
  RETURN_IF_ERROR(require_typed<PoolAttrs>(op));
  int64_t const rank = graph.tensor(op.inputs.at(0)).shape.rank();
  if (rank < 3 || rank > 5)
    return unsupported(op.type + " '" + op.name + "' has " + std::to_string(rank - 2) +
                       " spatial dims (1 to 3 supported)");
  if (op.type == "MaxPool") {
    auto it = op.attrs.find("dilations");
    if (it != op.attrs.end())
      for (int64_t d : std::get<std::vector<int64_t>>(it->second))
        if (d != 1) return unsupported("MaxPool '" + op.name + "' with dilations is not supported");
    if (op.outputs.size() > 1) return unsupported("MaxPool '" + op.name + "' with an Indices output is not supported");
  }
  return Status::ok();
}

Result<PoolWindow> pool_window(Op const& op, std::vector<int64_t> const& x_shape) {
  auto const& a = std::get<PoolAttrs>(op.typed);
  std::string const input = " (input " + dims_string(x_shape) + ")";
  if (x_shape.size() < 3 || x_shape.size() > 5)
    return op_error(op, "needs an input of rank 3 to 5 (N, C, 1 to 3 spatial dims)" + input);
  std::size_t const sp = x_shape.size() - 2;
  bool const global = a.kind == PoolKind::kGlobalAverage;
  if (!global && a.kernel.size() < sp) return op_error(op, "kernel_shape has fewer entries than spatial dims" + input);
  PoolWindow w;
  w.out_shape = {x_shape[0], x_shape[1]};
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const in = x_shape[2 + i];
    int64_t const k = global ? in : a.kernel[i];
    int64_t const s = global ? 1 : (i < a.strides.size() ? a.strides[i] : 1);
    int64_t const pl = !global && i < a.pads.size() / 2 ? a.pads[i] : 0;
    int64_t const pr = !global && i < a.pads.size() / 2 ? a.pads[i + a.pads.size() / 2] : 0;
    if (s <= 0 || k <= 0) return op_error(op, "kernel and strides must be positive" + input);
    int64_t const span = in + pl + pr - k;
    if (span < 0) return op_error(op, "kernel larger than the padded input" + input);
    int64_t out = span / s + 1;
    if (a.ceil_mode && !global) {
      out = (span + s - 1) / s + 1;
      if ((out - 1) * s >= in + pl) --out;  // the last window must start inside the input
    }
    w.out_shape.push_back(out);
    w.kernel.push_back(k);
    w.strides.push_back(s);
    w.pads_begin.push_back(pl);
    w.pads_end.push_back((out - 1) * s + k - in - pl);
  }
  return w;
}

}  // namespace gp::graph::ops
