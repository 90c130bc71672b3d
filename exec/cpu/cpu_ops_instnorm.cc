// CPU kernels: InstanceNormalization through oneDNN's batch normalisation over a [1, N*C, spatial]
// view of the input (its channels are the (sample, channel) pairs).
#include <algorithm>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"

namespace gp::exec::cpu {
namespace {

struct BnFwd {
  dnnl::batch_normalization_forward::primitive_desc pd;
  dnnl::batch_normalization_forward prim;
};
struct BnBwd {
  dnnl::batch_normalization_backward::primitive_desc pd;
  dnnl::batch_normalization_backward prim;
};

dnnl::normalization_flags in_flags() {
  return dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
}

// x [N, C, spatial...] as oneDNN's [1, N*C, S]: one batch-norm channel per (sample, channel).
std::vector<int64_t> instance_view(std::vector<int64_t> const& x) {
  int64_t s = 1;
  for (std::size_t i = 2; i < x.size(); ++i) s *= x[i];
  return {1, x[0] * x[1], s};
}

std::shared_ptr<BnFwd const> in_fwd_prim(std::vector<int64_t> const& view, float eps) {
  return dnnl_ctx::cached<BnFwd>(dnnl_ctx::key("instnorm_fwd", dnnl_ctx::key_dims(view), eps), [&] {
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, dnnl_ctx::plain_md(view), eps,
                                              in_flags());
    dnnl::batch_normalization_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return BnFwd{pd, dnnl::batch_normalization_forward(pd)};
  });
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
    auto e = in_fwd_prim(view, a.epsilon);
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
    auto f = in_fwd_prim(view, a.epsilon);
    auto e = dnnl_ctx::cached<BnBwd>(dnnl_ctx::key("instnorm_bwd", dnnl_ctx::key_dims(view), a.epsilon), [&] {
      dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, dnnl_ctx::plain_md(view),
                                                 dnnl_ctx::plain_md(view), a.epsilon, in_flags());
      dnnl::batch_normalization_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
      return BnBwd{pd, dnnl::batch_normalization_backward(pd)};
    });
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

Status instnorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2)) || !gout.at(0).defined()) return Status::ok();
  Tensor d[3];
  RETURN_IF_ERROR(instnorm_grads(call, saved, gout[0], d[0], d[1], d[2]));
  for (std::size_t i = 0; i < 3; ++i)
    if (wants(wanted, i)) RETURN_IF_ERROR(emit_grad(call, grads, i, d[i], accumulate));
  return Status::ok();
}

}  // namespace

CpuKernelFamily instnorm_kernels() {
  return {{"InstanceNormalization",
           {{instnorm_forward, instnorm_backward, instnorm_backward, require_attrs<graph::InstanceNormAttrs>,
             fresh_then_add<instnorm_backward>},
            3}}};
}

}  // namespace gp::exec::cpu
