#include "exec/cuda/deferred_checks.h"

#include <utility>

namespace gp::exec::cuda {

DeferredChecks::DeferredChecks(Calls calls, std::size_t slots) : calls_(std::move(calls)), capacity_(slots) {}

Status DeferredChecks::queue(void const* verdict, ErrorFor error) {
  if (!calls_.copy_async || capacity_ == 0) return internal_error("deferred index checks without a device stream");
  if (capture_) {
    Captured& c = capture_->checks;
    if (c.errors.size() == capture_->capacity)
      return unsupported("more than " + std::to_string(capture_->capacity) +
                         " index checks in one captured piece of work (set cuda_graphs: false)");
    RETURN_IF_ERROR(calls_.copy_async(c.slots.get() + c.errors.size(), verdict));
    c.errors.push_back(std::move(error));
    return Status::ok();
  }
  if (!slots_) {
    ASSIGN_OR_RETURN(Verdict * p, calls_.host_alloc(capacity_));
    slots_ = std::unique_ptr<Verdict[], Free>(p, Free{calls_.host_free});
  }
  if (queued_here_ == capacity_) RETURN_IF_ERROR(resolve());
  Verdict* const slot = &slots_[queued_here_];
  RETURN_IF_ERROR(calls_.copy_async(slot, verdict));
  pending_.push_back({slot, std::move(error), nullptr});
  ++queued_here_;
  return Status::ok();
}

Status DeferredChecks::resolve() {
  if (pending_.empty()) return Status::ok();
  std::vector<Pending> const pending = std::exchange(pending_, {});
  queued_here_ = 0;
  RETURN_IF_ERROR(calls_.synchronize());
  for (Pending const& p : pending)
    if (p.slot->first_bad != kNoBadIndex) return p.error(*p.slot);
  return Status::ok();
}

Status DeferredChecks::begin_capture(std::size_t slots) {
  if (capture_) return internal_error("deferred index checks: a capture is already open");
  if (!calls_.host_alloc || slots == 0) return internal_error("deferred index checks without a device stream");
  ASSIGN_OR_RETURN(Verdict * p, calls_.host_alloc(slots));
  auto c = std::make_unique<Capture>();
  c->checks.slots = std::shared_ptr<Verdict>(p, Free{calls_.host_free});
  c->capacity = slots;
  capture_ = std::move(c);
  return Status::ok();
}

Result<DeferredChecks::Captured> DeferredChecks::end_capture() {
  if (!capture_) return internal_error("deferred index checks: no capture is open");
  Captured out = std::move(capture_->checks);
  capture_.reset();
  return out;
}

void DeferredChecks::adopt(Captured const& captured) {
  for (std::size_t i = 0; i < captured.errors.size(); ++i)
    pending_.push_back({captured.slots.get() + i, captured.errors[i], captured.slots});
}

}  // namespace gp::exec::cuda
