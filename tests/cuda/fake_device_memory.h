// A fake RawDeviceMemory for the caching allocator's tests (tests/cuda/test_caching_allocator.cc):
// host memory stands in for the device, events complete when the test says so, and counters show
// every raw malloc/free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "exec/cuda/caching_allocator.h"

namespace gp::exec::cuda::testing {

class FakeDeviceMemory final : public RawDeviceMemory {
 public:
  explicit FakeDeviceMemory(std::size_t capacity = 0) : capacity_(capacity) {}
  ~FakeDeviceMemory() override {
    for (auto const& [ptr, size] : live_) std::free(ptr);
  }

  Result<void*> malloc(std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ != 0 && used_ + bytes > capacity_) {
      ++failed_mallocs_;
      return infeasible("fake cudaMalloc: out of memory");
    }
    void* p = std::malloc(bytes);
    if (p == nullptr) return internal_error("fake cudaMalloc: host malloc failed");
    live_[p] = bytes;
    used_ += bytes;
    ++mallocs_;
    malloc_sizes_.push_back(bytes);
    return p;
  }
  Status free(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return internal_error("fake cudaFree of an unknown pointer");
    used_ -= it->second;
    live_.erase(it);
    std::free(ptr);
    ++frees_;
    return Status::ok();
  }
  Result<EventId> record_event(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_record_) return internal_error("fake cudaEventRecord failed");
    EventId const id = next_event_++;
    events_[id] = Event{stream, false};
    return id;
  }
  Result<bool> event_done(EventId event) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = events_.find(event);
    if (it == events_.end()) return internal_error("fake cudaEventQuery of an unknown event");
    return it->second.done;
  }
  Status destroy_event(EventId event) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.erase(event) == 0) return internal_error("fake cudaEventDestroy of an unknown event");
    return Status::ok();
  }
  Status synchronize_device() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++syncs_;
    for (auto& [id, e] : events_) e.done = true;
    return Status::ok();
  }
  Status zero(void* ptr, std::size_t n, StreamId) override {
    RETURN_IF_ERROR(check_device(ptr, n));
    std::memset(ptr, 0, n);
    return Status::ok();
  }
  Status copy_to_host(void* host_dst, void const* src, std::size_t n, StreamId) override {
    RETURN_IF_ERROR(check_device(src, n));
    count(host_copies_);
    std::memcpy(host_dst, src, n);
    return Status::ok();
  }
  Status copy_from_host(void* dst, void const* host_src, std::size_t n, StreamId) override {
    RETURN_IF_ERROR(check_device(dst, n));
    count(host_copies_);
    std::memcpy(dst, host_src, n);
    return Status::ok();
  }
  Status copy_within(void* dst, void const* src, std::size_t n, StreamId) override {
    RETURN_IF_ERROR(check_device(dst, n));
    RETURN_IF_ERROR(check_device(src, n));
    std::memcpy(dst, src, n);
    return Status::ok();
  }
  // The source lives in another fake's memory (host memory too), which this one cannot check.
  Status copy_from_peer(void* dst, void const* src, int src_device, std::size_t n, StreamId) override {
    RETURN_IF_ERROR(check_device(dst, n));
    count(peer_copies_);
    std::lock_guard<std::mutex> lock(mu_);
    peer_sources_.push_back(src_device);
    std::memcpy(dst, src, n);
    return Status::ok();
  }

  Status synchronize_stream(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stream_syncs_;
    for (auto& [id, e] : events_)
      if (e.stream == stream) e.done = true;
    return Status::ok();
  }

  // Completes every event recorded on `stream` so far, as when the stream has run past them.
  void complete_stream(StreamId stream) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : events_) {
      if (e.stream == stream) e.done = true;
    }
  }
  void complete_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : events_) e.done = true;
  }
  void set_fail_record(bool fail) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_record_ = fail;
  }

  int64_t mallocs() const { return locked(mallocs_); }
  int64_t frees() const { return locked(frees_); }
  int64_t failed_mallocs() const { return locked(failed_mallocs_); }
  int64_t syncs() const { return locked(syncs_); }
  std::size_t used() const { return locked(used_); }
  std::size_t live_segments() const { return locked(live_.size()); }
  std::size_t live_events() const { return locked(events_.size()); }
  std::vector<std::size_t> malloc_sizes() const { return locked(malloc_sizes_); }
  int64_t host_copies() const { return locked(host_copies_); }  // copy_to_host and copy_from_host calls
  int64_t peer_copies() const { return locked(peer_copies_); }
  int64_t stream_syncs() const { return locked(stream_syncs_); }
  std::vector<int> peer_sources() const { return locked(peer_sources_); }

 private:
  struct Event {
    StreamId stream = 0;
    bool done = false;
  };
  template <typename T>
  T locked(T const& v) const {
    std::lock_guard<std::mutex> lock(mu_);
    return v;
  }
  Status check_device(void const* p, std::size_t n) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto const* c = static_cast<char const*>(p);
    auto it = live_.upper_bound(const_cast<void*>(p));
    if (it != live_.begin()) {
      --it;
      auto const* base = static_cast<char const*>(it->first);
      if (c >= base && c + n <= base + it->second) return Status::ok();
    }
    return internal_error("fake byte move outside device memory");
  }

  void count(int64_t& counter) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counter;
  }

  std::size_t capacity_;
  mutable std::mutex mu_;
  std::map<void*, std::size_t> live_;
  std::size_t used_ = 0;
  int64_t mallocs_ = 0, frees_ = 0, failed_mallocs_ = 0, syncs_ = 0, host_copies_ = 0, peer_copies_ = 0,
          stream_syncs_ = 0;
  std::vector<int> peer_sources_;
  std::vector<std::size_t> malloc_sizes_;
  std::map<EventId, Event> events_;
  EventId next_event_ = 1;
  bool fail_record_ = false;
};

}  // namespace gp::exec::cuda::testing
