// Runs a GemmPlan (exec/cuda/gemm_mapping.h) with cuBLASLt on the current context's compute
// stream: T (float, __nv_bfloat16 or __half) for every operand and result, FP32 compute always,
// the context's workspace, the heuristic's first algorithm cached per shape key (thread_local:
// descriptors are not shared across workers).
#pragma once

#include "core/status.h"
#include "exec/cuda/gemm_mapping.h"

namespace gp::exec::cuda {

// `buffers` binds the plan's operands (GemmBuffers, gemm_mapping.h); kOnes and kTmp are provided
// here. Every buffer is checked bound (check_bound) before cuBLASLt is reached.
template <typename T>
Status run_gemm_plan(GemmPlan const& plan, GemmBuffers buffers);

}  // namespace gp::exec::cuda
