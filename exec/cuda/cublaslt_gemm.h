// Runs a GemmPlan (exec/cuda/gemm_mapping.h) with cuBLASLt on the current context's compute
// stream: FP32 compute, the context's workspace, the heuristic's first algorithm cached per shape
// key (thread_local: descriptors are not shared across workers).
#pragma once

#include <array>

#include "core/status.h"
#include "exec/cuda/gemm_mapping.h"

namespace gp::exec::cuda {

// Device pointers indexed by Buf; kOnes and kTmp are provided by run_gemm_plan itself.
using GemmBuffers = std::array<void*, static_cast<std::size_t>(Buf::kTmp) + 1>;

inline void bind(GemmBuffers& b, Buf name, void const* ptr) {
  b[static_cast<std::size_t>(name)] = const_cast<void*>(ptr);  // read-only operands are never written
}

template <typename T>
Status run_gemm_plan(GemmPlan const& plan, GemmBuffers buffers);

}  // namespace gp::exec::cuda
