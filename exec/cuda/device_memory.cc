#include "exec/cuda/device_memory.h"

#include <mutex>
#include <set>
#include <utility>

#include <cuda_runtime_api.h>

#include "exec/cuda/cuda_check.h"

namespace gp::exec::cuda {
namespace {

cudaStream_t to_stream(StreamId id) { return reinterpret_cast<cudaStream_t>(id); }
cudaEvent_t to_event(EventId id) { return reinterpret_cast<cudaEvent_t>(id); }

Status restore_device(int device) {
  GP_CUDA_CHECK(cudaSetDevice(device));
  return Status::ok();
}

// Runs `body` with `device` current, then makes the caller's device current again.
template <typename Body>
Status on_device(int device, Body&& body) {
  int current = -1;
  GP_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) GP_CUDA_CHECK(cudaSetDevice(device));
  Status status = body();
  if (current != device) {
    Status const restored = restore_device(current);
    if (status.is_ok()) status = restored;
  }
  return status;
}

}  // namespace

Result<void*> CudaDeviceMemory::malloc(std::size_t bytes) {
  void* ptr = nullptr;
  Status const status = on_device(device_, [&]() -> Status {
    // While this thread captures work (CUDA graphs), cudaMalloc is a call its capture mode
    // forbids; it is safe (the memory is not the captured stream's work), so it runs in relaxed
    // mode, as PyTorch's allocator does during graph capture.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    GP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    cudaError_t const rc = cudaMalloc(&ptr, bytes);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);  // back to this thread's mode
    GP_CUDA_CHECK(rc);
    return Status::ok();
  });
  if (!status.is_ok()) {
    // An out-of-memory is not sticky; clear it so that the next call reports its own error.
    (void)cudaGetLastError();
    return status;
  }
  return ptr;
}

Status CudaDeviceMemory::free(void* ptr) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaFree(ptr));
    return Status::ok();
  });
}

Result<EventId> CudaDeviceMemory::record_event(StreamId stream) {
  cudaEvent_t event = nullptr;
  Status const status = on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    Status const recorded = [&]() -> Status {
      GP_CUDA_CHECK(cudaEventRecord(event, to_stream(stream)));
      return Status::ok();
    }();
    if (!recorded.is_ok()) (void)cudaEventDestroy(event);  // the error to report is the record's
    return recorded;
  });
  if (!status.is_ok()) return status;
  return reinterpret_cast<EventId>(event);
}

Result<bool> CudaDeviceMemory::event_done(EventId event) {
  bool done = false;
  Status const status = on_device(device_, [&]() -> Status {
    cudaError_t const rc = cudaEventQuery(to_event(event));
    if (rc == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error: keep it out of later checks
      return Status::ok();
    }
    GP_CUDA_CHECK(rc);
    done = true;
    return Status::ok();
  });
  if (!status.is_ok()) return status;
  return done;
}

Status CudaDeviceMemory::destroy_event(EventId event) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaEventDestroy(to_event(event)));
    return Status::ok();
  });
}

Status CudaDeviceMemory::synchronize_device() {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaDeviceSynchronize());
    return Status::ok();
  });
}

Status CudaDeviceMemory::zero(void* ptr, std::size_t n, StreamId stream) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaMemsetAsync(ptr, 0, n, to_stream(stream)));
    GP_CUDA_CHECK(cudaStreamSynchronize(to_stream(stream)));
    return Status::ok();
  });
}

Status CudaDeviceMemory::copy_to_host(void* host_dst, void const* src, std::size_t n, StreamId stream) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, n, cudaMemcpyDeviceToHost, to_stream(stream)));
    GP_CUDA_CHECK(cudaStreamSynchronize(to_stream(stream)));
    return Status::ok();
  });
}

Status CudaDeviceMemory::copy_from_host(void* dst, void const* host_src, std::size_t n, StreamId stream) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, n, cudaMemcpyHostToDevice, to_stream(stream)));
    GP_CUDA_CHECK(cudaStreamSynchronize(to_stream(stream)));
    return Status::ok();
  });
}

Status CudaDeviceMemory::copy_within(void* dst, void const* src, std::size_t n, StreamId stream) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, to_stream(stream)));
    GP_CUDA_CHECK(cudaStreamSynchronize(to_stream(stream)));
    return Status::ok();
  });
}

Status CudaDeviceMemory::synchronize_stream(StreamId stream) {
  return on_device(device_, [&]() -> Status {
    GP_CUDA_CHECK(cudaStreamSynchronize(to_stream(stream)));
    return Status::ok();
  });
}

Status CudaDeviceMemory::copy_from_peer(void* dst, void const* src, int src_device, std::size_t n, StreamId stream) {
  return on_device(device_, [&]() -> Status {
    {
      // Peer access is a property of the (device, peer) pair in the process: enabled once.
      static std::mutex mu;
      static std::set<std::pair<int, int>> tried;
      std::lock_guard<std::mutex> lock(mu);
      if (tried.insert({device_, src_device}).second) {
        int can = 0;
        GP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device_, src_device));
        if (can != 0) {
          cudaError_t const e = cudaDeviceEnablePeerAccess(src_device, 0);
          if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError();  // enabled elsewhere: clear the error, not sticky
          else
            GP_CUDA_CHECK(e);
        }
      }
    }
    GP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, device_, src, src_device, n, to_stream(stream)));
    GP_CUDA_CHECK(cudaStreamSynchronize(to_stream(stream)));
    return Status::ok();
  });
}

}  // namespace gp::exec::cuda
