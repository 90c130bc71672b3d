// Einsum's CPU kernels (cpu_ops_einsum.cc), listed in the rnn family's table (rnn.cc).
#pragma once

#include "exec/cpu/cpu_ops.h"

namespace gp::exec::cpu {

CpuKernelEntry einsum_kernel_entry();

}  // namespace gp::exec::cpu
