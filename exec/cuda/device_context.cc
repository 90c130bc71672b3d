#include "exec/cuda/device_context.h"

#include "exec/cuda/cuda_check.h"

namespace gp::exec::cuda {
namespace {
thread_local DeviceContext* t_current = nullptr;
}

Result<DeviceContext*> current_context() {
  if (t_current == nullptr) return internal_error("a CUDA op ran outside CudaBackend (no current device context)");
  return t_current;
}

// Also makes the context's device current for this thread: a process may drive several GPUs from
// several worker threads, and every runtime call acts on the thread's current device.
ScopedContext::ScopedContext(DeviceContext& ctx) : previous_(t_current) {
  t_current = &ctx;
  (void)cudaSetDevice(ctx.device);  // a failure here resurfaces at the first checked call
}
ScopedContext::~ScopedContext() { t_current = previous_; }

Result<Tensor> empty(std::vector<int64_t> shape, DType dtype) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  return Tensor(std::move(shape), dtype, *ctx->allocator);
}

Result<Tensor> zeros(std::vector<int64_t> shape, DType dtype) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  Tensor t(std::move(shape), dtype, *ctx->allocator);
  if (t.nbytes() > 0) GP_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), ctx->compute));
  return t;
}

}  // namespace gp::exec::cuda
