// What a backend needs to know of a training configuration (Backend::loss, optimizer_update): the
// loss and the optimizer, in a header of their own so that the backend interface does not depend on
// the training configuration (exec/train_config.h).
#pragma once

#include <cstdint>

namespace gp::exec {

enum class LossKind : uint8_t { kCrossEntropy, kMse };
char const* loss_kind_name(LossKind kind);

enum class OptimizerKind : uint8_t { kSgd, kAdam, kAdamW };
char const* optimizer_kind_name(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.01f;
  float momentum = 0.f;
  float weight_decay = 0.f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

}  // namespace gp::exec
