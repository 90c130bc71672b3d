// The CPU backend: oneDNN primitives for the heavy operators, kernels/ for the rest, one explicit
// kernel table (cpu_backend.cc). It is the reference every other backend is compared with.
//
// Conventions the executor relies on:
// - Reshape/Flatten/Squeeze/Unsqueeze/Identity/Cast and inactive Dropout return views that share
//   the input's storage, and their backward may return the incoming gradient itself: treat
//   tensors as immutable once produced, except accumulators you allocated.
// - An undefined gradient (output or input) means zero.
// - BatchNormalization and Dropout follow OpCall::training. In training, BatchNormalization
//   returns outputs 1 and 2, the updated running mean and variance, even when the graph does not
//   name them (new tensors; the inputs are not written).
// - Dropout masks are a pure function of (OpCall::rng_seed, element index).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"

namespace gp::exec {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DeviceRef device() const override { return {DeviceKind::kCpu, 0}; }
  Allocator& allocator() override { return cpu_allocator(); }

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
  Tensor empty(std::vector<int64_t> shape, DType dtype = DType::kFloat32) override;
  Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32) override;
  Status fill(Tensor& t, float value) override;
  Status copy(Tensor const& src, Tensor& dst) override;
  Status add_into(Tensor& dst, Tensor const& src) override;
  Status scale(Tensor& t, double factor) override;
  Status copy_chunks(Tensor const& src, std::vector<int> const& src_chunks, Tensor& dst,
                     std::vector<int> const& dst_chunks, int axis, int64_t chunk) override;
  Status loss_into(LossKind kind, Tensor const& output, Tensor const& labels, int64_t total_rows, Tensor& grad,
                   StepLosses& losses, int slot) override;
  Status optimizer_update(OptimizerConfig const& config, int64_t step, Tensor& param, Tensor const& grad,
                          std::vector<Tensor*> const& state) override;
  Status synchronize() override { return Status::ok(); }

  // The op types in the kernel table, sorted.
  static std::vector<std::string> op_types();
  // Whether the kernel table has an entry for `kind` keyed by `dtype` (float32, bfloat16, ...).
  static bool runs(graph::ops::OpKind kind, DType dtype);
};

// How the CPU runs bf16 (mixed precision). kNative: oneDNN's bf16 primitives for Conv, Gemm,
// MatMul, ReLU and the poolings (CPUs with AVX512; AVX512-BF16 makes them fast). kEmulated: those
// ops' float32 kernels between a widening of their bf16 inputs (weights rounded to bf16 first) and
// a rounding of their outputs and gradients to bf16, so every op boundary sees the values native
// bf16 gives (up to the order of float32 sums), on any x86-64 CPU and no faster than float32. The default: native where
// oneDNN has bf16 (dnnl_ctx::has_bf16_primitives), else emulated; GP_CPU_BF16=emulated forces emulation.
enum class CpuBf16 : uint8_t { kNative, kEmulated };
CpuBf16 cpu_bf16();
// Tests: the mode for kernels resolved after the call (native only where oneDNN has bf16); returns
// the mode in effect.
CpuBf16 set_cpu_bf16(CpuBf16 mode);
char const* cpu_bf16_name(CpuBf16 mode);  // "native", "emulated"

// A RuntimeOptions::make_backend that gives every device of a run its own CPU backend.
inline std::function<Result<std::unique_ptr<Backend>>(int device)> cpu_backend_factory() {
  return
      [](int) -> Result<std::unique_ptr<Backend>> { return std::unique_ptr<Backend>(std::make_unique<CpuBackend>()); };
}

}  // namespace gp::exec
