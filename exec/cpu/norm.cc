// Norm family: BatchNormalization, InstanceNormalization and LayerNormalization through oneDNN,
// forward and backward; LRN on kernels/norm.h (kernels/hd/norm.h's per-element math, which the CUDA
// kernels run too).
// BatchNormalization in training (OpCall::training) normalises with batch statistics and returns
// the updated running statistics as outputs 1 and 2, whether or not the graph names them (the
// executor stores them as the model's state): new = old · momentum + batch · (1 − momentum), with
// the unbiased batch variance in running_var as torch and cuDNN compute it (ONNX's reference uses
// the biased one; trained models come from torch, whose inference expects its own statistics).
// It does not write the input tensors. With a fused Relu (BatchNormAttrs::relu) y = max(0, ·) (after
// adding a fused residual z, input 5: BatchNormAttrs::residual, whose gradient is the masked dy),
// and backward masks dy by y > 0 first: on the CPU as two oneDNN passes, as BatchNorm and Relu apart
// run (oneDNN 2.6's fuse_norm_relu on these plain layouts took 3.5x the normalisation's time,
// `bench_ops`), so the fusion is for the GPU, where our kernels clip and mask in their own passes.
#include <algorithm>
#include <cmath>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/op_shared.h"
#include "graph/ops/norm.h"
#include "kernels/norm.h"

namespace gp::exec::cpu {
namespace {

using dnnl::normalization_flags;

struct BnFwd {
  dnnl::batch_normalization_forward::primitive_desc pd;
  dnnl::batch_normalization_forward prim;
};
struct BnBwd {
  dnnl::batch_normalization_backward::primitive_desc pd;
  dnnl::batch_normalization_backward prim;
};

normalization_flags bn_flags(bool training) {
  normalization_flags f = normalization_flags::use_scale | normalization_flags::use_shift;
  if (!training) f = f | normalization_flags::use_global_stats;
  return f;
}

// The data in `dtype` (float32, or bfloat16 under mixed precision); statistics, scale and shift
// are float32 either way.
std::shared_ptr<BnFwd const> bn_fwd_prim(std::vector<int64_t> const& shape, float eps, bool training, DType dtype) {
  return dnnl_ctx::cached<BnFwd>(dnnl_ctx::key("bn_fwd", shape, eps, training, static_cast<int>(dtype)), [&] {
    dnnl::batch_normalization_forward::desc d(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
        dnnl_ctx::plain_md(shape, dtype), eps, bn_flags(training));
    dnnl::batch_normalization_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return BnFwd{pd, dnnl::batch_normalization_forward(pd)};
  });
}

std::shared_ptr<BnBwd const> bn_bwd_prim(std::vector<int64_t> const& shape, float eps, bool training, DType dtype) {
  auto f = bn_fwd_prim(shape, eps, training, dtype);
  return dnnl_ctx::cached<BnBwd>(dnnl_ctx::key("bn_bwd", shape, eps, training, static_cast<int>(dtype)), [&] {
    dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, dnnl_ctx::plain_md(shape, dtype),
                                               dnnl_ctx::plain_md(shape, dtype), eps, bn_flags(training));
    dnnl::batch_normalization_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return BnBwd{pd, dnnl::batch_normalization_backward(pd)};
  });
}

}  // namespace

