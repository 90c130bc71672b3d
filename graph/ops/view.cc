#include "graph/ops/view.h"

#include <algorithm>

namespace gp::graph::ops {

std::optional<std::vector<int64_t>> graph_output_shape(OpGraph const& graph, Op const& op,
                                                       std::vector<int64_t> const& input_shape) {
  TensorInfo const& in_info = graph.tensor(op.inputs[0]);
  TensorInfo const& out_info = graph.tensor(op.outputs[0]);
  int const ib = in_info.shape.batch_axis();
  if (ib < 0 || !out_info.shape.has_batch() || ib >= static_cast<int64_t>(input_shape.size())) return std::nullopt;
  for (int64_t d : out_info.shape.dims)
    if (d < 0 && d != kBatch) return std::nullopt;
  std::vector<int64_t> out = out_info.shape.concrete(input_shape[ib]);
  if (numel_of(out) != numel_of(input_shape)) return std::nullopt;
  return out;
}

namespace {

Result<std::vector<int64_t>> reshape_shape(OpGraph const& graph, Op const& op, std::vector<int64_t> const& s) {
  if (auto from_graph = graph_output_shape(graph, op, s)) return *from_graph;
  auto const& attrs = std::get<ReshapeAttrs>(op.typed);
  std::vector<int64_t> out = attrs.shape;
  int infer = -1;
  int64_t known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !attrs.allowzero) {
      if (i >= s.size()) return op_error(op, "shape copies a dimension the input lacks");
      out[i] = s[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) return op_error(op, "shape has two -1 entries");
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) out[infer] = known == 0 ? 0 : numel_of(s) / known;
  return out;
}

}  // namespace

Result<std::vector<int64_t>> view_output_shape(OpGraph const& graph, Op const& op,
                                               std::vector<int64_t> const& input_shape) {
  std::string const& type = op.type;
  std::vector<int64_t> const& s = input_shape;
  int64_t const rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> out;
  if (type == "Identity" || type == "Cast" || type == "Dropout") {
    out = s;
  } else if (type == "Flatten") {
    int64_t const axis = normalised_axis(std::get<FlattenAttrs>(op.typed).axis, rank);
    if (axis < 0 || axis > rank) return op_error(op, "axis out of range for input " + dims_string(s));
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= s[i];
    out = {a, b};
  } else if (type == "Squeeze") {
    auto const& axes = std::get<SqueezeAttrs>(op.typed).axes;
    for (int64_t i = 0; i < rank; ++i) {
      bool const listed = std::find(axes.begin(), axes.end(), i) != axes.end() ||
                          std::find(axes.begin(), axes.end(), i - rank) != axes.end();
      if (listed && s[i] != 1)
        return op_error(op, "cannot squeeze axis " + std::to_string(i) + " of " + dims_string(s));
      if (!(listed || (axes.empty() && s[i] == 1))) out.push_back(s[i]);
    }
  } else if (type == "Unsqueeze") {
    auto axes = std::get<UnsqueezeAttrs>(op.typed).axes;
    int64_t const r = rank + static_cast<int64_t>(axes.size());
    for (auto& a : axes) a = normalised_axis(a, r);
    std::size_t k = 0;
    for (int64_t i = 0; i < r; ++i) {
      if (std::find(axes.begin(), axes.end(), i) != axes.end()) {
        out.push_back(1);
      } else {
        if (k >= s.size()) return op_error(op, "bad axes for input " + dims_string(s));
        out.push_back(s[k++]);
      }
    }
  } else {  // Reshape
    ASSIGN_OR_RETURN(out, reshape_shape(graph, op, s));
  }
  if (numel_of(out) != numel_of(s))
    return op_error(op, "cannot reshape " + dims_string(s) + " into " + dims_string(out));
  return out;
}

Status view_check(Op const& op, OpGraph const&) {
  if (op.type == "Flatten") return require_typed<FlattenAttrs>(op);
  if (op.type == "Squeeze") return require_typed<SqueezeAttrs>(op);
  if (op.type == "Unsqueeze") return require_typed<UnsqueezeAttrs>(op);
  if (op.type == "Reshape") return require_typed<ReshapeAttrs>(op);
  return Status::ok();
}

Status cast_check(Op const& op, OpGraph const& graph) {
  RETURN_IF_ERROR(require_typed<CastAttrs>(op));
  DType const from = graph.tensor(op.inputs[0]).dtype;
  int32_t const to = std::get<CastAttrs>(op.typed).to;
  if (from != DType::kFloat32 || to != 1)
    return unsupported("only float32 → float32 casts are supported (got " + std::string(dtype_name(from)) +
                       " → ONNX type " + std::to_string(to) + ")");
  return Status::ok();
}

}  // namespace gp::graph::ops
