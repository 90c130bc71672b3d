#include "exec/backend.h"

#include <algorithm>
#include <limits>
#include <set>

#include "kernels/vector_ops.h"

namespace gp::exec {

namespace {
// The tensor itself on the host, else a host copy (one synchronisation on a device).
Tensor on_host(Tensor const& t) {
  return t.device().kind == DeviceKind::kCpu ? t : t.clone_to(process_cpu_allocator());
}
}  // namespace

Status Backend::scale(Tensor& t, double factor) {
  if (!t.defined()) return Status::ok();
  if (t.dtype() != DType::kFloat32)
    return internal_error("scale: a " + std::string(graph::dtype_name(t.dtype())) + " tensor");
  Tensor host = t.clone_to(process_cpu_allocator());
  kernels::scale_inplace(host.data<float>(), static_cast<float>(factor), host.numel());
  return copy(host, t);
}

Status Backend::scale_by(Tensor& t, Tensor const& factor) {
  if (factor.dtype() != DType::kFloat32 || factor.numel() != 1)
    return internal_error("scale_by: a factor of " + factor.shape_string());
  return scale(t, on_host(factor).data<float>()[0]);
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
    Tensor const host = on_host(t);
    if (!kernels::all_finite(host.data<float>(), host.numel())) return false;
  }
  return true;
}

Status Backend::begin_capture() {
  return unsupported("the " + name() + " backend does not capture work (cuda_graphs: true needs --backend cuda)");
}

Result<std::unique_ptr<Backend::CapturedWork>> Backend::end_capture() {
  return internal_error("the " + name() + " backend has no capture to end");
}

Status Backend::replay(CapturedWork&) { return internal_error("the " + name() + " backend has no captured work"); }

Backend::StepLosses Backend::step_losses(int slots) {
  StepLosses l;
  l.values = empty({slots}, DType::kFloat64);
  l.bad = empty({slots, 2}, DType::kInt64);
  l.classes.assign(static_cast<std::size_t>(slots), 0);
  l.written.assign(static_cast<std::size_t>(slots), false);
  return l;
}

Result<std::vector<double>> Backend::read_losses(StepLosses const& losses) {
  if (!losses.any_written()) return losses_read(losses, nullptr, nullptr);
  Tensor const values = on_host(losses.values);
  Tensor const bad = on_host(losses.bad);
  return losses_read(losses, values.data<double>(), bad.data<int64_t>());
}

bool Backend::StepLosses::any_written() const {
  return std::find(written.begin(), written.end(), true) != written.end();
}

Result<std::vector<double>> Backend::losses_read(StepLosses const& losses, double const* values, int64_t const* bad) {
  std::vector<double> out(losses.written.size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (!losses.written[k]) continue;
    int64_t const row = bad[2 * k];
    if (row >= 0) return label_out_of_range(bad[2 * k + 1], row, losses.classes.at(k));
    out[k] = values[k];
  }
  return out;
}

Status Backend::label_out_of_range(int64_t label, int64_t row, int64_t classes) {
  return invalid_argument("label " + std::to_string(label) + " (row " + std::to_string(row) + ") is outside [0, " +
                          std::to_string(classes) + ") for a model with " + std::to_string(classes) + " classes");
}

Result<double> Backend::loss(LossKind kind, Tensor const& output, Tensor const& labels, int64_t total_rows,
                             Tensor& grad) {
  StepLosses one = step_losses(1);
  RETURN_IF_ERROR(loss_into(kind, output, labels, total_rows, grad, one, 0));
  ASSIGN_OR_RETURN(std::vector<double> const v, read_losses(one));
  return v[0];
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
