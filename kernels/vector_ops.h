// Whole-buffer float loops the executor runs on every step (gradient accumulation, zeroing),
// parallel over OpenMP threads for long buffers; results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace gp::kernels {

void add_inplace(float* dst, float const* src, int64_t n);  // dst += src
void fill(float* dst, float value, int64_t n);
void scale_inplace(float* dst, float factor, int64_t n);  // dst *= factor
bool all_finite(float const* src, int64_t n);             // no inf or NaN

}  // namespace gp::kernels
