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

using Verdict = DeferredChecks::Verdict;

// The error for a verdict that says the index at position first_bad * scale is out of range.
Status index_error(graph::Op const& op, Verdict const& v, int64_t scale, std::string const& range) {
  uint64_t const at = v.first_bad * static_cast<uint64_t>(scale);
  return graph::ops::op_error(
      op, "index " + std::to_string(v.index) + " (position " + std::to_string(at) + ") is out of range for " + range);
}

// A flag's verdict: queued while the backend defers checks and `deferrable`, else read back at once
// (a synchronisation); `error` makes the op's error of a failed verdict.
Status resolve_verdict(DeviceContext& ctx, Tensor const& flag, bool deferrable, DeferredChecks::ErrorFor error) {
  if (deferrable && ctx.checks.on) return ctx.checks.queue(flag.raw(), std::move(error));
  Verdict v;
  GP_CUDA_CHECK(cudaMemcpyAsync(&v, flag.raw(), sizeof v, cudaMemcpyDeviceToHost, ctx.compute));
  GP_CUDA_CHECK(cudaStreamSynchronize(ctx.compute));
  if (v.first_bad == DeferredChecks::kNoBadIndex) return Status::ok();
  return error(v);
}

}  // namespace

Result<Tensor> index_flag() { return empty({2}, DType::kInt64); }

Status check_index_flag(OpCall const& call, Tensor const& idx, Tensor& flag, int64_t scale, std::string const& range,
                        bool deferrable) {
  if (flag.nbytes() != sizeof(Verdict) || (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32))
    return internal_error("an index check of " + flag.shape_string() + " flags over " + idx.shape_string() + " " +
                          graph::dtype_name(idx.dtype()) + " indices");
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  cudaStream_t const s = ctx->compute;
  GP_CUDA_CHECK(kernels::cuda::note_bad_index(static_cast<unsigned long long*>(flag.raw()), idx.raw(),
                                              idx.dtype() == DType::kInt64, scale, s));
  graph::Op const* const op = &call.op;  // the graph outlives the step that resolves the check
  return resolve_verdict(*ctx, flag, deferrable,
                         [op, scale, range](Verdict const& v) { return index_error(*op, v, scale, range); });
}

Status check_position_flag(Tensor& flag, std::function<Status(uint64_t position)> error) {
  if (flag.nbytes() != sizeof(Verdict)) return internal_error("a position check flags in " + flag.shape_string());
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  return resolve_verdict(*ctx, flag, /*deferrable=*/true,
                         [error = std::move(error)](Verdict const& v) { return error(v.first_bad); });
}

}  // namespace gp::exec::cuda
