// Dropout with a mask that is a pure function of (seed, element index): reproducible across runs,
// thread counts and devices (the CUDA twin hashes the same way); the random ops draw the same way.
#pragma once

#include <cstdint>

namespace gp::kernels {

// mask[i] = 1 when element i is kept (probability 1 - ratio); out[i] = x[i] * mask[i] / (1 - ratio).
void dropout_forward(float const* x, int64_t n, float ratio, uint64_t seed, float* out, uint8_t* mask);
// grad_x[i] = grad_out[i] * mask[i] / (1 - ratio).
void dropout_backward(float const* grad_out, uint8_t const* mask, int64_t n, float ratio, float* grad_x);

// The random ops (kernels/hd/view.h's draws): out[i] for every element, from `seed`.
void random_uniform(uint64_t seed, int64_t n, float low, float high, float* out);
void random_normal(uint64_t seed, int64_t n, float mean, float scale, float* out);
// out[i] = 1 with probability p[i], as float (float_out) or as a byte (byte_out); one of them is null.
void bernoulli(uint64_t seed, float const* p, int64_t n, float* float_out, uint8_t* byte_out);

}  // namespace gp::kernels
