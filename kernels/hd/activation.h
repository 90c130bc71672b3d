// Per-element math of the elementwise operators (kernels/cuda/activation.cu, binary.cu and view.cu) with the CPU
// backend's formulas (oneDNN eltwise, kernels/activation.cc): activations, Pow with a scalar exponent,
// and the four broadcasting arithmetic operators. Computed in float whatever T is.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

enum class UnaryKind : int32_t {
  kRelu,
  kLeakyRelu,  // alpha: the negative slope
  kSigmoid,
  kTanh,
  kGeluErf,
  kGeluTanh,
  kSqrt,
  kErf,
  kExp,
  kLog,
  kAbs,
  kNeg,
  kPow,  // alpha: the exponent
};

// Backward reads the forward output instead of the input (oneDNN's *_use_dst_for_bwd, which the
// CPU backend saves): Relu, Sigmoid, Tanh, Sqrt, Exp.
GP_HD bool unary_backward_uses_output(UnaryKind k) {
  return k == UnaryKind::kRelu || k == UnaryKind::kSigmoid || k == UnaryKind::kTanh || k == UnaryKind::kSqrt ||
         k == UnaryKind::kExp;
}

inline constexpr float kSqrtHalf = 0.70710678118654752f;      // 1/√2
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;    // 1/√(2π)
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;   // √(2/π)
inline constexpr float kTwoOverSqrtPi = 1.1283791670955126f;  // 2/√π
inline constexpr float kGeluCubic = 0.044715f;

GP_HD float unary_forward_f(UnaryKind k, float alpha, float x) {
  switch (k) {
    case UnaryKind::kRelu:
      return x > 0.f ? x : 0.f;
    case UnaryKind::kLeakyRelu:
      return x > 0.f ? x : alpha * x;
    case UnaryKind::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case UnaryKind::kTanh:
      return tanhf(x);
    case UnaryKind::kGeluErf:
      return 0.5f * x * (1.f + erff(x * kSqrtHalf));
    case UnaryKind::kGeluTanh:
      return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * x * (1.f + kGeluCubic * x * x)));
    case UnaryKind::kSqrt:
      return sqrtf(x);
    case UnaryKind::kErf:
      return erff(x);
    case UnaryKind::kExp:
      return expf(x);
    case UnaryKind::kLog:
      return logf(x);
    case UnaryKind::kAbs:
      return fabsf(x);
    case UnaryKind::kNeg:
      return -x;
    case UnaryKind::kPow:
      return powf(x, alpha);
  }
  return x;
}

// dx from dy and the saved value: the output y where unary_backward_uses_output(k), else x.
GP_HD float unary_backward_f(UnaryKind k, float alpha, float kept, float dy) {
  float const v = kept;
  switch (k) {
    case UnaryKind::kRelu:
      return v > 0.f ? dy : 0.f;
    case UnaryKind::kLeakyRelu:
      return v > 0.f ? dy : alpha * dy;
    case UnaryKind::kSigmoid:
      return dy * v * (1.f - v);
    case UnaryKind::kTanh:
      return dy * (1.f - v * v);
    case UnaryKind::kGeluErf:
      return dy * (0.5f * (1.f + erff(v * kSqrtHalf)) + v * kInvSqrt2Pi * expf(-0.5f * v * v));
    case UnaryKind::kGeluTanh: {
      float const t = tanhf(kSqrt2OverPi * v * (1.f + kGeluCubic * v * v));
      float const dg = kSqrt2OverPi * (1.f + 3.f * kGeluCubic * v * v);
      return dy * 0.5f * (1.f + t) * (1.f + v * (1.f - t) * dg);
    }
    case UnaryKind::kSqrt:
      return dy / (2.f * v);
    case UnaryKind::kErf:
      return dy * kTwoOverSqrtPi * expf(-v * v);
    case UnaryKind::kExp:
      return dy * v;
    case UnaryKind::kLog:
      return dy / v;
    case UnaryKind::kAbs:
      return v > 0.f ? dy : (v < 0.f ? -dy : 0.f);
    case UnaryKind::kNeg:
      return -dy;
    case UnaryKind::kPow:
      return alpha == 0.f ? 0.f : dy * alpha * powf(v, alpha - 1.f);
  }
  return dy;
}

template <typename T>
GP_HD T unary_forward(UnaryKind k, float alpha, T x) {
  return static_cast<T>(unary_forward_f(k, alpha, static_cast<float>(x)));
}
template <typename T>
GP_HD T unary_backward(UnaryKind k, float alpha, T kept, T dy) {
  return static_cast<T>(unary_backward_f(k, alpha, static_cast<float>(kept), static_cast<float>(dy)));
}

enum class BinaryKind : int32_t { kAdd, kSub, kMul, kDiv };

template <typename T>
GP_HD T binary_op(BinaryKind k, T a, T b) {
  float const x = static_cast<float>(a), y = static_cast<float>(b);
  switch (k) {
    case BinaryKind::kAdd:
      return static_cast<T>(x + y);
    case BinaryKind::kSub:
      return static_cast<T>(x - y);
    case BinaryKind::kMul:
      return static_cast<T>(x * y);
    case BinaryKind::kDiv:
      return static_cast<T>(x / y);
  }
  return a;
}

}  // namespace gp::kernels::hd
