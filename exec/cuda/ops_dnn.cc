// Gemm and MatMul through cuBLASLt (plans from gemm_mapping.h), Conv and BatchNormalization
// through cuDNN graphs (cudnn_graphs.h), BatchNormalization's inference-mode backward through our
// kernels (kernels/cuda/math.h). Inputs, outputs and gradients follow the CPU ops
// (exec/cpu/linalg.cc, conv.cc, norm.cc); weight gradients of the GEMMs
// accumulate in place (beta = 1), cuDNN's are computed fresh and added.
#include <algorithm>
#include <cmath>

#include "exec/cuda/cublaslt_gemm.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/ops_common.h"
#include "graph/ops/conv.h"
#include "kernels/cuda/math.h"

namespace gp::exec::cuda {
namespace {

Status in_op(OpCall const& call, Status s) { return s.with_context(call.op.type + " '" + call.op.name + "'"); }

template <typename V>
Status value_or_op_error(OpCall const& call, Result<V> const& r) {
  return r.is_ok() ? Status::ok() : op_error(call, r.status().message());
}

// Where gradient i is written: the existing accumulator, or a new tensor placed in grads[i].
Result<Tensor> grad_target(OpCall const& call, std::vector<Tensor>& grads, std::size_t i,
                           std::vector<int64_t> const& shape, bool accumulate) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (accumulate) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (!grads[i].defined() || grads[i].numel() != n)
      return op_error(call, "gradient accumulator for input " + std::to_string(i) + " has shape " +
                                grads[i].shape_string() + ", expected " + std::to_string(n) + " elements");
    return grads[i];
  }
  ASSIGN_OR_RETURN(grads[i], zeros(shape));  // zeros: an empty product (a 0 dim) still gives a defined gradient
  return grads[i];
}

bool has_input(OpCall const& call, std::size_t i) {
  return call.op.inputs.size() > i && call.op.inputs[i] != graph::kNoTensor;
}

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
    GemmBuffers b{};
    bind(b, Buf::kA, in[0].raw()), bind(b, Buf::kB, in[1].raw()), bind(b, Buf::kY, y.raw());
    if (c_shape.defined()) bind(b, Buf::kC, in[2].raw());
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
  GemmBuffers buf{};
  bind(buf, Buf::kA, a.raw()), bind(buf, Buf::kB, b.raw()), bind(buf, Buf::kDY, gout[0].raw());
  if (want_a) {
    ASSIGN_OR_RETURN(Tensor da, grad_target(call, grads, 0, a.shape(), accumulate));
    bind(buf, Buf::kDA, da.raw());
  }
  if (want_b) {
    ASSIGN_OR_RETURN(Tensor db, grad_target(call, grads, 1, b.shape(), accumulate));
    bind(buf, Buf::kDB, db.raw());
  }
  if (want_c) {
    ASSIGN_OR_RETURN(Tensor dc, grad_target(call, grads, 2, shape_of(c_shape), accumulate));
    bind(buf, Buf::kDC, dc.raw());
  }
  if (p.m == 0 || p.n == 0 || p.k == 0) return Status::ok();  // every gradient is zero (or empty)
  return in_op(call, run_gemm_plan<float>(gemm_backward_plan(p, want_a, want_b, want_c, accumulate), buf));
}

// ---- MatMul ----
Status matmul_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Result<MatMulShapes> s = matmul_shapes(in[0].shape(), in[1].shape());
  RETURN_IF_ERROR(value_or_op_error(call, s));
  ASSIGN_OR_RETURN(Tensor y, zeros(s->out));
  if (y.numel() > 0 && in[0].numel() > 0) {
    GemmBuffers b{};
    bind(b, Buf::kA, in[0].raw()), bind(b, Buf::kB, in[1].raw()), bind(b, Buf::kY, y.raw());
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
  GemmBuffers buf{};
  bind(buf, Buf::kA, a.raw()), bind(buf, Buf::kB, b.raw()), bind(buf, Buf::kDY, gout[0].raw());
  if (want_a) {
    ASSIGN_OR_RETURN(Tensor da, grad_target(call, grads, 0, a.shape(), accumulate));
    bind(buf, Buf::kDA, da.raw());
  }
  if (want_b) {
    ASSIGN_OR_RETURN(Tensor db, grad_target(call, grads, 1, b.shape(), accumulate));
    bind(buf, Buf::kDB, db.raw());
  }
  if (gout[0].numel() == 0 || a.numel() == 0 || b.numel() == 0) return Status::ok();
  return in_op(call, run_gemm_plan<float>(matmul_backward_plan(*s, want_a, want_b, accumulate), buf));
}

