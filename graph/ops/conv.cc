// Convolutions: import-time inference (graph/ops/infer.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<Inferred> infer_conv(InferContext const& c) {
  Inferred k;
  Dims const& x = c.dims(0);
  Dims const& wd = c.dims(1);
  if (x.size() < 3 || wd.size() != x.size())
    return invalid_argument("Conv needs N,C,spatial input and a matching weight");
  std::size_t const sp = x.size() - 2;
  ConvAttrs a;
  a.kernel = c.attr_ints("kernel_shape").value_or(Dims(wd.begin() + 2, wd.end()));
  a.strides = c.attr_ints("strides").value_or(Dims(sp, 1));
  a.dilations = c.attr_ints("dilations").value_or(Dims(sp, 1));
  a.group = c.attr_int("group", 1);
  a.has_bias = c.has(2);
  if (x[1] != wd[1] * a.group)
    return invalid_argument("input has " + dim_str(x[1]) + " channels but the weight expects " +
                            std::to_string(wd[1] * a.group));
  ASSIGN_OR_RETURN(Window w, sliding_window(c, Dims(x.begin() + 2, x.end()), a.kernel, a.strides, a.dilations, false));
  a.pads = w.pads;
  Dims out = {x[0], wd[0]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
  return k;
}

}  // namespace

void register_conv_ops(OpTable& t) { define(t, "Conv", infer_conv); }

}  // namespace gp::graph::ops
