#include "kernels/bf16.h"

#include "kernels/optim.h"

namespace gp::kernels {

void float_to_bf16(float const* src, int64_t n, uint16_t* dst) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

void bf16_to_float(uint16_t const* src, int64_t n, float* dst) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

void float_to_half(float const* src, int64_t n, uint16_t* dst) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

void add_inplace_bf16(uint16_t* dst, uint16_t const* src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(bf16_to_float(dst[i]) + bf16_to_float(src[i]));
}

void add_bf16(uint16_t const* a, uint16_t const* b, int64_t n, uint16_t* y) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

}  // namespace gp::kernels
