// The CUDA backend's linalg family: Gemm and MatMul through cuBLASLt (plans from gemm_mapping.h),
// Einsum as exec/einsum.h's plan on our strided-copy and reduction kernels and those GEMMs;
// weight gradients accumulate in place (beta = 1). Same inputs, outputs and gradients as the
// CPU's exec/cpu/linalg.cc.
#include <algorithm>
#include <cmath>

#include "exec/cuda/cublaslt_gemm.h"
#include "exec/einsum.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "graph/ops/conv.h"
#include "kernels/cuda/math.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"

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

template <typename T>
Status gemm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const c_shape = in.size() > 2 && in[2].defined() ? shape_tensor(in[2].shape()) : Tensor();
  ASSIGN_OR_RETURN(GemmProblem p, problem_of(call, in[0], in[1], &c_shape));
  if (p.k == 0 && p.bias != BiasKind::kNone && p.beta != 0.f)
    return unsupported("Gemm '" + call.op.name + "': K = 0 with a C input is not supported by backend cuda");
  ASSIGN_OR_RETURN(Tensor y, zeros({p.m, p.n}, dtype_of<T>()));
  if (y.numel() > 0 && p.k > 0) {
    GemmBuffers const b = forward_buffers(in[0].raw(), in[1].raw(), c_shape.defined() ? in[2].raw() : nullptr, y.raw());
    RETURN_IF_ERROR(in_op(call, run_gemm_plan<T>(gemm_forward_plan(p), b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1], c_shape};
  return Status::ok();
}

template <typename T>
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
    ASSIGN_OR_RETURN(da, grad_target(call, grads, 0, a.shape(), accumulate, dtype_of<T>()));
  }
  if (want_b) {
    ASSIGN_OR_RETURN(db, grad_target(call, grads, 1, b.shape(), accumulate, dtype_of<T>()));
  }
  if (want_c) {
    ASSIGN_OR_RETURN(dc, grad_target(call, grads, 2, shape_of(c_shape), accumulate, dtype_of<T>()));
  }
  if (p.m == 0 || p.n == 0 || p.k == 0) return Status::ok();  // every gradient is zero (or empty)
  GemmBuffers const buf = backward_buffers(a.raw(), b.raw(), gout[0].raw(), da.raw(), db.raw(), dc.raw());
  return in_op(call, run_gemm_plan<T>(gemm_backward_plan(p, want_a, want_b, want_c, accumulate), buf));
}

// ---- MatMul ----
template <typename T>
Status matmul_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  graph::MatMulAttrs const at = graph::ops::matmul_attrs(call.op);
  Result<MatMulShapes> s = matmul_shapes(in[0].shape(), in[1].shape(), at.trans_a, at.trans_b);
  RETURN_IF_ERROR(value_or_op_error(call, s));
  ASSIGN_OR_RETURN(Tensor y, zeros(s->out, dtype_of<T>()));
  if (y.numel() > 0 && in[0].numel() > 0) {
    GemmBuffers const b = forward_buffers(in[0].raw(), in[1].raw(), nullptr, y.raw());
    RETURN_IF_ERROR(in_op(call, run_gemm_plan<T>(matmul_forward_plan(*s, at.alpha), b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1]};
  return Status::ok();
}

template <typename T>
Status matmul_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  graph::MatMulAttrs const at = graph::ops::matmul_attrs(call.op);
  Result<MatMulShapes> s = matmul_shapes(a.shape(), b.shape(), at.trans_a, at.trans_b);
  RETURN_IF_ERROR(value_or_op_error(call, s));
  bool const want_a = wants(wanted, 0), want_b = wants(wanted, 1);
  Tensor da, db;  // undefined (null) where not wanted
  if (want_a) {
    ASSIGN_OR_RETURN(da, grad_target(call, grads, 0, a.shape(), accumulate, dtype_of<T>()));
  }
  if (want_b) {
    ASSIGN_OR_RETURN(db, grad_target(call, grads, 1, b.shape(), accumulate, dtype_of<T>()));
  }
  if (gout[0].numel() == 0 || a.numel() == 0 || b.numel() == 0) return Status::ok();
  GemmBuffers const buf = backward_buffers(a.raw(), b.raw(), gout[0].raw(), da.raw(), db.raw(), nullptr);
  return in_op(call, run_gemm_plan<T>(matmul_backward_plan(*s, want_a, want_b, accumulate, at.alpha), buf));
}

// ---- Einsum: exec/einsum.h's plan on our strided-copy and reduction kernels and cuBLASLt ----

Result<Tensor> einsum_permute(Tensor const& x, std::vector<int64_t> const& x_strides,
                              std::vector<int64_t> const& y_shape) {
  hd::StridedParams p;
  if (!hd::make_strided(y_shape, x_strides, hd::row_major_strides(y_shape), p))
    return unsupported("Einsum: a permutation of more than " + std::to_string(hd::kMaxRank) + " dims");
  ASSIGN_OR_RETURN(Tensor y, empty(y_shape));
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::strided_copy(x.data<float>(), y.data<float>(), p, false, s));
  return y;
}

