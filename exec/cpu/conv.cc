// Convolution through oneDNN: forward, backward data (B), backward weights and bias (W). Tensors
// stay plain (NCHW-style) between operators; each primitive picks its own (blocked) layouts and
// operands are reordered around it, because oneDNN's blocked kernels are several times faster than
// its plain-layout ones, above all for backward weights.
#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "graph/ops/conv.h"

namespace gp::exec::cpu {
namespace {

struct ConvGeometry {
  std::vector<int64_t> src, weights, weights_grouped, bias, dst;
  dnnl_ctx::dims strides, dilates, pad_l, pad_r;
  // Every operand's dtype: float32, or bfloat16 under mixed precision (oneDNN accumulates in float32).
  DType dtype = DType::kFloat32;
  IntKey key;  // the primitives' cache key (dnnl_ctx::key)
};

// `dtype`: the data's (a kernel's input tensors', which an emulated bf16 entry widened to float32).
Status conv_geometry(OpCall const& call, std::vector<int64_t> const& x, std::vector<int64_t> const& w, DType dtype,
                     ConvGeometry& g) {
  auto const& a = *attrs_of<graph::ConvAttrs>(call.op);
  Result<graph::ops::ConvWindow> const cw = graph::ops::conv_window(a, x, w);
  if (!cw) return op_error(call, cw.status().message());
  int64_t const group = cw->group;
  g.src = x;
  g.weights = w;
  g.bias = {w[0]};
  g.dst = cw->out_shape;
  g.strides = cw->strides;
  g.dilates.clear();
  for (int64_t d : cw->dilations) g.dilates.push_back(d - 1);  // oneDNN counts the gaps
  g.pad_l = cw->pads_begin;
  g.pad_r = cw->pads_end;
  g.weights_grouped = w;
  if (group > 1) {
    g.weights_grouped = {group, w[0] / group};
    g.weights_grouped.insert(g.weights_grouped.end(), w.begin() + 1, w.end());
  }
  g.dtype = dtype;
  g.key = dnnl_ctx::key(static_cast<int>(g.dtype), x, w, group, g.strides, g.dilates, g.pad_l, g.pad_r);
  return Status::ok();
}

dnnl::memory::desc any_md(std::vector<int64_t> const& shape, DType dtype) {
  return dnnl::memory::desc(dnnl_ctx::to_dims(shape), dnnl_ctx::dnnl_type(dtype), dnnl::memory::format_tag::any);
}

struct ConvFwd {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
};
struct ConvBwdData {
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
};
struct ConvBwdWeights {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
};

std::shared_ptr<ConvFwd const> conv_fwd_prim(ConvGeometry const& g, bool bias) {
  return dnnl_ctx::cached<ConvFwd>(dnnl_ctx::key("conv_fwd", g.key, bias), [&] {
    dnnl::convolution_forward::desc d =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               any_md(g.src, g.dtype), any_md(g.weights_grouped, g.dtype),
                                               dnnl_ctx::plain_md(g.bias, g.dtype), any_md(g.dst, g.dtype), g.strides,
                                               g.dilates, g.pad_l, g.pad_r)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               any_md(g.src, g.dtype), any_md(g.weights_grouped, g.dtype),
                                               any_md(g.dst, g.dtype), g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return ConvFwd{pd, dnnl::convolution_forward(pd)};
  });
}

}  // namespace

