#include "exec/cuda/conv_shape.h"

#include <algorithm>

#include "core/units.h"
#include "graph/ops/conv.h"

namespace gp::exec::cuda {

std::string ConvShape::describe() const {
  return "x " + dims_string(x) + " w " + dims_string(w) + " y " + dims_string(y) + " stride " + dims_string(stride) +
         " dilation " + dims_string(dilation) + " pads " + dims_string(pad_begin) + dims_string(pad_end) + " group " +
         std::to_string(group);
}

Result<ConvShape> conv_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& w, graph::ConvAttrs const& a) {
  ASSIGN_OR_RETURN(graph::ops::ConvWindow const cw, graph::ops::conv_window(a, x, w));
  ConvShape s;
  s.x = x, s.w = w, s.y = cw.out_shape, s.group = cw.group;
  s.stride = cw.strides, s.dilation = cw.dilations, s.pad_begin = cw.pads_begin, s.pad_end = cw.pads_end;
  return s;
}

Result<ConvShape> conv_transpose_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& w,
                                       graph::ConvTransposeAttrs const& a) {
  ASSIGN_OR_RETURN(graph::ops::ConvWindow const cw, graph::ops::conv_transpose_window(a, x, w));
  ConvShape s;
  s.w = w, s.y = x, s.group = cw.group;
  s.x = {x[0], cw.out_shape[1]};
  s.x.insert(s.x.end(), cw.computed.begin(), cw.computed.end());
  s.stride = cw.strides, s.dilation = cw.dilations, s.pad_begin = cw.pads_begin, s.pad_end = cw.pads_end;
  if (cw.embedded) {
    s.embedding = cw.out_shape;
    s.offset = {0, 0};
    s.offset.insert(s.offset.end(), cw.offset.begin(), cw.offset.end());
  }
  return s;
}

std::optional<SymmetricConv> symmetric_padding(ConvShape const& s) {
  if (s.pad_begin == s.pad_end) return std::nullopt;
  SymmetricConv r{s, std::vector<int64_t>(s.x.size(), 0)};
  for (std::size_t i = 0; i < s.pad_begin.size() && i < s.pad_end.size() && i + 2 < s.x.size(); ++i) {
    int64_t const b = s.pad_begin[i], e = s.pad_end[i], keep = std::min(b, e);
    r.shape.x[i + 2] += (b - keep) + (e - keep);
    r.x_at[i + 2] = b - keep;
    r.shape.pad_begin[i] = r.shape.pad_end[i] = keep;
  }
  return r;
}

PlanKey conv_plan_key(PlanKind kind, ConvShape const& s, int64_t dtype, int device, bool deterministic) {
  PlanKey key(kind, device, dtype);
  key.add_list(s.x).add_list(s.w).add_list(s.y).add_list(s.stride).add_list(s.dilation);
  key.add_list(s.pad_begin).add_list(s.pad_end).add(s.group).add(deterministic ? 1 : 0);
  return key;
}

}  // namespace gp::exec::cuda
