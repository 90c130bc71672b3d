// Asynchronous host-to-device copies of pageable host memory through pinned staging buffers.
//
// A copy from pageable memory cannot overlap anything: the driver stages it and the caller must
// wait before the host buffer may be reused (the CUDA backend used to synchronize the compute
// stream after every such copy: the input batch and the labels of every micro-batch, so the GPU
// sat idle while the host prepared the next batch). Here the bytes are first copied on the host
// into a pinned slot, the DMA is enqueued on the stream, and an event recorded after it marks
// when the slot may be written again. The slots form a ring: a slot is reused only after its
// previous copy completed (the host waits on that event, which by then has long fired).
//
// Host-only bookkeeping (no CUDA header): the CUDA calls come in `StagingOps`, so host tests run
// the ring on fakes (tests/cuda/test_pinned_staging.cc). The CUDA backend supplies cudaHostAlloc,
// cudaMemcpyAsync on its compute stream and events (exec/cuda/cuda_device_ops.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "exec/tensor.h"

namespace gp::exec::cuda {

struct StagingOps {
  std::function<Result<void*>(std::size_t bytes)> host_alloc;  // pinned host memory
  std::function<void(void*)> host_free;
  // Enqueue a host-to-device copy from a pinned source on the stream (returns at once).
  std::function<Status(void* dst, void const* pinned_src, std::size_t bytes)> copy_async;
  std::function<Result<void*>()> event_create;
  std::function<Status(void* event)> event_record;      // on the stream, after the copy
  std::function<Status(void* event)> event_wait;        // the host waits for it
  std::function<Result<bool>(void* event)> event_done;  // has the stream passed it? (does not wait)
  std::function<void(void* event)> event_destroy;
};

class PinnedStaging {
 public:
  // `slots` buffers in the ring, together at most `max_bytes` of pinned memory.
  PinnedStaging(StagingOps ops, int slots = 4, std::size_t max_bytes = std::size_t{1} << 30);
  ~PinnedStaging();
  PinnedStaging(PinnedStaging const&) = delete;
  PinnedStaging& operator=(PinnedStaging const&) = delete;

  // Copies `bytes` from pageable host memory `src` to device memory `dst` asynchronously: `src`
  // may be reused as soon as this returns. False (nothing done) when the copy would take the ring
  // over its budget: the caller copies synchronously instead.
  Result<bool> copy_to_device(void* dst, void const* src, std::size_t bytes);

  std::size_t pinned_bytes() const;  // held by the ring now
  int64_t copies() const;            // staged copies so far

 private:
  struct Slot {
    void* buffer = nullptr;
    std::size_t capacity = 0;
    void* event = nullptr;
    bool in_flight = false;  // the event was recorded after a copy out of this slot
  };
  StagingOps ops_;
  std::size_t max_bytes_;
  mutable std::mutex mu_;  // one backend may be called from several threads (the profiler)
  std::vector<Slot> slots_;
  std::size_t next_ = 0;
  std::size_t held_ = 0;
  int64_t copies_ = 0;
};

// Pinned host memory for the tensors the data path fills (the trainer's prefetch thread makes
// each batch here), which the backend copies to the device directly: no host copy into the ring,
// no synchronisation. The DMA reads the block after the copy call returned, maybe after the
// tensor was freed, so a freed block is reused only once the stream has passed the point where it
// was freed (an event recorded then; in stream order, after every copy enqueued from it before).
// Past the budget, or when pinning fails, blocks come from pageable memory: they work as any host
// memory does (the backend stages them through the ring). Thread-safe: a batch is made on one
// thread and freed on another.
class PinnedHostPool final : public Allocator {
 public:
  explicit PinnedHostPool(StagingOps ops, std::size_t max_bytes = std::size_t{1} << 30);
  ~PinnedHostPool() override;  // waits for the copies still reading its blocks
  PinnedHostPool(PinnedHostPool const&) = delete;
  PinnedHostPool& operator=(PinnedHostPool const&) = delete;

  DeviceRef device() const override { return {DeviceKind::kCpu, 0}; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  int64_t bytes_in_use() const override;
  int64_t peak_bytes() const override;

  // [ptr, ptr + bytes) lies in one live pinned block (not a pageable fallback).
  bool pinned(void const* ptr, std::size_t bytes) const;
  std::size_t pinned_bytes() const;  // held (in use or cached)
  int64_t fallbacks() const;         // allocations served from pageable memory

 private:
  struct Block {
    std::size_t capacity = 0;
    void* event = nullptr;
    bool in_use = false;
    bool pending = false;  // freed; the event recorded then may not have fired yet
    bool lost = false;     // recording its event failed: never reused, only freed at the end
  };
  StagingOps ops_;
  std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::byte*, Block> blocks_;  // by start address
  std::set<void*> pageable_;
  std::size_t held_ = 0;
  int64_t in_use_ = 0, peak_ = 0, fallbacks_ = 0;
};

}  // namespace gp::exec::cuda
