#include "exec/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <utility>

#include "exec/cuda/caching_allocator.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/cuda_check.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/device_context.h"
#include "exec/cuda/device_memory.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/pinned_staging.h"
#include "exec/kernel_table.h"
#include "graph/ops/common.h"
#include "graph/ops/registry.h"

namespace gp::exec {
namespace {

using cuda::KernelEntry;
using Table = KernelTable<KernelEntry>;

Table const& kernel_table() {
  static Table const table = [] {
    Table t;
    for (auto family :
         {cuda::activation_kernels, cuda::binary_kernels, cuda::logic_kernels, cuda::reduce_kernels, cuda::view_kernels,
          cuda::move_kernels, cuda::index_kernels, cuda::loss_kernels, cuda::pool_kernels, cuda::linalg_kernels,
          cuda::conv_kernels, cuda::norm_kernels, cuda::rnn_kernels})
      for (KernelEntry& e : family()) {
        OpKind const op = e.op;
        DType const dtype = e.dtype;
        t.add(op, dtype, std::move(e));
      }
    return t;
  }();
  return table;
}

// What the CUDA backend does not run, and why: every op type the importer lowers (the op table of
// graph/ops) without an entry in the CUDA kernel table. supports() names the reason; the
// kernel-parity test fails if an entry lacks B or W.
std::map<std::string, std::string> const& unsupported_table() {
  static std::map<std::string, std::string> const table = [] {
    std::map<std::string, std::string> t;
    for (auto const& [type, def] : graph::ops::op_table())
      if (def.infer && !kernel_table().runs(&def))
        t[type] = "not implemented on CUDA yet (CPU backend only); run this model with --backend cpu";
    return t;
  }();
  return table;
}

KernelEntry const* find(graph::Op const& op, graph::OpGraph const& graph) { return kernel_table().find(op, graph); }

std::string describe(graph::Op const& op, graph::OpGraph const& graph) {
  return "op type '" + op.type + "' (node '" + op.name + "', dtype " + graph::dtype_name(data_dtype(op, graph)) + ")";
}

Status with_op(Status s, OpCall const& call) { return graph::ops::in_op(std::move(s), call.op); }

// Runs one kernel-table function: a device allocation that fails inside it (exec::Allocator
// throws, as it cannot return a Status) becomes the allocator's out-of-memory Status.
template <typename F>
Status guarded(cuda::CachingAllocator& alloc, OpCall const& call, F&& f) {
  try {
    return with_op(f(), call);
  } catch (std::bad_alloc const&) {
    return with_op(infeasible(alloc.last_error()), call);
  } catch (std::runtime_error const& e) {
    return with_op(internal_error(e.what()), call);
  }
}

Result<KernelEntry const*> checked_entry(graph::Op const& op, graph::OpGraph const& graph) {
  auto miss = [&](std::string const& why) {
    return unsupported(describe(op, graph) + " is not supported by the CUDA backend: " + why);
  };
  if (auto u = unsupported_table().find(op.type); u != unsupported_table().end()) return miss(u->second);
  KernelEntry const* e = find(op, graph);
  if (e == nullptr) return miss("no CUDA kernel for this op type and dtype");
  if (op.inputs.size() < e->min_inputs)
    return miss("needs at least " + std::to_string(e->min_inputs) + " inputs, has " + std::to_string(op.inputs.size()));
  for (std::size_t i = 0; i < e->min_inputs; ++i)
    if (op.inputs[i] == graph::kNoTensor) return miss("input " + std::to_string(i) + " is missing");
  if (e->kernels.check)
    if (Status s = e->kernels.check(op, graph); !s) return miss(s.message());
  return e;
}

}  // namespace

namespace {
// The CUDA calls of the pinned staging ring and pool: pinned host memory, copies and events on
// the compute stream. Each makes the device current: the pool frees blocks on whichever thread
// drops a batch.
cuda::StagingOps staging_ops(cuda::DeviceContext* ctx) {
  cudaStream_t const stream = ctx->compute;
  cuda::StagingOps o;
  o.host_alloc = [ctx](std::size_t n) -> Result<void*> {
    cuda::ScopedContext scope(*ctx);
    void* p = nullptr;
    GP_CUDA_CHECK(cudaHostAlloc(&p, n, cudaHostAllocDefault));
    return p;
  };
  o.host_free = [](void* p) { (void)cudaFreeHost(p); };
  o.copy_async = [stream](void* dst, void const* src, std::size_t n) -> Status {
    GP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
    return Status::ok();
  };
  o.event_create = [ctx]() -> Result<void*> {
    cuda::ScopedContext scope(*ctx);
    cudaEvent_t e = nullptr;
    GP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return static_cast<void*>(e);
  };
  o.event_record = [stream, ctx](void* e) -> Status {
    cuda::ScopedContext scope(*ctx);
    GP_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), stream));
    return Status::ok();
  };
  o.event_wait = [](void* e) -> Status {
    GP_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e)));
    return Status::ok();
  };
  o.event_done = [](void* e) -> Result<bool> {
    cudaError_t const r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not yet" is an answer, not an error for the next call's check
      return false;
    }
    GP_CUDA_CHECK(r);
    return true;
  };
  o.event_destroy = [](void* e) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); };
  return o;
}

