// The CUDA backend's device operations (exec/backend.h): everything is enqueued on the compute
// stream; only loss() synchronises, for the scalar it returns (and the label check), and copies
// into host memory.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "exec/cuda/caching_allocator.h"
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/cuda_check.h"
#include "exec/cuda/device_context.h"
#include "exec/cuda/low_precision.h"
#include "exec/cuda/pinned_staging.h"
#include "exec/optimizer.h"
#include "kernels/cuda/device_ops.h"

namespace gp::exec {
namespace {

bool on_host(Tensor const& t) { return t.device().kind == DeviceKind::kCpu; }

}  // namespace

Status CudaBackend::device_op_error(std::string const& what) const { return internal_error(name() + ": " + what); }

Tensor CudaBackend::empty(std::vector<int64_t> shape, DType dtype) { return Tensor(std::move(shape), dtype, *alloc_); }

Tensor CudaBackend::zeros(std::vector<int64_t> shape, DType dtype) {
  cuda::ScopedContext scope(*ctx_);
  Tensor t(std::move(shape), dtype, *alloc_);
  // Backend::zeros cannot return a Status: a failed memset is kept for the next synchronize() (the
  // step ends with one) and read off the runtime now, so that the next op's launch check does not
  // report it as its own.
  if (t.nbytes() == 0) return t;
  if (cudaError_t const rc = cudaMemsetAsync(t.raw(), 0, t.nbytes(), ctx_->compute); rc != cudaSuccess) {
    Status const s = cuda::cuda_error(rc, "cudaMemsetAsync in zeros", __FILE__, __LINE__);
    std::lock_guard lock(ctx_->deferred_mu);
    if (ctx_->deferred.is_ok()) ctx_->deferred = s;
  }
  return t;
}

Allocator* CudaBackend::pinned_host_allocator() { return host_pool_.get(); }

Status CudaBackend::fill(Tensor& t, float value) {
  cuda::ScopedContext scope(*ctx_);
  if (!t.defined()) return device_op_error("fill: an undefined tensor");
  if (t.dtype() != DType::kFloat32 && !(is_low_float(t.dtype()) && !on_host(t)))
    return unsupported(name() + " fill: " + graph::dtype_name(t.dtype()));
  if (on_host(t)) {
    t.fill(value);
    return Status::ok();
  }
  if (t.dtype() == DType::kBFloat16) {
    GP_CUDA_CHECK(kernels::cuda::fill(t.data<__nv_bfloat16>(), value, t.numel(), ctx_->compute));
  } else if (t.dtype() == DType::kFloat16) {
    GP_CUDA_CHECK(kernels::cuda::fill(t.data<__half>(), value, t.numel(), ctx_->compute));
  } else {
    GP_CUDA_CHECK(kernels::cuda::fill(t.data<float>(), value, t.numel(), ctx_->compute));
  }
  return Status::ok();
}

Status CudaBackend::copy(Tensor const& src, Tensor& dst) {
  cuda::ScopedContext scope(*ctx_);
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    return device_op_error("copy " + src.shape_string() + " into " + dst.shape_string());
  if (src.defined() != dst.defined())
    return device_op_error(std::string("copy ") + (src.defined() ? "into" : "from") + " an undefined tensor");
  if (src.nbytes() == 0 || src.raw() == dst.raw()) return Status::ok();
  if (ctx_->capturing && (on_host(src) || on_host(dst)))
    return unsupported("a copy between host and device memory (" + src.shape_string() +
                       ") inside captured work: a replay would read or write the host memory again, long after");
  if (on_host(src) && on_host(dst)) {
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return Status::ok();
  }
  // Host to device (the data of every micro-batch, its labels): through the pinned staging ring,
  // asynchronous, and the host buffer may be reused as soon as this returns. Without that (a copy
  // over the ring's budget) and for every other direction: cudaMemcpyDefault (unified addressing
  // tells host, this device and a peer apart); a host side is pageable memory, so the copy is made
  // synchronous with respect to the host (checkpoints, tests).
  if (on_host(src) && !on_host(dst) && host_pool_ && host_pool_->pinned(src.raw(), src.nbytes())) {
    // A batch the data path made in pinned memory: the DMA reads it directly (the pool keeps the
    // block from reuse until the stream has passed this copy).
    GP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyHostToDevice, ctx_->compute));
    return Status::ok();
  }
  if (on_host(src) && !on_host(dst) && staging_) {
    ASSIGN_OR_RETURN(bool const staged, staging_->copy_to_device(dst.raw(), src.raw(), src.nbytes()));
    if (staged) return Status::ok();
  }
  GP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDefault, ctx_->compute));
  if (on_host(src) || on_host(dst)) GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->compute));
  return Status::ok();
}

