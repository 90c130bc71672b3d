#include "exec/autodiff.h"

#include <algorithm>
#include <sstream>

#include "graph/ops/registry.h"

namespace gp::exec {

namespace {
bool is_float(graph::DType d) {
  return d == graph::DType::kFloat32 || d == graph::DType::kFloat64 || d == graph::DType::kFloat16 ||
         d == graph::DType::kBFloat16;
}
// Per tensor: computed from a float weight (a trainable one, wherever its stage is). A stage input
// that is not (a causal mask computed from constants, a position index) gets no gradient: the
// stage that makes it trains nothing through it, and one without a batch dimension could not
// cross a stage boundary with one.
// Forward propagation of "depends on something flagged" over `order`: an op's float outputs are
// flagged when any input is, its other outputs not.
void propagate_forward(graph::OpGraph const& graph, std::vector<graph::OpId> const& order, std::vector<bool>& flag) {
  for (graph::OpId id : order) {
    auto const& op = graph.op(id);
    bool any = false;
    for (graph::TensorId t : op.inputs) any = any || (t != graph::kNoTensor && flag[t]);
    for (graph::TensorId t : op.outputs)
      if (t != graph::kNoTensor) flag[t] = any && is_float(graph.tensor(t).dtype);
  }
}

std::vector<bool> depends_on_weights(graph::OpGraph const& graph) {
  std::vector<bool> dep(graph.tensors().size(), false);
  for (graph::TensorInfo const& t : graph.tensors())
    dep[t.id] = t.role == graph::TensorRole::kWeight && is_float(t.dtype);
  propagate_forward(graph, graph.topo_order(), dep);
  return dep;
}
}  // namespace

bool AutodiffPlan::is_stage_output(graph::TensorId t) const {
  return std::find(stage_outputs.begin(), stage_outputs.end(), t) != stage_outputs.end();
}

Result<AutodiffPlan> plan_autodiff(graph::OpGraph const& graph, std::vector<graph::OpId> const& ops) {
  if (!graph.finalized()) return internal_error("plan_autodiff: the graph is not finalized");
  std::size_t const nt = graph.tensors().size(), no = graph.num_ops();
  AutodiffPlan p;
  p.in_stage.assign(no, ops.empty());
  for (graph::OpId id : ops) {
    if (id < 0 || static_cast<std::size_t>(id) >= no) return invalid_argument("plan_autodiff: op id out of range");
    p.in_stage[id] = true;
  }
  for (graph::OpId id : graph.topo_order())
    if (p.in_stage[id]) p.forward_order.push_back(id);

  p.requires_grad.assign(nt, false);
  p.trainable.assign(nt, false);
  p.last_forward_use.assign(nt, -1);
  p.grad_fan_in.assign(nt, 0);
  p.runs_backward.assign(no, false);
  p.has_weight_grad.assign(no, false);

  std::vector<bool> is_graph_output(nt, false);
  for (graph::TensorId t : graph.outputs()) is_graph_output[t] = true;

  // Stage boundary and forward liveness.
  std::vector<bool> const from_weights = depends_on_weights(graph);
  std::vector<bool> seen_input(nt, false), seen_weight(nt, false);
  for (int pos = 0; pos < static_cast<int>(p.forward_order.size()); ++pos) {
    auto const& op = graph.op(p.forward_order[pos]);
    for (graph::TensorId t : op.inputs) {
      if (t == graph::kNoTensor) continue;
      p.last_forward_use[t] = pos;
      auto const& info = graph.tensor(t);
      bool const produced_inside = info.producer != graph::kNoOp && p.in_stage[info.producer];
      if (info.role == graph::TensorRole::kWeight) {
        if (is_float(info.dtype) && !seen_weight[t]) {
          seen_weight[t] = true;
          p.trainable[t] = true;
          p.requires_grad[t] = true;
          p.weights.push_back(t);
        }
      } else if (!produced_inside &&
                 (info.role == graph::TensorRole::kInput || info.role == graph::TensorRole::kActivation)) {
        if (!seen_input[t]) {
          seen_input[t] = true;
          p.stage_inputs.push_back(t);
          if (info.role == graph::TensorRole::kActivation && from_weights[t]) p.requires_grad[t] = true;
        }
      }
    }
  }
  for (graph::OpId id : p.forward_order) {
    for (graph::TensorId t : graph.op(id).outputs) {
      if (t == graph::kNoTensor) continue;
      bool leaves = is_graph_output[t];
      for (graph::OpId c : graph.tensor(t).consumers) leaves = leaves || !p.in_stage[c];
      if (leaves) p.stage_outputs.push_back(t);
    }
  }

  // Forward propagation of "depends on something trainable".
  propagate_forward(graph, p.forward_order, p.requires_grad);

  // Backward relevance: a tensor gets a gradient when it leaves the stage or feeds a backward op.
  std::vector<bool> gets_grad(nt, false);
  for (graph::TensorId t : p.stage_outputs) gets_grad[t] = p.requires_grad[t];
  for (auto it = p.forward_order.rbegin(); it != p.forward_order.rend(); ++it) {
    auto const& op = graph.op(*it);
    bool out_grad = false;
    for (graph::TensorId t : op.outputs) out_grad = out_grad || (t != graph::kNoTensor && gets_grad[t]);
    bool in_grad = false;
    for (graph::TensorId t : op.inputs) in_grad = in_grad || (t != graph::kNoTensor && p.requires_grad[t]);
    if (!out_grad || !in_grad) continue;
    p.runs_backward[*it] = true;
    p.backward_order.push_back(*it);
    p.saved_bytes_per_sample += op.activation_bytes_per_sample;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      graph::TensorId t = op.inputs[i];
      if (t == graph::kNoTensor || !p.requires_grad[t]) continue;
      // An op that reads the same tensor twice (x * x) adds twice: counted once per op.
      if (std::find(op.inputs.begin(), op.inputs.begin() + static_cast<std::ptrdiff_t>(i), t) !=
          op.inputs.begin() + static_cast<std::ptrdiff_t>(i))
        continue;
      gets_grad[t] = true;
      ++p.grad_fan_in[t];
      if (p.trainable[t]) p.has_weight_grad[*it] = true;
    }
  }
  // Outputs no gradient flows back through (OpDef::differentiable_outputs): refused where one would
  // arrive, from a consumer that runs backward or from another stage (graph outputs other than the
  // loss's get none).
  for (graph::OpId id : p.forward_order) {
    graph::Op const& op = graph.op(id);
    if (op.def == nullptr || !p.runs_backward[id]) continue;
    for (std::size_t k = op.def->differentiable_outputs; k < op.outputs.size(); ++k) {
      graph::TensorId const t = op.outputs[k];
      if (t == graph::kNoTensor || !p.requires_grad[t] || !gets_grad[t]) continue;
      bool needed =
          p.is_stage_output(t) && std::find(graph.outputs().begin(), graph.outputs().end(), t) == graph.outputs().end();
      for (graph::OpId c : graph.tensor(t).consumers) needed = needed || (p.in_stage[c] && p.runs_backward[c]);
      if (needed)
        return unsupported(op.type + " '" + op.name + "': the loss depends on its output " + std::to_string(k) + " ('" +
                           graph.tensor(t).name + "'), and graphpipe differentiates only its first " +
                           std::to_string(op.def->differentiable_outputs) + " output(s)");
    }
  }
  // Tensors that require a gradient but get none (e.g. a weight behind an unused branch) do not.
  for (std::size_t t = 0; t < nt; ++t) p.requires_grad[t] = p.requires_grad[t] && gets_grad[t];
  for (graph::TensorId t : p.stage_inputs)
    if (p.requires_grad[t]) p.input_grads.push_back(t);
  std::erase_if(p.weights, [&](graph::TensorId t) { return !p.requires_grad[t]; });
  for (graph::TensorId t : p.weights) p.trainable[t] = true;
  for (std::size_t t = 0; t < nt; ++t)
    if (!p.requires_grad[t]) p.trainable[t] = false;
  return p;
}

std::string describe(AutodiffPlan const& plan, graph::OpGraph const& graph) {
  int64_t params = 0;
  for (graph::TensorId t : plan.weights) params += graph.tensor(t).shape.elements_per_sample();
  std::ostringstream os;
  os << plan.forward_order.size() << " ops (" << plan.backward_order.size() << " with backward), "
     << plan.weights.size() << " trainable weights (" << params << " parameters), " << plan.saved_bytes_per_sample
     << " saved activation bytes per sample";
  return os.str();
}

}  // namespace gp::exec
