#include "exec/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <new>
#include <stdexcept>
#include <utility>

namespace gp::exec::cuda {
namespace {

// Larger requests cannot be rounded without overflow and exceed any device anyway.
constexpr std::size_t kMaxRequest = std::size_t{1} << 60;

std::string mib(std::size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

bool CachingAllocator::BlockOrder::operator()(Block const* a, Block const* b) const {
  if (a->captured != b->captured) return b->captured;
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingAllocator::CachingAllocator(RawDeviceMemory& raw, int device_index) : raw_(raw), device_index_(device_index) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  // Errors cannot be reported from here; the device is being torn down anyway.
  if (!pending_.empty()) (void)raw_.synchronize_device();
  for (auto const& [event, block] : pending_) (void)raw_.destroy_event(event);
  pending_.clear();
  for (Block* head : segments_) {
    (void)raw_.free(head->ptr);
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
  segments_.clear();
}

std::size_t CachingAllocator::round_size(std::size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

std::size_t CachingAllocator::segment_size(std::size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocator::Block* CachingAllocator::take_free_block(bool small, StreamId stream, std::size_t size,
                                                           bool captured) {
  Pool& pool = pool_of(small);
  Block key;
  key.stream = stream;
  key.size = size;
  key.captured = captured;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream || (*it)->captured != captured) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

Result<CachingAllocator::Block*> CachingAllocator::reserve_segment(bool small, StreamId stream, std::size_t size,
                                                                   bool captured) {
  if (limit_ != 0 && static_cast<std::size_t>(stats_.bytes_reserved) + size > limit_) {
    return infeasible("reserving a " + mib(size) + " segment would exceed the device's memory limit of " + mib(limit_) +
                      " (" + mib(static_cast<std::size_t>(stats_.bytes_reserved)) + " reserved)");
  }
  ASSIGN_OR_RETURN(void* ptr, raw_.malloc(size));
  auto* block = new Block;
  block->size = size;
  block->ptr = static_cast<char*>(ptr);
  block->stream = stream;
  block->small = small;
  block->captured = captured;
  segments_.insert(block);
  stats_.bytes_reserved += static_cast<int64_t>(size);
  ++stats_.raw_mallocs;
  ++stats_.segments;
  raise_peaks();
  return block;
}

Status CachingAllocator::release_free_segments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr || b->captured) {  // captured work's memory stays
        ++it;
        continue;
      }
      RETURN_IF_ERROR(raw_.free(b->ptr).with_context("CachingAllocator on cuda:" + std::to_string(device_index_) +
                                                     ": freeing a cached segment of " + mib(b->size)));
      it = pool->erase(it);
      stats_.bytes_reserved -= static_cast<int64_t>(b->size);
      ++stats_.raw_frees;
      --stats_.segments;
      segments_.erase(b);
      delete b;
    }
  }
  return Status::ok();
}

Status CachingAllocator::wait_for_pending_events() {
  RETURN_IF_ERROR(raw_.synchronize_device());
  return process_events_locked();
}

Status CachingAllocator::process_events_locked() {
  Status status;
  std::size_t keep = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    auto const [event, block] = pending_[i];
    if (status.is_ok()) {
      Result<bool> done = raw_.event_done(event);
      if (!done.is_ok()) {
        status = done.status();
      } else if (*done) {
        status = raw_.destroy_event(event);  // the event is done either way: release its block
        if (--block->pending_events == 0) return_block(block);
        continue;
      }
    }
    pending_[keep++] = pending_[i];
  }
  pending_.resize(keep);
  stats_.pending_events = static_cast<int64_t>(keep);
  return status;
}

void CachingAllocator::return_block(Block* block) {
  Pool& pool = pool_of(block->small);
  block->allocated = false;
  block->stream_uses.clear();
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  // Merge into the previous block, so that a segment's first block lives as long as the segment.
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    delete block;
    block = prev;
  }
  pool.insert(block);
}

void CachingAllocator::raise_peaks() {
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
}

Status CachingAllocator::out_of_memory(std::size_t bytes, StreamId stream, Status const& cause) const {
  std::string msg = "CUDA out of memory on cuda:" + std::to_string(device_index_) + ": allocating " + mib(bytes) +
                    " (" + std::to_string(bytes) + " B) on stream " + hex(stream) +
                    " failed after freeing the cache and retrying; " +
                    mib(static_cast<std::size_t>(stats_.bytes_in_use)) + " in use, " +
                    mib(static_cast<std::size_t>(stats_.bytes_reserved)) + " reserved, device limit " +
                    (limit_ != 0 ? mib(limit_) : std::string("none")) + ": " + cause.message();
  return infeasible(std::move(msg));
}

