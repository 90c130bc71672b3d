#include "exec/cuda/deferred_checks.h"

#include <utility>

namespace gp::exec::cuda {

DeferredChecks::DeferredChecks(Calls calls, std::size_t slots) : calls_(std::move(calls)), capacity_(slots) {}

Status DeferredChecks::queue(void const* flag, ErrorFor error) {
  if (!calls_.copy_async || capacity_ == 0) return internal_error("deferred index checks without a device stream");
  if (!slots_) {
    ASSIGN_OR_RETURN(uint64_t * p, calls_.host_alloc(capacity_));
    slots_ = std::unique_ptr<uint64_t[], Free>(p, Free{calls_.host_free});
  }
  if (pending_.size() == capacity_) RETURN_IF_ERROR(resolve());
  RETURN_IF_ERROR(calls_.copy_async(&slots_[pending_.size()], flag));
  pending_.push_back(std::move(error));
  return Status::ok();
}

Status DeferredChecks::resolve() {
  if (pending_.empty()) return Status::ok();
  std::vector<ErrorFor> const pending = std::exchange(pending_, {});
  RETURN_IF_ERROR(calls_.synchronize());
  for (std::size_t i = 0; i < pending.size(); ++i)
    if (slots_[i] != kNoBadIndex) return pending[i](slots_[i]);
  return Status::ok();
}

}  // namespace gp::exec::cuda
