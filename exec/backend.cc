#include "exec/backend.h"

#include <set>

namespace gp::exec {

// Tensors that share storage (a view and its base) are counted once.
int64_t Saved::bytes() const {
  std::set<void const*> seen;
  int64_t total = 0;
  for (Tensor const& t : tensors) {
    if (!t.defined()) continue;
    if (!seen.insert(t.raw()).second) continue;
    total += static_cast<int64_t>(t.nbytes());
  }
  return total;
}

Status Backend::backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                         std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                         std::vector<Tensor>& weight_grads) {
  bool any_in = false;
  for (bool b : needs_grad) any_in = any_in || b;
  if (any_in)
    RETURN_IF_ERROR(backward_input(call, saved, grad_outputs, needs_grad, grad_inputs));
  else
    grad_inputs.assign(call.op.inputs.size(), Tensor());
  return backward_weight(call, saved, grad_outputs, weight_grads);
}

}  // namespace gp::exec