// The CUDA calls of the deferred index checks: pinned slots, verdicts copied into them on the
// compute stream, and the stream's synchronisation.
cuda::DeferredChecks::Calls deferred_check_calls(cuda::DeviceContext* ctx) {
  cudaStream_t const stream = ctx->compute;
  cuda::StagingOps const pinned = staging_ops(ctx);  // the pinned host memory calls
  cuda::DeferredChecks::Calls c;
  using Verdict = cuda::DeferredChecks::Verdict;
  c.host_alloc = [alloc = pinned.host_alloc](std::size_t n) -> Result<Verdict*> {
    ASSIGN_OR_RETURN(void* p, alloc(n * sizeof(Verdict)));
    return static_cast<Verdict*>(p);
  };
  c.host_free = [free = pinned.host_free](Verdict* p) { free(p); };
  c.copy_async = [stream](Verdict* slot, void const* verdict) -> Status {
    GP_CUDA_CHECK(cudaMemcpyAsync(slot, verdict, sizeof(Verdict), cudaMemcpyDeviceToHost, stream));
    return Status::ok();
  };
  c.synchronize = [stream]() -> Status {
    GP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return Status::ok();
  };
  return c;
}
}  // namespace

struct CudaBackend::Events {
  std::mutex mu;
  std::vector<cudaEvent_t> free;
  std::map<uint64_t, cudaEvent_t> live;
  uint64_t next = 1;
};

std::vector<std::string> CudaBackend::op_types() { return kernel_table().op_types(); }

std::map<std::string, std::string> CudaBackend::unsupported_ops() { return unsupported_table(); }

std::map<std::string, CudaBackend::Coverage> CudaBackend::coverage() {
  std::map<std::string, Coverage> out;
  // An op counts as covered by any of its dtypes' entries (the logic family's bool-only ones too).
  for (auto const& [key, e] : kernel_table().entries()) {
    Coverage& c = out[std::string(graph::ops::op_kind_name(key.first->kind))];
    c.forward = c.forward || e.kernels.forward != nullptr;
    c.backward_input = c.backward_input || e.kernels.backward_input != nullptr;
    c.backward_weight = c.backward_weight || e.kernels.backward_weight != nullptr;
  }
  return out;
}

std::map<std::string, std::set<DType>> CudaBackend::entry_dtypes() {
  std::map<std::string, std::set<DType>> out;
  for (auto const& [key, e] : kernel_table().entries())
    out[std::string(graph::ops::op_kind_name(key.first->kind))].insert(key.second);
  return out;
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int device, CudaBackendOptions const& options) {
  RETURN_IF_ERROR(cuda::device_available());
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  RETURN_IF_ERROR(b->init(device, options));
  return b;
}

