#include "graph/graph_summary.h"

#include "graph/accounting.h"
#include "graph/analysis.h"

namespace gp::graph {

GraphSummary summarize(OpGraph const& graph) {
  GraphSummary s;
  s.name = graph.name();
  auto tensor_summary = [&](TensorId t) {
    TensorInfo const& info = graph.tensor(t);
    return TensorSummary{info.name, info.shape.to_string(), dtype_name(info.dtype)};
  };
  for (TensorId t : graph.inputs()) s.inputs.push_back(tensor_summary(t));
  for (TensorId t : graph.outputs()) s.outputs.push_back(tensor_summary(t));
  for (Op const& op : graph.ops()) {
    ++s.ops_by_type[op.type];
    s.bwd_weight_flops_per_sample += op.bwd_weight_flops_per_sample;
  }
  s.num_ops = static_cast<int64_t>(graph.num_ops());
  s.param_tensors = static_cast<int64_t>(graph.weights().size());
  s.param_count = graph.param_count();
  s.param_bytes = graph.param_bytes();
  s.fwd_flops_per_sample = graph.fwd_flops_per_sample();
  s.bwd_flops_per_sample = graph.bwd_flops_per_sample();
  s.activation_bytes_per_sample = saved_activation_bytes_per_sample(graph);
  s.fork_points = static_cast<int64_t>(fork_points(graph).size());
  s.join_points = static_cast<int64_t>(join_points(graph).size());
  s.branches = branch_count(graph);
  for (OpId v : widest_antichain(graph)) s.widest_antichain.push_back(graph.op(v).name);
  return s;
}

}  // namespace gp::graph
