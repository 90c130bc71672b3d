#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "kernels/vector_ops.h"

namespace gp::exec::cpu {

void add_into(Tensor& dst, Tensor const& src) {
  kernels::add_inplace(dst.data<float>(), src.data<float>(), dst.numel());
}

Status emit_grad(OpCall const& call, std::vector<Tensor>& grads, std::size_t i, Tensor g, bool accumulate) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (!accumulate) {
    grads[i] = std::move(g);
    return Status::ok();
  }
  Tensor& dst = grads[i];
  if (!dst.defined() || dst.numel() != g.numel())
    return op_error(call, "gradient accumulator for input " + std::to_string(i) + " has shape " + dst.shape_string() +
                              ", expected " + g.shape_string());
  add_into(dst, g);
  return Status::ok();
}

Tensor& grad_slot(std::vector<Tensor>& grads, std::size_t i, std::vector<int64_t> const& shape, bool accumulate) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (!accumulate) grads[i] = Tensor(shape);
  return grads[i];
}

Tensor shape_tensor(std::vector<int64_t> const& shape) {
  Tensor t({static_cast<int64_t>(shape.size())}, DType::kInt64);
  if (!shape.empty()) std::memcpy(t.raw(), shape.data(), shape.size() * sizeof(int64_t));
  return t;
}

std::vector<int64_t> shape_of(Tensor const& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

Tensor grad_or_zeros(std::vector<Tensor> const& grad_outputs, std::size_t i, std::vector<int64_t> const& shape) {
  if (i < grad_outputs.size() && grad_outputs[i].defined()) return grad_outputs[i];
  return Tensor::zeros(shape);
}

}  // namespace gp::exec::cpu
