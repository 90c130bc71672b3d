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

std::size_t PlanKey::hash() const {
  // FNV-1a's offset and prime over whole 64-bit words, each word first mixed (splitmix64's
  // finalizer) so that small integers differing in one bit spread over the table.
  uint64_t h = 0xcbf29ce484222325ull ^ (static_cast<uint64_t>(kind_) << 32) ^ static_cast<uint32_t>(device_);
  for (int64_t v : values_) {
    uint64_t x = static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    h = (h ^ x) * 0x100000001b3ull;
  }
  return static_cast<std::size_t>(h);
}

std::string PlanKey::describe() const {
  std::string out = plan_kind_name(kind_);
  for (int64_t v : values_) {
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
