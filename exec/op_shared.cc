#include "exec/op_shared.h"

#include <string>
#include <utility>

#include "kernels/hd/binary.h"

namespace gp::exec {

Result<kernels::hd::Reduction> reduction_of(OpCall const& call) {
  using kernels::hd::Reduction;
  static std::pair<OpKind, Reduction> const kinds[] = {
      {OpKind::kReduceSum, Reduction::kSum},       {OpKind::kReduceMean, Reduction::kMean},
      {OpKind::kReduceMax, Reduction::kMax},       {OpKind::kReduceMin, Reduction::kMin},
      {OpKind::kReduceProd, Reduction::kProd},     {OpKind::kReduceL1, Reduction::kL1},
      {OpKind::kReduceL2, Reduction::kL2},         {OpKind::kReduceSumSquare, Reduction::kSumSquare},
      {OpKind::kReduceLogSum, Reduction::kLogSum}, {OpKind::kReduceLogSumExp, Reduction::kLogSumExp}};
  for (auto const& [type, r] : kinds)
    if (call.op.kind() == type) return r;
  return op_error(call, "is not a reduction");
}

Result<graph::ops::AxisSplit> softmax_axis_split(OpCall const& call, std::vector<int64_t> const& shape) {
  auto const* a = attrs_of<graph::SoftmaxAttrs>(call.op);
  return graph::ops::axis_split(call.op, a ? a->axis : -1, shape);
}

Status variadic_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (std::size_t k = 0; k < op.inputs.size(); ++k) {
    if (op.inputs[k] == graph::kNoTensor)
      return unsupported(op.type + " '" + op.name + "' has an empty input " + std::to_string(k));
    DType const d = graph.tensor(op.inputs[k]).dtype;
    if (d != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a " + graph::dtype_name(d) + " input " + std::to_string(k) +
                         " (float32 only)");
  }
  return Status::ok();
}

Result<std::vector<int64_t>> variadic_shape(OpCall const& call, std::vector<Tensor> const& in) {
  std::vector<int64_t> shape = in.at(0).shape();
  for (std::size_t k = 1; k < in.size(); ++k) {
    std::vector<int64_t> next;
    if (!kernels::hd::broadcast_shape(shape, in[k].shape(), next))
      return op_error(call, "input " + std::to_string(k) + " " + in[k].shape_string() +
                                " does not broadcast with the inputs before it");
    shape = std::move(next);
  }
  return shape;
}

}  // namespace gp::exec
