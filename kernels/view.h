// Dropout with a mask that is a pure function of (seed, element index): reproducible across runs,
// thread counts and devices (the CUDA twin hashes the same way).
#pragma once

#include <cstdint>

namespace gp::kernels {

// mask[i] = 1 when element i is kept (probability 1 - ratio); out[i] = x[i] * mask[i] / (1 - ratio).
void dropout_forward(float const* x, int64_t n, float ratio, uint64_t seed, float* out, uint8_t* mask);
// grad_x[i] = grad_out[i] * mask[i] / (1 - ratio).
void dropout_backward(float const* grad_out, uint8_t const* mask, int64_t n, float ratio, float* grad_x);

}  // namespace gp::kernels
