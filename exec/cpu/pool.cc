// MaxPool, AveragePool, GlobalAveragePool through oneDNN's pooling (its v2 primitive, the one that
// takes dilations); max pooling keeps oneDNN's workspace (argmax) for backward.
#include <limits>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "graph/ops/pool.h"
#include "kernels/bf16.h"
#include "exec/op_shared.h"
#include "kernels/hd/pool.h"

namespace gp::exec::cpu {
namespace {

struct PoolGeometry {
  std::vector<int64_t> src, dst;
  dnnl_ctx::dims kernel, strides, dilation, pad_l, pad_r;  // dilation: oneDNN's, 0 = dense
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  DType dtype = DType::kFloat32;  // of the data (float32, or bfloat16 under mixed precision)
  IntKey key;                     // the primitives' cache key (dnnl_ctx::key)
  // count_include_pad: kernel volume / the window's elements inside the padded input, per output
  // position of a plane; empty when every window lies inside (all but ceil_mode's extra ones).
  // oneDNN divides every window by the kernel volume, so these outputs and their gradients are
  // rescaled to ONNX's and PyTorch's divisor.
  std::vector<float> include_pad_scale;
};

std::vector<float> include_pad_scale(graph::ops::PoolWindow const& w, std::vector<int64_t> const& x) {
  std::size_t const sp = w.kernel.size();
  bool reaches_past = false;  // the common case, no window past the end pads: nothing to build
  for (std::size_t i = 0; i < sp; ++i) reaches_past = reaches_past || w.pads_end[i] > w.counted_pads_end[i];
  if (!reaches_past) return {};
  std::vector<std::vector<float>> per_dim(sp);
  bool any = false;
  for (std::size_t i = 0; i < sp; ++i) {
    if (w.pads_end[i] <= w.counted_pads_end[i]) {
      per_dim[i].assign(w.out_shape[2 + i], 1.f);
      continue;
    }
    for (int64_t o = 0; o < w.out_shape[2 + i]; ++o) {
      int64_t const taps = kernels::hd::pool_taps_before<int64_t>(o * w.strides[i] - w.pads_begin[i], w.kernel[i],
                                                                  w.dilations[i], x[2 + i] + w.counted_pads_end[i]);
      per_dim[i].push_back(static_cast<float>(w.kernel[i]) / static_cast<float>(taps));
      any = any || taps != w.kernel[i];
    }
  }
  if (!any) return {};
  std::vector<float> scale{1.f};
  for (std::size_t i = 0; i < sp; ++i) {
    std::vector<float> next;
    for (float f : scale)
      for (float g : per_dim[i]) next.push_back(f * g);
    scale = std::move(next);
  }
  return scale;
}

// t *= scale, repeated over t's planes (float32 or bfloat16 data).
void scale_planes(Tensor& t, std::vector<float> const& scale) {
  int64_t const plane = static_cast<int64_t>(scale.size()), planes = t.numel() / plane;
  for (int64_t q = 0; q < planes; ++q)
    for (int64_t e = 0; e < plane; ++e) {
      if (t.dtype() == DType::kBFloat16) {
        uint16_t& v = t.data<uint16_t>()[q * plane + e];
        v = kernels::float_to_bf16(kernels::bf16_to_float(v) * scale[e]);
      } else {
        t.data<float>()[q * plane + e] *= scale[e];
      }
    }
}

// `dtype`: the data's (the kernel's tensors', which an emulated bf16 entry widened to float32).
Status pool_geometry(OpCall const& call, std::vector<int64_t> const& x, DType dtype, PoolGeometry& g) {
  auto const& a = *attrs_of<graph::PoolAttrs>(call.op);
  ASSIGN_OR_RETURN(graph::ops::PoolWindow const w, graph::ops::pool_window(call.op, x));
  bool const global = a.kind == graph::PoolKind::kGlobalAverage;
  g.alg = a.kind == graph::PoolKind::kMax    ? dnnl::algorithm::pooling_max
          : (a.count_include_pad && !global) ? dnnl::algorithm::pooling_avg_include_padding
                                             : dnnl::algorithm::pooling_avg_exclude_padding;
  g.src = x;
  g.dst = w.out_shape;
  g.kernel = w.kernel;
  g.strides = w.strides;
  g.dilation.clear();
  for (int64_t d : w.dilations) g.dilation.push_back(d - 1);
  g.pad_l = w.pads_begin;
  g.pad_r = w.pads_end;  // oneDNN wants the padding that yields the output size exactly
  g.dtype = dtype;
  if (g.alg == dnnl::algorithm::pooling_avg_include_padding) g.include_pad_scale = include_pad_scale(w, x);
  g.key = dnnl_ctx::key(static_cast<int>(g.alg), static_cast<int>(g.dtype), x, g.kernel, g.strides, g.dilation, g.pad_l,
                        g.pad_r);
  return Status::ok();
}

struct PoolFwd {
  dnnl::pooling_v2_forward::primitive_desc pd;
  dnnl::pooling_v2_forward prim;
};
struct PoolBwd {
  dnnl::pooling_v2_backward::primitive_desc pd;
  dnnl::pooling_v2_backward prim;
};

std::shared_ptr<PoolFwd const> pool_fwd_prim(PoolGeometry const& g) {
  return dnnl_ctx::cached<PoolFwd>(dnnl_ctx::key("pool_fwd", g.key), [&] {
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_training, g.alg, dnnl_ctx::plain_md(g.src, g.dtype),
                                     dnnl_ctx::plain_md(g.dst, g.dtype), g.strides, g.kernel, g.dilation, g.pad_l,
                                     g.pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return PoolFwd{pd, dnnl::pooling_v2_forward(pd)};
  });
}

// MaxPool's Indices output: kernels/hd/pool.h's arg-max (the first largest element of each
// window) and flat index, which the CUDA kernels compute too; a bf16 input is widened first.
Result<Tensor> max_pool_indices(OpCall const& call, Tensor const& x) {
  namespace hd = kernels::hd;
  hd::PoolParams p;
  std::vector<int64_t> out_shape;
  RETURN_IF_ERROR(pool_params(call, x.shape(), p, out_shape));
  std::vector<float> widened;
  float const* xf = nullptr;
  if (x.dtype() == DType::kBFloat16) {
    widened.resize(static_cast<std::size_t>(x.numel()));
    for (std::size_t i = 0; i < widened.size(); ++i) widened[i] = kernels::bf16_to_float(x.data<uint16_t>()[i]);
    xf = widened.data();
  } else {
    xf = x.data<float>();
  }
  Tensor idx(out_shape, DType::kInt64);
  for (int64_t e = 0; e < idx.numel(); ++e) {
    int32_t arg = -1;
    hd::pool_forward_at<float>(xf, p, e, arg, std::numeric_limits<float>::lowest());
    idx.data<int64_t>()[e] = hd::pool_flat_index(p, e, arg, attrs_of<graph::PoolAttrs>(call.op)->indices_column_major);
  }
  return idx;
}

}  // namespace

Status pool_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  PoolGeometry g;
  RETURN_IF_ERROR(pool_geometry(call, in[0].shape(), in[0].dtype(), g));
  auto e = pool_fwd_prim(g);
  Tensor y(g.dst, g.dtype);
  Tensor ws;
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl_ctx::mem(e->pd.src_desc(), in[0].raw())},
                                             {DNNL_ARG_DST, dnnl_ctx::mem(e->pd.dst_desc(), y.raw())}};
  std::size_t const ws_bytes = e->pd.workspace_desc().get_size();
  if (ws_bytes > 0) {
    ws = Tensor({static_cast<int64_t>(ws_bytes)}, DType::kUInt8);
    args.emplace(DNNL_ARG_WORKSPACE, dnnl_ctx::mem(e->pd.workspace_desc(), ws.raw()));
  }
  dnnl_ctx::run(e->prim, args);
  if (!g.include_pad_scale.empty()) scale_planes(y, g.include_pad_scale);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1 && g.alg == dnnl::algorithm::pooling_max) {
    ASSIGN_OR_RETURN(out[1], max_pool_indices(call, in[0]));
  }
  if (saved) saved->tensors = {shape_tensor(in[0].shape()), ws};
  return Status::ok();
}

