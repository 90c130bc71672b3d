// What a CUDA op function needs besides its tensors: the device, its compute and communication
// streams, the device's caching allocator and the library handles. One per CudaBackend (one per
// worker); the backend installs it as the calling thread's current context for every call, so the
// per-op functions (exec/cuda/ops_*.cc) take the same arguments as the CPU ones.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "exec/cuda/deferred_checks.h"
#include "exec/tensor.h"

struct cublasLtContext;  // cublasLtHandle_t
struct cudnnContext;     // cudnnHandle_t

namespace gp::exec::cuda {

struct DeviceContext {
  int device = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  cudaStream_t copy = nullptr;     // host data to the device beside compute (Backend::copy_on)
  Allocator* allocator = nullptr;  // the device's caching allocator
  cublasLtContext* cublaslt = nullptr;
  void* cublaslt_workspace = nullptr;
  std::size_t cublaslt_workspace_bytes = 0;
  bool tf32_matmul = false;       // CudaBackendOptions::tf32_matmul
  bool deterministic = false;     // CudaBackendOptions::deterministic, or GP_CUDNN_DETERMINISTIC=1
  cudnnContext* cudnn = nullptr;  // bound to `compute`
  // The first failure of a runtime call that cannot return a Status (Backend::zeros' memset),
  // reported by the backend's next synchronize().
  std::mutex deferred_mu;
  Status deferred = Status::ok();
  DeferredChecks checks;  // Backend::defer_checks
  // Work on `compute` is being captured (Backend::begin_capture): an op that would read host
  // memory into the device (a replay would read it again, long after) refuses instead.
  bool capturing = false;
};

// The calling thread's context; internal_error when none is installed, the CUDA error when the
// ScopedContext that installed it could not make its device current.
Result<DeviceContext*> current_context();

class ScopedContext {
 public:
  explicit ScopedContext(DeviceContext& ctx);
  ~ScopedContext();
  ScopedContext(ScopedContext const&) = delete;
  ScopedContext& operator=(ScopedContext const&) = delete;

 private:
  DeviceContext* previous_;
  int previous_set_device_rc_;
};

// New tensors in the current context's device memory (uninitialised / zeroed on its compute stream).
Result<Tensor> empty(std::vector<int64_t> shape, DType dtype = DType::kFloat32);
Result<Tensor> zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32);

}  // namespace gp::exec::cuda
