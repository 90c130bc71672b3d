// CPU kernels: Pad, Tile, Trilu, GatherElements, ScatterElements, Resize.
#include "exec/cpu/cpu_ops.h"

namespace gp::exec::cpu {

CpuKernelFamily index_kernels() { return {}; }

}  // namespace gp::exec::cpu
