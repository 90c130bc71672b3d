#include "exec/stage_runner.h"

namespace gp::exec {

Result<std::unique_ptr<StageRunner>> StageRunner::create(graph::OpGraph const& graph, Backend& backend,
                                                         std::vector<graph::OpId> const& ops,
                                                         OptimizerConfig const& optimizer) {
  ASSIGN_OR_RETURN(auto executor, StageExecutor::create(graph, backend, ops));
  return std::unique_ptr<StageRunner>(new StageRunner(std::move(executor), optimizer));
}

std::vector<Tensor> StageRunner::gradient_list() const {
  std::vector<Tensor> out;
  for (auto const& [name, g] : executor_->gradients()) out.push_back(g);
  return out;
}

Status StageRunner::update() {
  return optimizer_.step(executor_->backend(), executor_->parameters(), executor_->gradients());
}

Result<bool> StageRunner::finite_gradients() const { return executor_->backend().all_finite(gradient_list()); }

Status StageRunner::unscale_gradients(double scale) {
  double const inverse = 1.0 / scale;
  for (auto& [name, grad] : executor_->gradients()) {
    Tensor g = grad;  // shares storage: scaled in place
    RETURN_IF_ERROR(executor_->backend().scale(g, inverse));
  }
  return Status::ok();
}

}  // namespace gp::exec
