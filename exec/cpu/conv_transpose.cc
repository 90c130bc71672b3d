// CPU kernels: ConvTranspose through oneDNN's deconvolution primitives (forward, backward data,
// backward weights and bias).
//
// ConvTranspose's pads may be negative (an output_shape beyond the full output) and its
// output_padding may reach the stride (with a larger dilation); oneDNN takes neither. Those cases
// run the primitive on the part of the output that receives contributions and place it into a
// zero-filled output ("embedded"); the common cases write the output directly.
#include <algorithm>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "graph/ops/conv.h"

namespace gp::exec::cpu {
namespace {

// ---------------------------------------------------------------------------------------------
// ConvTranspose

struct DeconvGeometry {
  std::vector<int64_t> src, weights, bias, dst;  // dst: the op's output
  std::vector<int64_t> prim_dst;                 // what the primitive writes (dst unless embedded)
  std::vector<int64_t> offset;                   // where prim_dst sits in dst, per dim
  std::vector<int64_t> wei_dims, wei_strides;    // ONNX's [C, M/g, k...] as oneDNN's [g,] M/g, C/g, k...
  dnnl_ctx::dims strides, dilates, pad_l, pad_r;
  bool embedded = false;
  IntKey key;  // the primitives' cache key (dnnl_ctx::key)
};

Status deconv_geometry(OpCall const& call, std::vector<int64_t> const& x, std::vector<int64_t> const& w,
                       DeconvGeometry& g) {
  auto const& a = *attrs_of<graph::ConvTransposeAttrs>(call.op);
  Result<graph::ops::ConvWindow> const cw = graph::ops::conv_transpose_window(a, x, w);
  if (!cw) return op_error(call, cw.status().message());
  std::size_t const sp = x.size() - 2;
  int64_t const group = cw->group;
  g.src = x;
  g.weights = w;
  g.bias = {cw->out_shape[1]};
  g.dst = cw->out_shape;
  g.prim_dst = {x[0], cw->out_shape[1]};
  g.prim_dst.insert(g.prim_dst.end(), cw->computed.begin(), cw->computed.end());
  g.offset = {0, 0};
  g.offset.insert(g.offset.end(), cw->offset.begin(), cw->offset.end());
  g.strides = cw->strides;
  g.dilates.clear();
  for (int64_t d : cw->dilations) g.dilates.push_back(d - 1);  // oneDNN counts the gaps
  g.pad_l = cw->pads_begin;
  g.pad_r = cw->pads_end;
  g.embedded = cw->embedded;
  // ONNX's weight [C, M/g, k...] is, per group, input channel major: oneDNN's [g, M/g, C/g, k...]
  // over the same memory with strides.
  int64_t kernel = 1;
  for (std::size_t i = 2; i < w.size(); ++i) kernel *= w[i];
  std::vector<int64_t> kstrides(sp);
  for (std::size_t i = sp, s = 1; i-- > 0;) {
    kstrides[i] = static_cast<int64_t>(s);
    s *= static_cast<std::size_t>(w[2 + i]);
  }
  int64_t const in_g = w[0] / group;
  g.wei_dims = {w[1], in_g};
  g.wei_strides = {kernel, w[1] * kernel};
  if (group > 1) {
    g.wei_dims.insert(g.wei_dims.begin(), group);
    g.wei_strides.insert(g.wei_strides.begin(), in_g * w[1] * kernel);
  }
  g.wei_dims.insert(g.wei_dims.end(), w.begin() + 2, w.end());
  g.wei_strides.insert(g.wei_strides.end(), kstrides.begin(), kstrides.end());
  g.key = dnnl_ctx::key(x, w, group, g.strides, g.dilates, g.pad_l, g.pad_r, g.prim_dst);
  return Status::ok();
}

dnnl::memory::desc any_md(std::vector<int64_t> const& shape) {
  return dnnl::memory::desc(dnnl_ctx::to_dims(shape), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

dnnl::memory::desc weights_md(DeconvGeometry const& g) { return dnnl_ctx::strided_md(g.wei_dims, g.wei_strides); }

// Copies between a block of shape `bshape` and the tensor of shape `fshape` that holds it at
// `offset` (same rank): from the block into the full tensor when `into_full`, else back.
void copy_block(std::vector<int64_t> const& bshape, std::vector<int64_t> const& fshape,
                std::vector<int64_t> const& offset, bool into_full, float const* from, float* to) {
  std::size_t const r = bshape.size();
  std::vector<int64_t> fstride(r, 1);
  for (std::size_t i = r - 1; i-- > 0;) fstride[i] = fstride[i + 1] * fshape[i + 1];
  int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < r; ++i) rows *= bshape[i];
  int64_t const len = bshape[r - 1];
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t f = offset[r - 1];
    for (std::size_t i = 0; i + 1 < r; ++i) f += (idx[i] + offset[i]) * fstride[i];
    int64_t const b = row * len;
    if (into_full)
      std::copy(from + b, from + b + len, to + f);
    else
      std::copy(from + f, from + f + len, to + b);
    for (std::size_t i = r - 1; i-- > 0;) {
      if (++idx[i] < bshape[i]) break;
      idx[i] = 0;
    }
  }
}

// Per output channel, the sum over samples and positions (a bias gradient).
Tensor channel_sums(Tensor const& t) {
  int64_t const n = t.dim(0), c = t.dim(1), plane = t.numel() / std::max<int64_t>(n * c, 1);
  std::vector<double> sum(static_cast<std::size_t>(c), 0.0);
  float const* p = t.data<float>();
  for (int64_t nc = 0; nc < n * c; ++nc)
    for (int64_t i = 0; i < plane; ++i) sum[static_cast<std::size_t>(nc % c)] += p[nc * plane + i];
  Tensor out({c});
  for (int64_t i = 0; i < c; ++i) out.data<float>()[i] = static_cast<float>(sum[static_cast<std::size_t>(i)]);
  return out;
}

struct DeconvFwd {
  dnnl::deconvolution_forward::primitive_desc pd;
  dnnl::deconvolution_forward prim;
};
struct DeconvBwdData {
  dnnl::deconvolution_backward_data::primitive_desc pd;
  dnnl::deconvolution_backward_data prim;
};
struct DeconvBwdWeights {
  dnnl::deconvolution_backward_weights::primitive_desc pd;
  dnnl::deconvolution_backward_weights prim;
};

std::shared_ptr<DeconvFwd const> deconv_fwd_prim(DeconvGeometry const& g, bool bias) {
  return dnnl_ctx::cached<DeconvFwd>(dnnl_ctx::key("deconv_fwd", g.key, bias), [&] {
    auto const alg = dnnl::algorithm::deconvolution_direct;
    auto const prop = dnnl::prop_kind::forward_training;
    dnnl::deconvolution_forward::desc d =
        bias ? dnnl::deconvolution_forward::desc(prop, alg, any_md(g.src), any_md(g.wei_dims),
                                                 dnnl_ctx::plain_md(g.bias), any_md(g.prim_dst), g.strides, g.dilates,
                                                 g.pad_l, g.pad_r)
             : dnnl::deconvolution_forward::desc(prop, alg, any_md(g.src), any_md(g.wei_dims), any_md(g.prim_dst),
                                                 g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return DeconvFwd{pd, dnnl::deconvolution_forward(pd)};
  });
}

Status deconv_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ConvTransposeAttrs>(op, graph));
  auto const& w = graph.tensor(op.inputs.at(1)).shape;
  if (w.rank() < 3 || w.rank() > 5)
    return unsupported("ConvTranspose '" + op.name + "' has " + std::to_string(w.rank() - 2) +
                       " spatial dims (1 to 3 supported)");
  return Status::ok();
}

Status deconv_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& w = in[1];
  DeconvGeometry g;
  RETURN_IF_ERROR(deconv_geometry(call, x.shape(), w.shape(), g));
  bool const bias = has_bias(call) && in.size() > 2 && in[2].defined();
  if (bias && in[2].numel() != g.bias[0])
    return op_error(call,
                    "bias has " + std::to_string(in[2].numel()) + " elements, expected " + std::to_string(g.bias[0]));
  Tensor y = g.embedded ? Tensor::zeros(g.dst) : Tensor(g.dst);
  Tensor yp = g.embedded ? Tensor(g.prim_dst) : y;
  auto e = deconv_fwd_prim(g, bias && !g.embedded);
  dnnl_ctx::InLayout const src = dnnl_ctx::to_layout(x.raw(), dnnl_ctx::plain_md(g.src), e->pd.src_desc());
  dnnl_ctx::InLayout const wei = dnnl_ctx::to_layout(w.raw(), weights_md(g), e->pd.weights_desc());
  dnnl_ctx::InLayout const dst = dnnl_ctx::output_layout(yp.raw(), dnnl_ctx::plain_md(g.prim_dst), e->pd.dst_desc());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src.mem}, {DNNL_ARG_WEIGHTS, wei.mem}, {DNNL_ARG_DST, dst.mem}};
  if (bias && !g.embedded) args.emplace(DNNL_ARG_BIAS, dnnl_ctx::mem(e->pd.bias_desc(), in[2].raw()));
  dnnl_ctx::run(e->prim, args);
  dnnl_ctx::finish_layout(dst, yp.raw(), dnnl_ctx::plain_md(g.prim_dst));
  if (g.embedded) {
    copy_block(g.prim_dst, g.dst, g.offset, true, yp.data<float>(), y.data<float>());
    if (bias) {
      int64_t const c = g.dst[1], plane = y.numel() / std::max<int64_t>(g.dst[0] * c, 1);
      float* p = y.data<float>();
      float const* b = in[2].data<float>();
      for (int64_t nc = 0; nc < g.dst[0] * c; ++nc)
        for (int64_t i = 0; i < plane; ++i) p[nc * plane + i] += b[nc % c];
    }
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, w};
  return Status::ok();
}

