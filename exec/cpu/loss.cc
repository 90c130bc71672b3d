// CPU kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph ops; the
// per-position math is kernels/hd/loss.h's (the CUDA backend runs the same). The gradient flows to
// the scores only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "exec/cpu/cpu_ops.h"
#include "kernels/hd/loss.h"
#include "kernels/hd/reduce.h"

namespace gp::exec::cpu {
namespace {

bool is_sce(graph::Op const& op) { return op.kind() == OpKind::kSoftmaxCrossEntropyLoss; }

struct Layout {
  int64_t n = 0, c = 0, d = 1;
};

Layout layout_of(std::vector<int64_t> const& shape) {
  Layout l{shape.at(0), shape.at(1), 1};
  for (std::size_t i = 2; i < shape.size(); ++i) l.d *= shape[i];
  return l;
}

// The class and weight of every target position: class -1 and weight 0 where it is ignored.
struct Picked {
  std::vector<int64_t> cls;
  std::vector<float> w;
  double total_w = 0;  // sum of the weights (the divisor of "mean")
};

kernels::hd::LossParams params_of(graph::LossAttrs const& a, Layout const& l) {
  return {l.n, l.c, l.d, a.has_ignore_index, a.ignore_index};
}

Result<Picked> pick(OpCall const& call, graph::LossAttrs const& a, Tensor const& target, Tensor const& weight,
                    Layout const& l) {
  kernels::hd::LossParams const hp = params_of(a, l);
  Picked p;
  int64_t const m = target.numel();
  p.cls.resize(static_cast<std::size_t>(m));
  p.w.resize(static_cast<std::size_t>(m));
  float const* wp = weight.defined() ? weight.data<float>() : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    int64_t const t = target.dtype() == DType::kInt32 ? target.data<int32_t>()[i] : target.data<int64_t>()[i];
    if (!kernels::hd::loss_pick(hp, t, wp, p.cls[i], p.w[i]))
      return op_error(call, "target " + std::to_string(t) + " at position " + std::to_string(i) + " is outside [0, " +
                                std::to_string(l.c) + ")" +
                                (a.has_ignore_index ? " and is not the ignore_index " + std::to_string(a.ignore_index)
                                                    : std::string(" (set ignore_index to skip such targets)")));
    p.total_w += p.w[i];
  }
  return p;
}

// log_softmax over the class axis of x viewed as [N, C, D] (hd::log_softmax_line per (n, d)).
Tensor log_softmax(Tensor const& x, Layout const& l) {
  Tensor y(x.shape());
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t d = 0; d < l.d; ++d) {
      int64_t const base = n * l.c * l.d + d;
      kernels::hd::log_softmax_line(x.data<float>() + base, l.c, l.d, y.data<float>() + base);
    }
  return y;
}

// The loss output's gradient at target position i, times the reduction's factor.
float position_grad(graph::LossAttrs const& a, Tensor const& g, Picked const& p, int64_t i) {
  if (a.reduction == graph::LossReduction::kNone) return g.data<float>()[i];
  float const gs = g.data<float>()[0];
  if (a.reduction == graph::LossReduction::kSum) return gs;
  return static_cast<float>(gs / p.total_w);
}

Status loss_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::LossAttrs>(op, graph));
  auto dtype = [&](std::size_t i) { return graph.tensor(op.inputs[i]).dtype; };
  if (dtype(0) != DType::kFloat32)
    return unsupported("scores have dtype " + std::string(graph::dtype_name(dtype(0))) +
                       " (only float32: cast them to float32 before the loss)");
  if (dtype(1) != DType::kInt64 && dtype(1) != DType::kInt32)
    return unsupported("targets have dtype " + std::string(graph::dtype_name(dtype(1))) + " (int64 or int32)");
  if (op.inputs.size() > 2 && op.inputs[2] != graph::kNoTensor && dtype(2) != DType::kFloat32)
    return unsupported("the class weights have dtype " + std::string(graph::dtype_name(dtype(2))) + " (only float32)");
  if (graph.tensor(op.inputs[0]).shape.rank() < 2)
    return unsupported("scores have shape " + graph.tensor(op.inputs[0]).shape.to_string() +
                       "; they must be [N, C] or [N, C, d1, ...]");
  return Status::ok();
}

