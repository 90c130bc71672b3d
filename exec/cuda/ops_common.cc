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

}  // namespace gp::exec::cuda
