// Per-element math of the logic family's CUDA kernels (kernels/cuda/logic.cu) with the CPU
// backend's semantics (exec/cpu/logic.cc): comparisons of two numbers of one dtype and the boolean
// operators (a nonzero byte reads as true) give one byte, 0 or 1; Where picks x where the
// condition holds, else y. Operands are broadcast by hd::BinaryIndex (kernels/hd/binary.h).
#pragma once

#include <cstdint>

#include "kernels/hd/hd.h"

namespace gp::kernels::hd {

enum class LogicKind : int32_t { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor };

template <typename T>
GP_HD uint8_t logic_op(LogicKind k, T a, T b) {
  switch (k) {
    case LogicKind::kEqual:
      return a == b;
    case LogicKind::kLess:
      return a < b;
    case LogicKind::kGreater:
      return a > b;
    case LogicKind::kLessOrEqual:
      return a <= b;
    case LogicKind::kGreaterOrEqual:
      return a >= b;
    case LogicKind::kAnd:
      return a != T(0) && b != T(0);
    case LogicKind::kOr:
      return a != T(0) || b != T(0);
    case LogicKind::kXor:
      return (a != T(0)) != (b != T(0));
  }
  return 0;
}

GP_HD uint8_t logical_not(uint8_t a) { return a == 0; }

template <typename T>
GP_HD T where_value(uint8_t cond, T x, T y) {
  return cond != 0 ? x : y;
}

// Where's gradient to x (to_x) or y: dy where the condition picked that operand, else 0.
template <typename T>
GP_HD T where_grad(uint8_t cond, T dy, bool to_x) {
  return (cond != 0) == to_x ? dy : T(0);
}

}  // namespace gp::kernels::hd
