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

PinnedHostPool::PinnedHostPool(StagingOps ops, std::size_t max_bytes) : ops_(std::move(ops)), max_bytes_(max_bytes) {}

PinnedHostPool::~PinnedHostPool() {
  for (auto& [ptr, b] : blocks_) {
    // Never free a buffer a DMA still reads (a block without an event: its owner synchronized the
    // stream before destroying the pool).
    if ((b.pending || b.lost) && b.event) (void)ops_.event_wait(b.event);
    if (b.event) ops_.event_destroy(b.event);
    ops_.host_free(ptr);
  }
}

void* PinnedHostPool::allocate(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> lock(mu_);
  auto count = [&](std::size_t n) {
    in_use_ += static_cast<int64_t>(n);
    peak_ = std::max(peak_, in_use_);
  };
  // The smallest free block that fits and is at most twice the size, once its copies are done.
  Block* best = nullptr;
  std::byte* best_ptr = nullptr;
  for (auto& [ptr, b] : blocks_) {
    if (b.in_use || b.lost || b.capacity < bytes || b.capacity > 2 * bytes) continue;
    if (best && best->capacity <= b.capacity) continue;
    if (b.pending) {
      auto done = ops_.event_done(b.event);
      if (!done.is_ok() || !*done) continue;
      b.pending = false;
    }
    best = &b;
    best_ptr = ptr;
  }
  if (best) {
    best->in_use = true;
    count(best->capacity);
    return best_ptr;
  }
  if (held_ + bytes <= max_bytes_) {
    if (auto p = ops_.host_alloc(bytes); p.is_ok()) {
      blocks_[static_cast<std::byte*>(*p)] = Block{bytes, nullptr, true, false, false};
      held_ += bytes;
      count(bytes);
      return *p;
    }
  }
  void* p = process_cpu_allocator().allocate(bytes);
  pageable_.insert(p);
  ++fallbacks_;
  count(bytes);
  return p;
}

void PinnedHostPool::deallocate(void* ptr, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> lock(mu_);
  if (pageable_.erase(ptr)) {
    process_cpu_allocator().deallocate(ptr, bytes);
    in_use_ -= static_cast<int64_t>(bytes);
    return;
  }
  auto it = blocks_.find(static_cast<std::byte*>(ptr));
  if (it == blocks_.end()) return;  // not ours: nothing to give back
  Block& b = it->second;
  b.in_use = false;
  in_use_ -= static_cast<int64_t>(b.capacity);
  if (!b.event) {
    if (auto e = ops_.event_create(); e.is_ok()) b.event = *e;
  }
  b.pending = b.event && ops_.event_record(b.event).is_ok();
  b.lost = !b.pending;  // no event: we cannot tell when the block's copies are done
}

int64_t PinnedHostPool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

int64_t PinnedHostPool::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

bool PinnedHostPool::pinned(void const* ptr, std::size_t bytes) const {
  auto const* p = static_cast<std::byte const*>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(const_cast<std::byte*>(p));
  if (it == blocks_.begin()) return false;
  --it;
  return it->second.in_use && p >= it->first && p + bytes <= it->first + it->second.capacity;
}

std::size_t PinnedHostPool::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

int64_t PinnedHostPool::fallbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fallbacks_;
}

}  // namespace gp::exec::cuda
