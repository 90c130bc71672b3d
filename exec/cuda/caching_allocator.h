// The CUDA backend's stream-aware caching allocator: device memory is taken from the runtime in
// segments and kept, so that a training step after the first makes no cudaMalloc/cudaFree (both
// synchronise the device). Host-only: it talks to the runtime through RawDeviceMemory, so the
// bookkeeping builds and is tested everywhere (sanitizers included) on a fake heap.
//
// The scheme is PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), reduced:
// - Every request is rounded up to a multiple of 512 B (a request of 0 B gets 512 B, so every
//   tensor has its own non-null address).
// - Small pool: rounded requests <= 1 MiB, carved from 2 MiB segments. Large pool: the rest;
//   rounded requests up to 10 MiB are cut from 20 MiB segments, larger ones get a segment of the
//   request rounded up to 2 MiB.
// - Best fit: the free block of the request's pool and stream with the smallest size, then the
//   lowest address. A block is split when the rest is worth keeping (small pool: >= 512 B; large
//   pool: > 1 MiB); a freed block merges with free neighbours of its segment.
// - A block belongs to the stream it was allocated on and is reused only by that stream, which
//   orders reuse after the last use without a wait. A use on another stream must be declared with
//   record_stream(); freeing such a block records an event on each of those streams and keeps the
//   block out of the pools until all of them are done (polled on later allocations and by
//   process_events()).
// - On a raw out-of-memory: wait for pending events if any (a block they release may fit), then
//   free every fully free cached segment and retry once; only then fail, naming the request, the
//   bytes in use and reserved, and the limit. set_memory_limit() makes any reservation beyond it
//   an out-of-memory, which is how a plan's per-device memory limit is enforced.
// - Captured work (CUDA graphs): between begin_capture(stream) and end_capture(), what `stream`
//   allocates comes from a private pool, kept for replays of what was captured: its blocks are
//   reused only by later captures (which replay on the same stream, one after another, never
//   beside each other) and its segments are never returned to the runtime. A capture is sound
//   only if everything it allocated is freed before it ends (its replays reuse those addresses)
//   and it frees nothing allocated outside it (the pools would hand that memory out again while
//   replays still use it); end_capture() checks both. During a capture nothing waits: pending
//   events are not polled and a pool miss reserves a segment without the retries.
// Not modelled: expandable segments, max_split_size, garbage collection.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/status.h"
#include "exec/tensor.h"

namespace gp::exec::cuda {

using StreamId = std::uintptr_t;  // a cudaStream_t as an integer; 0 is the legacy default stream
using EventId = std::uintptr_t;   // a cudaEvent_t as an integer

// What the allocator needs from a device runtime (one device). Byte moves are synchronous:
// enqueued on `stream`, so they follow work already queued there, then waited for.
class RawDeviceMemory {
 public:
  virtual ~RawDeviceMemory() = default;
  virtual Result<void*> malloc(std::size_t bytes) = 0;  // out of memory: kInfeasible
  virtual Status free(void* ptr) = 0;
  virtual Result<EventId> record_event(StreamId stream) = 0;
  virtual Result<bool> event_done(EventId event) = 0;
  virtual Status destroy_event(EventId event) = 0;
  virtual Status synchronize_device() = 0;

  virtual Status zero(void* ptr, std::size_t n, StreamId stream) = 0;
  virtual Status copy_to_host(void* host_dst, void const* src, std::size_t n, StreamId stream) = 0;
  virtual Status copy_from_host(void* dst, void const* host_src, std::size_t n, StreamId stream) = 0;
  virtual Status copy_within(void* dst, void const* src, std::size_t n, StreamId stream) = 0;
  // Into this device's memory from another device's (`src_device`, same runtime).
  virtual Status copy_from_peer(void* dst, void const* src, int src_device, std::size_t n, StreamId stream) = 0;
  // Waits for the work queued on `stream` so far.
  virtual Status synchronize_stream(StreamId stream) = 0;
};

struct CachingAllocatorStats {
  int64_t bytes_in_use = 0;     // sum of the requested sizes of live allocations
  int64_t bytes_allocated = 0;  // the same allocations' block sizes (rounded, split)
  int64_t bytes_reserved = 0;   // sum of the segments taken from the runtime
  int64_t peak_bytes_in_use = 0;
  int64_t peak_bytes_reserved = 0;
  int64_t raw_mallocs = 0;
  int64_t raw_frees = 0;
  int64_t allocations = 0;  // successful malloc() calls
  int64_t cache_hits = 0;   // of those, served from a pool without a raw malloc
  int64_t out_of_memory = 0;
  int64_t segments = 0;
  int64_t pending_events = 0;  // events still guarding freed blocks
};

// One device's caching allocator, and the exec::Allocator its tensors come from. Thread-safe
// (one mutex): a pipeline worker allocates on its compute stream while tensors it handed over may
// be freed on another thread. `raw` must outlive it.
class CachingAllocator final : public Allocator {
 public:
  static constexpr std::size_t kMinBlockSize = 512;
  static constexpr std::size_t kSmallSize = std::size_t{1} << 20;       // largest small-pool request
  static constexpr std::size_t kSmallBuffer = std::size_t{2} << 20;     // small-pool segment
  static constexpr std::size_t kLargeBuffer = std::size_t{20} << 20;    // segment for 1-10 MiB requests
  static constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;  // from here, own segments
  static constexpr std::size_t kRoundLarge = std::size_t{2} << 20;      // their rounding

