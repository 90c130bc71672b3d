#include "exec/cuda/conv_shape.h"

#include "core/units.h"
#include "exec/op_shared.h"

namespace gp::exec::cuda {

std::string ConvShape::describe() const {
  return "x " + dims_string(x) + " w " + dims_string(w) + " y " + dims_string(y) + " stride " + dims_string(stride) +
         " dilation " + dims_string(dilation) + " pads " + dims_string(pad_begin) + dims_string(pad_end) + " group " +
         std::to_string(group);
}

Result<ConvShape> conv_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& w, graph::ConvAttrs const& a) {
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    return invalid_argument("input " + dims_string(x) + " and weight " + dims_string(w) +
                            " must have the same rank, 3 to 5");
  int64_t const group = a.group;
  if (group < 1 || x[1] != w[1] * group || w[0] % group != 0)
    return invalid_argument("input channels " + std::to_string(x[1]) + " do not match weight " + dims_string(w) +
                            " with group " + std::to_string(group));
  ConvShape s;
  s.x = x, s.w = w, s.group = group;
  s.y = {x[0], w[0]};
  std::size_t const sp = x.size() - 2, half = a.pads.size() / 2;
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const st = i < a.strides.size() ? a.strides[i] : 1;
    int64_t const d = i < a.dilations.size() ? a.dilations[i] : 1;
    int64_t const pb = i < half ? a.pads[i] : 0, pe = i < half ? a.pads[i + half] : 0;
    int64_t const out = (x[2 + i] + pb + pe - ((w[2 + i] - 1) * d + 1)) / st + 1;
    if (st < 1 || d < 1 || out <= 0) return invalid_argument("kernel larger than the padded input " + dims_string(x));
    s.y.push_back(out);
    s.stride.push_back(st), s.dilation.push_back(d), s.pad_begin.push_back(pb), s.pad_end.push_back(pe);
  }
  return s;
}

Result<ConvShape> conv_transpose_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& w,
                                       graph::ConvTransposeAttrs const& a) {
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    return invalid_argument("input " + dims_string(x) + " and weight " + dims_string(w) +
                            " must have the same rank, 3 to 5");
  int64_t const group = a.group;
  if (group < 1 || x[1] != w[0] || w[0] % group != 0)
    return invalid_argument("input channels " + std::to_string(x[1]) + " do not match weight " + dims_string(w) +
                            " with group " + std::to_string(group));
  std::size_t const sp = x.size() - 2;
  if (a.pads.size() != 2 * sp)
    return invalid_argument(std::to_string(a.pads.size()) + " pads for " + std::to_string(sp) + " spatial dims");
  ConvShape s;
  s.w = w, s.y = x, s.group = group;
  s.x = {x[0], w[1] * group};
  std::vector<int64_t> out = s.x, offset(2, 0);
  bool embedded = false;
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const st = i < a.strides.size() ? a.strides[i] : 1;
    int64_t const d = i < a.dilations.size() ? a.dilations[i] : 1;
    int64_t const op = i < a.output_padding.size() ? a.output_padding[i] : 0;
    if (st < 1 || d < 1)
      return invalid_argument("strides " + dims_string(a.strides) + " and dilations " + dims_string(a.dilations) +
                              " must be positive");
    ConvTransposeAxis const axis = conv_transpose_axis(x[2 + i], w[2 + i], st, d, a.pads[i], a.pads[i + sp], op);
    if (axis.out <= 0 || axis.computed <= 0)
      return invalid_argument("pads " + dims_string(a.pads) + " leave no output");
    s.x.push_back(axis.computed);
    out.push_back(axis.out);
    offset.push_back(axis.offset);
    embedded = embedded || axis.embedded;
    s.stride.push_back(st), s.dilation.push_back(d), s.pad_begin.push_back(axis.pad_begin);
    s.pad_end.push_back(axis.pad_end);
  }
  if (embedded) s.embedding = std::move(out), s.offset = std::move(offset);
  return s;
}

PlanKey conv_plan_key(PlanKind kind, ConvShape const& s, int64_t dtype, int device) {
  PlanKey key(kind, device, dtype);
  key.add_list(s.x).add_list(s.w).add_list(s.y).add_list(s.stride).add_list(s.dilation);
  key.add_list(s.pad_begin).add_list(s.pad_end).add(s.group);
  return key;
}

}  // namespace gp::exec::cuda