// The output gradient as the primitives see it: cropped to prim_dst when embedded, then in the
// blocked layout a primitive asked for (reordered once, shared by backward data and weights).
struct DeconvDiffDst {
  Tensor cropped;
  dnnl::memory::desc desc;
  dnnl_ctx::InLayout layout;
  bool set = false;
};

dnnl::memory const& diff_dst_in(Tensor const& gout, DeconvGeometry const& g, dnnl::memory::desc const& want,
                                DeconvDiffDst& memo) {
  if (!memo.set || memo.desc != want) {
    void const* data = gout.raw();
    if (g.embedded) {
      if (!memo.cropped.defined()) {
        memo.cropped = Tensor(g.prim_dst);
        copy_block(g.prim_dst, g.dst, g.offset, false, gout.data<float>(), memo.cropped.data<float>());
      }
      data = memo.cropped.raw();
    }
    memo.layout = dnnl_ctx::to_layout(data, dnnl_ctx::plain_md(g.prim_dst), want);
    memo.desc = want;
    memo.set = true;
  }
  return memo.layout.mem;
}

Status deconv_data_grad(OpCall const& call, Saved const& saved, Tensor const& gout, Tensor& dx, DeconvDiffDst& memo) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  DeconvGeometry g;
  RETURN_IF_ERROR(deconv_geometry(call, x.shape(), w.shape(), g));
  if (gout.shape() != g.dst) return op_error(call, "output gradient has shape " + gout.shape_string());
  auto f = deconv_fwd_prim(g, false);
  auto e = dnnl_ctx::cached<DeconvBwdData>(dnnl_ctx::key("deconv_bwd_data", g.key), [&] {
    dnnl::deconvolution_backward_data::desc d(dnnl::algorithm::deconvolution_direct, any_md(g.src), any_md(g.wei_dims),
                                              any_md(g.prim_dst), g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::deconvolution_backward_data::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return DeconvBwdData{pd, dnnl::deconvolution_backward_data(pd)};
  });
  dx = Tensor(g.src);
  dnnl::memory const& ddst = diff_dst_in(gout, g, e->pd.diff_dst_desc(), memo);
  dnnl_ctx::InLayout const wei = dnnl_ctx::to_layout(w.raw(), weights_md(g), e->pd.weights_desc());
  dnnl_ctx::InLayout const dsrc = dnnl_ctx::output_layout(dx.raw(), dnnl_ctx::plain_md(g.src), e->pd.diff_src_desc());
  dnnl_ctx::run(e->prim, {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei.mem}, {DNNL_ARG_DIFF_SRC, dsrc.mem}});
  dnnl_ctx::finish_layout(dsrc, dx.raw(), dnnl_ctx::plain_md(g.src));
  return Status::ok();
}

