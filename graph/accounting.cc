#include "graph/accounting.h"

#include <set>

#include "graph/ops/registry.h"

namespace gp::graph {
namespace {

ops::OpDef const* def_of(Op const& op) { return op.def != nullptr ? op.def : ops::find_op(op.type); }

}  // namespace

SavedForBackward saved_for_backward(Op const& op, std::vector<TensorInfo> const& ts) {
  SavedForBackward s;
  ops::OpDef const* def = def_of(op);
  if (def != nullptr && def->saved != nullptr) def->saved(ops::CostContext{op, *def, ts}, s);
  return s;
}

OpCost op_cost(Op const& op, std::vector<TensorInfo> const& ts) {
  OpCost c;
  ops::OpDef const* def = def_of(op);
  if (def != nullptr && def->cost != nullptr) c = def->cost(ops::CostContext{op, *def, ts});
  SavedForBackward const s = saved_for_backward(op, ts);
  c.activation_bytes_per_sample = s.extra_bytes_per_sample;
  for (TensorId id : s.tensors) c.activation_bytes_per_sample += ts[id].bytes_per_sample();
  return c;
}

void fill_accounting(std::vector<Op>& ops, std::vector<TensorInfo> const& tensors) {
  std::set<TensorId> counted;
  for (Op& op : ops) {
    OpCost const c = op_cost(op, tensors);
    op.fwd_flops_per_sample = c.fwd_flops_per_sample;
    op.bwd_flops_per_sample = c.bwd_flops_per_sample;
    op.bwd_weight_flops_per_sample = c.bwd_weight_flops_per_sample;
    op.activation_bytes_per_sample = c.activation_bytes_per_sample;
    op.param_bytes = 0;
    for (TensorId t : op.inputs)
      if (t != kNoTensor && tensors[t].role == TensorRole::kWeight && counted.insert(t).second)
        op.param_bytes += tensors[t].static_bytes();
  }
}

int64_t saved_activation_bytes_per_sample(OpGraph const& graph) {
  std::set<TensorId> saved;
  int64_t extra = 0;
  for (Op const& op : graph.ops()) {
    SavedForBackward const s = saved_for_backward(op, graph.tensors());
    saved.insert(s.tensors.begin(), s.tensors.end());
    extra += s.extra_bytes_per_sample;
  }
  int64_t total = extra;
  for (TensorId t : saved) total += graph.tensor(t).bytes_per_sample();
  return total;
}

}  // namespace gp::graph
