// Dynamic loss scaling (PyTorch's GradScaler, Megatron's across pipeline ranks): the loss gradient
// is multiplied by a scale S before backward so small gradients survive a narrow format (fp16);
// before the optimizer step the weight gradients are checked for inf/NaN, and
// - if any device found one, every device skips the step and S is multiplied by backoff_factor;
// - else the gradients are divided by S, the step runs, and after growth_interval clean steps in a
//   row S is multiplied by growth_factor.
// A pipeline reduces the found-inf flag over every device (each stage and replica) before STEP, so
// all skip together, and every worker's scaler stays identical. Scales are powers of two with the
// defaults, so scaling and unscaling are exact when nothing overflows: a scaled run then trains
// bitwise as an unscaled one.
#pragma once

#include <cstdint>
#include <string>

#include "exec/checkpoint.h"
#include "exec/train_config.h"

namespace gp::exec {

class LossScaler {
 public:
  explicit LossScaler(LossScaleConfig const& config = {});

  bool enabled() const { return config_.dynamic; }
  double scale() const { return enabled() ? scale_ : 1.0; }
  // The step's verdict, the same on every device: found_inf skips the step (returns false) and
  // backs the scale off; a clean step returns true and may grow it.
  bool update(bool found_inf);
  int64_t skipped_steps() const { return skipped_; }
  int64_t good_steps() const { return good_; }
  // Checkpoints.
  void restore(double scale, int64_t good_steps, int64_t skipped_steps);

 private:
  LossScaleConfig config_;
  double scale_ = 1.0;
  int64_t good_ = 0;     // clean steps since the last change
  int64_t skipped_ = 0;  // steps skipped over the whole run
};

// For checkpoints and progress lines (the same on one device and in a pipeline).
LossScaleState loss_scale_state(LossScaler const& scaler);                 // scale 0 when disabled
void restore_loss_scale(LossScaler& scaler, LossScaleState const& state);  // no-op when either side has none
std::string loss_scale_note(LossScaler const& scaler);  // "  scale 32768 (1 step skipped)", "" when disabled

}  // namespace gp::exec
