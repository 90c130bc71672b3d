// Per-element math of Pow with a tensor exponent (kernels/cuda/math_pow.cu), with the CPU
// backend's formulas (exec/cpu/binary.cc): y = a^b with a and b broadcast to y's shape
// (hd::BinaryIndex). The gradients are full-shape values that sum_to then sums down to each
// operand's shape. Computed in float whatever T is.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

enum class PowOperand : int32_t { kBase, kExponent };

template <typename T>
GP_HD T pow_value(T a, T b) {
  return static_cast<T>(powf(static_cast<float>(a), static_cast<float>(b)));
}

// dy·∂(a^b)/∂a = dy·b·a^(b−1); dy·∂(a^b)/∂b = dy·a^b·ln a, with y = a^b from the forward pass. As
// on the CPU, a ≤ 0 gives the exponent a NaN or infinite gradient (ln a), never a guess.
template <typename T>
GP_HD T pow_grad(PowOperand wrt, T a, T b, T y, T dy) {
  float const av = static_cast<float>(a), bv = static_cast<float>(b), g = static_cast<float>(dy);
  if (wrt == PowOperand::kBase) return static_cast<T>(g * (bv * powf(av, bv - 1.f)));
  return static_cast<T>(g * (static_cast<float>(y) * logf(av)));
}

}  // namespace gp::kernels::hd
