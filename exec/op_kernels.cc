#include "exec/op_kernels.h"

#include <cstring>

#include "kernels/hd/view.h"

namespace gp::exec {

Status op_error(OpCall const& call, std::string const& what) { return graph::ops::op_error(call.op, what); }

bool wants(std::vector<bool> const& wanted, std::size_t i) { return i < wanted.size() && wanted[i]; }

graph::TensorData const* constant_input(graph::Op const& op, graph::OpGraph const& graph, std::size_t i) {
  if (i >= op.inputs.size() || op.inputs[i] == graph::kNoTensor) return nullptr;
  graph::TensorInfo const& info = graph.tensor(op.inputs[i]);
  if (info.role != graph::TensorRole::kConstant && info.role != graph::TensorRole::kWeight) return nullptr;
  return info.data.get();
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
  if (call.backend == nullptr)
    return internal_error(call.op.name +
                          ": a gradient to accumulate, but the call names no backend "
                          "(backends pass bound_to(call, *this) to their kernels)");
  return call.backend->add_into(dst, g);
}

Tensor grad_or_zeros(OpCall const& call, std::vector<Tensor> const& grad_outputs, std::size_t i,
                     std::vector<int64_t> const& shape) {
  if (i < grad_outputs.size() && grad_outputs[i].defined()) return grad_outputs[i];
  return call.backend ? call.backend->zeros(shape) : Tensor::zeros(shape);
}

Status emit_zero_grad(OpCall const& call, std::vector<bool> const& wanted, std::vector<Tensor>& grads, std::size_t i,
                      std::vector<int64_t> const& shape, bool accumulate) {
  if (!wants(wanted, i) || accumulate) return Status::ok();
  return emit_grad(call, grads, i, call.backend ? call.backend->zeros(shape) : Tensor::zeros(shape), false);
}

uint64_t random_seed_mix(graph::RandomAttrs const& attrs) {
  if (!attrs.has_seed) return 0;
  uint32_t bits = 0;
  static_assert(sizeof bits == sizeof attrs.seed);
  std::memcpy(&bits, &attrs.seed, sizeof bits);
  return kernels::hd::splitmix64(bits);
}

uint64_t random_seed(OpCall const& call, graph::RandomAttrs const& attrs) {
  return call.rng_seed ^ random_seed_mix(attrs);
}

Tensor shape_tensor(std::vector<int64_t> const& shape, Allocator& alloc) {
  Tensor t({static_cast<int64_t>(shape.size())}, DType::kInt64, alloc);
  if (!shape.empty()) std::memcpy(t.raw(), shape.data(), shape.size() * sizeof(int64_t));
  return t;
}

std::vector<int64_t> shape_of(Tensor const& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

}  // namespace gp::exec