Status CudaBackend::init(int device, CudaBackendOptions const& options) {
  int count = 0;
  GP_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return invalid_argument("CUDA device " + std::to_string(device) + " does not exist: this machine has " +
                            std::to_string(count) + " (use --devices " + std::to_string(count) + " or fewer)");
  device_ = device;
  GP_CUDA_CHECK(cudaSetDevice(device));
  ctx_ = std::make_unique<cuda::DeviceContext>();
  ctx_->device = device;
  GP_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_->compute, cudaStreamNonBlocking));
  GP_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_->comm, cudaStreamNonBlocking));
  GP_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_->copy, cudaStreamNonBlocking));
  ctx_->checks = cuda::DeferredChecks(deferred_check_calls(ctx_.get()));
  raw_ = std::make_unique<cuda::CudaDeviceMemory>(device);
  alloc_ = std::make_unique<cuda::CachingAllocator>(*raw_, device);
  alloc_->set_default_stream(cuda::stream_id(ctx_->compute));
  if (options.memory_limit_bytes > 0) alloc_->set_memory_limit(static_cast<std::size_t>(options.memory_limit_bytes));
  ctx_->allocator = alloc_.get();
  cublasLtHandle_t lt = nullptr;
  GP_CUBLAS_CHECK(cublasLtCreate(&lt));
  ctx_->cublaslt = lt;
  ctx_->cublaslt_workspace_bytes = options.cublaslt_workspace_bytes;
  ctx_->tf32_matmul = options.tf32_matmul;
  ctx_->deterministic = options.deterministic || cuda::deterministic_from_environment();
  GP_CUDA_CHECK(cudaMalloc(&ctx_->cublaslt_workspace, ctx_->cublaslt_workspace_bytes));
  cudnnHandle_t dnn = nullptr;
  GP_CUDNN_CHECK(cudnnCreate(&dnn));
  ctx_->cudnn = dnn;
  GP_CUDNN_CHECK(cudnnSetStream(dnn, ctx_->compute));
  events_ = std::make_unique<Events>();
  staging_ = std::make_unique<cuda::PinnedStaging>(staging_ops(ctx_.get()));
  host_pool_ = std::make_unique<cuda::PinnedHostPool>(staging_ops(ctx_.get()));
  return Status::ok();
}

CudaBackend::~CudaBackend() {
  if (!ctx_) return;
  (void)cudaSetDevice(device_);
  (void)synchronize();
  multi_.clear();        // the tables live in alloc_
  ctx_->checks.clear();  // a step's unread checks (the captures' slots they keep)
  staging_.reset();      // its copies are done: the stream was synchronized
  host_pool_.reset();
  if (events_) {
    for (cudaEvent_t e : events_->free) (void)cudaEventDestroy(e);
    for (auto& [id, e] : events_->live) (void)cudaEventDestroy(e);
  }
  if (ctx_->cudnn) (void)cudnnDestroy(ctx_->cudnn);
  if (ctx_->cublaslt) (void)cublasLtDestroy(ctx_->cublaslt);
  if (ctx_->cublaslt_workspace) (void)cudaFree(ctx_->cublaslt_workspace);
  alloc_.reset();  // returns the cached segments before the streams go
  if (ctx_->compute) (void)cudaStreamDestroy(ctx_->compute);
  if (ctx_->comm) (void)cudaStreamDestroy(ctx_->comm);
  if (ctx_->copy) (void)cudaStreamDestroy(ctx_->copy);
  (void)cudaGetLastError();  // a teardown failure is nobody's to report: keep it from the next call's check
}

std::string CudaBackend::name() const { return "cuda:" + std::to_string(device_); }

Allocator& CudaBackend::allocator() { return *alloc_; }

namespace {

cudaStream_t stream_of(cuda::DeviceContext const& ctx, Backend::StreamKind kind) {
  switch (kind) {
    case Backend::StreamKind::kCompute:
      return ctx.compute;
    case Backend::StreamKind::kCommunication:
      return ctx.comm;
    case Backend::StreamKind::kCopy:
      return ctx.copy;
  }
  return ctx.compute;
}

}  // namespace

void* CudaBackend::stream(StreamKind kind) const { return static_cast<void*>(stream_of(*ctx_, kind)); }

Status CudaBackend::supports(graph::Op const& op, graph::OpGraph const& graph) const { return supports_op(op, graph); }

Status CudaBackend::supports_op(graph::Op const& op, graph::OpGraph const& graph) {
  return checked_entry(op, graph).status();
}

Result<ResolvedKernel> CudaBackend::resolve(graph::Op const& op, graph::OpGraph const& graph) const {
  ASSIGN_OR_RETURN(KernelEntry const* e, checked_entry(op, graph));
  return ResolvedKernel{this, e};
}

Status CudaBackend::forward(OpCall const& call, std::vector<Tensor> const& inputs, std::vector<Tensor>& outputs,
                            Saved* saved) {
  KernelEntry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  RETURN_IF_ERROR(check_forward_inputs(call, e->min_inputs, inputs));
  cuda::ScopedContext scope(*ctx_);
  if (saved) saved->tensors.clear();
  return guarded(*alloc_, call, [&] { return e->kernels.forward(bound_to(call, *this), inputs, outputs, saved); });
}