Status batchnorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::BatchNormAttrs>(call.op);
  Tensor const& x = in[0];
  if (x.rank() < 2) return op_error(call, "input " + x.shape_string() + " has no channel dimension");
  int64_t const c = x.dim(1);
  for (std::size_t i = 1; i < 5; ++i)
    if (in.size() <= i || !in[i].defined() || in[i].numel() != c)
      return op_error(call, "input " + std::to_string(i) + " must have " + std::to_string(c) + " elements");
  std::size_t const zi = graph::kBatchNormResidualInput;
  if (a.residual &&
      (in.size() <= zi || !in[zi].defined() || in[zi].shape() != x.shape() || in[zi].dtype() != x.dtype()))
    return op_error(call, "the fused residual (input 5) must have x's shape " + x.shape_string() + " and dtype");
  bool const training = call.training;
  auto e = bn_fwd_prim(x.shape(), a.epsilon, training, x.dtype());
  Tensor y(x.shape(), x.dtype());
  Tensor mean = training ? Tensor({c}) : in[3];
  Tensor var = training ? Tensor({c}) : in[4];
  dnnl::memory::desc const stat = dnnl_ctx::plain_md({c});
  dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(x)},
                          {DNNL_ARG_DST, dnnl_ctx::mem(y)},
                          {DNNL_ARG_SCALE, dnnl_ctx::mem(stat, in[1].raw())},
                          {DNNL_ARG_SHIFT, dnnl_ctx::mem(stat, in[2].raw())},
                          {DNNL_ARG_MEAN, dnnl_ctx::mem(stat, mean.raw())},
                          {DNNL_ARG_VARIANCE, dnnl_ctx::mem(stat, var.raw())}});
  if (a.residual)
    add_relu_in_place(y, in[zi]);
  else if (a.relu)
    relu_in_place(y);
  out.assign(std::max<std::size_t>(call.op.outputs.size(), training ? 3 : 1), Tensor());
  out[0] = y;
  int64_t const per_channel = x.numel() / std::max<int64_t>(c, 1);
  double const unbias = per_channel > 1 ? static_cast<double>(per_channel) / static_cast<double>(per_channel - 1) : 1.0;
  for (std::size_t k = 1; k < out.size() && k < 3; ++k) {
    float const* running = in[2 + k].data<float>();
    float const* batch = (k == 1 ? mean : var).data<float>();
    double const correction = k == 2 ? unbias : 1.0;
    Tensor r({c});
    float* dst = r.data<float>();
    for (int64_t i = 0; i < c; ++i)
      dst[i] = training ? static_cast<float>(running[i] * a.momentum + batch[i] * correction * (1.0 - a.momentum))
                        : running[i];
    out[k] = r;
  }
  if (saved) {
    Tensor mode({1}, DType::kInt64);
    mode.data<int64_t>()[0] = training ? 1 : 0;
    saved->tensors = {x, in[1], mean, var, mode};
    if (a.relu) saved->tensors.push_back(y);
  }
  return Status::ok();
}

Status batchnorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  auto const& a = *attrs_of<graph::BatchNormAttrs>(call.op);
  std::size_t const zi = graph::kBatchNormResidualInput;
  bool const want_z = a.residual && wants(wanted, zi);
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2) || want_z) || !gout.at(0).defined())
    return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  Tensor const& scale = saved.tensors.at(1);
  Tensor const& mean = saved.tensors.at(2);
  Tensor const& var = saved.tensors.at(3);
  bool const training = saved.tensors.at(4).data<int64_t>()[0] != 0;
  // A fused Relu: the normalisation's gradient is dy where its output y > 0, else 0.
  Tensor const dy = a.relu ? relu_grad_from_output(saved.tensors.at(5), gout[0]) : gout[0];
  int64_t const c = x.dim(1);
  auto e = bn_bwd_prim(x.shape(), a.epsilon, training, x.dtype());
  Tensor dx(x.shape(), x.dtype()), dscale({c}), dshift({c});
  // oneDNN 2.6 checks that every argument of the flags is present, though backward ignores the shift.
  Tensor const zero_shift = Tensor::zeros({c});
  dnnl::memory::desc const stat = dnnl_ctx::plain_md({c});
  dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(x)},
                          {DNNL_ARG_DIFF_DST, dnnl_ctx::mem(dy)},
                          {DNNL_ARG_MEAN, dnnl_ctx::mem(stat, mean.raw())},
                          {DNNL_ARG_VARIANCE, dnnl_ctx::mem(stat, var.raw())},
                          {DNNL_ARG_SCALE, dnnl_ctx::mem(stat, scale.raw())},
                          {DNNL_ARG_SHIFT, dnnl_ctx::mem(stat, zero_shift.raw())},
                          {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(dx)},
                          {DNNL_ARG_DIFF_SCALE, dnnl_ctx::mem(stat, dscale.raw())},
                          {DNNL_ARG_DIFF_SHIFT, dnnl_ctx::mem(stat, dshift.raw())}});
  if (wants(wanted, 0)) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dshift, accumulate));
  // A fused residual's gradient: the masked dy (read above, no longer).
  if (want_z) RETURN_IF_ERROR(emit_grad(call, grads, zi, dy, accumulate));
  return Status::ok();
}