Status loss_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::LossAttrs>(call.op);
  Tensor const& x = in[0];
  Tensor const& target = in[1];
  Tensor const weight = in.size() > 2 ? in[2] : Tensor();
  if (x.rank() < 2) return op_error(call, "scores have shape " + x.shape_string() + "; they must be [N, C, ...]");
  Layout const l = layout_of(x.shape());
  if (target.numel() != l.n * l.d)
    return op_error(call, "targets have shape " + target.shape_string() + ", scores " + x.shape_string());
  if (weight.defined() && weight.numel() != l.c)
    return op_error(call, "weights have shape " + weight.shape_string() + ", expected [" + std::to_string(l.c) + "]");
  ASSIGN_OR_RETURN(Picked const p, pick(call, a, target, weight, l));
  Tensor const logp = is_sce(call.op) ? log_softmax(x, l) : Tensor();
  float const* src = is_sce(call.op) ? logp.data<float>() : x.data<float>();

  Tensor loss(a.reduction == graph::LossReduction::kNone ? target.shape() : std::vector<int64_t>{});
  double sum = 0;
  kernels::hd::LossParams const hp = params_of(a, l);
  for (int64_t i = 0; i < target.numel(); ++i) {
    float const li = kernels::hd::loss_value(hp, src, i, p.cls[i], p.w[i]);
    if (a.reduction == graph::LossReduction::kNone) loss.data<float>()[i] = li;
    sum += li;
  }
  if (a.reduction == graph::LossReduction::kSum) loss.data<float>()[0] = static_cast<float>(sum);
  // 0 / 0 (every target ignored) is NaN, as in the ONNX reference.
  if (a.reduction == graph::LossReduction::kMean) loss.data<float>()[0] = static_cast<float>(sum / p.total_w);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = loss;
  if (out.size() > 1) out[1] = logp;
  if (saved) saved->tensors = {is_sce(call.op) ? logp : shape_tensor(x.shape()), target, weight};
  return Status::ok();
}

Status loss_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (wants(wanted, 1) || wants(wanted, 2))
    return op_error(call, "targets and class weights get no gradient: make the class weights a constant");
  if (!wants(wanted, 0)) return Status::ok();
  auto const& a = *attrs_of<graph::LossAttrs>(call.op);
  bool const sce = is_sce(call.op);
  Tensor const& logp = saved.tensors.at(0);
  Tensor const& target = saved.tensors.at(1);
  Tensor const& weight = saved.tensors.at(2);
  std::vector<int64_t> const shape = sce ? logp.shape() : shape_of(logp);
  Layout const l = layout_of(shape);
  ASSIGN_OR_RETURN(Picked const p, pick(call, a, target, weight, l));
  Tensor dx = Tensor::zeros(shape);
  float* dxp = dx.data<float>();
  bool const loss_grad = !gout.empty() && gout[0].defined();
  Tensor const logp_grad = sce && gout.size() > 1 ? gout[1] : Tensor();
  kernels::hd::LossParams const hp = params_of(a, l);
  for (int64_t i = 0; i < target.numel(); ++i) {
    float const coef = loss_grad && p.cls[i] >= 0 ? p.w[i] * position_grad(a, gout[0], p, i) : 0.f;
    if (!sce) {
      if (coef != 0.f) dxp[kernels::hd::loss_at(hp, i, p.cls[i])] = -coef;
      continue;
    }
    kernels::hd::sce_position_backward(hp, logp.data<float>(), logp_grad.defined() ? logp_grad.data<float>() : nullptr,
                                       i, p.cls[i], coef, dxp);
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace

CpuKernelFamily loss_kernels() {
  CpuKernelEntry const loss{{loss_forward, loss_backward, loss_backward, loss_check}, 2, false};
  return {{OpKind::kNegativeLogLikelihoodLoss, loss}, {OpKind::kSoftmaxCrossEntropyLoss, loss}};
}

}  // namespace gp::exec::cpu