  CachingAllocator(RawDeviceMemory& raw, int device_index);
  ~CachingAllocator() override;  // waits for pending events, returns every segment to the runtime
  CachingAllocator(CachingAllocator const&) = delete;
  CachingAllocator& operator=(CachingAllocator const&) = delete;

  static std::size_t round_size(std::size_t bytes);
  static std::size_t segment_size(std::size_t rounded);  // the segment a pool miss reserves
  static bool is_small(std::size_t rounded) { return rounded <= kSmallSize; }

  // Status-returning core.
  Result<void*> malloc(std::size_t bytes, StreamId stream);
  Status free(void* ptr);
  Status record_stream(void* ptr, StreamId stream);  // `ptr` is in use on `stream` too
  Status process_events();                           // returns blocks whose events are all done
  Status empty_cache();  // waits for pending events, then frees every segment with nothing in use
  // The private pool for work captured on `stream` (see above). begin_capture fails while another
  // capture is open or a tensor of an earlier one is still alive; end_capture always ends the
  // capture and fails, naming it, when the capture left a tensor alive or freed one made before it.
  Status begin_capture(StreamId stream);
  Status end_capture();
  bool capturing() const;
  void set_memory_limit(std::size_t bytes);  // reserved bytes may not exceed it; 0 = no limit
  std::size_t memory_limit() const;
  CachingAllocatorStats stats() const;
  void reset_peak() override;  // peaks := current values

  // exec::Allocator. allocate() cannot return a Status (Tensor's constructor calls it, and the
  // CPU allocator reports failure the same way), so an out-of-memory throws std::bad_alloc after
  // storing the descriptive message for last_error(); the backend turns it into a Status. A bad
  // deallocate (called from a destructor) is stored there too. The byte moves run on the default
  // stream and throw std::runtime_error with the runtime's message, as tensor.h asks.
  void set_default_stream(StreamId stream) { default_stream_.store(stream); }
  StreamId default_stream() const { return default_stream_.load(); }
  std::string last_error() const;

  DeviceRef device() const override { return {DeviceKind::kCuda, device_index_}; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  int64_t bytes_in_use() const override;
  int64_t peak_bytes() const override;
  void zero_bytes(void* ptr, std::size_t n) override;
  void copy_to_host(void* host_dst, void const* src, std::size_t n) override;
  void copy_from_host(void* dst, void const* host_src, std::size_t n) override;
  void copy_within(void* dst, void const* src, std::size_t n) override;
  // From another GPU's caching allocator: once the source's default stream has run its queued work
  // (the kernels that wrote the bytes), a peer copy on this one's (over NVLink or PCIe where the two
  // can reach each other), never through host memory; false for any other source.
  bool copy_from_peer(void* dst, Allocator& from, void const* src, std::size_t n) override;

 private:
  struct Block {
    std::size_t size = 0;
    std::size_t requested = 0;  // live allocations only
    char* ptr = nullptr;
    StreamId stream = 0;
    bool small = false;
    bool allocated = false;  // handed out, or freed but waiting for events
    bool captured = false;   // in the private pool of captured work
    Block* prev = nullptr;   // neighbours in the same segment
    Block* next = nullptr;
    std::vector<StreamId> stream_uses;
    int pending_events = 0;
  };
  // Pools are ordered by (captured, stream, size, address): lower_bound finds the best fit for a
  // stream, inside or outside the private pool.
  struct BlockOrder {
    bool operator()(Block const* a, Block const* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  Pool& pool_of(bool small) { return small ? small_pool_ : large_pool_; }
  Block* take_free_block(bool small, StreamId stream, std::size_t size, bool captured);
  Result<Block*> reserve_segment(bool small, StreamId stream, std::size_t size, bool captured);
  Status release_free_segments();
  Status wait_for_pending_events();
  Status process_events_locked();
  void return_block(Block* block);  // into its pool, merged with free neighbours
  Status out_of_memory(std::size_t bytes, StreamId stream, Status const& cause) const;
  void raise_peaks();
  void throw_if_error(Status const& status, char const* hook) const;

  RawDeviceMemory& raw_;
  int const device_index_;
  std::atomic<StreamId> default_stream_{0};

  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;
  std::unordered_map<void*, Block*> allocated_;
  std::unordered_set<Block*> segments_;  // first block of each segment (never merged away)
  std::vector<std::pair<EventId, Block*>> pending_;
  std::size_t limit_ = 0;
  CachingAllocatorStats stats_;
  std::optional<StreamId> capture_stream_;  // the stream of the open capture
  int64_t captured_live_ = 0;               // live allocations of the private pool
  std::string capture_hazard_;              // the first thing that makes the open capture unsound
  std::string last_error_;
};

}  // namespace gp::exec::cuda