namespace {

struct LnFwd {
  dnnl::layer_normalization_forward::primitive_desc pd;
  dnnl::layer_normalization_forward prim;
};
struct LnBwd {
  dnnl::layer_normalization_backward::primitive_desc pd;
  dnnl::layer_normalization_backward prim;
};

normalization_flags ln_flags(bool bias) {
  return bias ? (normalization_flags::use_scale | normalization_flags::use_shift) : normalization_flags::use_scale;
}

std::shared_ptr<LnFwd const> ln_fwd_prim(int64_t rows, int64_t cols, float eps, bool bias) {
  return dnnl_ctx::cached<LnFwd>(dnnl_ctx::key("ln_fwd", rows, cols, eps, bias), [&] {
    dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_training, dnnl_ctx::plain_md({rows, cols}),
                                              dnnl_ctx::plain_md({rows}), eps, ln_flags(bias));
    dnnl::layer_normalization_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return LnFwd{pd, dnnl::layer_normalization_forward(pd)};
  });
}

bool ln_has_bias(OpCall const& call) { return call.op.inputs.size() > 2 && call.op.inputs[2] != graph::kNoTensor; }

}  // namespace

Status layernorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::LayerNormAttrs>(call.op);
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::LayerNormSplit const split, graph::ops::layer_norm_split(call.op, x.shape()));
  int64_t const rows = split.rows, cols = split.cols;
  bool const bias = ln_has_bias(call) && in.size() > 2 && in[2].defined();
  if (in[1].numel() != cols || (bias && in[2].numel() != cols))
    return op_error(call, "scale/bias must have " + std::to_string(cols) + " elements");
  auto e = ln_fwd_prim(rows, cols, a.epsilon, bias);
  Tensor y(x.shape()), mean({rows}), var({rows});
  dnnl::memory::desc const data = dnnl_ctx::plain_md({rows, cols});
  dnnl::memory::desc const stat = dnnl_ctx::plain_md({rows});
  dnnl::memory::desc const wmd = dnnl_ctx::plain_md({cols});
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl_ctx::mem(data, x.raw())},
                                             {DNNL_ARG_DST, dnnl_ctx::mem(data, y.raw())},
                                             {DNNL_ARG_SCALE, dnnl_ctx::mem(wmd, in[1].raw())},
                                             {DNNL_ARG_MEAN, dnnl_ctx::mem(stat, mean.raw())},
                                             {DNNL_ARG_VARIANCE, dnnl_ctx::mem(stat, var.raw())}};
  if (bias) args.emplace(DNNL_ARG_SHIFT, dnnl_ctx::mem(wmd, in[2].raw()));
  dnnl_ctx::run(e->prim, args);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1) out[1] = mean.reshaped(split.stat_shape);
  if (out.size() > 2) {
    Tensor inv(split.stat_shape);
    for (int64_t i = 0; i < rows; ++i) inv.data<float>()[i] = 1.f / std::sqrt(var.data<float>()[i] + a.epsilon);
    out[2] = inv;
  }
  if (saved) saved->tensors = {x, in[1], mean, var};
  return Status::ok();
}

