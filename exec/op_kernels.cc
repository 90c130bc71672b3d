#include "exec/op_kernels.h"

namespace gp::exec {

Status op_error(OpCall const& call, std::string const& what) { return graph::ops::op_error(call.op, what); }

bool wants(std::vector<bool> const& wanted, std::size_t i) { return i < wanted.size() && wanted[i]; }

graph::TensorData const* constant_input(graph::Op const& op, graph::OpGraph const& graph, std::size_t i) {
  if (i >= op.inputs.size() || op.inputs[i] == graph::kNoTensor) return nullptr;
  graph::TensorInfo const& info = graph.tensor(op.inputs[i]);
  if (info.role != graph::TensorRole::kConstant && info.role != graph::TensorRole::kWeight) return nullptr;
  return info.data.get();
}

}  // namespace gp::exec
