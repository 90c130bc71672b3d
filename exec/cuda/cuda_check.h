// Checked calls into CUDA, cuBLAS(Lt) and cuDNN (NCCL's are exec/comm/nccl_check.h, so that a
// single-GPU build needs neither NCCL nor MPI). A failed call becomes a Status naming the
// call as written, the library's own name and message for the code, and file:line; the backend
// adds the op ("Conv 'conv1': ..."). Never exit, never throw: the worker returns the error, the
// runtime aborts every communicator first and reports it once.
//
// The *_error functions take the raw code as an int so that tests inject any code without a GPU
// (the libraries' name/message lookups are host functions that work without a device).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace gp::exec::cuda {

Status cuda_error(int code, char const* call, char const* file, int line);
Status cublas_error(int code, char const* call, char const* file, int line);
Status cudnn_error(int code, char const* call, char const* file, int line);
// Reads and drops the calling thread's last CUDA runtime error, so that a failure already reported
// (or one that is an answer, like "not ready") is not reported again by the next kernel launch's
// cudaGetLastError() as its own. Every *_error function below calls it.
void clear_last_cuda_error();
// "<library> error <name>: <message> in <call> (<file>:<line>)": the form every vendor's error takes.
Status vendor_error(StatusCode code, std::string const& library, std::string const& name, std::string const& message,
                    char const* call, char const* file, int line);

// Ok when a CUDA device can be used; else kUnsupported, "no usable CUDA GPU: ..." with the
// runtime's reason. cudaErrorNoDevice and cudaErrorInsufficientDriver both mean "none here".
Status device_available();
int device_count();  // 0 when device_available() fails
// GPU `index`'s memory in bytes (its total, as cudaGetDeviceProperties reports it).
Result<int64_t> device_memory_bytes(int index);

}  // namespace gp::exec::cuda

#define GP_CUDA_CHECK(expr)                                                                            \
  do {                                                                                                 \
    int const gp_cuda_rc_ = static_cast<int>(expr);                                                    \
    if (gp_cuda_rc_ != 0) return ::gp::exec::cuda::cuda_error(gp_cuda_rc_, #expr, __FILE__, __LINE__); \
  } while (0)
#define GP_CUBLAS_CHECK(expr)                                                                                \
  do {                                                                                                       \
    int const gp_cublas_rc_ = static_cast<int>(expr);                                                        \
    if (gp_cublas_rc_ != 0) return ::gp::exec::cuda::cublas_error(gp_cublas_rc_, #expr, __FILE__, __LINE__); \
  } while (0)
#define GP_CUDNN_CHECK(expr)                                                                              \
  do {                                                                                                    \
    int const gp_cudnn_rc_ = static_cast<int>(expr);                                                      \
    if (gp_cudnn_rc_ != 0) return ::gp::exec::cuda::cudnn_error(gp_cudnn_rc_, #expr, __FILE__, __LINE__); \
  } while (0)