// ---- Conv ----
Result<ConvShape> conv_shape_of(OpCall const& call, Tensor const& x, Tensor const& w) {
  Result<ConvShape> s = conv_shape(x.shape(), w.shape(), *attrs_of<graph::ConvAttrs>(call.op));
  RETURN_IF_ERROR(value_or_op_error(call, s));
  return s;
}

int64_t spatial(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (std::size_t i = 2; i < shape.size(); ++i) n *= shape[i];
  return n;
}

Status conv_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& w = in[1];
  ASSIGN_OR_RETURN(ConvShape s, conv_shape_of(call, x, w));
  ASSIGN_OR_RETURN(Tensor y, empty(s.y));
  RETURN_IF_ERROR(in_op(call, conv_fprop<float>(s, x.data<float>(), w.data<float>(), y.data<float>())));
  if (has_input(call, 2) && in.size() > 2 && in[2].defined()) {
    // y_n[K,S] += bias[K,1]·ones[1,S] for every n: one strided-batched rank-1 product.
    int64_t const n = s.y[0], k = s.y[1], sp = spatial(s.y);
    GemmPlan plan;
    LtCall c = rowmajor_call(Buf::kC, false, Buf::kOnes, false, Buf::kY, k, sp, 1, 1.f, 1.f);
    c.batch = n, c.stride_c = k * sp;  // bias and ones: stride 0, the same for every n
    plan.calls.push_back(c);
    plan.ones = sp;
    GemmBuffers b{};
    bind(b, Buf::kC, in[2].raw()), bind(b, Buf::kY, y.raw());
    RETURN_IF_ERROR(in_op(call, run_gemm_plan<float>(plan, b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, w};
  return Status::ok();
}

// db[K] = Σ_{n,s} dy[n,K,s]: dy·ones over s into tmp[N,K], then ones·tmp over n (accumulating).
Status conv_bias_grad(OpCall const& call, ConvShape const& s, Tensor const& dy, Tensor& db, bool accumulate) {
  int64_t const n = s.y[0], k = s.y[1], sp = spatial(s.y);
  GemmPlan plan;
  plan.calls.push_back(rowmajor_call(Buf::kDY, false, Buf::kOnes, false, Buf::kTmp, n * k, 1, sp, 1.f, 0.f));
  plan.calls.push_back(
      rowmajor_call(Buf::kOnes, false, Buf::kTmp, false, Buf::kDC, 1, k, n, 1.f, accumulate ? 1.f : 0.f));
  plan.ones = std::max(n, sp);
  plan.tmp = n * k;
  GemmBuffers b{};
  bind(b, Buf::kDY, dy.raw()), bind(b, Buf::kDC, db.raw());
  return in_op(call, run_gemm_plan<float>(plan, b));
}

// dx into dx_grads[0], dw and db into w_grads[1], w_grads[2] (each set, or added when accumulating).
Status conv_grads(OpCall const& call, Saved const& saved, Tensor const& dy, bool want_x, bool want_w, bool want_b,
                  std::vector<Tensor>& dx_grads, bool accumulate_x, std::vector<Tensor>& w_grads, bool accumulate_w) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  ASSIGN_OR_RETURN(ConvShape s, conv_shape_of(call, x, w));
  if (want_x) {
    ASSIGN_OR_RETURN(Tensor dx, empty(s.x));
    RETURN_IF_ERROR(in_op(call, conv_dgrad<float>(s, dy.data<float>(), w.data<float>(), dx.data<float>())));
    RETURN_IF_ERROR(emit_grad(call, dx_grads, 0, dx, accumulate_x));
  }
  if (want_w) {  // cuDNN's graph API has no output blend: fresh, then added
    ASSIGN_OR_RETURN(Tensor dw, empty(s.w));
    RETURN_IF_ERROR(in_op(call, conv_wgrad<float>(s, x.data<float>(), dy.data<float>(), dw.data<float>())));
    RETURN_IF_ERROR(emit_grad(call, w_grads, 1, dw, accumulate_w));
  }
  if (want_b && has_input(call, 2)) {
    ASSIGN_OR_RETURN(Tensor db, grad_target(call, w_grads, 2, {s.w[0]}, accumulate_w));
    RETURN_IF_ERROR(conv_bias_grad(call, s, dy, db, accumulate_w));
  }
  return Status::ok();
}

Status conv_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  return conv_grads(call, saved, gout[0], wants(wanted, 0), wants(wanted, 1), wants(wanted, 2), grads, accumulate,
                    grads, accumulate);
}

