// The CUDA runtime behind the caching allocator: one device's cudaMalloc/cudaFree, events and
// synchronous byte moves. No CUDA header here: a StreamId is a cudaStream_t cast to an integer
// (stream_id(ctx.compute)), an EventId a cudaEvent_t.
#pragma once

#include "exec/cuda/caching_allocator.h"

namespace gp::exec::cuda {

inline StreamId stream_id(void* cuda_stream) { return reinterpret_cast<StreamId>(cuda_stream); }

// Every call makes `device_index` current for its duration (a tensor may be freed, and the cache
// emptied, on a thread whose current device is another) and restores the previous device.
class CudaDeviceMemory final : public RawDeviceMemory {
 public:
  explicit CudaDeviceMemory(int device_index) : device_(device_index) {}
  int device_index() const { return device_; }

  Result<void*> malloc(std::size_t bytes) override;
  Status free(void* ptr) override;
  Result<EventId> record_event(StreamId stream) override;
  Result<bool> event_done(EventId event) override;
  Status destroy_event(EventId event) override;
  Status synchronize_device() override;

  // Enqueued on `stream`, then cudaStreamSynchronize: a plain cudaMemcpy runs on the legacy default
  // stream, which does not wait for work on non-blocking streams (the compute stream may be one).
  Status zero(void* ptr, std::size_t n, StreamId stream) override;
  Status copy_to_host(void* host_dst, void const* src, std::size_t n, StreamId stream) override;
  Status copy_from_host(void* dst, void const* host_src, std::size_t n, StreamId stream) override;
  Status copy_within(void* dst, void const* src, std::size_t n, StreamId stream) override;
  // cudaMemcpyPeerAsync, peer access from this device to `src_device` enabled first where the two
  // can reach each other (once per pair; else the driver stages the copy itself).
  Status copy_from_peer(void* dst, void const* src, int src_device, std::size_t n, StreamId stream) override;
  Status synchronize_stream(StreamId stream) override;

 private:
  int device_;
};

}  // namespace gp::exec::cuda