Result<void*> CachingAllocator::malloc(std::size_t bytes, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > kMaxRequest) {
    ++stats_.out_of_memory;
    return out_of_memory(bytes, stream, infeasible("the request exceeds any device"));
  }
  bool const captured = capture_stream_ && *capture_stream_ == stream;
  // An open capture waits for nothing (the stream's work is being recorded, not run).
  if (!capture_stream_) RETURN_IF_ERROR(process_events_locked());
  std::size_t const size = round_size(bytes);
  bool const small = is_small(size);
  Block* block = take_free_block(small, stream, size, captured);
  if (block == nullptr) {
    std::size_t const segment = segment_size(size);
    Result<Block*> reserved = reserve_segment(small, stream, segment, captured);
    if (!reserved.is_ok() && reserved.status().code() == StatusCode::kInfeasible && !capture_stream_) {
      if (!pending_.empty()) {
        RETURN_IF_ERROR(wait_for_pending_events());
        block = take_free_block(small, stream, size, captured);
      }
      if (block == nullptr) {
        RETURN_IF_ERROR(release_free_segments());
        reserved = reserve_segment(small, stream, segment, captured);
      }
    }
    if (block == nullptr) {
      if (!reserved.is_ok()) {
        if (reserved.status().code() != StatusCode::kInfeasible) {
          return reserved.status().with_context("CachingAllocator on cuda:" + std::to_string(device_index_));
        }
        ++stats_.out_of_memory;
        return out_of_memory(bytes, stream, reserved.status());
      }
      block = *reserved;
    } else {
      ++stats_.cache_hits;
    }
  } else {
    ++stats_.cache_hits;
  }

  std::size_t const rest = block->size - size;
  if (block->small ? rest >= kMinBlockSize : rest > kSmallSize) {
    auto* tail = new Block;
    tail->size = rest;
    tail->ptr = block->ptr + size;
    tail->stream = block->stream;
    tail->small = block->small;
    tail->captured = block->captured;
    tail->prev = block;
    tail->next = block->next;
    if (tail->next != nullptr) tail->next->prev = tail;
    block->next = tail;
    block->size = size;
    pool_of(tail->small).insert(tail);
  }
  block->allocated = true;
  block->requested = bytes;
  allocated_[block->ptr] = block;
  if (block->captured) ++captured_live_;
  stats_.bytes_in_use += static_cast<int64_t>(bytes);
  stats_.bytes_allocated += static_cast<int64_t>(block->size);
  ++stats_.allocations;
  raise_peaks();
  return static_cast<void*>(block->ptr);
}

Status CachingAllocator::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) {
    return invalid_argument("CachingAllocator::free on cuda:" + std::to_string(device_index_) + ": pointer " +
                            hex(reinterpret_cast<std::uintptr_t>(ptr)) +
                            " was not allocated here or was already freed");
  }
  Block* block = it->second;
  allocated_.erase(it);
  if (block->captured) --captured_live_;
  if (capture_stream_ && capture_hazard_.empty()) {
    if (!block->captured)
      capture_hazard_ = "it freed a tensor of " + mib(block->requested) +
                        " made before it (its replays would use memory the allocator hands out again)";
    else if (!block->stream_uses.empty())
      capture_hazard_ = "it freed a tensor of " + mib(block->requested) + " used on another stream";
  }
  stats_.bytes_in_use -= static_cast<int64_t>(block->requested);
  stats_.bytes_allocated -= static_cast<int64_t>(block->size);
  block->requested = 0;
  if (block->stream_uses.empty()) {
    return_block(block);
    return Status::ok();
  }
  std::size_t const first = pending_.size();
  for (StreamId s : block->stream_uses) {
    Result<EventId> event = raw_.record_event(s);
    if (!event.is_ok()) {
      // Without an event on every stream that used it, the block is never safe to reuse: keep it
      // out of the pools until the allocator is destroyed.
      for (std::size_t i = first; i < pending_.size(); ++i) (void)raw_.destroy_event(pending_[i].first);
      pending_.resize(first);
      block->pending_events = 0;
      stats_.pending_events = static_cast<int64_t>(pending_.size());
      return event.status().with_context("CachingAllocator::free on cuda:" + std::to_string(device_index_) +
                                         ": recording an event on stream " + hex(s));
    }
    pending_.emplace_back(*event, block);
    ++block->pending_events;
  }
  block->stream_uses.clear();
  stats_.pending_events = static_cast<int64_t>(pending_.size());
  return Status::ok();
}

