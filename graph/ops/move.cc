#include "graph/ops/move.h"

#include <algorithm>

namespace gp::graph::ops {

Result<std::vector<int64_t>> transpose_perm(Op const& op, std::vector<int64_t> const& shape, std::string_view role) {
  std::vector<int64_t> perm = std::get<TransposeAttrs>(op.typed).perm;
  int64_t const rank = static_cast<int64_t>(shape.size());
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return op_error(
        op, "perm has " + std::to_string(perm.size()) + " entries for " + std::string(role) + " " + dims_string(shape));
  std::vector<bool> seen(perm.size(), false);
  for (int64_t a : perm) {
    if (a < 0 || a >= rank || seen[a])
      return op_error(op, "perm " + dims_string(perm) + " is not a permutation of the dims of " + dims_string(shape));
    seen[a] = true;
  }
  return perm;
}

Result<ConcatShape> concat_shape(Op const& op, std::vector<std::vector<int64_t>> const& input_shapes) {
  std::vector<int64_t> const& first = input_shapes.at(0);
  int64_t const rank = static_cast<int64_t>(first.size());
  ConcatShape c;
  c.axis = normalised_axis(std::get<ConcatAttrs>(op.typed).axis, rank);
  if (c.axis < 0 || c.axis >= rank) return op_error(op, "axis out of range for input " + dims_string(first));
  c.out_shape = first;
  c.out_shape[c.axis] = 0;
  for (std::vector<int64_t> const& s : input_shapes) {
    if (static_cast<int64_t>(s.size()) != rank) return op_error(op, "inputs have different ranks");
    c.out_shape[c.axis] += s[c.axis];
  }
  return c;
}

Result<SplitShape> split_shape(Op const& op, std::vector<int64_t> const& input_shape) {
  auto const& attrs = std::get<SplitAttrs>(op.typed);
  int64_t const rank = static_cast<int64_t>(input_shape.size());
  SplitShape sp;
  sp.axis = normalised_axis(attrs.axis, rank);
  if (sp.axis < 0 || sp.axis >= rank) return op_error(op, "axis out of range for input " + dims_string(input_shape));
  int64_t const dim = input_shape[sp.axis];
  sp.sizes = attrs.sizes;
  if (sp.sizes.empty()) {
    int64_t const n = static_cast<int64_t>(op.outputs.size());
    int64_t const chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sp.sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  int64_t total = 0;
  for (int64_t s : sp.sizes) total += s;
  if (total != dim || sp.sizes.size() != op.outputs.size())
    return op_error(
        op, "split sizes do not add up to dimension " + std::to_string(sp.axis) + " of " + dims_string(input_shape));
  return sp;
}

Result<SliceGeometry> slice_geometry(Op const& op, std::vector<int64_t> const& input_shape) {
  auto const& a = std::get<SliceAttrs>(op.typed);
  std::vector<int64_t> const& in_shape = input_shape;
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  std::string const for_input = " for input " + dims_string(in_shape);
  std::vector<int64_t> start(in_shape.size(), 0), step(in_shape.size(), 1);
  SliceGeometry g;
  g.out_shape = in_shape;
  for (std::size_t k = 0; k < a.starts.size(); ++k) {
    int64_t const axis = normalised_axis(k < a.axes.size() ? a.axes[k] : static_cast<int64_t>(k), rank);
    if (axis < 0 || axis >= rank)
      return op_error(op, "slice axis " + std::to_string(axis) + " out of range" + for_input);
    int64_t const dim = in_shape[axis];
    int64_t const st = k < a.steps.size() ? a.steps[k] : 1;
    if (st == 0) return op_error(op, "slice step is 0" + for_input);
    int64_t s = a.starts[k], e = k < a.ends.size() ? a.ends[k] : dim;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count = 0;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    start[axis] = s;
    step[axis] = st;
    g.out_shape[axis] = count;
  }
  g.src_strides.assign(in_shape.size(), 0);
  int64_t stride = 1;
  for (std::size_t i = in_shape.size(); i-- > 0;) {
    g.src_strides[i] = stride * step[i];
    if (g.out_shape[i] > 0) g.offset += start[i] * stride;
    stride *= in_shape[i];
  }
  return g;
}

Result<GatherShape> gather_shape(Op const& op, std::vector<int64_t> const& data_shape,
                                 std::vector<int64_t> const& indices_shape) {
  int64_t const rank = static_cast<int64_t>(data_shape.size());
  GatherShape g;
  g.axis = normalised_axis(std::get<GatherAttrs>(op.typed).axis, rank);
  if (g.axis < 0 || g.axis >= rank) return op_error(op, "axis out of range for data " + dims_string(data_shape));
  for (int64_t i = 0; i < g.axis; ++i) g.outer *= data_shape[i];
  for (int64_t i = g.axis + 1; i < rank; ++i) g.inner *= data_shape[i];
  g.axis_dim = data_shape[g.axis];
  g.out_shape.assign(data_shape.begin(), data_shape.begin() + g.axis);
  g.out_shape.insert(g.out_shape.end(), indices_shape.begin(), indices_shape.end());
  g.out_shape.insert(g.out_shape.end(), data_shape.begin() + g.axis + 1, data_shape.end());
  return g;
}

}  // namespace gp::graph::ops
