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

}  // namespace gp::exec