Status CudaBackend::add_into(Tensor& dst, Tensor const& src) {
  cuda::ScopedContext scope(*ctx_);
  if (!dst.defined() || !src.defined() || dst.dtype() != src.dtype() ||
      (dst.dtype() != DType::kFloat32 && !is_low_float(dst.dtype())) || dst.numel() != src.numel())
    return device_op_error("add_into " + src.shape_string() + " " + graph::dtype_name(src.dtype()) + " into " +
                           dst.shape_string() + " " + graph::dtype_name(dst.dtype()));
  int64_t const n = dst.numel();
  if (dst.dtype() == DType::kBFloat16) {
    GP_CUDA_CHECK(kernels::cuda::add_inplace(dst.data<__nv_bfloat16>(), src.data<__nv_bfloat16>(), n, ctx_->compute));
  } else if (dst.dtype() == DType::kFloat16) {
    GP_CUDA_CHECK(kernels::cuda::add_inplace(dst.data<__half>(), src.data<__half>(), n, ctx_->compute));
  } else {
    GP_CUDA_CHECK(kernels::cuda::add_inplace(dst.data<float>(), src.data<float>(), n, ctx_->compute));
  }
  return Status::ok();
}

Status CudaBackend::scale(Tensor& t, double factor) {
  if (!t.defined() || t.dtype() != DType::kFloat32 || on_host(t)) return Backend::scale(t, factor);
  cuda::ScopedContext scope(*ctx_);
  GP_CUDA_CHECK(kernels::cuda::scale_inplace(t.data<float>(), static_cast<float>(factor), t.numel(), ctx_->compute));
  return Status::ok();
}

Status CudaBackend::scale_by(Tensor& t, Tensor const& factor) {
  if (!t.defined() || t.dtype() != DType::kFloat32 || on_host(t) || on_host(factor) ||
      factor.dtype() != DType::kFloat32 || factor.numel() != 1)
    return Backend::scale_by(t, factor);
  cuda::ScopedContext scope(*ctx_);
  GP_CUDA_CHECK(kernels::cuda::scale_inplace(t.data<float>(), factor.data<float>(), t.numel(), ctx_->compute));
  return Status::ok();
}

// One device int set by every tensor's check, then one read back (the step's one synchronisation
// for loss scaling; the found-inf flag decides whether the optimizer runs).
Result<bool> CudaBackend::all_finite(std::vector<Tensor> const& tensors) {
  cuda::ScopedContext scope(*ctx_);
  Tensor flag = zeros({1}, DType::kInt32);
  for (Tensor const& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    if (t.dtype() != DType::kFloat32 || on_host(t))
      return device_op_error(std::string("all_finite: a ") + graph::dtype_name(t.dtype()) + " tensor" +
                             (on_host(t) ? " in host memory" : ""));
    GP_CUDA_CHECK(kernels::cuda::flag_nonfinite(t.data<float>(), t.numel(), flag.data<int>(), ctx_->compute));
  }
  int found = 0;
  GP_CUDA_CHECK(cudaMemcpyAsync(&found, flag.raw(), sizeof found, cudaMemcpyDeviceToHost, ctx_->compute));
  GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->compute));
  return found == 0;
}