Status layernorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2)) || !gout.at(0).defined()) return Status::ok();
  auto const& a = *attrs_of<graph::LayerNormAttrs>(call.op);
  Tensor const& x = saved.tensors.at(0);
  Tensor const& scale = saved.tensors.at(1);
  ASSIGN_OR_RETURN(graph::ops::LayerNormSplit const split, graph::ops::layer_norm_split(call.op, x.shape()));
  int64_t const rows = split.rows, cols = split.cols;
  bool const bias = ln_has_bias(call);
  auto f = ln_fwd_prim(rows, cols, a.epsilon, bias);
  auto e = dnnl_ctx::cached<LnBwd>(dnnl_ctx::key("ln_bwd", rows, cols, a.epsilon, bias), [&] {
    dnnl::layer_normalization_backward::desc d(dnnl::prop_kind::backward, dnnl_ctx::plain_md({rows, cols}),
                                               dnnl_ctx::plain_md({rows, cols}), dnnl_ctx::plain_md({rows}), a.epsilon,
                                               ln_flags(bias));
    dnnl::layer_normalization_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return LnBwd{pd, dnnl::layer_normalization_backward(pd)};
  });
  Tensor dx(x.shape()), dscale(scale.shape()), dshift(scale.shape());
  dnnl::memory::desc const data = dnnl_ctx::plain_md({rows, cols});
  dnnl::memory::desc const stat = dnnl_ctx::plain_md({rows});
  dnnl::memory::desc const wmd = dnnl_ctx::plain_md({cols});
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl_ctx::mem(data, x.raw())},
                                             {DNNL_ARG_DIFF_DST, dnnl_ctx::mem(data, gout[0].raw())},
                                             {DNNL_ARG_MEAN, dnnl_ctx::mem(stat, saved.tensors.at(2).raw())},
                                             {DNNL_ARG_VARIANCE, dnnl_ctx::mem(stat, saved.tensors.at(3).raw())},
                                             {DNNL_ARG_SCALE, dnnl_ctx::mem(wmd, scale.raw())},
                                             {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(data, dx.raw())},
                                             {DNNL_ARG_DIFF_SCALE, dnnl_ctx::mem(wmd, dscale.raw())}};
  Tensor const zero_shift = bias ? Tensor::zeros({cols}) : Tensor();
  if (bias) {
    args.emplace(DNNL_ARG_DIFF_SHIFT, dnnl_ctx::mem(wmd, dshift.raw()));
    args.emplace(DNNL_ARG_SHIFT, dnnl_ctx::mem(wmd, zero_shift.raw()));  // see batchnorm_backward
  }
  dnnl_ctx::run(e->prim, args);
  if (wants(wanted, 0)) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (wants(wanted, 2) && bias) RETURN_IF_ERROR(emit_grad(call, grads, 2, dshift, accumulate));
  return Status::ok();
}

// ---- InstanceNormalization: oneDNN's batch normalisation over a [1, N*C, spatial] view of the
// input (its channels are the (sample, channel) pairs), sharing BatchNormalization's primitives ----

namespace {

// x [N, C, spatial...] as oneDNN's [1, N*C, S]: one batch-norm channel per (sample, channel).
std::vector<int64_t> instance_view(std::vector<int64_t> const& x) {
  int64_t s = 1;
  for (std::size_t i = 2; i < x.size(); ++i) s *= x[i];
  return {1, x[0] * x[1], s};
}

// A per-channel [C] vector repeated for each of n samples: [n*C].
Tensor tiled(Tensor const& v, int64_t n) {
  int64_t const c = v.numel();
  Tensor t({n * c});
  for (int64_t i = 0; i < n; ++i) std::copy(v.data<float>(), v.data<float>() + c, t.data<float>() + i * c);
  return t;
}

// [n*C] -> [C] summed over the samples.
Tensor summed(Tensor const& t, int64_t n, int64_t c) {
  Tensor s = Tensor::zeros({c});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) s.data<float>()[j] += t.data<float>()[i * c + j];
  return s;
}

