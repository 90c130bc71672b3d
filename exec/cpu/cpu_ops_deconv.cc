// CPU kernels: ConvTranspose, InstanceNormalization.
#include "exec/cpu/cpu_ops.h"

namespace gp::exec::cpu {

CpuKernelFamily deconv_kernels() { return {}; }

}  // namespace gp::exec::cpu
