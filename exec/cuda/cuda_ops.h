// Internal to the CUDA backend: one family's kernel-table entries. Each exec/cuda/<family>.cc
// lists its operators in one function; cuda_backend.cc concatenates the families into the one
// explicit table (and marks what the CUDA backend does not run, with the reason).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "exec/op_kernels.h"

namespace gp::exec::cuda {

struct KernelEntry {
  OpKind op;
  DType dtype = DType::kFloat32;  // the dtype of the op's data inputs this entry runs
  OpKernels kernels;
  std::size_t min_inputs = 1;
};

// One function per op family (graph/ops/registry.h), in exec/cuda/<family>.cc.
std::vector<KernelEntry> activation_kernels();
std::vector<KernelEntry> binary_kernels();
std::vector<KernelEntry> logic_kernels();
std::vector<KernelEntry> reduce_kernels();
std::vector<KernelEntry> view_kernels();
std::vector<KernelEntry> move_kernels();
std::vector<KernelEntry> index_kernels();
std::vector<KernelEntry> loss_kernels();
std::vector<KernelEntry> pool_kernels();
std::vector<KernelEntry> linalg_kernels();  // cuBLASLt
std::vector<KernelEntry> conv_kernels();    // cuDNN
std::vector<KernelEntry> norm_kernels();    // cuDNN (BatchNormalization) and our kernels (LayerNormalization, LRN)
std::vector<KernelEntry> rnn_kernels();     // cuBLASLt per step and our gate kernels (exec/rnn_plan.h)

}  // namespace gp::exec::cuda
