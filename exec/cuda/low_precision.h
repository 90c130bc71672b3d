// Inside the CUDA backend: mixed precision (graph/precision.h). The C++ type of each float dtype
// (kernels/cuda/low_types.h), the device conversion between float32 and the 16-bit types, and
// the kernel-table entries of the ops whose float32 weights stay float32
// (exec/low_precision_kernel.h's wrapper around the 16-bit kernel).
#pragma once

#include <type_traits>

#include "exec/cuda/ops_common.h"
#include "exec/low_precision_kernel.h"
#include "kernels/cuda/low_types.h"

namespace gp::exec::cuda {

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return DType::kBFloat16;
  if constexpr (std::is_same_v<T, __half>) return DType::kFloat16;
  return DType::kFloat32;
}

// x converted between float32 and bfloat16 or half on the compute stream (round to nearest even);
// x itself when it has dtype `to`. Any other pair is kInternal.
Result<Tensor> convert_float(Tensor const& x, DType to);

// The functions of a 16-bit entry from its kernel (F, B, W instantiated for the 16-bit type):
// float32 inputs (weights) rounded per call, their gradients widened to float32.
template <ForwardFn F, BackwardFn B, BackwardFn W>
OpKernels low_precision_kernels(CheckFn check) {
  return exec::low_precision_kernels<F, B, W, convert_float>(check);
}

}  // namespace gp::exec::cuda
