#include "kernels/vector_ops.h"

#include "kernels/optim.h"

namespace gp::kernels {

void add_inplace(float* dst, float const* src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void fill(float* dst, float value, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = value;
}

}  // namespace gp::kernels