// Weight and bias gradients into grads[1] and grads[2] (set, or added when accumulating).
Status deconv_weight_grads(OpCall const& call, Saved const& saved, Tensor const& gout, bool want_w, bool want_b,
                           std::vector<Tensor>& grads, bool accumulate, DeconvDiffDst& memo) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  DeconvGeometry g;
  RETURN_IF_ERROR(deconv_geometry(call, x.shape(), w.shape(), g));
  if (gout.shape() != g.dst) return op_error(call, "output gradient has shape " + gout.shape_string());
  // The primitive sums the bias gradient along with the weights' unless part of the output lies
  // outside its dst (embedded) or only the bias is wanted.
  bool const prim_b = want_b && want_w && !g.embedded;
  Tensor db = want_b && !prim_b ? channel_sums(gout) : Tensor(g.bias);
  if (want_w) {
    auto f = deconv_fwd_prim(g, prim_b);
    auto e = dnnl_ctx::cached<DeconvBwdWeights>(dnnl_ctx::key("deconv_bwd_weights", g.key, prim_b), [&] {
      auto const alg = dnnl::algorithm::deconvolution_direct;
      dnnl::deconvolution_backward_weights::desc d =
          prim_b
              ? dnnl::deconvolution_backward_weights::desc(alg, any_md(g.src), any_md(g.wei_dims),
                                                           dnnl_ctx::plain_md(g.bias), any_md(g.prim_dst), g.strides,
                                                           g.dilates, g.pad_l, g.pad_r)
              : dnnl::deconvolution_backward_weights::desc(alg, any_md(g.src), any_md(g.wei_dims), any_md(g.prim_dst),
                                                           g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::deconvolution_backward_weights::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
      return DeconvBwdWeights{pd, dnnl::deconvolution_backward_weights(pd)};
    });
    // oneDNN overwrites diff_weights: when accumulating, the reorder back to ONNX's layout adds
    // into the accumulator (as for Conv).
    if (accumulate && (grads.size() <= 1 || grads[1].numel() != w.numel()))
      return op_error(call, "weight gradient accumulator does not have " + std::to_string(w.numel()) + " elements");
    Tensor dw = accumulate ? Tensor() : Tensor(g.weights);
    dnnl::memory::desc const w_plain = weights_md(g);
    dnnl_ctx::InLayout const src = dnnl_ctx::to_layout(x.raw(), dnnl_ctx::plain_md(g.src), e->pd.src_desc());
    dnnl::memory const& ddst = diff_dst_in(gout, g, e->pd.diff_dst_desc(), memo);
    dnnl_ctx::InLayout const dwei = accumulate ? dnnl_ctx::scratch_layout(e->pd.diff_weights_desc())
                                               : dnnl_ctx::output_layout(dw.raw(), w_plain, e->pd.diff_weights_desc());
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src.mem}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dwei.mem}};
    if (prim_b) args.emplace(DNNL_ARG_DIFF_BIAS, dnnl_ctx::mem(e->pd.diff_bias_desc(), db.raw()));
    dnnl_ctx::run(e->prim, args);
    if (accumulate) {
      dnnl_ctx::finish_accumulate(dwei, grads[1].raw(), w_plain);
    } else {
      dnnl_ctx::finish_layout(dwei, dw.raw(), w_plain);
      RETURN_IF_ERROR(emit_grad(call, grads, 1, dw, false));
    }
  }
  if (want_b) RETURN_IF_ERROR(emit_grad(call, grads, 2, db, accumulate));
  return Status::ok();
}

