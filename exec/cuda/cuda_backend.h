// The CUDA backend: one device, its compute, communication and copy streams, a stream-aware caching
// allocator, cuBLASLt for Gemm/MatMul, cuDNN (graph API) for Conv and BatchNormalization, and
// kernels/cuda for everything else. Same interface and conventions as the CPU backend
// (exec/cpu/cpu_backend.h), which is its reference: tests/cuda compares every op with it.
//
// Kernel table: the families of exec/cuda/<family>.cc; the CPU ops this backend does not run are
// derived from the op table, each with the reason (supports() reports it, so a plan is refused
// before anything runs).
// fp32 only for now; entries are keyed by (op definition, dtype) (exec/kernel_table.h), so bf16/fp16
// add entries.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "kernels/hd/optim.h"

namespace gp::exec::cuda {
struct DeviceContext;
class CachingAllocator;
class CudaDeviceMemory;
class PinnedHostPool;
class PinnedStaging;
}  // namespace gp::exec::cuda

namespace gp::exec {

struct CudaBackendOptions {
  std::size_t cublaslt_workspace_bytes = std::size_t{32} << 20;  // Hopper wants 32 MiB (llm.c)
  int64_t memory_limit_bytes = 0;  // 0: the device's own; else the plan's per-device limit
  // TF32 tensor cores for float32 Gemm/MatMul (cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32), as PyTorch's
  // torch.backends.cuda.matmul.allow_tf32; off: full float32 (PyTorch's default too). Convolutions
  // follow cuDNN's default (TF32 allowed, as torch.backends.cudnn.allow_tf32) either way, unless the
  // environment sets NVIDIA_TF32_OVERRIDE=0.
  bool tf32_matmul = false;
  // cuDNN engines without the NONDETERMINISTIC note (no atomics): two runs compute the same bits,
  // as torch.backends.cudnn.deterministic. The environment's GP_CUDNN_DETERMINISTIC=1 turns it on
  // for every backend of the process.
  bool deterministic = false;
};

class CudaBackend final : public Backend {
 public:
  // The backend of CUDA device `device`: kUnsupported "no usable CUDA GPU ..." without one.
  static Result<std::unique_ptr<CudaBackend>> create(int device, CudaBackendOptions const& options = {});
  ~CudaBackend() override;

  std::string name() const override;  // "cuda:<index>"
  DeviceRef device() const override { return {DeviceKind::kCuda, device_}; }
  Allocator& allocator() override;

