// The CUDA backend's linalg family: Gemm and MatMul through cuBLASLt (plans from gemm_mapping.h);
// weight gradients accumulate in place (beta = 1). Same inputs, outputs and gradients as the
// CPU's exec/cpu/linalg.cc.
#include <algorithm>
#include <cmath>

#include "exec/cuda/cublaslt_gemm.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "graph/ops/conv.h"
#include "kernels/cuda/math.h"
#include "exec/cuda/cuda_ops.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// ---- Gemm ----
Result<GemmProblem> problem_of(OpCall const& call, Tensor const& a, Tensor const& b, Tensor const* c_shape) {
  auto const& at = *attrs_of<graph::GemmAttrs>(call.op);
  Result<GemmProblem> p = gemm_problem(a.shape(), b.shape(), at.trans_a, at.trans_b, at.alpha, at.beta);
  RETURN_IF_ERROR(value_or_op_error(call, p));
  if (c_shape && c_shape->defined()) {
    Result<BiasKind> kind = gemm_bias_kind(shape_of(*c_shape), p->m, p->n);
    RETURN_IF_ERROR(value_or_op_error(call, kind));
    p->bias = *kind;
  }
  return p;
}

Status gemm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const c_shape = in.size() > 2 && in[2].defined() ? shape_tensor(in[2].shape()) : Tensor();
  ASSIGN_OR_RETURN(GemmProblem p, problem_of(call, in[0], in[1], &c_shape));
  if (p.k == 0 && p.bias != BiasKind::kNone && p.beta != 0.f)
    return unsupported("Gemm '" + call.op.name + "': K = 0 with a C input is not supported by backend cuda");
  ASSIGN_OR_RETURN(Tensor y, zeros({p.m, p.n}));
  if (y.numel() > 0 && p.k > 0) {
    GemmBuffers const b = forward_buffers(in[0].raw(), in[1].raw(), c_shape.defined() ? in[2].raw() : nullptr, y.raw());
    RETURN_IF_ERROR(in_op(call, run_gemm_plan<float>(gemm_forward_plan(p), b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1], c_shape};
  return Status::ok();
}

Status gemm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Tensor const& c_shape = saved.tensors.at(2);
  ASSIGN_OR_RETURN(GemmProblem p, problem_of(call, a, b, &c_shape));
  bool const want_a = wants(wanted, 0), want_b = wants(wanted, 1), want_c = wants(wanted, 2) && c_shape.defined();
  Tensor da, db, dc;  // undefined (null) where not wanted
  if (want_a) {
    ASSIGN_OR_RETURN(da, grad_target(call, grads, 0, a.shape(), accumulate));
  }
  if (want_b) {
    ASSIGN_OR_RETURN(db, grad_target(call, grads, 1, b.shape(), accumulate));
  }
  if (want_c) {
    ASSIGN_OR_RETURN(dc, grad_target(call, grads, 2, shape_of(c_shape), accumulate));
  }
  if (p.m == 0 || p.n == 0 || p.k == 0) return Status::ok();  // every gradient is zero (or empty)
  GemmBuffers const buf = backward_buffers(a.raw(), b.raw(), gout[0].raw(), da.raw(), db.raw(), dc.raw());
  return in_op(call, run_gemm_plan<float>(gemm_backward_plan(p, want_a, want_b, want_c, accumulate), buf));
}

// ---- MatMul ----
Status matmul_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Result<MatMulShapes> s = matmul_shapes(in[0].shape(), in[1].shape());
  RETURN_IF_ERROR(value_or_op_error(call, s));
  ASSIGN_OR_RETURN(Tensor y, zeros(s->out));
  if (y.numel() > 0 && in[0].numel() > 0) {
    GemmBuffers const b = forward_buffers(in[0].raw(), in[1].raw(), nullptr, y.raw());
    RETURN_IF_ERROR(in_op(call, run_gemm_plan<float>(matmul_forward_plan(*s), b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1]};
  return Status::ok();
}

Status matmul_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Result<MatMulShapes> s = matmul_shapes(a.shape(), b.shape());
  RETURN_IF_ERROR(value_or_op_error(call, s));
  bool const want_a = wants(wanted, 0), want_b = wants(wanted, 1);
  Tensor da, db;  // undefined (null) where not wanted
  if (want_a) {
    ASSIGN_OR_RETURN(da, grad_target(call, grads, 0, a.shape(), accumulate));
  }
  if (want_b) {
    ASSIGN_OR_RETURN(db, grad_target(call, grads, 1, b.shape(), accumulate));
  }
  if (gout[0].numel() == 0 || a.numel() == 0 || b.numel() == 0) return Status::ok();
  GemmBuffers const buf = backward_buffers(a.raw(), b.raw(), gout[0].raw(), da.raw(), db.raw(), nullptr);
  return in_op(call, run_gemm_plan<float>(matmul_backward_plan(*s, want_a, want_b, accumulate), buf));
}

}  // namespace

std::vector<KernelEntry> linalg_kernels() {
  std::vector<KernelEntry> t;
  t.push_back({OpKind::kGemm,
               DType::kFloat32,
               {gemm_forward, gemm_backward, gemm_backward, require_attrs<graph::GemmAttrs>},
               2});
  t.push_back({OpKind::kMatMul, DType::kFloat32, {matmul_forward, matmul_backward, matmul_backward, no_check}, 2});
  return t;
}

}  // namespace gp::exec::cuda
