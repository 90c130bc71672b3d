// MaxPool, AveragePool, GlobalAveragePool through oneDNN pooling; max pooling keeps oneDNN's
// workspace (argmax) for backward.
#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "graph/ops/pool.h"

namespace gp::exec::cpu {
namespace {

struct PoolGeometry {
  std::vector<int64_t> src, dst;
  dnnl_ctx::dims kernel, strides, pad_l, pad_r;
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  DType dtype = DType::kFloat32;  // of the data (float32, or bfloat16 under mixed precision)
  IntKey key;                     // the primitives' cache key (dnnl_ctx::key)
};

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
  g.pad_l = w.pads_begin;
  g.pad_r = w.pads_end;  // oneDNN wants the padding that yields the output size exactly
  g.dtype = dtype;
  g.key = dnnl_ctx::key(static_cast<int>(g.alg), static_cast<int>(g.dtype), x, g.kernel, g.strides, g.pad_l, g.pad_r);
  return Status::ok();
}

struct PoolFwd {
  dnnl::pooling_forward::primitive_desc pd;
  dnnl::pooling_forward prim;
};
struct PoolBwd {
  dnnl::pooling_backward::primitive_desc pd;
  dnnl::pooling_backward prim;
};

std::shared_ptr<PoolFwd const> pool_fwd_prim(PoolGeometry const& g) {
  return dnnl_ctx::cached<PoolFwd>(dnnl_ctx::key("pool_fwd", g.key), [&] {
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training, g.alg, dnnl_ctx::plain_md(g.src, g.dtype),
                                  dnnl_ctx::plain_md(g.dst, g.dtype), g.strides, g.kernel, g.pad_l, g.pad_r);
    dnnl::pooling_forward::primitive_desc pd(d, dnnl_ctx::engine());
    return PoolFwd{pd, dnnl::pooling_forward(pd)};
  });
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
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
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
    dnnl::pooling_backward::desc d(g.alg, dnnl_ctx::plain_md(g.src, g.dtype), dnnl_ctx::plain_md(g.dst, g.dtype),
                                   g.strides, g.kernel, g.pad_l, g.pad_r);
    dnnl::pooling_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
    return PoolBwd{pd, dnnl::pooling_backward(pd)};
  });
  Tensor dx(g.src, g.dtype);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, dnnl_ctx::mem(e->pd.diff_dst_desc(), gout[0].raw())},
                                             {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(e->pd.diff_src_desc(), dx.raw())}};
  Tensor const& ws = saved.tensors.at(1);
  if (ws.defined()) args.emplace(DNNL_ARG_WORKSPACE, dnnl_ctx::mem(f->pd.workspace_desc(), ws.raw()));
  dnnl_ctx::run(e->prim, args);
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace gp::exec::cpu
