#include "exec/cuda/plan_key.h"

namespace gp::exec::cuda {

char const* plan_kind_name(PlanKind kind) {
  switch (kind) {
    case PlanKind::kConvFprop:
      return "conv_fprop";
    case PlanKind::kConvDgrad:
      return "conv_dgrad";
    case PlanKind::kConvWgrad:
      return "conv_wgrad";
    case PlanKind::kBatchNormTrain:
      return "bn_train";
    case PlanKind::kBatchNormInfer:
      return "bn_infer";
    case PlanKind::kBatchNormBackward:
      return "bn_bwd";
    case PlanKind::kMatmul:
      return "matmul";
  }
  return "?";
}

std::string PlanKey::describe() const {
  std::string out = plan_kind_name(kind_);
  for (int64_t v : values_.values()) {
    out += ' ';
    out += std::to_string(v);
  }
  return out;
}

Status VariantPack::bind(std::initializer_list<void*> ptrs) {
  if (ptrs.size() != map_.size())
    return internal_error(std::to_string(ptrs.size()) + " tensors bound to a graph of " + std::to_string(map_.size()));
  int64_t uid = 1;
  for (void* p : ptrs) {
    if (p == nullptr) return internal_error("tensor " + std::to_string(uid - 1) + " is unbound");
    ++uid;
  }
  uid = 1;
  for (void* p : ptrs) map_.find(uid++)->second = p;
  return Status::ok();
}

}  // namespace gp::exec::cuda
