// The CUDA backend's pool family: MaxPool (keeping its arg-max for backward), AveragePool and
// GlobalAveragePool. Same inputs, outputs and conventions as the CPU's exec/cpu/pool.cc; kernels in
// kernels/cuda/move.h.

#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "graph/ops/move.h"
#include "graph/ops/pool.h"
#include "graph/ops/view.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// ---- MaxPool, AveragePool, GlobalAveragePool ----

template <typename T>
Status pool_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  RETURN_IF_ERROR(need_float(call, in[0], dtype_of<T>()));
  hd::PoolParams p;
  std::vector<int64_t> shape;
  RETURN_IF_ERROR(pool_params(call, in[0].shape(), p, shape));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, dtype_of<T>()));
  Tensor argmax;
  if (p.mode == hd::PoolMode::kMax) {
    ASSIGN_OR_RETURN(argmax, empty(shape, DType::kInt32));
  }
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(
      kc::pool_forward(in[0].data<T>(), y.data<T>(), argmax.defined() ? argmax.data<int32_t>() : nullptr, p, s));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1 && argmax.defined()) {  // MaxPool's Indices
    ASSIGN_OR_RETURN(out[1], empty(shape, DType::kInt64));
    GP_CUDA_CHECK(kc::pool_indices(argmax.data<int32_t>(), p, attrs_of<graph::PoolAttrs>(call.op)->indices_column_major,
                                   out[1].data<int64_t>(), s));
  }
  if (saved) saved->tensors = {shape_tensor(in[0].shape()), argmax};
  return Status::ok();
}

template <typename T>
Status pool_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const x_shape = shape_of(saved.tensors.at(0));
  hd::PoolParams p;
  std::vector<int64_t> shape;
  RETURN_IF_ERROR(pool_params(call, x_shape, p, shape));
  Tensor const& argmax = saved.tensors.at(1);
  if (p.mode == hd::PoolMode::kMax && !argmax.defined()) return internal_error("MaxPool backward without its arg-max");
  ASSIGN_OR_RETURN(Tensor * dx, grad_slot(call, grads, 0, x_shape, accumulate, false, dtype_of<T>()));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::pool_backward(gout[0].data<T>(), argmax.defined() ? argmax.data<int32_t>() : nullptr, dx->data<T>(),
                                  p, accumulate, s));
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> pool_kernels() {
  std::vector<KernelEntry> t;
  OpKernels const pool{pool_forward<float>, pool_backward<float>, pool_backward<float>, graph::ops::pool_check};
  // Mixed precision: pooling follows its 16-bit input (averages summed in float).
  OpKernels const bf16{pool_forward<__nv_bfloat16>, pool_backward<__nv_bfloat16>, pool_backward<__nv_bfloat16>,
                       graph::ops::pool_check};
  OpKernels const f16{pool_forward<__half>, pool_backward<__half>, pool_backward<__half>, graph::ops::pool_check};
  for (OpKind p : {OpKind::kMaxPool, OpKind::kAveragePool, OpKind::kGlobalAveragePool}) {
    t.push_back({p, DType::kFloat32, pool, 1});
    t.push_back({p, DType::kBFloat16, bf16, 1});
    t.push_back({p, DType::kFloat16, f16, 1});
  }
  return t;
}

}  // namespace gp::exec::cuda