Status CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) {
    return invalid_argument("CachingAllocator::record_stream on cuda:" + std::to_string(device_index_) + ": pointer " +
                            hex(reinterpret_cast<std::uintptr_t>(ptr)) + " is not a live allocation");
  }
  Block* block = it->second;
  if (stream == block->stream) return Status::ok();
  for (StreamId s : block->stream_uses) {
    if (s == stream) return Status::ok();
  }
  block->stream_uses.push_back(stream);
  return Status::ok();
}

Status CachingAllocator::process_events() {
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_stream_) return Status::ok();  // nothing is polled while work is being recorded
  return process_events_locked();
}

Status CachingAllocator::begin_capture(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_stream_)
    return internal_error("CachingAllocator on cuda:" + std::to_string(device_index_) +
                          ": a capture is already open on stream " + hex(*capture_stream_));
  if (captured_live_ != 0)
    return internal_error("CachingAllocator on cuda:" + std::to_string(device_index_) + ": " +
                          std::to_string(captured_live_) +
                          " tensor(s) of an earlier capture are still alive; a new capture would reuse their memory");
  capture_stream_ = stream;
  capture_hazard_.clear();
  return Status::ok();
}

Status CachingAllocator::end_capture() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!capture_stream_)
    return internal_error("CachingAllocator on cuda:" + std::to_string(device_index_) + ": no capture is open");
  capture_stream_.reset();
  std::string const hazard = std::exchange(capture_hazard_, {});
  if (!hazard.empty()) return unsupported("the captured work is unsound: " + hazard);
  if (captured_live_ != 0)
    return unsupported("the captured work is unsound: " + std::to_string(captured_live_) +
                       " tensor(s) it made outlive it (its replays would overwrite them)");
  return Status::ok();
}

bool CachingAllocator::capturing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capture_stream_.has_value();
}

Status CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) RETURN_IF_ERROR(wait_for_pending_events());
  return release_free_segments();
}

void CachingAllocator::set_memory_limit(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

std::size_t CachingAllocator::memory_limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
  stats_.peak_bytes_reserved = stats_.bytes_reserved;
}

std::string CachingAllocator::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  Result<void*> ptr = malloc(bytes, default_stream());
  if (!ptr.is_ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_ = ptr.status().to_string();
    }
    throw std::bad_alloc();
  }
  return *ptr;
}

void CachingAllocator::deallocate(void* ptr, std::size_t /*bytes*/) {
  if (ptr == nullptr) return;
  Status const status = free(ptr);
  if (!status.is_ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = status.to_string();
  }
}

int64_t CachingAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_.bytes_in_use;
}

int64_t CachingAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_.peak_bytes_in_use;
}

void CachingAllocator::throw_if_error(Status const& status, char const* hook) const {
  if (!status.is_ok()) {
    throw std::runtime_error(std::string("CachingAllocator::") + hook + " on cuda:" + std::to_string(device_index_) +
                             ": " + status.message());
  }
}

void CachingAllocator::zero_bytes(void* ptr, std::size_t n) {
  if (n > 0) throw_if_error(raw_.zero(ptr, n, default_stream()), "zero_bytes");
}

void CachingAllocator::copy_to_host(void* host_dst, void const* src, std::size_t n) {
  if (n > 0) throw_if_error(raw_.copy_to_host(host_dst, src, n, default_stream()), "copy_to_host");
}

void CachingAllocator::copy_from_host(void* dst, void const* host_src, std::size_t n) {
  if (n > 0) throw_if_error(raw_.copy_from_host(dst, host_src, n, default_stream()), "copy_from_host");
}

void CachingAllocator::copy_within(void* dst, void const* src, std::size_t n) {
  if (n > 0) throw_if_error(raw_.copy_within(dst, src, n, default_stream()), "copy_within");
}

bool CachingAllocator::copy_from_peer(void* dst, Allocator& from, void const* src, std::size_t n) {
  auto* peer = dynamic_cast<CachingAllocator*>(&from);
  if (peer == nullptr || peer->device_index_ == device_index_) return false;
  if (n == 0) return true;
  throw_if_error(peer->raw_.synchronize_stream(peer->default_stream()), "copy_from_peer (the source's stream)");
  throw_if_error(raw_.copy_from_peer(dst, src, peer->device_index_, n, default_stream()), "copy_from_peer");
  return true;
}

}  // namespace gp::exec::cuda
