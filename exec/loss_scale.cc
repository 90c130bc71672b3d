#include "exec/loss_scale.h"

#include <cstdio>

namespace gp::exec {

LossScaler::LossScaler(LossScaleConfig const& config) : config_(config), scale_(config.init) {}

bool LossScaler::update(bool found_inf) {
  if (!enabled()) return !found_inf;
  if (found_inf) {
    scale_ *= config_.backoff_factor;
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= config_.growth_interval) {
    scale_ *= config_.growth_factor;
    good_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t good_steps, int64_t skipped_steps) {
  scale_ = scale;
  good_ = good_steps;
  skipped_ = skipped_steps;
}

LossScaleState loss_scale_state(LossScaler const& scaler) {
  if (!scaler.enabled()) return {};
  return {scaler.scale(), scaler.good_steps(), scaler.skipped_steps()};
}

void restore_loss_scale(LossScaler& scaler, LossScaleState const& state) {
  if (scaler.enabled() && state.scale > 0) scaler.restore(state.scale, state.good_steps, state.skipped_steps);
}

std::string loss_scale_note(LossScaler const& scaler) {
  if (!scaler.enabled()) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "  scale %g (%lld step%s skipped)", scaler.scale(),
                static_cast<long long>(scaler.skipped_steps()), scaler.skipped_steps() == 1 ? "" : "s");
  return buf;
}

}  // namespace gp::exec
