// Per-element math of the elementwise operators (kernels/cuda/activation.cu, binary.cu and view.cu) with the CPU
// backend's formulas (oneDNN eltwise, kernels/activation.cc, which runs the Pointwise ones below):
// activations, Pow with a scalar exponent, and the four broadcasting arithmetic operators. Computed
// in float whatever T is.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

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

// ---- the other elementwise activations and math ----
// The CPU's plain loops (kernels/activation.cc) and the formulas of the oneDNN eltwise algorithms
// it runs Clip, HardSwish, Softplus, Reciprocal and Elu through, as ONNX defines them: one
// definition for the CPU loops and the CUDA kernels. Backward is dy · f'(x) from the saved input.
enum class Pointwise : uint8_t {
  kErf,
  kSelu,             // gamma · (x > 0 ? x : alpha · (e^x − 1))
  kCelu,             // max(0, x) + min(0, alpha · (e^(x/alpha) − 1))
  kSoftsign,         // x / (1 + |x|)
  kHardSigmoid,      // max(0, min(1, alpha · x + beta))
  kThresholdedRelu,  // x > alpha ? x : 0
  kShrink,           // x < -alpha ? x + beta : x > alpha ? x - beta : 0 (alpha: lambd, beta: bias)
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kSign,  // zero gradient from here to kRound
  kFloor,
  kCeil,
  kRound,       // half to even
  kClip,        // min(max(x, alpha), beta); the gradient flows where alpha < x <= beta (oneDNN's clip_v2)
  kHardSwish,   // x · max(0, min(1, x / 6 + 1/2))
  kSoftplus,    // log(1 + e^x), x itself past 20 (where the two agree in float)
  kReciprocal,  // 1 / x
  kElu,         // x > 0 ? x : alpha · (e^x − 1)
};
struct PointwiseParams {
  float alpha = 0.f;
  float beta = 0.f;
  float gamma = 0.f;
};

// sin and cos. On the device, libm's sinf/cosf keep a Payne-Hanek reduction for huge arguments in
// local memory (the ptxas gate refuses any): there the argument is reduced to [−π, π] in double
// and the hardware's __sinf/__cosf finish (absolute error under 5e-7 there). The host uses libm.
GP_HD float hd_sin(float v) {
#if defined(__CUDA_ARCH__)
  double const k = rint(static_cast<double>(v) * 0.15915494309189535);  // 1 / (2π)
  return __sinf(static_cast<float>(fma(-k, 6.283185307179586, static_cast<double>(v))));
#else
  return sinf(v);
#endif
}
GP_HD float hd_cos(float v) {
#if defined(__CUDA_ARCH__)
  double const k = rint(static_cast<double>(v) * 0.15915494309189535);
  return __cosf(static_cast<float>(fma(-k, 6.283185307179586, static_cast<double>(v))));
#else
  return cosf(v);
#endif
}

GP_HD float pointwise_forward_f(Pointwise f, PointwiseParams const& p, float v) {
  float const a = p.alpha, b = p.beta, g = p.gamma;
  switch (f) {
    case Pointwise::kErf:
      return erff(v);
    case Pointwise::kSelu:
      return g * (v > 0.f ? v : a * expm1f(v));
    case Pointwise::kCelu:
      return fmaxf(0.f, v) + fminf(0.f, a * expm1f(v / a));
    case Pointwise::kSoftsign:
      return v / (1.f + fabsf(v));
    case Pointwise::kHardSigmoid:
      return fmaxf(0.f, fminf(1.f, a * v + b));
    case Pointwise::kThresholdedRelu:
      return v > a ? v : 0.f;
    case Pointwise::kShrink:
      return v < -a ? v + b : v > a ? v - b : 0.f;
    case Pointwise::kSin:
      return hd_sin(v);
    case Pointwise::kCos:
      return hd_cos(v);
    case Pointwise::kTan:
      return hd_sin(v) / hd_cos(v);
    case Pointwise::kAsin:
      return asinf(v);
    case Pointwise::kAcos:
      return acosf(v);
    case Pointwise::kAtan:
      return atanf(v);
    case Pointwise::kSinh:
      return sinhf(v);
    case Pointwise::kCosh:
      return coshf(v);
    case Pointwise::kAsinh:
      return asinhf(v);
    case Pointwise::kAcosh:
      return acoshf(v);
    case Pointwise::kAtanh:
      return atanhf(v);
    case Pointwise::kSign:
      return v > 0.f ? 1.f : v < 0.f ? -1.f : v;  // keeps ±0 and NaN
    case Pointwise::kFloor:
      return floorf(v);
    case Pointwise::kCeil:
      return ceilf(v);
    case Pointwise::kRound:
      return nearbyintf(v);
    case Pointwise::kClip:
      return fminf(fmaxf(v, a), b);
    case Pointwise::kHardSwish:
      return v * fmaxf(0.f, fminf(1.f, v * (1.f / 6.f) + 0.5f));
    case Pointwise::kSoftplus:
      return v > 20.f ? v : log1pf(expf(v));
    case Pointwise::kReciprocal:
      return 1.f / v;
    case Pointwise::kElu:
      return v > 0.f ? v : a * expm1f(v);
  }
  return v;
}