Status CudaBackend::copy_on(StreamKind stream, Tensor const& src, Tensor& dst) {
  // Only a copy the DMA can run beside compute (a batch in the pinned pool, to this device) goes
  // on the copy stream; the caller orders it against the compute stream with events.
  if (stream != StreamKind::kCopy || !on_host(src) || !dst.defined() || on_host(dst) || !host_pool_ ||
      src.dtype() != dst.dtype() || src.numel() != dst.numel() || src.nbytes() == 0 ||
      !host_pool_->pinned(src.raw(), src.nbytes()))
    return copy(src, dst);
  cuda::ScopedContext scope(*ctx_);
  GP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyHostToDevice, ctx_->copy));
  return Status::ok();
}

Status CudaBackend::copy_chunks(Tensor const& src, std::vector<int> const& src_chunks, Tensor& dst,
                                std::vector<int> const& dst_chunks, int axis, int64_t chunk) {
  cuda::ScopedContext scope(*ctx_);
  if (src.dtype() != dst.dtype() || src_chunks.size() != dst_chunks.size() || axis < 0 || axis >= src.rank() ||
      src.rank() != dst.rank())
    return device_op_error("copy_chunks " + src.shape_string() + " -> " + dst.shape_string());
  int64_t outer = 1, inner = static_cast<int64_t>(graph::dtype_size(src.dtype()));
  for (int i = 0; i < axis; ++i) outer *= src.dim(i);
  for (int64_t i = axis + 1; i < src.rank(); ++i) inner *= src.dim(static_cast<int>(i));
  auto const se = static_cast<std::size_t>(src.dim(axis) * inner), de = static_cast<std::size_t>(dst.dim(axis) * inner);
  auto const bytes = static_cast<std::size_t>(chunk * inner);
  if (bytes == 0 || outer == 0) return Status::ok();
  auto const* s = static_cast<std::byte const*>(src.raw());
  auto* d = static_cast<std::byte*>(dst.raw());
  // One strided 2-D copy per chunk: `outer` rows of `bytes`, pitched by each side's axis extent.
  for (std::size_t k = 0; k < src_chunks.size(); ++k)
    GP_CUDA_CHECK(cudaMemcpy2DAsync(d + static_cast<std::size_t>(dst_chunks[k]) * bytes, de,
                                    s + static_cast<std::size_t>(src_chunks[k]) * bytes, se, bytes,
                                    static_cast<std::size_t>(outer), cudaMemcpyDefault, ctx_->compute));
  return Status::ok();
}

