// Broadcasting helpers that the binary family (binary.cc) and the activation family's PRelu and
// variadic Min/Max/Sum/Mean (activation.cc) share: not one family's, so not in a family file.
#pragma once

#include <vector>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"

namespace gp::exec::cpu {

// dst = a ∘ b where a has the output shape and b broadcasts to it.
Tensor binary_full(dnnl::algorithm alg, Tensor const& a, Tensor const& b);
// x broadcast to `shape` (x itself when it has that shape already).
Tensor expanded(Tensor const& x, std::vector<int64_t> const& shape);

}  // namespace gp::exec::cpu
