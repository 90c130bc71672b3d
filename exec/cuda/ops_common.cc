#include "exec/cuda/ops_common.h"

#include <cstring>

#include "kernels/cuda/device_ops.h"

namespace gp::exec::cuda {

Result<cudaStream_t> compute_stream() {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  return ctx->compute;
}

Status add_into(Tensor& dst, Tensor const& src) {
  if (dst.dtype() != DType::kFloat32 || src.dtype() != DType::kFloat32 || dst.numel() != src.numel())
    return internal_error("add_into " + src.shape_string() + " into " + dst.shape_string());
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kernels::cuda::add_inplace(dst.data<float>(), src.data<float>(), dst.numel(), s));
  return Status::ok();
}

Status emit_grad(OpCall const& call, std::vector<Tensor>& grads, std::size_t i, Tensor g, bool accumulate) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (!accumulate) {
    grads[i] = std::move(g);
    return Status::ok();
  }
  Tensor& dst = grads[i];
  if (!dst.defined() || dst.numel() != g.numel())
    return op_error(call, "gradient accumulator for input " + std::to_string(i) + " has shape " + dst.shape_string() +
                              ", expected " + g.shape_string());
  return add_into(dst, g);
}

Result<Tensor> grad_or_zeros(std::vector<Tensor> const& grad_outputs, std::size_t i,
                             std::vector<int64_t> const& shape) {
  if (i < grad_outputs.size() && grad_outputs[i].defined()) return grad_outputs[i];
  return zeros(shape);
}

Tensor shape_tensor(std::vector<int64_t> const& shape) {
  Tensor t({static_cast<int64_t>(shape.size())}, DType::kInt64, process_cpu_allocator());
  if (!shape.empty()) std::memcpy(t.raw(), shape.data(), shape.size() * sizeof(int64_t));
  return t;
}

std::vector<int64_t> shape_of(Tensor const& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

}  // namespace gp::exec::cuda
