// Checked NCCL calls: a failed call becomes a Status naming the call as written, NCCL's code and
// message, and file:line (the form of exec/cuda/cuda_check.h). The code is taken as an int so that
// tests inject any code without a GPU.
#pragma once

#include "core/status.h"

namespace gp::exec {

Status nccl_error(int code, char const* call, char const* file, int line);

}  // namespace gp::exec

// ncclInProgress (7) is not an error for a non-blocking communicator: callers that expect it
// compare the code themselves and use this macro for the rest.
#define GP_NCCL_CHECK(expr)                                                                      \
  do {                                                                                           \
    int const gp_nccl_rc_ = static_cast<int>(expr);                                              \
    if (gp_nccl_rc_ != 0) return ::gp::exec::nccl_error(gp_nccl_rc_, #expr, __FILE__, __LINE__); \
  } while (0)