Status conv_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& w = in[1];
  ConvGeometry g;
  RETURN_IF_ERROR(conv_geometry(call, x.shape(), w.shape(), x.dtype(), g));
  bool const bias = has_bias(call) && in.size() > 2 && in[2].defined();
  Tensor y(g.dst, g.dtype);
  auto e = conv_fwd_prim(g, bias);
  dnnl_ctx::InLayout const src = dnnl_ctx::to_layout(x.raw(), dnnl_ctx::plain_md(g.src, g.dtype), e->pd.src_desc());
  dnnl_ctx::InLayout const wei =
      dnnl_ctx::to_layout(w.raw(), dnnl_ctx::plain_md(g.weights_grouped, g.dtype), e->pd.weights_desc());
  dnnl_ctx::InLayout const dst = dnnl_ctx::output_layout(y.raw(), dnnl_ctx::plain_md(g.dst, g.dtype), e->pd.dst_desc());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src.mem}, {DNNL_ARG_WEIGHTS, wei.mem}, {DNNL_ARG_DST, dst.mem}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl_ctx::mem(e->pd.bias_desc(), in[2].raw()));
  dnnl_ctx::run(e->prim, args);
  dnnl_ctx::finish_layout(dst, y.raw(), dnnl_ctx::plain_md(g.dst, g.dtype));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, w};
  return Status::ok();
}

namespace {

// The output gradient in the blocked layout a backward primitive asked for, reordered once and
// shared by backward data and backward weights when both run (they usually ask for the same one).
struct DiffDst {
  dnnl::memory::desc desc;
  dnnl_ctx::InLayout layout;
  bool set = false;
};

dnnl::memory const& diff_dst_in(Tensor const& gout, ConvGeometry const& g, dnnl::memory::desc const& want,
                                DiffDst& memo) {
  if (!memo.set || memo.desc != want) {
    memo.layout = dnnl_ctx::to_layout(gout.raw(), dnnl_ctx::plain_md(g.dst, g.dtype), want);
    memo.desc = want;
    memo.set = true;
  }
  return memo.layout.mem;
}

Status data_grad(OpCall const& call, Saved const& saved, Tensor const& gout, Tensor& dx, DiffDst& memo) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  ConvGeometry g;
  RETURN_IF_ERROR(conv_geometry(call, x.shape(), w.shape(), x.dtype(), g));
  auto f = conv_fwd_prim(g, false);
  auto e = dnnl_ctx::cached<ConvBwdData>(dnnl_ctx::key("conv_bwd_data", g.key), [&] {
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, any_md(g.src, g.dtype),
                                            any_md(g.weights_grouped, g.dtype), any_md(g.dst, g.dtype), g.strides,
                                            g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return ConvBwdData{pd, dnnl::convolution_backward_data(pd)};
  });
  dx = Tensor(g.src, g.dtype);
  dnnl::memory const& ddst = diff_dst_in(gout, g, e->pd.diff_dst_desc(), memo);
  dnnl_ctx::InLayout const wei =
      dnnl_ctx::to_layout(w.raw(), dnnl_ctx::plain_md(g.weights_grouped, g.dtype), e->pd.weights_desc());
  dnnl_ctx::InLayout const dsrc =
      dnnl_ctx::output_layout(dx.raw(), dnnl_ctx::plain_md(g.src, g.dtype), e->pd.diff_src_desc());
  dnnl_ctx::run(e->prim, {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei.mem}, {DNNL_ARG_DIFF_SRC, dsrc.mem}});
  dnnl_ctx::finish_layout(dsrc, dx.raw(), dnnl_ctx::plain_md(g.src, g.dtype));
  return Status::ok();
}

