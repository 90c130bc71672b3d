// CPU kernels: Reduce*, LogSoftmax, CumSum, ArgMax, ArgMin.
#include "exec/cpu/cpu_ops.h"

namespace gp::exec::cpu {

CpuKernelFamily reduce_kernels() { return {}; }

}  // namespace gp::exec::cpu