Status conv_backward_both(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                          std::vector<Tensor>& weight_grads) {
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  if (!gout.at(0).defined()) return Status::ok();
  bool const want_w = weight_grads.size() > 1 && weight_grads[1].defined();
  bool const want_b = weight_grads.size() > 2 && weight_grads[2].defined();
  return conv_grads(call, saved, gout[0], wants(needs_grad, 0), want_w, want_b, grad_inputs, false, weight_grads, true);
}

// ---- BatchNormalization ----
Result<Tensor> copy_of(Tensor const& src) {
  ASSIGN_OR_RETURN(Tensor dst, empty(src.shape(), src.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (src.nbytes() > 0)
    GP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, stream));
  return dst;
}

// 1/sqrt(var + eps) for C channels, on the host: a C-float round trip (inference only), since no
// library call of ours computes a reciprocal square root.
Result<Tensor> inv_std(Tensor const& var, float eps) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  std::vector<float> h(static_cast<std::size_t>(var.numel()));
  GP_CUDA_CHECK(cudaMemcpyAsync(h.data(), var.raw(), var.nbytes(), cudaMemcpyDeviceToHost, stream));
  GP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (float& v : h) v = 1.f / std::sqrt(v + eps);
  ASSIGN_OR_RETURN(Tensor out, empty(var.shape()));
  GP_CUDA_CHECK(cudaMemcpyAsync(out.raw(), h.data(), out.nbytes(), cudaMemcpyHostToDevice, stream));
  GP_CUDA_CHECK(cudaStreamSynchronize(stream));  // h is freed on return
  return out;
}

Status batchnorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::BatchNormAttrs>(call.op);
  Tensor const& x = in[0];
  if (x.rank() < 2 || x.rank() > 5) return op_error(call, "input " + x.shape_string() + " must have rank 2 to 5");
  int64_t const c = x.dim(1);
  for (std::size_t i = 1; i < 5; ++i)
    if (in.size() <= i || !in[i].defined() || in[i].numel() != c)
      return op_error(call, "input " + std::to_string(i) + " must have " + std::to_string(c) + " elements");
  bool const training = call.training;
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape()));
  Tensor mean, inv_var;
  out.assign(std::max<std::size_t>(call.op.outputs.size(), training ? 3 : 1), Tensor());
  if (training) {
    ASSIGN_OR_RETURN(mean, empty({c}));
    ASSIGN_OR_RETURN(inv_var, empty({c}));
    ASSIGN_OR_RETURN(Tensor next_mean, empty({c}));
    ASSIGN_OR_RETURN(Tensor next_var, empty({c}));
    BnTrainPtrs const p{x.raw(), in[1].raw(), in[2].raw(),   in[3].raw(),     in[4].raw(),
                        y.raw(), mean.raw(),  inv_var.raw(), next_mean.raw(), next_var.raw()};
    RETURN_IF_ERROR(in_op(call, batchnorm_train<float>(x.shape(), a.epsilon, 1.f - a.momentum, p)));
    out[1] = next_mean;
    out[2] = next_var;
  } else {
    mean = in[3];
    ASSIGN_OR_RETURN(inv_var, inv_std(in[4], a.epsilon));
    BnInferPtrs const p{x.raw(), in[1].raw(), in[2].raw(), mean.raw(), inv_var.raw(), y.raw()};
    RETURN_IF_ERROR(in_op(call, batchnorm_infer<float>(x.shape(), p)));
    for (std::size_t k = 1; k < out.size() && k < 3; ++k) {
      ASSIGN_OR_RETURN(out[k], copy_of(in[2 + k]));
    }
  }
  out[0] = y;
  // The CPU keeps the variance, this backend cuDNN's inverse standard deviation (same size).
  if (saved) saved->tensors = {x, in[1], mean, inv_var, shape_tensor({training ? 1 : 0})};
  return Status::ok();
}

