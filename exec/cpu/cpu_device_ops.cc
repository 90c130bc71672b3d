// The CPU backend's device operations (exec/backend.h): host memory, kernels/ for the arithmetic.
#include <cstring>

#include "exec/cpu/cpu_backend.h"
#include "exec/optimizer.h"
#include "kernels/bf16.h"
#include "kernels/loss.h"
#include "kernels/optim.h"
#include "kernels/vector_ops.h"

namespace gp::exec {

Tensor CpuBackend::empty(std::vector<int64_t> shape, DType dtype) { return Tensor(std::move(shape), dtype); }
Tensor CpuBackend::zeros(std::vector<int64_t> shape, DType dtype) { return Tensor::zeros(std::move(shape), dtype); }

Status CpuBackend::fill(Tensor& t, float value) {
  if (!t.defined()) return internal_error("cpu fill: an undefined tensor");
  if (t.dtype() != DType::kFloat32) return unsupported("cpu fill: " + std::string(graph::dtype_name(t.dtype())));
  kernels::fill(t.data<float>(), value, t.numel());
  return Status::ok();
}

Status CpuBackend::copy(Tensor const& src, Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    return internal_error("copy " + src.shape_string() + " into " + dst.shape_string());
  if (src.defined() != dst.defined())
    return internal_error(std::string("copy ") + (src.defined() ? "into" : "from") + " an undefined tensor");
  if (src.nbytes() && src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
  return Status::ok();
}

Status CpuBackend::add_into(Tensor& dst, Tensor const& src) {
  if (!dst.defined() || !src.defined() || dst.dtype() != src.dtype() ||
      (dst.dtype() != DType::kFloat32 && dst.dtype() != DType::kBFloat16) || dst.numel() != src.numel())
    return internal_error("add_into " + src.shape_string() + " (" + graph::dtype_name(src.dtype()) + ") into " +
                          dst.shape_string() + " (" + graph::dtype_name(dst.dtype()) + ")");
  if (dst.dtype() == DType::kBFloat16) {
    kernels::add_inplace_bf16(dst.data<uint16_t>(), src.data<uint16_t>(), dst.numel());
    return Status::ok();
  }
  kernels::add_inplace(dst.data<float>(), src.data<float>(), dst.numel());
  return Status::ok();
}

Status CpuBackend::scale(Tensor& t, double factor) {
  if (!t.defined()) return Status::ok();
  if (t.dtype() != DType::kFloat32)
    return internal_error("scale: a " + std::string(graph::dtype_name(t.dtype())) + " tensor");
  kernels::scale_inplace(t.data<float>(), static_cast<float>(factor), t.numel());
  return Status::ok();
}

Status CpuBackend::copy_chunks(Tensor const& src, std::vector<int> const& src_chunks, Tensor& dst,
                               std::vector<int> const& dst_chunks, int axis, int64_t chunk) {
  if (src.dtype() != dst.dtype() || src_chunks.size() != dst_chunks.size() || axis < 0 || axis >= src.rank() ||
      src.rank() != dst.rank())
    return internal_error("copy_chunks " + src.shape_string() + " -> " + dst.shape_string());
  int64_t outer = 1, inner = static_cast<int64_t>(graph::dtype_size(src.dtype()));
  for (int i = 0; i < axis; ++i) outer *= src.dim(i);
  for (int64_t i = axis + 1; i < src.rank(); ++i) inner *= src.dim(static_cast<int>(i));
  int64_t const se = src.dim(axis), de = dst.dim(axis), bytes = chunk * inner;
  auto const* s = static_cast<std::byte const*>(src.raw());
  auto* d = static_cast<std::byte*>(dst.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (std::size_t k = 0; k < src_chunks.size(); ++k)
      std::memcpy(d + (o * de + dst_chunks[k] * chunk) * inner, s + (o * se + src_chunks[k] * chunk) * inner,
                  static_cast<std::size_t>(bytes));
  return Status::ok();
}

Status CpuBackend::loss_into(LossKind kind, Tensor const& output, Tensor const& labels, int64_t total_rows,
                             Tensor& grad, StepLosses& losses, int slot) {
  if (output.dtype() != DType::kFloat32) return unsupported("the loss needs a float32 model output");
  if (slot < 0 || slot >= losses.slots())
    return internal_error("loss slot " + std::to_string(slot) + " of " + std::to_string(losses.slots()));
  grad = empty(output.shape(), DType::kFloat32);
  float const scale = 1.f / static_cast<float>(total_rows);
  double sum = 0;
  if (kind == LossKind::kCrossEntropy) {
    int64_t const classes = output.shape().back();
    int64_t const rows = output.numel() / classes;
    if (labels.dtype() != DType::kInt64 || labels.numel() != rows)
      return invalid_argument("cross-entropy: the model output " + output.shape_string() + " has " +
                              std::to_string(rows) + " rows but the labels are " + labels.shape_string() + " " +
                              graph::dtype_name(labels.dtype()) + " (need one int64 class id per row)");
    int64_t bad = -1;
    sum = kernels::softmax_cross_entropy_forward(output.data<float>(), labels.data<int64_t>(), rows, classes, &bad);
    if (bad >= 0) return label_out_of_range(labels.data<int64_t>()[bad], bad, classes);
    kernels::softmax_cross_entropy_backward(output.data<float>(), labels.data<int64_t>(), rows, classes, scale,
                                            grad.data<float>());
  } else {
    if (labels.dtype() != DType::kFloat32 || labels.numel() != output.numel())
      return invalid_argument("mse: the model output is " + output.shape_string() + " but the targets are " +
                              labels.shape_string() + " " + graph::dtype_name(labels.dtype()));
    sum = kernels::mse_forward(output.data<float>(), labels.data<float>(), output.numel());
    kernels::mse_backward(output.data<float>(), labels.data<float>(), output.numel(), scale, grad.data<float>());
  }
  losses.values.data<double>()[slot] = sum / static_cast<double>(total_rows);
  losses.bad.data<int64_t>()[2 * slot] = -1;
  losses.written[static_cast<std::size_t>(slot)] = true;
  return Status::ok();
}

Status CpuBackend::optimizer_update(OptimizerConfig const& config, int64_t step, Tensor& param, Tensor const& grad,
                                    std::vector<Tensor*> const& state) {
  int64_t const n = param.numel();
  switch (config.kind) {
    case OptimizerKind::kSgd: {
      float* buf = state.empty() ? nullptr : state[0]->data<float>();
      kernels::sgd_update(param.data<float>(), grad.data<float>(), buf, n, config.lr, config.momentum,
                          config.weight_decay);
      return Status::ok();
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      if (state.size() != 2) return internal_error("adam needs two moments");
      kernels::AdamParams const p = adam_params(config, step);
      kernels::adam_update(param.data<float>(), grad.data<float>(), state[0]->data<float>(), state[1]->data<float>(), n,
                           p);
      return Status::ok();
    }
  }
  return internal_error("unknown optimizer");
}

}  // namespace gp::exec