// Weight and bias gradients into grads[1] and grads[2] (set, or added when accumulating).
Status weight_grads(OpCall const& call, Saved const& saved, Tensor const& gout, bool want_w, bool want_b,
                    std::vector<Tensor>& grads, bool accumulate, DiffDst& memo) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  ConvGeometry g;
  RETURN_IF_ERROR(conv_geometry(call, x.shape(), w.shape(), x.dtype(), g));
  auto f = conv_fwd_prim(g, want_b);
  auto e = dnnl_ctx::cached<ConvBwdWeights>(dnnl_ctx::key("conv_bwd_weights", g.key, want_b), [&] {
    dnnl::convolution_backward_weights::desc d =
        want_b
            ? dnnl::convolution_backward_weights::desc(
                  dnnl::algorithm::convolution_direct, any_md(g.src, g.dtype), any_md(g.weights_grouped, g.dtype),
                  dnnl_ctx::plain_md(g.bias, g.dtype), any_md(g.dst, g.dtype), g.strides, g.dilates, g.pad_l, g.pad_r)
            : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, any_md(g.src, g.dtype),
                                                       any_md(g.weights_grouped, g.dtype), any_md(g.dst, g.dtype),
                                                       g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return ConvBwdWeights{pd, dnnl::convolution_backward_weights(pd)};
  });
  // oneDNN overwrites diff_weights: when accumulating, the reorder back to the plain layout adds
  // into the accumulator (a sum post-op), so no temporary of the weights' size is added by hand.
  bool const add_w = want_w && accumulate;
  if (add_w && (grads.size() <= 1 || grads[1].numel() != w.numel()))
    return op_error(call, "weight gradient accumulator does not have " + std::to_string(w.numel()) + " elements");
  Tensor dw = want_w && !accumulate ? Tensor(g.weights, g.dtype) : Tensor();
  Tensor db(g.bias, g.dtype);
  dnnl_ctx::InLayout const src = dnnl_ctx::to_layout(x.raw(), dnnl_ctx::plain_md(g.src, g.dtype), e->pd.src_desc());
  dnnl::memory const& ddst = diff_dst_in(gout, g, e->pd.diff_dst_desc(), memo);
  dnnl::memory::desc const w_plain = dnnl_ctx::plain_md(g.weights_grouped, g.dtype);
  dnnl_ctx::InLayout const dwei = add_w || !want_w
                                      ? dnnl_ctx::scratch_layout(e->pd.diff_weights_desc())
                                      : dnnl_ctx::output_layout(dw.raw(), w_plain, e->pd.diff_weights_desc());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src.mem}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dwei.mem}};
  if (want_b) args.emplace(DNNL_ARG_DIFF_BIAS, dnnl_ctx::mem(e->pd.diff_bias_desc(), db.raw()));
  dnnl_ctx::run(e->prim, args);
  if (add_w)
    dnnl_ctx::finish_accumulate(dwei, grads[1].raw(), w_plain);
  else if (want_w)
    dnnl_ctx::finish_layout(dwei, dw.raw(), w_plain);
  if (want_w && !accumulate) RETURN_IF_ERROR(emit_grad(call, grads, 1, dw, false));
  if (want_b) RETURN_IF_ERROR(emit_grad(call, grads, 2, db, accumulate));
  return Status::ok();
}

// Every wanted gradient of one conv, all with the same accumulate mode.
Status conv_backward_all(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  DiffDst memo;
  if (wants(wanted, 0)) {
    Tensor dx;
    RETURN_IF_ERROR(data_grad(call, saved, gout[0], dx, memo));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  }
  bool const want_w = wants(wanted, 1);
  bool const want_b = wants(wanted, 2) && has_bias(call);
  if (!want_w && !want_b) return Status::ok();
  return weight_grads(call, saved, gout[0], want_w, want_b, grads, accumulate, memo);
}

}  // namespace

Status conv_backward_data(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  return conv_backward_all(call, saved, gout, wanted, grads, accumulate);
}

Status conv_backward_weights(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                             std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  return conv_backward_all(call, saved, gout, wanted, grads, accumulate);
}

Status conv_backward_both(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                          std::vector<Tensor>& weight_grads_out) {
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  if (!gout.at(0).defined()) return Status::ok();
  DiffDst memo;
  if (wants(needs_grad, 0)) RETURN_IF_ERROR(data_grad(call, saved, gout[0], grad_inputs[0], memo));
  bool const want_w = weight_grads_out.size() > 1 && weight_grads_out[1].defined();
  bool const want_b = weight_grads_out.size() > 2 && weight_grads_out[2].defined() && has_bias(call);
  if (!want_w && !want_b) return Status::ok();
  return weight_grads(call, saved, gout[0], want_w, want_b, weight_grads_out, /*accumulate=*/true, memo);
}

}  // namespace gp::exec::cpu
