// CPU kernels: LSTM, GRU, Einsum.
#include "exec/cpu/cpu_ops.h"

namespace gp::exec::cpu {

CpuKernelFamily rnn_kernels() { return {}; }

}  // namespace gp::exec::cpu