// Every gradient in one pass (dx, and dscale, dB summed over the samples).
Status instnorm_grads(OpCall const& call, Saved const& saved, Tensor const& gout, Tensor& dx, Tensor& dscale,
                      Tensor& dshift) {
  auto const& a = *attrs_of<graph::InstanceNormAttrs>(call.op);
  Tensor const& x = saved.tensors.at(0);
  if (gout.shape() != x.shape()) return op_error(call, "output gradient has shape " + gout.shape_string());
  int64_t const n = x.dim(0), c = x.dim(1);
  std::vector<int64_t> const view = instance_view(x.shape());
  dx = Tensor(x.shape());
  Tensor ds({n * c}), db({n * c});
  if (x.numel() > 0) {
    auto e = bn_bwd_prim(view, a.epsilon, /*training=*/true, DType::kFloat32);
    Tensor const scale = tiled(saved.tensors.at(1), n);
    // oneDNN 2.6 checks that every argument of the flags is present, though backward ignores the shift.
    Tensor const zero_shift = Tensor::zeros({n * c});
    dnnl::memory::desc const data = dnnl_ctx::plain_md(view);
    dnnl::memory::desc const stat = dnnl_ctx::plain_md({n * c});
    dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(data, x.raw())},
                            {DNNL_ARG_DIFF_DST, dnnl_ctx::mem(data, gout.raw())},
                            {DNNL_ARG_MEAN, dnnl_ctx::mem(stat, saved.tensors.at(2).raw())},
                            {DNNL_ARG_VARIANCE, dnnl_ctx::mem(stat, saved.tensors.at(3).raw())},
                            {DNNL_ARG_SCALE, dnnl_ctx::mem(stat, scale.raw())},
                            {DNNL_ARG_SHIFT, dnnl_ctx::mem(stat, zero_shift.raw())},
                            {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(data, dx.raw())},
                            {DNNL_ARG_DIFF_SCALE, dnnl_ctx::mem(stat, ds.raw())},
                            {DNNL_ARG_DIFF_SHIFT, dnnl_ctx::mem(stat, db.raw())}});
  } else {
    ds = Tensor::zeros({n * c});
    db = Tensor::zeros({n * c});
  }
  dscale = summed(ds, n, c);
  dshift = summed(db, n, c);
  return Status::ok();
}

}  // namespace

Status instnorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::InstanceNormAttrs>(call.op);
  Tensor const& x = in[0];
  if (x.rank() < 3) return op_error(call, "input " + x.shape_string() + " needs N, C and spatial dims");
  int64_t const n = x.dim(0), c = x.dim(1);
  for (std::size_t i = 1; i < 3; ++i)
    if (in[i].numel() != c)
      return op_error(call, "input " + std::to_string(i) + " must have " + std::to_string(c) + " elements, has " +
                                std::to_string(in[i].numel()));
  std::vector<int64_t> const view = instance_view(x.shape());
  Tensor y(x.shape()), mean({n * c}), var({n * c});
  if (x.numel() > 0) {
    auto e = bn_fwd_prim(view, a.epsilon, /*training=*/true, DType::kFloat32);
    Tensor const scale = tiled(in[1], n), shift = tiled(in[2], n);
    dnnl::memory::desc const data = dnnl_ctx::plain_md(view);
    dnnl::memory::desc const stat = dnnl_ctx::plain_md({n * c});
    dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(data, x.raw())},
                            {DNNL_ARG_DST, dnnl_ctx::mem(data, y.raw())},
                            {DNNL_ARG_SCALE, dnnl_ctx::mem(stat, scale.raw())},
                            {DNNL_ARG_SHIFT, dnnl_ctx::mem(stat, shift.raw())},
                            {DNNL_ARG_MEAN, dnnl_ctx::mem(stat, mean.raw())},
                            {DNNL_ARG_VARIANCE, dnnl_ctx::mem(stat, var.raw())}});
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, in[1], mean, var};
  return Status::ok();
}

Status instnorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2)) || !gout.at(0).defined()) return Status::ok();
  Tensor d[3];
  RETURN_IF_ERROR(instnorm_grads(call, saved, gout[0], d[0], d[1], d[2]));
  for (std::size_t i = 0; i < 3; ++i)
    if (wants(wanted, i)) RETURN_IF_ERROR(emit_grad(call, grads, i, d[i], accumulate));
  return Status::ok();
}

// ---- LRN: saves x and the denominator d ----

Status lrn_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(kernels::hd::LrnParams const p, lrn_params(call, x.shape()));
  Tensor y(x.shape()), d(x.shape());
  kernels::lrn_forward(x.data<float>(), p, x.numel(), y.data<float>(), d.data<float>());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, d};
  return Status::ok();
}

Status lrn_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  ASSIGN_OR_RETURN(kernels::hd::LrnParams const p, lrn_backward_params(call, saved, gout));
  Tensor const& x = saved.tensors[0];
  Tensor dx(x.shape());
  kernels::lrn_backward(x.data<float>(), saved.tensors[1].data<float>(), gout[0].data<float>(), p, x.numel(),
                        dx.data<float>());
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace gp::exec::cpu