  Status supports(graph::Op const& op, graph::OpGraph const& graph) const override;
  Result<ResolvedKernel> resolve(graph::Op const& op, graph::OpGraph const& graph) const override;
  Status forward(OpCall const& call, std::vector<Tensor> const& inputs, std::vector<Tensor>& outputs,
                 Saved* saved) override;
  Status backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                        std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs) override;
  Status backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                         std::vector<Tensor>& weight_grads) override;
  Status backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                  std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                  std::vector<Tensor>& weight_grads) override;

  Allocator* pinned_host_allocator() override;
  Tensor empty(std::vector<int64_t> shape, DType dtype = DType::kFloat32) override;
  Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32) override;
  Status fill(Tensor& t, float value) override;
  Status copy(Tensor const& src, Tensor& dst) override;
  // kCopy: a host-to-device copy from the pinned pool on the copy stream; else copy().
  Status copy_on(StreamKind stream, Tensor const& src, Tensor& dst) override;
  bool overlaps_copies() const override { return true; }
  Status add_into(Tensor& dst, Tensor const& src) override;  // float32, bfloat16 or half (same dtype)
  Status scale(Tensor& t, double factor) override;           // loss scaling, on the device
  Status scale_by(Tensor& t, Tensor const& factor) override;
  Result<bool> all_finite(std::vector<Tensor> const& tensors) override;  // one flag, one read back
  Status copy_chunks(Tensor const& src, std::vector<int> const& src_chunks, Tensor& dst,
                     std::vector<int> const& dst_chunks, int axis, int64_t chunk) override;
  Status loss_into(LossKind kind, Tensor const& output, Tensor const& labels, int64_t total_rows, Tensor& grad,
                   StepLosses& losses, int slot) override;
  // Both tensors copied into pinned host memory on the compute stream, then one synchronisation.
  Result<std::vector<double>> read_losses(StepLosses const& losses) override;
  bool defers_host_reads() const override { return true; }
  void defer_checks(bool on) override;  // Gather's indices and a loss op's targets
  Status deferred_checks() override;    // one synchronisation, when any check is queued
  Status optimizer_update(OptimizerConfig const& config, int64_t step, Tensor& param, Tensor const& grad,
                          std::vector<Tensor*> const& state) override;
  Status optimizer_update_all(OptimizerConfig const& config, int64_t step,
                              std::vector<ParamUpdate> const& updates) override;

  Event record(StreamKind stream) override;
  Status wait(StreamKind stream, Event event) override;
  HostFence fence(StreamKind stream) override;
  Status synchronize() override;
  // CUDA graphs: stream capture of the compute stream (thread-local mode, so that the data path's
  // thread goes on allocating pinned memory), the allocator's private pool and the deferred
  // checks' capture slots (exec/cuda/caching_allocator.h, deferred_checks.h); a replay launches
  // the instantiated graph on the compute stream and queues its checks.
  bool captures_work() const override { return true; }
  Status begin_capture() override;
  Result<std::unique_ptr<CapturedWork>> end_capture() override;
  Status replay(CapturedWork& work) override;

  // The raw streams (cudaStream_t) for transports that enqueue on them (NCCL).
  void* stream(StreamKind kind) const;
  // The device's caching allocator (statistics: raw mallocs, peaks).
  cuda::CachingAllocator& caching_allocator() { return *alloc_; }

  // The op types this backend runs (sorted), and those it does not with the reason. Static
  // tables: they need no GPU (the kernel-parity test reads them, and a run is checked against
  // them before any device is touched).
  static std::vector<std::string> op_types();
  static std::map<std::string, std::string> unsupported_ops();
  struct Coverage {
    bool forward = false, backward_input = false, backward_weight = false;
  };
  static std::map<std::string, Coverage> coverage();  // per op type (any dtype's entry)
  // Per op type, the dtypes its entries are keyed by (the dtype of the op's data input).
  static std::map<std::string, std::set<DType>> entry_dtypes();
  // What supports() answers, without a device: Ok or kUnsupported naming op, dtype and reason.
  static Status supports_op(graph::Op const& op, graph::OpGraph const& graph);

 private:
  CudaBackend() = default;
  Status init(int device, CudaBackendOptions const& options);
  Status device_op_error(std::string const& what) const;

  int device_ = 0;
  std::unique_ptr<cuda::DeviceContext> ctx_;
  std::unique_ptr<cuda::CudaDeviceMemory> raw_;  // declared before alloc_: outlives it
  std::unique_ptr<cuda::CachingAllocator> alloc_;
  std::unique_ptr<cuda::PinnedStaging> staging_;     // asynchronous copies from pageable host memory
  std::unique_ptr<cuda::PinnedHostPool> host_pool_;  // pinned batches, copied without staging
  struct Events;
  std::unique_ptr<Events> events_;
  // optimizer_update_all's parameter tables and chunks on the device, one per set of parameters (a
  // worker may run several stages, each with its optimizer), uploaded once: the parameters,
  // gradients and moments stay put from step to step. The most recently used first; at most 16.
  struct MultiTensorTable {
    std::vector<kernels::hd::MultiTensorEntry> entries;
    int64_t chunks = 0;
    Tensor table;  // the entries, then the chunks
  };
  std::vector<MultiTensorTable> multi_;
};

}  // namespace gp::exec