// exec/einsum.h's EinsumSumPlan on our kernels: a copy into zeros, or one thread per out element.
Result<Tensor> einsum_strided_sum(Tensor const& src, std::vector<int64_t> const& src_strides,
                                  std::vector<int64_t> const& out_strides, std::vector<int64_t> const& space,
                                  std::vector<int64_t> const& out_shape) {
  EinsumSumPlan plan;
  if (!einsum_sum_plan(src_strides, out_strides, space, plan))
    return unsupported("Einsum: a reduction over more than " + std::to_string(hd::kMaxRank) + " dims");
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  if (plan.copy_only) {
    ASSIGN_OR_RETURN(Tensor out, zeros(out_shape));
    GP_CUDA_CHECK(kc::strided_copy(src.data<float>(), out.data<float>(), plan.copy, false, s));
    return out;
  }
  ASSIGN_OR_RETURN(Tensor out, empty(out_shape));
  if (plan.targets != out.numel()) return internal_error("Einsum: the kept labels do not cover the output");
  GP_CUDA_CHECK(kc::reduce_to(src.data<float>(), out.data<float>(), plan.reduce, plan.targets, false, s));
  return out;
}

Result<Tensor> einsum_batched_gemm(Tensor const& a, Tensor const& b, int64_t nb, int64_t nm, int64_t nk, int64_t nn) {
  if (nk == 0 || nb * nm * nn == 0) return zeros({nb, nm, nn});
  ASSIGN_OR_RETURN(MatMulShapes const s, matmul_shapes({nb, nm, nk}, {nb, nk, nn}));
  ASSIGN_OR_RETURN(Tensor c, empty({nb, nm, nn}));
  RETURN_IF_ERROR(run_gemm_plan<float>(matmul_forward_plan(s), forward_buffers(a.raw(), b.raw(), nullptr, c.raw())));
  return c;
}

EinsumPrimitives const& cuda_einsum_primitives() {
  static EinsumPrimitives const ops{einsum_permute, einsum_strided_sum, einsum_batched_gemm};
  return ops;
}

Status einsum_forward_op(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  graph::ops::EinsumSpec spec;
  std::vector<int64_t> size;
  RETURN_IF_ERROR(einsum_setup(call, in, spec, size));
  Result<Tensor> y = einsum_forward(in, spec, size, cuda_einsum_primitives());
  RETURN_IF_ERROR(in_op(call, y.status()));
  out.assign(call.op.outputs.size(), Tensor());
  if (y->raw() == in[0].raw()) {  // the identity equation: a copy, never the input itself
    ASSIGN_OR_RETURN(out[0], copy_of(*y));
  } else {
    out[0] = *y;
  }
  if (saved) saved->tensors = in;
  return Status::ok();
}

Status einsum_backward_op(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (gout.empty() || !gout[0].defined()) return Status::ok();
  std::vector<Tensor> const& in = saved.tensors;
  graph::ops::EinsumSpec spec;
  std::vector<int64_t> size;
  RETURN_IF_ERROR(einsum_setup(call, in, spec, size));
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!wants(wanted, i)) continue;
    Result<Tensor> g = einsum_gradient(in, i, gout[0], spec, size, cuda_einsum_primitives());
    RETURN_IF_ERROR(in_op(call, g.status()));
    RETURN_IF_ERROR(emit_grad(call, grads, i, *g, accumulate));
  }
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> linalg_kernels() {
  std::vector<KernelEntry> t;
  t.push_back({OpKind::kGemm,
               DType::kFloat32,
               {gemm_forward<float>, gemm_backward<float>, gemm_backward<float>, require_attrs<graph::GemmAttrs>},
               2});
  t.push_back({OpKind::kMatMul,
               DType::kFloat32,
               {matmul_forward<float>, matmul_backward<float>, matmul_backward<float>, no_check},
               2});
  // Mixed precision: 16-bit products with float32 accumulation; float32 weights rounded per call.
  auto low = [&t]<typename T>() {
    t.push_back(
        {OpKind::kGemm, dtype_of<T>(),
         low_precision_kernels<gemm_forward<T>, gemm_backward<T>, gemm_backward<T>>(require_attrs<graph::GemmAttrs>),
         2});
    t.push_back({OpKind::kMatMul, dtype_of<T>(),
                 low_precision_kernels<matmul_forward<T>, matmul_backward<T>, matmul_backward<T>>(no_check), 2});
  };
  low.operator()<__nv_bfloat16>();
  low.operator()<__half>();
  t.push_back(
      {OpKind::kEinsum, DType::kFloat32, {einsum_forward_op, einsum_backward_op, einsum_backward_op, einsum_check}, 1});
  return t;
}

}  // namespace gp::exec::cuda
