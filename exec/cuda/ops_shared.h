// Inside the CUDA backend: the small helpers several op families' files share (float32 checks,
// gradient slots, op context on errors, spatial sizes). Each family's own code stays in its file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"
#include "exec/cuda/ops_common.h"
#include "exec/op_shared.h"
#include "kernels/hd/move.h"

namespace gp::exec::cuda {

inline Status need_float(OpCall const& call, Tensor const& t, DType dtype = DType::kFloat32) {
  if (t.dtype() != dtype)
    return unsupported(call.op.type + " '" + call.op.name + "' on cuda runs " + graph::dtype_name(dtype) +
                       " data, got " + graph::dtype_name(t.dtype()));
  return Status::ok();
}

// The gradient slot of input i written in place: the existing accumulator, or a new tensor (zeroed
// where the kernel does not write every element).
inline Result<Tensor*> grad_slot(OpCall const& call, std::vector<Tensor>& grads, std::size_t i,
                                 std::vector<int64_t> const& shape, bool accumulate, bool zeroed,
                                 DType dtype = DType::kFloat32) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (accumulate) {
    if (!grads[i].defined() || grads[i].numel() != kernels::hd::numel_of(shape))
      return op_error(call, "gradient accumulator for input " + std::to_string(i) + " has shape " +
                                grads[i].shape_string() + ", expected " + ::gp::dims_string(shape));
    return &grads[i];
  }
  if (zeroed) {
    ASSIGN_OR_RETURN(grads[i], zeros(shape, dtype));
  } else {
    ASSIGN_OR_RETURN(grads[i], empty(shape, dtype));
  }
  return &grads[i];
}

inline Status in_op(OpCall const& call, Status s) { return s.with_context(call.op.type + " '" + call.op.name + "'"); }

template <typename V>
Status value_or_op_error(OpCall const& call, Result<V> const& r) {
  return r.is_ok() ? Status::ok() : op_error(call, r.status().message());
}

// Where gradient i is written: the existing accumulator, or a new tensor placed in grads[i].
inline Result<Tensor> grad_target(OpCall const& call, std::vector<Tensor>& grads, std::size_t i,
                                  std::vector<int64_t> const& shape, bool accumulate, DType dtype = DType::kFloat32) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (accumulate) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (!grads[i].defined() || grads[i].numel() != n)
      return op_error(call, "gradient accumulator for input " + std::to_string(i) + " has shape " +
                                grads[i].shape_string() + ", expected " + std::to_string(n) + " elements");
    return grads[i];
  }
  ASSIGN_OR_RETURN(grads[i], zeros(shape, dtype));  // zeros: an empty product (a 0 dim) still gives a defined gradient
  return grads[i];
}

inline bool has_input(OpCall const& call, std::size_t i) { return exec::has_input(call.op, i); }

inline int64_t spatial(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (std::size_t i = 2; i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace gp::exec::cuda
