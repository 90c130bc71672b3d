#include "exec/cuda/device_context.h"

#include "exec/cuda/cuda_check.h"

namespace gp::exec::cuda {
namespace {
thread_local DeviceContext* t_current = nullptr;
thread_local int t_set_device_rc = 0;  // cudaSetDevice's result for t_current's device
}  // namespace

Result<DeviceContext*> current_context() {
  if (t_current == nullptr) return internal_error("a CUDA op ran outside CudaBackend (no current device context)");
  if (t_set_device_rc != 0) return cuda_error(t_set_device_rc, "cudaSetDevice", __FILE__, __LINE__);
  return t_current;
}

// Also makes the context's device current for this thread: a process may drive several GPUs from
// several worker threads, and every runtime call acts on the thread's current device. A failure is
// kept for current_context(), which every op calls first, and read off the runtime now so that it
// is not the thread's last error when a later kernel launch asks for its own.
ScopedContext::ScopedContext(DeviceContext& ctx) : previous_(t_current), previous_set_device_rc_(t_set_device_rc) {
  t_current = &ctx;
  t_set_device_rc = static_cast<int>(cudaSetDevice(ctx.device));
  if (t_set_device_rc != 0) clear_last_cuda_error();
}
ScopedContext::~ScopedContext() {
  t_current = previous_;
  t_set_device_rc = previous_set_device_rc_;
}

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
