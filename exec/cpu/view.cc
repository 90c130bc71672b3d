// View family: views share the input's storage (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Cast to the same type; tensors are immutable once produced), and Dropout (kernels/dropout: the
// mask a pure function of seed and element index).
#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "graph/ops/view.h"
#include "kernels/view.h"

namespace gp::exec::cpu {

Status reshape_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, graph::ops::view_output_shape(call.graph, call.op, in[0].shape()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = in[0].reshaped(shape);
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status reshape_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  return emit_grad(call, grads, 0, grad_or_zeros(call, gout, 0, in_shape).reshaped(in_shape), accumulate);
}

Status dropout_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  auto const* attrs = attrs_of<graph::DropoutAttrs>(call.op);
  float const ratio = attrs ? attrs->ratio : 0.5f;
  out.assign(call.op.outputs.size(), Tensor());
  bool const active = call.training && ratio > 0.f;
  Tensor mask(x.shape(), DType::kUInt8);
  if (active) {
    Tensor y(x.shape());
    kernels::dropout_forward(x.data<float>(), x.numel(), ratio, call.rng_seed, y.data<float>(), mask.data<uint8_t>());
    out[0] = y;
  } else {
    std::memset(mask.raw(), 1, mask.nbytes());
    out[0] = x;
  }
  if (out.size() > 1) out[1] = mask.reshaped(x.shape());  // kUInt8 holds ONNX's bool mask
  if (saved) {
    saved->tensors.clear();
    if (active) saved->tensors.push_back(mask);
  }
  return Status::ok();
}

Status dropout_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  if (saved.tensors.empty()) return emit_grad(call, grads, 0, gout[0], accumulate);
  auto const* attrs = attrs_of<graph::DropoutAttrs>(call.op);
  Tensor dx(gout[0].shape());
  kernels::dropout_backward(gout[0].data<float>(), saved.tensors[0].data<uint8_t>(), dx.numel(),
                            attrs ? attrs->ratio : 0.5f, dx.data<float>());
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace gp::exec::cpu