// f'(x).
GP_HD float pointwise_derivative(Pointwise f, PointwiseParams const& p, float v) {
  float const a = p.alpha, b = p.beta, g = p.gamma;
  switch (f) {
    case Pointwise::kErf:
      return kTwoOverSqrtPi * expf(-v * v);
    case Pointwise::kSelu:
      return v > 0.f ? g : g * a * expf(v);
    case Pointwise::kCelu:
      return (v > 0.f ? 1.f : 0.f) + (a * expm1f(v / a) < 0.f ? expf(v / a) : 0.f);
    case Pointwise::kSoftsign: {
      float const d = 1.f + fabsf(v);
      return 1.f / (d * d);
    }
    case Pointwise::kHardSigmoid: {
      float const z = a * v + b;
      return z > 0.f && z < 1.f ? a : 0.f;
    }
    case Pointwise::kThresholdedRelu:
      return v > a ? 1.f : 0.f;
    case Pointwise::kShrink:
      return v < -a || v > a ? 1.f : 0.f;
    case Pointwise::kSin:
      return hd_cos(v);
    case Pointwise::kCos:
      return -hd_sin(v);
    case Pointwise::kTan: {
      float const c = hd_cos(v);
      return 1.f / (c * c);
    }
    case Pointwise::kAsin:
      return 1.f / sqrtf(1.f - v * v);
    case Pointwise::kAcos:
      return -1.f / sqrtf(1.f - v * v);
    case Pointwise::kAtan:
      return 1.f / (1.f + v * v);
    case Pointwise::kSinh:
      return coshf(v);
    case Pointwise::kCosh:
      return sinhf(v);
    case Pointwise::kAsinh:
      return 1.f / sqrtf(v * v + 1.f);
    case Pointwise::kAcosh:
      return 1.f / sqrtf(v * v - 1.f);
    case Pointwise::kAtanh:
      return 1.f / (1.f - v * v);
    case Pointwise::kSign:
    case Pointwise::kFloor:
    case Pointwise::kCeil:
    case Pointwise::kRound:
      return 0.f;
    case Pointwise::kClip:
      return v > a && v <= b ? 1.f : 0.f;
    case Pointwise::kHardSwish:
      return v < -3.f ? 0.f : v > 3.f ? 1.f : v * (1.f / 3.f) + 0.5f;
    case Pointwise::kSoftplus:
      return 1.f / (1.f + expf(-v));
    case Pointwise::kReciprocal:
      return -1.f / (v * v);
    case Pointwise::kElu:
      return v > 0.f ? 1.f : a * expf(v);
  }
  return 0.f;
}

template <typename T>
GP_HD T pointwise_forward(Pointwise f, PointwiseParams const& p, T x) {
  return static_cast<T>(pointwise_forward_f(f, p, static_cast<float>(x)));
}
template <typename T>
GP_HD T pointwise_backward(Pointwise f, PointwiseParams const& p, T x, T dy) {
  return static_cast<T>(static_cast<float>(dy) * pointwise_derivative(f, p, static_cast<float>(x)));
}

// kMax and kMin: the integer Max/Min (float Max/Min are the variadic kernels below).
enum class BinaryKind : int32_t { kAdd, kSub, kMul, kDiv, kMax, kMin };

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
    case BinaryKind::kMax:
      return y > x ? b : a;
    case BinaryKind::kMin:
      return y < x ? b : a;
  }
  return a;
}

