// A stage as training sees it: its StageExecutor together with the stage's parameters, their
// accumulated gradients and the optimizer state. The single-device Trainer holds one over the
// whole graph; a pipeline worker holds one per stage replica it hosts.
#pragma once

#include <memory>
#include <vector>

#include "exec/optimizer.h"
#include "exec/stage_executor.h"

namespace gp::exec {

class StageRunner {
 public:
  // `ops` empty: the whole graph. Weights are loaded into the calling thread's allocator.
  static Result<std::unique_ptr<StageRunner>> create(graph::OpGraph const& graph, Backend& backend,
                                                     std::vector<graph::OpId> const& ops,
                                                     OptimizerConfig const& optimizer);

  StageExecutor& executor() { return *executor_; }
  StageExecutor const& executor() const { return *executor_; }
  Optimizer& optimizer() { return optimizer_; }
  Optimizer const& optimizer() const { return optimizer_; }

  // The gradients in parameter-name order (what a replica group all-reduces; same order
  // everywhere).
  std::vector<Tensor> gradient_list() const;
  // One optimizer update with the accumulated gradients. They stay readable until the next step
  // zeroes them (executor().zero_grads()), as the single-device Trainer does at a step's start.
  Status update();
  // Loss scaling (exec/loss_scale.h): whether every accumulated gradient is finite, and dividing
  // them all by the step's scale before update().
  Result<bool> finite_gradients() const;
  Status unscale_gradients(double scale);

 private:
  StageRunner(std::unique_ptr<StageExecutor> executor, OptimizerConfig const& optimizer)
      : executor_(std::move(executor)), optimizer_(optimizer) {}

  std::unique_ptr<StageExecutor> executor_;
  Optimizer optimizer_;
};

}  // namespace gp::exec
