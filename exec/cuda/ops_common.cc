#include "exec/cuda/ops_common.h"

#include <cstring>
#include <limits>

#include "graph/ops/common.h"
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

Result<Tensor> copy_of(Tensor const& src) {
  ASSIGN_OR_RETURN(Tensor dst, empty(src.shape(), src.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (src.nbytes() > 0)
    GP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream));
  return dst;
}

namespace {

// The error for a flag that says the index at position first_bad * scale is out of range (one
// more read: the index's value).
Status index_error(graph::Op const& op, Tensor const& idx, uint64_t first_bad, int64_t scale, std::string const& range,
                   cudaStream_t s) {
  uint64_t const at = first_bad * static_cast<uint64_t>(scale);
  std::size_t const width = graph::dtype_size(idx.dtype());
  int64_t value = 0;
  int32_t value32 = 0;
  void* host = width == sizeof value ? static_cast<void*>(&value) : static_cast<void*>(&value32);
  GP_CUDA_CHECK(
      cudaMemcpyAsync(host, static_cast<char const*>(idx.raw()) + at * width, width, cudaMemcpyDeviceToHost, s));
  GP_CUDA_CHECK(cudaStreamSynchronize(s));
  if (width != sizeof value) value = value32;
  return graph::ops::op_error(
      op, "index " + std::to_string(value) + " (position " + std::to_string(at) + ") is out of range for " + range);
}

}  // namespace

Status check_index_flag(OpCall const& call, Tensor const& idx, Tensor const& flag, int64_t scale,
                        std::string const& range, bool deferrable) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  cudaStream_t const s = ctx->compute;
  if (deferrable && ctx->checks.on) {
    graph::Op const* const op = &call.op;  // the graph outlives the step that resolves the check
    return ctx->checks.queue(flag.raw(), [op, idx, scale, range, s](uint64_t first_bad) {
      return index_error(*op, idx, first_bad, scale, range, s);
    });
  }
  unsigned long long first_bad = 0;
  GP_CUDA_CHECK(cudaMemcpyAsync(&first_bad, flag.raw(), sizeof first_bad, cudaMemcpyDeviceToHost, s));
  GP_CUDA_CHECK(cudaStreamSynchronize(s));
  if (first_bad == std::numeric_limits<unsigned long long>::max()) return Status::ok();
  return index_error(call.op, idx, first_bad, scale, range, s);
}

}  // namespace gp::exec::cuda