Status pool_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  PoolGeometry g;
  RETURN_IF_ERROR(pool_geometry(call, shape_of(saved.tensors.at(0)), gout[0].dtype(), g));
  auto f = pool_fwd_prim(g);
  auto e = dnnl_ctx::cached<PoolBwd>(dnnl_ctx::key("pool_bwd", g.key), [&] {
    dnnl::pooling_v2_backward::desc d(g.alg, dnnl_ctx::plain_md(g.src, g.dtype), dnnl_ctx::plain_md(g.dst, g.dtype),
                                      g.strides, g.kernel, g.dilation, g.pad_l, g.pad_r);
    dnnl::pooling_v2_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return PoolBwd{pd, dnnl::pooling_v2_backward(pd)};
  });
  Tensor dy = gout[0];
  if (!g.include_pad_scale.empty()) {
    dy = dy.clone();
    scale_planes(dy, g.include_pad_scale);
  }
  Tensor dx(g.src, g.dtype);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, dnnl_ctx::mem(e->pd.diff_dst_desc(), dy.raw())},
                                             {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(e->pd.diff_src_desc(), dx.raw())}};
  Tensor const& ws = saved.tensors.at(1);
  if (ws.defined()) args.emplace(DNNL_ARG_WORKSPACE, dnnl_ctx::mem(f->pd.workspace_desc(), ws.raw()));
  dnnl_ctx::run(e->prim, args);
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace gp::exec::cpu
