// Optimizers over named parameters (SGD with momentum and weight decay, Adam, AdamW), with
// PyTorch's update rules. Moments are keyed by parameter name so checkpoints can save and restore
// them, and a stage's optimizer only ever sees its own parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "exec/backend.h"
#include "exec/tensor.h"
#include "exec/train_config.h"
#include "core/status.h"
#include "kernels/optim.h"

namespace gp::exec {

// The moments this optimizer keeps per parameter: SGD 0, with momentum 1; Adam/AdamW 2 (the
// `state` optimizer_update gets).
inline int moment_count(OptimizerConfig const& config) {
  if (config.kind == OptimizerKind::kSgd) return config.momentum != 0.f ? 1 : 0;
  return 2;
}

// Bytes a parameter costs beyond its own, per weight byte: its gradient and the moments this
// optimizer keeps (SGD: 1, with momentum 2; Adam/AdamW: 3). What the planner's memory model uses.
double state_bytes_per_weight_byte(OptimizerConfig const& config);

// Seconds one update of this optimizer takes per weight byte on `backend`, measured on a 16 MiB
// parameter under the calling thread's thread budget (what a plan's per-stage update_s needs).
Result<double> measure_update_seconds_per_byte(Backend& backend, OptimizerConfig const& config);

// The Adam/AdamW update's parameters for step `step` (from 1) of `config`: what every backend's
// optimizer_update passes to its kernel.
inline kernels::AdamParams adam_params(OptimizerConfig const& config, int64_t step) {
  kernels::AdamParams p;
  p.lr = config.lr;
  p.beta1 = config.beta1;
  p.beta2 = config.beta2;
  p.eps = config.eps;
  p.weight_decay = config.weight_decay;
  p.decoupled = config.kind == OptimizerKind::kAdamW;
  p.step = step;
  return p;
}

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config) : config_(config) {}

  OptimizerConfig const& config() const { return config_; }
  int64_t step_count() const { return step_; }

  // One update of every parameter with its gradient (a gradient must exist for each parameter,
  // same shape), on the parameters' backend. Moments are created on the first step.
  Status step(Backend& backend, std::map<std::string, Tensor>& params, std::map<std::string, Tensor> const& grads);

  // Moments keyed "<param>#momentum" (SGD), "<param>#m" and "<param>#v" (Adam/AdamW).
  std::map<std::string, Tensor> const& state() const { return state_; }
  // Restores a saved state; names/shapes are checked against `params` on the next step.
  void load_state(std::map<std::string, Tensor> state, int64_t step_count);

 private:
  OptimizerConfig config_;
  int64_t step_ = 0;
  std::map<std::string, Tensor> state_;
};

}  // namespace gp::exec
