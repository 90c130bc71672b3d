#include "exec/backend.h"

#include <set>

#include "kernels/vector_ops.h"

namespace gp::exec {

Status Backend::scale(Tensor& t, double factor) {
  if (!t.defined()) return Status::ok();
  if (t.dtype() != DType::kFloat32)
    return internal_error("scale: a " + std::string(graph::dtype_name(t.dtype())) + " tensor");
  Tensor host = t.clone_to(process_cpu_allocator());
  kernels::scale_inplace(host.data<float>(), static_cast<float>(factor), host.numel());
  return copy(host, t);
}

Status Backend::optimizer_update_all(OptimizerConfig const& config, int64_t step,
                                     std::vector<ParamUpdate> const& updates) {
  for (ParamUpdate const& u : updates) RETURN_IF_ERROR(optimizer_update(config, step, *u.param, *u.grad, u.state));
  return Status::ok();
}

Result<bool> Backend::all_finite(std::vector<Tensor> const& tensors) {
  for (Tensor const& t : tensors) {
    if (!t.defined()) continue;
    if (t.dtype() != DType::kFloat32)
      return internal_error("all_finite: a " + std::string(graph::dtype_name(t.dtype())) + " tensor");
    Tensor const host = t.device().kind == DeviceKind::kCpu ? t : t.clone_to(process_cpu_allocator());
    if (!kernels::all_finite(host.data<float>(), host.numel())) return false;
  }
  return true;
}

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