Status CudaBackend::backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                   std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs) {
  KernelEntry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  cuda::ScopedContext scope(*ctx_);
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  return guarded(*alloc_, call, [&] {
    return e->kernels.backward_input(bound_to(call, *this), saved, grad_outputs, needs_grad, grad_inputs, false);
  });
}

Status CudaBackend::backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                    std::vector<Tensor>& weight_grads) {
  KernelEntry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  std::vector<bool> const wanted = wanted_weight_grads(weight_grads);
  if (wanted.empty()) return Status::ok();
  cuda::ScopedContext scope(*ctx_);
  return guarded(*alloc_, call, [&] {
    return e->kernels.backward_weight(bound_to(call, *this), saved, grad_outputs, wanted, weight_grads, true);
  });
}

Status CudaBackend::backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                             std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                             std::vector<Tensor>& weight_grads) {
  KernelEntry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  if (e->kernels.backward_both == nullptr)
    return Backend::backward(call, saved, grad_outputs, needs_grad, grad_inputs, weight_grads);
  cuda::ScopedContext scope(*ctx_);
  return guarded(*alloc_, call, [&] {
    return e->kernels.backward_both(bound_to(call, *this), saved, grad_outputs, needs_grad, grad_inputs, weight_grads);
  });
}

Backend::Event CudaBackend::record(StreamKind stream) {
  cuda::ScopedContext scope(*ctx_);
  std::lock_guard lock(events_->mu);
  cudaEvent_t e = nullptr;
  if (!events_->free.empty()) {
    e = events_->free.back();
    events_->free.pop_back();
  } else if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaGetLastError();
    // No event: make the next wait a full synchronisation instead (correct, slower).
    return {~uint64_t{0}};
  }
  if (cudaEventRecord(e, stream_of(*ctx_, stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    events_->free.push_back(e);
    return {~uint64_t{0}};
  }
  uint64_t const id = events_->next++;
  events_->live.emplace(id, e);
  return {id};
}

Status CudaBackend::wait(StreamKind stream, Event event) {
  if (event.id == 0) return Status::ok();
  if (event.id == ~uint64_t{0}) return synchronize();
  cudaEvent_t e = nullptr;
  {
    std::lock_guard lock(events_->mu);
    auto it = events_->live.find(event.id);
    if (it == events_->live.end()) return internal_error("wait for an unknown event " + std::to_string(event.id));
    e = it->second;
    events_->live.erase(it);
  }
  // The event is recycled after the wait is enqueued: a later record re-arms it, and CUDA
  // resolves cudaStreamWaitEvent against the record that preceded the call.
  Status s = Status::ok();
  if (cudaError_t rc = cudaStreamWaitEvent(stream_of(*ctx_, stream), e, 0); rc != cudaSuccess)
    s = cuda::cuda_error(rc, "cudaStreamWaitEvent", __FILE__, __LINE__);
  std::lock_guard lock(events_->mu);
  events_->free.push_back(e);
  return s;
}

HostFence CudaBackend::fence(StreamKind stream) {
  cuda::ScopedContext scope(*ctx_);
  cudaStream_t const s = stream_of(*ctx_, stream);
  cudaEvent_t e = nullptr;
  cudaError_t rc = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (rc == cudaSuccess) {
    rc = cudaEventRecord(e, s);
    if (rc != cudaSuccess) (void)cudaEventDestroy(e);
  }
  if (rc != cudaSuccess) {
    // No event: wait for the stream here instead (correct, slower), as record() does.
    (void)cudaGetLastError();
    if (cudaError_t const r = cudaStreamSynchronize(s); r != cudaSuccess) {
      Status const failed = cuda::cuda_error(r, "cudaStreamSynchronize (a fence)", __FILE__, __LINE__);
      return [failed] { return failed; };
    }
    return {};
  }
  // Shared by the copies of the fence; the event is destroyed with the last of them.
  std::shared_ptr<CUevent_st> const event(e, [](cudaEvent_t ev) { (void)cudaEventDestroy(ev); });
  return [event]() -> Status {
    if (cudaError_t const r = cudaEventSynchronize(event.get()); r != cudaSuccess) {
      (void)cudaGetLastError();
      return cuda::cuda_error(r, "cudaEventSynchronize (waiting for the sender's kernels)", __FILE__, __LINE__);
    }
    return Status::ok();
  };
}

Status CudaBackend::synchronize() {
  cuda::ScopedContext scope(*ctx_);
  {
    std::lock_guard lock(ctx_->deferred_mu);
    if (!ctx_->deferred.is_ok()) return std::exchange(ctx_->deferred, Status::ok());
  }
  GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->compute));
  GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->comm));
  GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->copy));
  return Status::ok();
}

