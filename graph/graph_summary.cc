#include "graph/graph_summary.h"

#include <nlohmann/json.hpp>

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
    if (auto const* bn = std::get_if<BatchNormAttrs>(&op.typed)) s.fused_batchnorm_relus += bn->relu;
    if (auto const* mm = std::get_if<MatMulAttrs>(&op.typed))
      s.fused_matmuls += mm->trans_a || mm->trans_b || mm->alpha != 1.f;
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

std::string inspect_json(GraphSummary const& s, std::vector<WeightChoice> const& choices) {
  using nlohmann::json;
  auto tensors = [](std::vector<TensorSummary> const& list) {
    json a = json::array();
    for (auto const& t : list) a.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}});
    return a;
  };
  json initializers = json::array();
  for (auto const& c : choices)
    initializers.push_back({{"name", c.name},
                            {"dtype", dtype_name(c.dtype)},
                            {"shape", c.dims},
                            {"trainable", c.trainable},
                            {"reason", c.reason}});
  json const j{{"name", s.name},
               {"inputs", tensors(s.inputs)},
               {"outputs", tensors(s.outputs)},
               {"num_ops", s.num_ops},
               {"ops_by_type", s.ops_by_type},
               {"fused_batchnorm_relus", s.fused_batchnorm_relus},
               {"fused_matmuls", s.fused_matmuls},
               {"parameters", {{"tensors", s.param_tensors}, {"count", s.param_count}, {"bytes", s.param_bytes}}},
               {"flops_per_sample",
                {{"forward", s.fwd_flops_per_sample},
                 {"backward", s.bwd_flops_per_sample},
                 {"backward_weight", s.bwd_weight_flops_per_sample}}},
               {"activation_bytes_per_sample", s.activation_bytes_per_sample},
               {"fork_points", s.fork_points},
               {"join_points", s.join_points},
               {"branches", s.branches},
               {"widest_antichain", {{"size", s.widest_antichain.size()}, {"ops", s.widest_antichain}}},
               {"initializers", initializers}};
  return j.dump(2);
}

}  // namespace gp::graph
