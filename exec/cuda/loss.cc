// The CUDA backend's loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph
// ops, with the CPU's conventions (exec/cpu/loss.cc) and per-position math (kernels/hd/loss.h):
// scores [N, C, d...], targets [N, d...], optional class weights, ignore_index, reductions none,
// sum and mean. The gradient flows to the scores only.
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "kernels/cuda/loss.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

bool is_sce(graph::Op const& op) { return op.kind() == OpKind::kSoftmaxCrossEntropyLoss; }

int reduction_code(graph::LossReduction r) {
  return r == graph::LossReduction::kNone ? 0 : r == graph::LossReduction::kSum ? 1 : 2;
}

hd::LossParams params_of(graph::LossAttrs const& a, std::vector<int64_t> const& shape) {
  hd::LossParams p{shape.at(0), shape.at(1), 1, a.has_ignore_index, a.ignore_index};
  for (std::size_t i = 2; i < shape.size(); ++i) p.d *= shape[i];
  return p;
}

struct Picked {
  Tensor cls, w;
};

// The class and weight of every position; a target outside [0, C) that is not the ignore_index is
// an error naming it (with `check`: forward; backward reuses what forward checked). A bad target
// gets class -1 and weight 0, which every loss kernel skips: the check may be deferred.
Result<Picked> pick(OpCall const& call, hd::LossParams const& p, Tensor const& target, Tensor const& weight,
                    bool check) {
  Picked r;
  ASSIGN_OR_RETURN(r.cls, empty({p.n * p.d}, DType::kInt64));
  ASSIGN_OR_RETURN(r.w, empty({p.n * p.d}));
  ASSIGN_OR_RETURN(Tensor flag, index_flag());
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  auto* bad = static_cast<unsigned long long*>(flag.raw());
  float const* wp = weight.defined() ? weight.data<float>() : nullptr;
  if (target.dtype() == DType::kInt32) {
    GP_CUDA_CHECK(kc::loss_pick(p, target.data<int32_t>(), wp, r.cls.data<int64_t>(), r.w.data<float>(), bad, s));
  } else {
    GP_CUDA_CHECK(kc::loss_pick(p, target.data<int64_t>(), wp, r.cls.data<int64_t>(), r.w.data<float>(), bad, s));
  }
  if (check) {
    auto const& a = *attrs_of<graph::LossAttrs>(call.op);
    RETURN_IF_ERROR(
        check_index_flag(call, target, flag, 1,
                         "[0, " + std::to_string(p.c) + ")" +
                             (a.has_ignore_index ? " and is not the ignore_index " + std::to_string(a.ignore_index)
                                                 : std::string(" (set ignore_index to skip such targets)")),
                         /*deferrable=*/true));
  }
  return r;
}

Status loss_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::LossAttrs>(call.op);
  Tensor const& x = in[0];
  Tensor const& target = in[1];
  Tensor const weight = in.size() > 2 ? in[2] : Tensor();
  RETURN_IF_ERROR(need_float(call, x));
  if (x.rank() < 2) return op_error(call, "scores have shape " + x.shape_string() + "; they must be [N, C, ...]");
  hd::LossParams const p = params_of(a, x.shape());
  if (target.numel() != p.n * p.d)
    return op_error(call, "targets have shape " + target.shape_string() + ", scores " + x.shape_string());
  if (weight.defined() && weight.numel() != p.c)
    return op_error(call, "weights have shape " + weight.shape_string() + ", expected [" + std::to_string(p.c) + "]");
  ASSIGN_OR_RETURN(Picked const pk, pick(call, p, target, weight, true));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  Tensor logp;
  if (is_sce(call.op)) {
    ASSIGN_OR_RETURN(logp, empty(x.shape()));
    GP_CUDA_CHECK(kc::loss_log_softmax(p, x.data<float>(), logp.data<float>(), s));
  }
  float const* src = logp.defined() ? logp.data<float>() : x.data<float>();
  bool const none = a.reduction == graph::LossReduction::kNone;
  ASSIGN_OR_RETURN(Tensor values, empty(none ? target.shape() : std::vector<int64_t>{p.n * p.d}));
  GP_CUDA_CHECK(kc::loss_values(p, src, pk.cls.data<int64_t>(), pk.w.data<float>(), values.data<float>(), s));
  Tensor loss = values;
  if (!none) {
    ASSIGN_OR_RETURN(loss, empty({}));
    ASSIGN_OR_RETURN(Tensor sums, empty({2}, DType::kInt64));  // two doubles
    GP_CUDA_CHECK(kc::loss_sums(values.data<float>(), pk.w.data<float>(), p.n * p.d,
                                a.reduction == graph::LossReduction::kMean, static_cast<double*>(sums.raw()),
                                loss.data<float>(), s));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = loss;
  if (out.size() > 1) out[1] = logp;
  if (saved) saved->tensors = {logp.defined() ? logp : shape_tensor(x.shape()), target, weight};
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
  hd::LossParams const p = params_of(a, shape);
  ASSIGN_OR_RETURN(Picked const pk, pick(call, p, target, weight, false));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  ASSIGN_OR_RETURN(Tensor sums, empty({2}, DType::kInt64));  // two doubles: mean's divisor
  GP_CUDA_CHECK(kc::loss_sums(pk.w.data<float>(), pk.w.data<float>(), p.n * p.d, false,
                              static_cast<double*>(sums.raw()), nullptr, s));
  ASSIGN_OR_RETURN(Tensor dx, zeros(shape));
  bool const loss_grad = !gout.empty() && gout[0].defined();
  Tensor const logp_grad = sce && gout.size() > 1 ? gout[1] : Tensor();
  GP_CUDA_CHECK(kc::loss_backward(p, reduction_code(a.reduction), loss_grad ? gout[0].data<float>() : nullptr,
                                  static_cast<double const*>(sums.raw()), pk.cls.data<int64_t>(), pk.w.data<float>(),
                                  sce ? logp.data<float>() : nullptr,
                                  logp_grad.defined() ? logp_grad.data<float>() : nullptr, dx.data<float>(), s));
  return emit_grad(call, grads, 0, dx, accumulate);
}

Status loss_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::LossAttrs>(op, graph));
  auto dtype = [&](std::size_t i) { return graph.tensor(op.inputs[i]).dtype; };
  if (dtype(1) != DType::kInt64 && dtype(1) != DType::kInt32)
    return unsupported("targets have dtype " + std::string(graph::dtype_name(dtype(1))) + " (int64 or int32)");
  if (op.inputs.size() > 2 && op.inputs[2] != graph::kNoTensor && dtype(2) != DType::kFloat32)
    return unsupported("the class weights have dtype " + std::string(graph::dtype_name(dtype(2))) + " (only float32)");
  if (graph.tensor(op.inputs[0]).shape.rank() < 2)
    return unsupported("scores have shape " + graph.tensor(op.inputs[0]).shape.to_string() +
                       "; they must be [N, C] or [N, C, d1, ...]");
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> loss_kernels() {
  OpKernels const loss{loss_forward, loss_backward, loss_backward, loss_check};
  return {{OpKind::kNegativeLogLikelihoodLoss, DType::kFloat32, loss, 2},
          {OpKind::kSoftmaxCrossEntropyLoss, DType::kFloat32, loss, 2}};
}

}  // namespace gp::exec::cuda