namespace {

class CudaCapturedWork final : public Backend::CapturedWork {
 public:
  CudaCapturedWork(cudaGraphExec_t exec, cuda::DeferredChecks::Captured checks)
      : exec_(exec), checks_(std::move(checks)) {}
  ~CudaCapturedWork() override { (void)cudaGraphExecDestroy(exec_); }
  CudaCapturedWork(CudaCapturedWork const&) = delete;
  CudaCapturedWork& operator=(CudaCapturedWork const&) = delete;

  cudaGraphExec_t exec() const { return exec_; }
  cuda::DeferredChecks::Captured const& checks() const { return checks_; }

 private:
  cudaGraphExec_t exec_;
  cuda::DeferredChecks::Captured checks_;
};

}  // namespace

Status CudaBackend::begin_capture() {
  cuda::ScopedContext scope(*ctx_);
  if (ctx_->capturing) return internal_error("a capture is already open on " + name());
  // The segments the eager steps left free go back to the device, so that the captured work's
  // private pool can take that memory instead of holding the activations a second time.
  RETURN_IF_ERROR(alloc_->empty_cache());
  RETURN_IF_ERROR(ctx_->checks.begin_capture());  // pinned slots: made before the stream records
  if (Status const s = alloc_->begin_capture(cuda::stream_id(ctx_->compute)); !s.is_ok()) {
    ctx_->checks.abort_capture();
    return s;
  }
  if (cudaError_t const rc = cudaStreamBeginCapture(ctx_->compute, cudaStreamCaptureModeThreadLocal);
      rc != cudaSuccess) {
    (void)cudaGetLastError();
    (void)alloc_->end_capture();
    ctx_->checks.abort_capture();
    return cuda::cuda_error(rc, "cudaStreamBeginCapture", __FILE__, __LINE__);
  }
  ctx_->capturing = true;
  return Status::ok();
}

Result<std::unique_ptr<Backend::CapturedWork>> CudaBackend::end_capture() {
  cuda::ScopedContext scope(*ctx_);
  if (!ctx_->capturing) return internal_error("no capture is open on " + name());
  ctx_->capturing = false;
  cudaGraph_t graph = nullptr;
  cudaError_t const ended = cudaStreamEndCapture(ctx_->compute, &graph);
  (void)cudaGetLastError();  // an invalidated capture is this call's answer, not the next call's error
  std::unique_ptr<CUgraph_st, cudaError_t (*)(cudaGraph_t)> const owned(graph, &cudaGraphDestroy);
  Status const memory = alloc_->end_capture();
  Result<cuda::DeferredChecks::Captured> checks = ctx_->checks.end_capture();
  if (ended != cudaSuccess || graph == nullptr) {
    // A failure a call inside the capture could only defer (Backend::zeros' memset) is part of it.
    std::lock_guard lock(ctx_->deferred_mu);
    ctx_->deferred = Status::ok();
    return unsupported(
        "the work could not be captured: an operation in it waits for the device or is not "
        "recordable (" +
        std::string(cudaGetErrorString(ended)) + ")");
  }
  RETURN_IF_ERROR(memory);
  RETURN_IF_ERROR(checks.status());
  cudaGraphExec_t exec = nullptr;
  if (cudaError_t const rc = cudaGraphInstantiate(&exec, graph, 0); rc != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda::cuda_error(rc, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  return std::unique_ptr<CapturedWork>(new CudaCapturedWork(exec, std::move(*checks)));
}

Status CudaBackend::replay(CapturedWork& work) {
  auto* const captured = dynamic_cast<CudaCapturedWork*>(&work);
  if (captured == nullptr) return internal_error("replay on " + name() + " of work another backend captured");
  cuda::ScopedContext scope(*ctx_);
  GP_CUDA_CHECK(cudaGraphLaunch(captured->exec(), ctx_->compute));
  ctx_->checks.adopt(captured->checks());
  return Status::ok();
}

void CudaBackend::defer_checks(bool on) {
  ctx_->checks.on = on;
  if (!on) ctx_->checks.clear();  // unresolved ones belong to a step that failed anyway
}

Status CudaBackend::deferred_checks() {
  cuda::ScopedContext scope(*ctx_);
  return ctx_->checks.resolve();
}

}  // namespace gp::exec
