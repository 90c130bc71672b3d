#include "exec/cuda/cuda_check.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include <string>

namespace gp::exec::cuda {
namespace {

std::string where(char const* call, char const* file, int line) {
  std::string f = file;
  if (auto slash = f.find_last_of('/'); slash != std::string::npos) f = f.substr(slash + 1);
  return std::string(call) + " (" + f + ":" + std::to_string(line) + ")";
}

}  // namespace

Status vendor_error(StatusCode code, std::string const& library, std::string const& name, std::string const& message,
                    char const* call, char const* file, int line) {
  return Status(code, library + " error " + name + ": " + message + " in " + where(call, file, line));
}

// The runtime keeps a failed call's error as the thread's last error until someone reads it, and
// the kernel launchers return cudaGetLastError(): left there, an error would be reported again by
// the next launch as its own (a failed memset would be reported by the next op that launches).
// Reading it ends that. A sticky error (a faulted context) is not cleared by this: every later
// call returns it, as it should. cuBLAS and cuDNN launch kernels too, so their failures clear it.
void clear_last_cuda_error() { (void)cudaGetLastError(); }

Status cuda_error(int code, char const* call, char const* file, int line) {
  clear_last_cuda_error();
  auto const e = static_cast<cudaError_t>(code);
  StatusCode sc = StatusCode::kInternal;
  std::string hint;
  if (e == cudaErrorMemoryAllocation) {
    sc = StatusCode::kInfeasible;
    hint = " (out of GPU memory: use a smaller micro-batch, more devices, or a tighter --memory for the planner)";
  } else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    sc = StatusCode::kUnsupported;
    hint = " (no usable CUDA GPU here: run with --backend cpu)";
  }
  return vendor_error(sc, "CUDA", cudaGetErrorName(e), cudaGetErrorString(e) + hint, call, file, line);
}

Status cublas_error(int code, char const* call, char const* file, int line) {
  clear_last_cuda_error();
  auto const e = static_cast<cublasStatus_t>(code);
  StatusCode sc = StatusCode::kInternal;
  if (e == CUBLAS_STATUS_ALLOC_FAILED) sc = StatusCode::kInfeasible;
  if (e == CUBLAS_STATUS_NOT_SUPPORTED) sc = StatusCode::kUnsupported;
  return vendor_error(sc, "cuBLAS", cublasGetStatusName(e), cublasGetStatusString(e), call, file, line);
}

Status cudnn_error(int code, char const* call, char const* file, int line) {
  clear_last_cuda_error();
  auto const e = static_cast<cudnnStatus_t>(code);
  // cuDNN 9 codes are grouped by thousands: 3xxx "not supported", 4xxx internal (allocation
  // among them), 2xxx bad parameters, 5xxx execution failures.
  StatusCode sc = StatusCode::kInternal;
  if (code / 1000 == 3) sc = StatusCode::kUnsupported;
  return vendor_error(sc, "cuDNN", std::to_string(code), cudnnGetErrorString(e), call, file, line);
}

Status device_available() {
  int n = 0;
  cudaError_t const e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    clear_last_cuda_error();
    return unsupported(std::string("no usable CUDA GPU: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) +
                       " (use --backend cpu, or a machine with an NVIDIA GPU and driver)");
  }
  if (n == 0) return unsupported("no usable CUDA GPU: the runtime reports 0 devices (use --backend cpu)");
  return Status::ok();
}

int device_count() {
  if (!device_available()) return 0;
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

Result<int64_t> device_memory_bytes(int index) {
  RETURN_IF_ERROR(device_available());
  cudaDeviceProp prop{};
  GP_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return static_cast<int64_t>(prop.totalGlobalMem);
}

}  // namespace gp::exec::cuda