// Integer Add, Sub, Mul, Div, Max, Min (int64 or int32; the CPU's exec/cpu/binary.cc and the CUDA
// kernel run this): two's-complement wrap-around on overflow (unsigned arithmetic, never undefined
// behaviour); Div truncates toward zero, as ONNX's reference and C++ do, and the lowest value over
// -1 wraps. A zero divisor gives 0 here: the callers report it (integer division by zero).
template <typename T>
GP_HD T int_binary_op(BinaryKind k, T x, T z) {
  using U = std::make_unsigned_t<T>;
  switch (k) {
    case BinaryKind::kAdd:
      return static_cast<T>(static_cast<U>(x) + static_cast<U>(z));
    case BinaryKind::kSub:
      return static_cast<T>(static_cast<U>(x) - static_cast<U>(z));
    case BinaryKind::kMul:
      return static_cast<T>(static_cast<U>(x) * static_cast<U>(z));
    case BinaryKind::kDiv:
      if (z == 0) return T(0);
      return z == T(-1) ? static_cast<T>(U(0) - static_cast<U>(x)) : static_cast<T>(x / z);
    case BinaryKind::kMax:
      return z > x ? z : x;
    case BinaryKind::kMin:
      return z < x ? z : x;
  }
  return x;
}

// ---- variadic Max/Min and PRelu (the CPU's kernels/activation.cc runs these too) ----

// One input k's step into the running extremum acc, `which` recording the input it came from;
// a NaN wins and stays.
GP_HD void select_step_at(float x, bool take_max, int32_t k, float& acc, int32_t& which) {
  bool const wins = x != x || (take_max ? x > acc : x < acc);
  if (wins && acc == acc) {
    acc = x;
    which = k;
  }
}
// The gradient reaching input k: the output's where k was selected, else 0.
GP_HD float selected_grad_at(float gy, int32_t which, int32_t k) { return which == k ? gy : 0.f; }

GP_HD float prelu_at(float x, float slope) { return x < 0.f ? slope * x : x; }
GP_HD float prelu_dx_at(float x, float slope, float gy) { return x < 0.f ? gy * slope : gy; }
GP_HD float prelu_dslope_at(float x, float gy) { return x < 0.f ? gy * x : 0.f; }

// Clip with bounds computed at run time (kernels/activation.cc's loops and the CUDA kernels):
// std::min(std::max(x, lo), hi), so a NaN x stays NaN. Its gradient splits at the bounds: to lo
// where x <= lo, to hi where x > hi, to x in between.
GP_HD float clip_at(float x, float lo, float hi) {
  float const m = x < lo ? lo : x;
  return hi < m ? hi : m;
}
enum class ClipSide : uint8_t { kLow, kInside, kHigh };
GP_HD ClipSide clip_side(float x, float lo, float hi) {
  return x <= lo ? ClipSide::kLow : x > hi ? ClipSide::kHigh : ClipSide::kInside;
}

// Neg, Abs and Sign of integers (relative positions computed per micro-batch): two's complement,
// so Neg and Abs of the most negative value give it back (as torch and ONNX Runtime do, where C++
// would overflow); never differentiated.
enum class IntUnaryKind : int32_t { kNeg, kAbs, kSign };
template <typename T>
GP_HD T int_unary_at(IntUnaryKind k, T x) {
  using U = std::make_unsigned_t<T>;
  T const negated = static_cast<T>(static_cast<U>(U{0} - static_cast<U>(x)));
  switch (k) {
    case IntUnaryKind::kNeg:
      return negated;
    case IntUnaryKind::kAbs:
      if constexpr (std::is_signed_v<T>) return x < 0 ? negated : x;
      return x;
    case IntUnaryKind::kSign:
      if constexpr (std::is_signed_v<T>) return static_cast<T>(x > T{0} ? 1 : x < T{0} ? -1 : 0);
      return static_cast<T>(x != T{0} ? 1 : 0);
  }
  return x;
}

// Clip of integers (token ids clamped into a vocabulary, DeBERTa's relative position buckets):
// min(max(x, *lo), *hi), each bound only where given (a null pointer: none), so a lower bound
// above the upper gives the upper, as the float clip. Never differentiated.
template <typename T>
GP_HD T int_clip_at(T x, T const* lo, T const* hi) {
  if (lo != nullptr && x < *lo) x = *lo;
  if (hi != nullptr && *hi < x) x = *hi;
  return x;
}

}  // namespace gp::kernels::hd
