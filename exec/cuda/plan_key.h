// The key of a cached plan (a cuDNN graph, a cuBLASLt matmul): what kind of plan, on which
// device, for which data type, and the integers that pick it (dims, leading dimensions, conv
// parameters, alignments), compared and hashed as one short array. Every Conv, BatchNormalization
// and Gemm call looks its plan up by one, so it is built without a heap allocation (the values
// sit inline) and without formatting text; text is made from a key only on a miss (describe():
// the plan's file on disk, debug lines). The string keys it replaced cost a ResNet-50 conv call
// 1.25 us of host time against 0.11 us now (bench/plan_keys). Host-only (no CUDA header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "core/int_key.h"
#include "core/status.h"

namespace gp::exec::cuda {

enum class PlanKind : uint8_t {
  kConvFprop,
  kConvDgrad,
  kConvWgrad,
  kBatchNormTrain,
  kBatchNormInfer,
  kBatchNormBackward,
  kMatmul,
};
char const* plan_kind_name(PlanKind kind);  // "conv_fprop", ...

class PlanKey {
 public:
  PlanKey(PlanKind kind, int device, int64_t dtype) : kind_(kind), device_(device) { values_.add(dtype); }

  PlanKey& add(int64_t v) {
    values_.add(v);
    return *this;
  }
  // A list as its length, then its values: [1,2] then [3] is not [1] then [2,3].
  PlanKey& add_list(std::span<int64_t const> v) {
    values_.add_list(v);
    return *this;
  }

  PlanKind kind() const { return kind_; }
  int device() const { return device_; }
  std::size_t hash() const {
    return values_.hash((static_cast<uint64_t>(kind_) << 32) ^ static_cast<uint32_t>(device_));
  }
  // "conv_fprop 0 4 8 3 32 32 ..." (the kind, the data type, the values), without the device:
  // the same plan on two GPUs of one model is one file on disk.
  std::string describe() const;

  friend bool operator==(PlanKey const& a, PlanKey const& b) {
    return a.kind_ == b.kind_ && a.device_ == b.device_ && a.values_ == b.values_;
  }

 private:
  PlanKind kind_;
  int device_;
  IntKey values_;  // the data type first; a conv uses ~35
};

struct PlanKeyHash {
  std::size_t operator()(PlanKey const& k) const noexcept { return k.hash(); }
};

// A cuDNN plan's variant pack: its tensors, uids 1..size in the order the graph was built with,
// bound to device pointers. Made once with the plan; each call rebinds every pointer in place
// (no allocation), checking first that it binds them all: cudnn-frontend's execute() would
// otherwise run on the previous call's pointers, or fail deep inside cuDNN.
class VariantPack {
 public:
  explicit VariantPack(std::size_t size) {
    for (std::size_t uid = 1; uid <= size; ++uid) map_.emplace(static_cast<int64_t>(uid), nullptr);
  }
  // kInternal when ptrs has another length than the pack or holds a null (nothing is rebound).
  Status bind(std::initializer_list<void*> ptrs);
  std::unordered_map<int64_t, void*>& map() { return map_; }  // what execute() takes
  std::size_t size() const { return map_.size(); }

 private:
  std::unordered_map<int64_t, void*> map_;
};

// A thread's plans of one kind of library object.
template <typename Entry>
using PlanCache = std::unordered_map<PlanKey, std::unique_ptr<Entry>, PlanKeyHash>;

}  // namespace gp::exec::cuda
