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

Result<Tensor> grad_or_zeros(std::vector<Tensor> const& grad_outputs, std::size_t i,
                             std::vector<int64_t> const& shape) {
  if (i < grad_outputs.size() && grad_outputs[i].defined()) return grad_outputs[i];
  return zeros(shape);
}

}  // namespace gp::exec::cuda