Status CudaBackend::loss_into(LossKind kind, Tensor const& output, Tensor const& labels_in, int64_t total_rows,
                              Tensor& grad, StepLosses& losses, int slot) {
  cuda::ScopedContext scope(*ctx_);
  if (output.dtype() != DType::kFloat32) return unsupported("the loss needs a float32 model output");
  if (slot < 0 || slot >= losses.slots())
    return internal_error("loss slot " + std::to_string(slot) + " of " + std::to_string(losses.slots()));
  ASSIGN_OR_RETURN(Tensor labels, to_device(labels_in));
  grad = empty(output.shape(), DType::kFloat32);
  float const scale = 1.f / static_cast<float>(total_rows);
  double* const value = losses.values.data<double>() + slot;
  int64_t* const bad = losses.bad.data<int64_t>() + 2 * slot;  // the row, then its label
  // -1 in every byte is -1: no bad row yet. No host read here: read_losses reads every slot at once.
  GP_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof *bad, ctx_->compute));
  Tensor per_row;
  if (kind == LossKind::kCrossEntropy) {
    int64_t const classes = output.shape().back();
    int64_t const rows = classes > 0 ? output.numel() / classes : 0;
    if (labels.dtype() != DType::kInt64 || labels.numel() != rows)
      return invalid_argument("cross-entropy: the model output " + output.shape_string() + " has " +
                              std::to_string(rows) + " rows but the labels are " + labels.shape_string() + " " +
                              graph::dtype_name(labels.dtype()) + " (need one int64 class id per row)");
    per_row = empty({rows}, DType::kFloat32);
    GP_CUDA_CHECK(kernels::cuda::softmax_cross_entropy(output.data<float>(), labels.data<int64_t>(), rows, classes,
                                                       scale, per_row.data<float>(), grad.data<float>(), bad,
                                                       ctx_->compute));
    // The bad row's label, noted now: by the step's read the labels' buffer may hold another's.
    GP_CUDA_CHECK(kernels::cuda::note_bad_index(reinterpret_cast<unsigned long long*>(bad), labels.raw(), true, 1,
                                                ctx_->compute));
    losses.classes[static_cast<std::size_t>(slot)] = classes;
  } else {
    if (labels.dtype() != DType::kFloat32 || labels.numel() != output.numel())
      return invalid_argument("mse: the model output is " + output.shape_string() + " but the targets are " +
                              labels.shape_string() + " " + graph::dtype_name(labels.dtype()));
    per_row = empty({output.numel()}, DType::kFloat32);
    GP_CUDA_CHECK(kernels::cuda::mse(output.data<float>(), labels.data<float>(), output.numel(), scale,
                                     per_row.data<float>(), grad.data<float>(), ctx_->compute));
  }
  GP_CUDA_CHECK(kernels::cuda::sum_to_double(per_row.data<float>(), per_row.numel(), static_cast<double>(total_rows),
                                             value, ctx_->compute));
  losses.written[static_cast<std::size_t>(slot)] = true;
  return Status::ok();
}

Result<std::vector<double>> CudaBackend::read_losses(StepLosses const& losses) {
  if (!losses.any_written()) return losses_read(losses, nullptr, nullptr);
  cuda::ScopedContext scope(*ctx_);
  Tensor values(losses.values.shape(), DType::kFloat64, *host_pool_);
  Tensor bad(losses.bad.shape(), DType::kInt64, *host_pool_);
  GP_CUDA_CHECK(
      cudaMemcpyAsync(values.raw(), losses.values.raw(), values.nbytes(), cudaMemcpyDeviceToHost, ctx_->compute));
  GP_CUDA_CHECK(cudaMemcpyAsync(bad.raw(), losses.bad.raw(), bad.nbytes(), cudaMemcpyDeviceToHost, ctx_->compute));
  GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->compute));
  return losses_read(losses, values.data<double>(), bad.data<int64_t>());
}

Status CudaBackend::optimizer_update(OptimizerConfig const& config, int64_t step, Tensor& param, Tensor const& grad,
                                     std::vector<Tensor*> const& state) {
  if (param.dtype() != DType::kFloat32 || grad.dtype() != DType::kFloat32)
    return unsupported("optimizer: a " + std::string(graph::dtype_name(param.dtype())) +
                       " parameter (the optimizer updates float32 master weights)");
  cuda::ScopedContext scope(*ctx_);
  int64_t const n = param.numel();
  switch (config.kind) {
    case OptimizerKind::kSgd: {
      float* buf = state.empty() ? nullptr : state[0]->data<float>();
      GP_CUDA_CHECK(kernels::cuda::sgd_update(param.data<float>(), grad.data<float>(), buf, n, config.lr,
                                              config.momentum, config.weight_decay, ctx_->compute));
      return Status::ok();
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      if (state.size() != 2) return device_op_error("adam needs two moments");
      kernels::AdamParams const p = adam_params(config, step);
      GP_CUDA_CHECK(kernels::cuda::adam_update(param.data<float>(), grad.data<float>(), state[0]->data<float>(),
                                               state[1]->data<float>(), n, p, ctx_->compute));
      return Status::ok();
    }
  }
  return device_op_error("unknown optimizer");
}

