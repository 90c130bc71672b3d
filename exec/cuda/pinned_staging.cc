#include "exec/cuda/pinned_staging.h"

#include <algorithm>
#include <cstring>

namespace gp::exec::cuda {

PinnedStaging::PinnedStaging(StagingOps ops, int slots, std::size_t max_bytes)
    : ops_(std::move(ops)), max_bytes_(max_bytes), slots_(static_cast<std::size_t>(std::max(slots, 1))) {}

PinnedStaging::~PinnedStaging() {
  for (Slot& s : slots_) {
    if (s.in_flight) (void)ops_.event_wait(s.event);  // never free a buffer a DMA still reads
    if (s.event) ops_.event_destroy(s.event);
    if (s.buffer) ops_.host_free(s.buffer);
  }
}

Result<bool> PinnedStaging::copy_to_device(void* dst, void const* src, std::size_t bytes) {
  if (bytes == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[next_];
  if (s.in_flight) {  // its previous copy must be done before the slot is written again
    RETURN_IF_ERROR(ops_.event_wait(s.event));
    s.in_flight = false;
  }
  if (s.capacity < bytes) {
    if (held_ - s.capacity + bytes > max_bytes_) return false;
    if (s.buffer) ops_.host_free(s.buffer);
    held_ -= s.capacity;
    s.buffer = nullptr;
    s.capacity = 0;
    ASSIGN_OR_RETURN(s.buffer, ops_.host_alloc(bytes));
    s.capacity = bytes;
    held_ += bytes;
  }
  if (!s.event) {
    ASSIGN_OR_RETURN(s.event, ops_.event_create());
  }
  std::memcpy(s.buffer, src, bytes);
  RETURN_IF_ERROR(ops_.copy_async(dst, s.buffer, bytes));
  RETURN_IF_ERROR(ops_.event_record(s.event));
  s.in_flight = true;
  next_ = (next_ + 1) % slots_.size();
  ++copies_;
  return true;
}

std::size_t PinnedStaging::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

int64_t PinnedStaging::copies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return copies_;
}

}  // namespace gp::exec::cuda
