// The CUDA backend's view family: views that share storage (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, same-type Cast) and Dropout (the CPU's mask bit for bit). Same inputs, outputs and
// conventions as the CPU's exec/cpu/view.cc; kernels in kernels/cuda/math.h.
#include <algorithm>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/math.h"
#include <limits>

#include "exec/cuda/ops_shared.h"
#include "graph/ops/move.h"
#include "graph/ops/pool.h"
#include "graph/ops/view.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move.h"
#include "exec/cuda/cuda_ops.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// ---- Dropout ----

float dropout_ratio(OpCall const& call) {
  auto const* a = attrs_of<graph::DropoutAttrs>(call.op);
  return a ? a->ratio : 0.5f;
}

template <typename T>
Status dropout_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  float const ratio = dropout_ratio(call);
  bool const active = call.training && ratio > 0.f;
  out.assign(call.op.outputs.size(), Tensor());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  Tensor mask;
  if (active || out.size() > 1) {
    ASSIGN_OR_RETURN(mask, empty(x.shape(), DType::kUInt8));  // kUInt8 holds ONNX's bool mask
  }
  if (active) {
    ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
    GP_CUDA_CHECK(kc::dropout_forward<T>(x.data<T>(), x.numel(), ratio, call.rng_seed, y.data<T>(),
                                         mask.data<uint8_t>(), stream));
    out[0] = y;
  } else {
    out[0] = x;
    if (mask.defined() && mask.nbytes() > 0) GP_CUDA_CHECK(cudaMemsetAsync(mask.raw(), 1, mask.nbytes(), stream));
  }
  if (out.size() > 1) out[1] = mask;
  if (saved) {
    saved->tensors.clear();
    if (active) saved->tensors.push_back(mask);
  }
  return Status::ok();
}

template <typename T>
Status dropout_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  if (saved.tensors.empty()) return emit_grad(call, grads, 0, gout[0], accumulate);
  Tensor const& mask = saved.tensors[0];
  ASSIGN_OR_RETURN(Tensor dx, empty(gout[0].shape(), gout[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::dropout_backward<T>(gout[0].data<T>(), mask.data<uint8_t>(), dx.numel(), dropout_ratio(call),
                                        dx.data<T>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- views ----

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
  Tensor g = grad_or_zeros(call, gout, 0, in_shape);
  return emit_grad(call, grads, 0, g.reshaped(in_shape), accumulate);
}

}  // namespace

std::vector<KernelEntry> view_kernels() {
  constexpr DType f32 = DType::kFloat32;
  std::vector<KernelEntry> t;
  t.push_back(
      {OpKind::kDropout, f32, {dropout_forward<float>, dropout_backward<float>, dropout_backward<float>, no_check}, 1});
  OpKernels const view{reshape_forward, reshape_backward, reshape_backward, graph::ops::view_check};
  for (OpKind v : {OpKind::kReshape, OpKind::kFlatten, OpKind::kSqueeze, OpKind::kUnsqueeze, OpKind::kIdentity})
    t.push_back({v, f32, view, 1});
  t.push_back({OpKind::kCast, f32, {reshape_forward, reshape_backward, reshape_backward, graph::ops::cast_check}, 1});
  return t;
}

}  // namespace gp::exec::cuda
