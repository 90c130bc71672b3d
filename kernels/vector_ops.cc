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

void scale_inplace(float* dst, float factor, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] *= factor;
}

bool all_finite(float const* src, int64_t n) {
  // x - x is 0 for a finite x and NaN for inf or NaN: one comparison per element, vectorised.
  int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) bad |= !(src[i] - src[i] == 0.f);
  return bad == 0;
}

}  // namespace gp::kernels