// Inference mode: the running statistics are constants (the CPU's use_global_stats), so the
// gradients are elementwise and per-channel sums (our kernels, kernels/cuda/math.h), not a cuDNN
// graph. Only the gradients wanted are computed.
Status batchnorm_infer_backward(OpCall const& call, Saved const& saved, Tensor const& dy,
                                std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& scale = saved.tensors.at(1);
  float const* mean = saved.tensors.at(2).data<float>();
  float const* inv = saved.tensors.at(3).data<float>();
  int64_t const n = x.dim(0), c = x.dim(1), sp = spatial(x.shape());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(Tensor dx, empty(x.shape()));
    GP_CUDA_CHECK(kernels::cuda::batchnorm_infer_backward_input<float>(dy.data<float>(), scale.data<float>(), inv, n, c,
                                                                       sp, dx.data<float>(), stream));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  }
  if (!(wants(wanted, 1) || wants(wanted, 2))) return Status::ok();
  ASSIGN_OR_RETURN(Tensor dscale, empty({c}));
  ASSIGN_OR_RETURN(Tensor dbias, empty({c}));
  GP_CUDA_CHECK(kernels::cuda::batchnorm_infer_backward_params<float>(
      x.data<float>(), dy.data<float>(), mean, inv, n, c, sp, dscale.data<float>(), dbias.data<float>(), stream));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dbias, accumulate));
  return Status::ok();
}

Status batchnorm_backward_op(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                             std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2)) || !gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  bool const training = shape_of(saved.tensors.at(4)).at(0) != 0;
  if (!training) return batchnorm_infer_backward(call, saved, gout[0], wanted, grads, accumulate);
  int64_t const c = x.dim(1);
  ASSIGN_OR_RETURN(Tensor dx, empty(x.shape()));
  ASSIGN_OR_RETURN(Tensor dscale, empty({c}));
  ASSIGN_OR_RETURN(Tensor dbias, empty({c}));
  BnBackwardPtrs const p{gout[0].raw(),
                         x.raw(),
                         saved.tensors.at(1).raw(),
                         saved.tensors.at(2).raw(),
                         saved.tensors.at(3).raw(),
                         dx.raw(),
                         dscale.raw(),
                         dbias.raw()};
  RETURN_IF_ERROR(in_op(call, batchnorm_backward<float>(x.shape(), p)));
  if (wants(wanted, 0)) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dbias, accumulate));
  return Status::ok();
}

// The CPU's fresh_then_add (exec/cpu/cpu_backend.cc): one pass computes every gradient fresh,
// then the weights' (scale and bias: C elements each) are added into their accumulators.
Status batchnorm_backward_both(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                               std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                               std::vector<Tensor>& weight_grads) {
  std::size_t const n = call.op.inputs.size();
  std::vector<bool> wanted(n, false);
  for (std::size_t i = 0; i < n; ++i)
    wanted[i] = wants(needs_grad, i) || (i < weight_grads.size() && weight_grads[i].defined());
  grad_inputs.assign(n, Tensor());
  RETURN_IF_ERROR(batchnorm_backward_op(call, saved, gout, wanted, grad_inputs, false));
  for (std::size_t i = 0; i < n; ++i) {
    if (i >= weight_grads.size() || !weight_grads[i].defined() || !grad_inputs[i].defined()) continue;
    RETURN_IF_ERROR(emit_grad(call, weight_grads, i, grad_inputs[i], true));
    grad_inputs[i] = Tensor();
  }
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> dnn_kernels() {
  std::vector<KernelEntry> t;
  t.push_back(
      {"Gemm", DType::kFloat32, {gemm_forward, gemm_backward, gemm_backward, require_attrs<graph::GemmAttrs>}, 2});
  t.push_back({"MatMul", DType::kFloat32, {matmul_forward, matmul_backward, matmul_backward, no_check}, 2});
  t.push_back({"Conv",
               DType::kFloat32,
               {conv_forward, conv_backward, conv_backward, graph::ops::conv_check, conv_backward_both},
               2});
  t.push_back({"BatchNormalization",
               DType::kFloat32,
               {batchnorm_forward, batchnorm_backward_op, batchnorm_backward_op, require_attrs<graph::BatchNormAttrs>,
                batchnorm_backward_both},
               5});
  return t;
}

}  // namespace gp::exec::cuda
