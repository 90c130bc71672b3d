#include "exec/index_positions.h"

#include <string>

#include "core/units.h"
#include "graph/ops/index.h"

namespace gp::exec {

namespace {

Status indices_check(graph::Op const& op, graph::OpGraph const& graph) {
  DType const d = graph.tensor(op.inputs.at(1)).dtype;
  if (d != DType::kInt64 && d != DType::kInt32)
    return unsupported("indices have dtype " + std::string(graph::dtype_name(d)) + " (int64 or int32 only)");
  return Status::ok();
}

// Data and updates float32, indices int64 or int32.
Status scatter_dtypes_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
    DType const d = graph.tensor(op.inputs.at(i)).dtype;
    if (d != DType::kFloat32)
      return unsupported("input " + std::to_string(i) + " has dtype " + graph::dtype_name(d) + " (only float32)");
  }
  return indices_check(op, graph);
}

}  // namespace

Status gather_elements_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::GatherElementsAttrs>(op, graph));
  return indices_check(op, graph);
}

Status gather_nd_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::GatherNDAttrs>(op, graph));
  return indices_check(op, graph);
}

Status scatter_elements_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ScatterElementsAttrs>(op, graph));
  return scatter_dtypes_check(op, graph);
}

Status scatter_nd_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ScatterNDAttrs>(op, graph));
  return scatter_dtypes_check(op, graph);
}

Status scatter_elements_updates_check(OpCall const& call, std::vector<int64_t> const& indices,
                                      std::vector<int64_t> const& updates) {
  if (updates == indices) return Status::ok();
  return op_error(call,
                  "updates " + dims_string(updates) + " and indices " + dims_string(indices) + " differ in shape");
}

Status scatter_nd_updates_check(OpCall const& call, std::vector<int64_t> const& data,
                                std::vector<int64_t> const& indices, std::vector<int64_t> const& updates) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const expected, graph::ops::gather_nd_output_shape(data, indices));
  if (updates == expected) return Status::ok();
  return op_error(call, "updates " + dims_string(updates) + " do not fit indices " + dims_string(indices) +
                            " into data " + dims_string(data) + " (expected " + dims_string(expected) + ")");
}

void save_scatter(Tensor const& idx, std::vector<Tensor> const& in, graph::ScatterReduction r, Saved* saved) {
  if (!saved) return;
  saved->tensors = {idx, shape_tensor(in[0].shape())};
  if (r != graph::ScatterReduction::kNone && r != graph::ScatterReduction::kAdd) {
    saved->tensors.push_back(in[0]);
    saved->tensors.push_back(in[2]);
  }
}

Result<kernels::hd::ElementIndex> element_index(OpCall const& call, std::vector<int64_t> const& data_shape,
                                                std::vector<int64_t> const& ishape, int64_t axis) {
  std::size_t const r = data_shape.size();
  if (ishape.size() != r || axis < 0 || axis >= static_cast<int64_t>(r))
    return op_error(call, "indices " + dims_string(ishape) + " do not fit data " + dims_string(data_shape) +
                              " along axis " + std::to_string(axis));
  if (r > static_cast<std::size_t>(kernels::hd::kMaxRank))
    return unsupported(call.op.type + " '" + call.op.name + "': rank " + std::to_string(r) + " (at most " +
                       std::to_string(kernels::hd::kMaxRank) + ")");
  kernels::hd::ElementIndex p;
  p.rank = static_cast<int>(r);
  int64_t stride = 1;
  for (std::size_t d = r; d-- > 0;) {
    if (static_cast<int64_t>(d) != axis && ishape[d] > data_shape[d])
      return op_error(call, "indices " + dims_string(ishape) + " exceed data " + dims_string(data_shape) +
                                " along axis " + std::to_string(d));
    p.ishape[d] = ishape[d];
    p.walk[d] = static_cast<int64_t>(d) == axis ? 0 : stride;
    if (static_cast<int64_t>(d) == axis) p.axis_stride = stride;
    stride *= data_shape[d];
  }
  p.dim = data_shape[static_cast<std::size_t>(axis)];
  return p;
}

Result<kernels::hd::NdIndex> nd_index(OpCall const& call, std::vector<int64_t> const& data_shape,
                                      std::vector<int64_t> const& ishape) {
  RETURN_IF_ERROR(graph::ops::gather_nd_output_shape(data_shape, ishape).status());
  int64_t const k = ishape.empty() ? 0 : ishape.back();
  if (k < 1 || k > kernels::hd::kMaxRank)
    return unsupported(call.op.type + " '" + call.op.name + "': index tuples of " + std::to_string(k) + " (1 to " +
                       std::to_string(kernels::hd::kMaxRank) + ")");
  kernels::hd::NdIndex p;
  p.k = static_cast<int>(k);
  for (std::size_t d = static_cast<std::size_t>(k); d < data_shape.size(); ++d) p.slice *= data_shape[d];
  int64_t stride = p.slice;
  for (int64_t d = k; d-- > 0;) {
    p.dims[d] = data_shape[static_cast<std::size_t>(d)];
    p.strides[d] = stride;
    stride *= data_shape[static_cast<std::size_t>(d)];
  }
  return p;
}

}  // namespace gp::exec