Status deconv_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  DeconvDiffDst memo;
  if (wants(wanted, 0)) {
    Tensor dx;
    RETURN_IF_ERROR(deconv_data_grad(call, saved, gout[0], dx, memo));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  }
  bool const want_w = wants(wanted, 1);
  bool const want_b = wants(wanted, 2) && has_bias(call);
  if (!want_w && !want_b) return Status::ok();
  return deconv_weight_grads(call, saved, gout[0], want_w, want_b, grads, accumulate, memo);
}

Status deconv_backward_both(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                            std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                            std::vector<Tensor>& weight_grads) {
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  if (!gout.at(0).defined()) return Status::ok();
  DeconvDiffDst memo;
  if (wants(needs_grad, 0)) RETURN_IF_ERROR(deconv_data_grad(call, saved, gout[0], grad_inputs[0], memo));
  bool const want_w = weight_grads.size() > 1 && weight_grads[1].defined();
  bool const want_b = weight_grads.size() > 2 && weight_grads[2].defined() && has_bias(call);
  // A weight or bias that is an activation (not a trainable weight) gets a fresh gradient.
  bool const fresh_w = !want_w && wants(needs_grad, 1);
  bool const fresh_b = !want_b && wants(needs_grad, 2) && has_bias(call);
  if (fresh_w || fresh_b)
    RETURN_IF_ERROR(deconv_weight_grads(call, saved, gout[0], fresh_w, fresh_b, grad_inputs, false, memo));
  if (!want_w && !want_b) return Status::ok();
  return deconv_weight_grads(call, saved, gout[0], want_w, want_b, weight_grads, /*accumulate=*/true, memo);
}

}  // namespace

CpuKernelFamily deconv_kernels() {
  return {
      {OpKind::kConvTranspose,
       {{deconv_forward, deconv_backward, deconv_backward, deconv_check, deconv_backward_both}, 2}},
  };
}

}  // namespace gp::exec::cpu
