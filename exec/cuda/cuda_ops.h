// Internal to the CUDA backend: one family's kernel-table entries. Each exec/cuda/ops_<family>.cc
// lists its operators in one function; cuda_backend.cc concatenates the families into the one
// explicit table (and marks what the CUDA backend does not run, with the reason).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "exec/op_kernels.h"

namespace gp::exec::cuda {

struct KernelEntry {
  std::string op_type;
  DType dtype = DType::kFloat32;  // the dtype of the op's data inputs this entry runs
  OpKernels kernels;
  std::size_t min_inputs = 1;
};

std::vector<KernelEntry> math_kernels();  // ops_math.cc: elementwise, softmax, norms, reductions, dropout
std::vector<KernelEntry> move_kernels();  // ops_move.cc: views, transpose, slice, concat/split, expand, gather, pooling
std::vector<KernelEntry> dnn_kernels();   // ops_dnn.cc: Gemm, MatMul (cuBLASLt), Conv, BatchNormalization (cuDNN)

}  // namespace gp::exec::cuda