Status CudaBackend::optimizer_update_all(OptimizerConfig const& config, int64_t step,
                                         std::vector<ParamUpdate> const& updates) {
  auto const moments = static_cast<std::size_t>(moment_count(config));  // what Optimizer::step keeps
  std::vector<kernels::hd::MultiTensorEntry> entries;
  std::vector<int64_t> sizes;
  entries.reserve(updates.size());
  for (ParamUpdate const& u : updates) {
    bool const plain = u.param->dtype() == DType::kFloat32 && u.grad->dtype() == DType::kFloat32 &&
                       u.grad->numel() == u.param->numel() && u.state.size() == moments;
    if (!plain) return Backend::optimizer_update_all(config, step, updates);  // one call each checks and names it
    kernels::hd::MultiTensorEntry e;
    e.w = u.param->data<float>();
    e.g = u.grad->data<float>();
    e.s0 = moments > 0 ? u.state[0]->data<float>() : nullptr;
    e.s1 = moments > 1 ? u.state[1]->data<float>() : nullptr;
    e.n = u.param->numel();
    entries.push_back(e);
    sizes.push_back(e.n);
  }
  cuda::ScopedContext scope(*ctx_);
  auto found =
      std::find_if(multi_.begin(), multi_.end(), [&](MultiTensorTable const& t) { return t.entries == entries; });
  if (found == multi_.end()) {
    std::vector<kernels::hd::MultiTensorChunk> const chunks = kernels::hd::multi_tensor_chunks(sizes);
    std::size_t const table_bytes = entries.size() * sizeof(kernels::hd::MultiTensorEntry);
    std::size_t const bytes = table_bytes + chunks.size() * sizeof(kernels::hd::MultiTensorChunk);
    if (chunks.empty()) return Status::ok();  // nothing to update
    MultiTensorTable fresh;
    fresh.table = empty({static_cast<int64_t>(bytes)}, DType::kUInt8);
    std::vector<std::byte> host(bytes);
    std::memcpy(host.data(), entries.data(), table_bytes);
    std::memcpy(host.data() + table_bytes, chunks.data(), bytes - table_bytes);
    // Once per set of parameters (its first step): a synchronous copy from pageable memory.
    GP_CUDA_CHECK(cudaMemcpyAsync(fresh.table.raw(), host.data(), bytes, cudaMemcpyHostToDevice, ctx_->compute));
    GP_CUDA_CHECK(cudaStreamSynchronize(ctx_->compute));
    fresh.entries = std::move(entries);
    fresh.chunks = static_cast<int64_t>(chunks.size());
    if (multi_.size() >= 16) multi_.pop_back();
    multi_.insert(multi_.begin(), std::move(fresh));
    found = multi_.begin();
  } else if (found != multi_.begin()) {
    std::rotate(multi_.begin(), found, found + 1);  // the most recently used first
    found = multi_.begin();
  }
  MultiTensorTable const& t = *found;
  auto const* base = static_cast<std::byte const*>(t.table.raw());
  auto const* table = reinterpret_cast<kernels::hd::MultiTensorEntry const*>(base);
  auto const* chunks = reinterpret_cast<kernels::hd::MultiTensorChunk const*>(
      base + t.entries.size() * sizeof(kernels::hd::MultiTensorEntry));
  if (config.kind == OptimizerKind::kSgd) {
    GP_CUDA_CHECK(kernels::cuda::multi_sgd_update(table, chunks, t.chunks, config.lr, config.momentum,
                                                  config.weight_decay, ctx_->compute));
  } else {
    GP_CUDA_CHECK(kernels::cuda::multi_adam_update(table, chunks, t.chunks, adam_params(config, step), ctx_->compute));
  }
  return Status::ok();
}

}  // namespace gp::exec
