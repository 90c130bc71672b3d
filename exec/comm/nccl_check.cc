#include "exec/comm/nccl_check.h"

#include <nccl.h>

#include <string>

#include "exec/cuda/cuda_check.h"

namespace gp::exec {

Status nccl_error(int code, char const* call, char const* file, int line) {
  auto const e = static_cast<ncclResult_t>(code);
  StatusCode sc = StatusCode::kInternal;
  if (e == ncclRemoteError || e == ncclSystemError) sc = StatusCode::kAborted;
  if (e == ncclInvalidUsage || e == ncclInvalidArgument) sc = StatusCode::kInvalidArgument;
  return cuda::vendor_error(sc, "NCCL", std::to_string(code), ncclGetErrorString(e), call, file, line);
}

}  // namespace gp::exec
