// CPU kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph ops. Scores are
// seen as [N, C, D] (D: the product of the trailing dims), targets as [N, D]. Each target position
// weighs weight[target] (1 without weights, 0 where the target is the ignore_index); "mean"
// divides the weighted sum by the sum of those weights. The gradient flows to the scores only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "exec/cpu/cpu_ops.h"

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

Result<Picked> pick(OpCall const& call, graph::LossAttrs const& a, Tensor const& target, Tensor const& weight,
                    int64_t classes) {
  Picked p;
  int64_t const m = target.numel();
  p.cls.resize(static_cast<std::size_t>(m));
  p.w.resize(static_cast<std::size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    int64_t const t = target.dtype() == DType::kInt32 ? target.data<int32_t>()[i] : target.data<int64_t>()[i];
    if (a.has_ignore_index && t == a.ignore_index) {
      p.cls[i] = -1;
      p.w[i] = 0.f;
      continue;
    }
    if (t < 0 || t >= classes)
      return op_error(call, "target " + std::to_string(t) + " at position " + std::to_string(i) + " is outside [0, " +
                                std::to_string(classes) + ")" +
                                (a.has_ignore_index ? " and is not the ignore_index " + std::to_string(a.ignore_index)
                                                    : std::string(" (set ignore_index to skip such targets)")));
    p.cls[i] = t;
    p.w[i] = weight.defined() ? weight.data<float>()[t] : 1.f;
    p.total_w += p.w[i];
  }
  return p;
}

// log_softmax over the class axis of x viewed as [N, C, D].
Tensor log_softmax(Tensor const& x, Layout const& l) {
  Tensor y(x.shape());
  float const* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t d = 0; d < l.d; ++d) {
      int64_t const base = n * l.c * l.d + d;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < l.c; ++c) mx = std::max(mx, xp[base + c * l.d]);
      double s = 0;
      for (int64_t c = 0; c < l.c; ++c) s += std::exp(static_cast<double>(xp[base + c * l.d] - mx));
      float const lse = mx + static_cast<float>(std::log(s));
      for (int64_t c = 0; c < l.c; ++c) yp[base + c * l.d] = xp[base + c * l.d] - lse;
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
  ASSIGN_OR_RETURN(Picked const p, pick(call, a, target, weight, l.c));
  Tensor const logp = is_sce(call.op) ? log_softmax(x, l) : Tensor();
  float const* src = is_sce(call.op) ? logp.data<float>() : x.data<float>();

  Tensor loss(a.reduction == graph::LossReduction::kNone ? target.shape() : std::vector<int64_t>{});
  double sum = 0;
  for (int64_t i = 0; i < target.numel(); ++i) {
    int64_t const n = i / l.d, d = i % l.d;
    float const li = p.cls[i] < 0 ? 0.f : -p.w[i] * src[(n * l.c + p.cls[i]) * l.d + d];
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
  ASSIGN_OR_RETURN(Picked const p, pick(call, a, target, weight, l.c));
  Tensor dx = Tensor::zeros(shape);
  float* dxp = dx.data<float>();
  bool const loss_grad = !gout.empty() && gout[0].defined();
  Tensor const logp_grad = sce && gout.size() > 1 ? gout[1] : Tensor();
  for (int64_t i = 0; i < target.numel(); ++i) {
    int64_t const n = i / l.d, d = i % l.d, base = n * l.c * l.d + d;
    float const coef = loss_grad && p.cls[i] >= 0 ? p.w[i] * position_grad(a, gout[0], p, i) : 0.f;
    if (!sce) {
      if (coef != 0.f) dxp[base + p.cls[i] * l.d] = -coef;
      continue;
    }
    // loss = -w log p[t]: d/dx_c = w (p_c - [c = t]); log p_c: d/dx_k = [k = c] - p_k.
    float const* lp = logp.data<float>();
    double gsum = 0;
    if (logp_grad.defined())
      for (int64_t c = 0; c < l.c; ++c) gsum += logp_grad.data<float>()[base + c * l.d];
    for (int64_t c = 0; c < l.c; ++c) {
      int64_t const k = base + c * l.d;
      float const prob = std::exp(lp[k]);
      float v = coef * (prob - (c == p.cls[i] ? 1.f : 0.f));
      if (logp_grad.defined()) v += logp_grad.data<float>()[k] - prob * static_cast<float>(gsum);
      dxp[k] = v;
    }
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace

CpuKernelFamily loss_kernels() {
  CpuKernelEntry const loss{{loss_forward, loss_backward, loss_backward, loss_check}, 2, false};
  return {{OpKind::kNegativeLogLikelihoodLoss, loss}, {OpKind::kSoftmaxCrossEntropyLoss, loss}};
}

}  // namespace gp::exec::cpu
