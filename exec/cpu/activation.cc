// Activation family: unary activations and math through oneDNN eltwise (where it has no algorithm
// with ONNX's formula, through kernels/activation), and the family's table: Clip, PRelu, variadic
// Min/Max/Sum/Mean. Pow with a constant scalar exponent runs here as an eltwise (binary.cc).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "exec/cpu/cpu_broadcast.h"
#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/op_shared.h"
#include "kernels/activation.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

using dnnl::algorithm;

struct UnarySpec {
  algorithm alg = algorithm::undef;  // undef: a plain loop of kernels/activation (`loop`)
  float alpha = 0.f;
  float beta = 0.f;
  bool save_output = false;  // backward reads the output (the *_use_dst_for_bwd algorithms)
  kernels::Pointwise loop = kernels::Pointwise::kErf;
  kernels::PointwiseParams params{};
};

std::map<OpKind, kernels::Pointwise> const& pointwise_ops() {
  using P = kernels::Pointwise;
  static std::map<OpKind, P> const m = {
      {OpKind::kErf, P::kErf},
      {OpKind::kSelu, P::kSelu},
      {OpKind::kCelu, P::kCelu},
      {OpKind::kSoftsign, P::kSoftsign},
      {OpKind::kHardSigmoid, P::kHardSigmoid},
      {OpKind::kThresholdedRelu, P::kThresholdedRelu},
      {OpKind::kShrink, P::kShrink},
      {OpKind::kSin, P::kSin},
      {OpKind::kCos, P::kCos},
      {OpKind::kTan, P::kTan},
      {OpKind::kAsin, P::kAsin},
      {OpKind::kAcos, P::kAcos},
      {OpKind::kAtan, P::kAtan},
      {OpKind::kSinh, P::kSinh},
      {OpKind::kCosh, P::kCosh},
      {OpKind::kAsinh, P::kAsinh},
      {OpKind::kAcosh, P::kAcosh},
      {OpKind::kAtanh, P::kAtanh},
      {OpKind::kSign, P::kSign},
      {OpKind::kFloor, P::kFloor},
      {OpKind::kCeil, P::kCeil},
      {OpKind::kRound, P::kRound},
  };
  return m;
}

UnarySpec unary_spec(OpCall const& call) {
  OpKind const t = call.op.kind();
  if (t == OpKind::kRelu) return {algorithm::eltwise_relu_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == OpKind::kLeakyRelu) {
    auto const* a = attrs_of<graph::LeakyReluAttrs>(call.op);
    return {algorithm::eltwise_relu, a ? a->alpha : 0.01f, 0.f, false};
  }
  if (t == OpKind::kSigmoid) return {algorithm::eltwise_logistic_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == OpKind::kTanh) return {algorithm::eltwise_tanh_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == OpKind::kGelu) {
    auto const* a = attrs_of<graph::GeluAttrs>(call.op);
    return {a && a->tanh_approx ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf, 0.f, 0.f, false};
  }
  if (t == OpKind::kSqrt) return {algorithm::eltwise_sqrt_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == OpKind::kExp) return {algorithm::eltwise_exp_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == OpKind::kLog) return {algorithm::eltwise_log, 0.f, 0.f, false};
  if (t == OpKind::kAbs) return {algorithm::eltwise_abs, 0.f, 0.f, false};
  if (t == OpKind::kNeg) return {algorithm::eltwise_linear, -1.f, 0.f, false};
  if (t == OpKind::kReciprocal) return {algorithm::eltwise_pow, 1.f, -1.f, false};
  if (t == OpKind::kSoftplus) return {algorithm::eltwise_soft_relu, 0.f, 0.f, false};
  if (t == OpKind::kHardSwish) return {algorithm::eltwise_hardswish, 0.f, 0.f, false};
  if (t == OpKind::kClip) {
    auto const* c = attrs_of<graph::ClipAttrs>(call.op);
    graph::ClipAttrs const bounds = c ? *c : graph::ClipAttrs{};
    return {algorithm::eltwise_clip_v2, bounds.min, bounds.max, false};
  }
  if (t == OpKind::kPow) {
    graph::TensorData const* e = constant_input(call.op, call.graph, 1);
    return {algorithm::eltwise_pow, 1.f, static_cast<float>(e->to_doubles().at(0)), false};
  }
  auto const* p = attrs_of<graph::ActivationAttrs>(call.op);
  graph::ActivationAttrs const a = p ? *p : graph::ActivationAttrs{};
  if (t == OpKind::kElu) return {algorithm::eltwise_elu, a.alpha, 0.f, false};
  UnarySpec s;
  auto it = pointwise_ops().find(t);
  if (it != pointwise_ops().end()) s.loop = it->second;
  s.params = {a.alpha, a.beta, a.gamma};
  return s;
}

// Cache keys hold the float parameters' bits: printed floats would round nearby values together.
uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

struct EltwiseFwd {
  dnnl::eltwise_forward::primitive_desc pd;
  dnnl::eltwise_forward prim;
};
struct EltwiseBwd {
  dnnl::eltwise_backward::primitive_desc pd;
  dnnl::eltwise_backward prim;
};

std::shared_ptr<EltwiseFwd const> eltwise_fwd(UnarySpec const& s, int64_t n, DType dtype) {
  return dnnl_ctx::cached<EltwiseFwd>(
      dnnl_ctx::key("eltwise_fwd", static_cast<int>(s.alg), bits(s.alpha), bits(s.beta), n, static_cast<int>(dtype)),
      [&] {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, s.alg, dnnl_ctx::plain_md({n}, dtype), s.alpha,
                                      s.beta);
        dnnl::eltwise_forward::primitive_desc pd(d, dnnl_ctx::engine());
        return EltwiseFwd{pd, dnnl::eltwise_forward(pd)};
      });
}

}  // namespace

Status unary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  UnarySpec const s = unary_spec(call);
  Tensor y(x.shape(), x.dtype());
  int64_t const n = x.numel();
  if (n > 0) {
    if (s.alg == algorithm::undef) {
      kernels::pointwise_forward(s.loop, s.params, x.data<float>(), n, y.data<float>());
    } else {
      auto e = eltwise_fwd(s, n, x.dtype());
      dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(e->pd.src_desc(), x.raw())},
                              {DNNL_ARG_DST, dnnl_ctx::mem(e->pd.dst_desc(), y.raw())}});
    }
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {s.save_output ? y : x};
  return Status::ok();
}

namespace {

// dx = f'(kept)·dy through oneDNN's eltwise backward (kept: the output for *_use_dst_for_bwd).
void eltwise_backward(UnarySpec const& s, Tensor const& kept, Tensor const& dy, Tensor& dx) {
  int64_t const n = kept.numel();
  DType const dt = kept.dtype();
  auto f = eltwise_fwd(s, n, dt);
  auto b = dnnl_ctx::cached<EltwiseBwd>(
      dnnl_ctx::key("eltwise_bwd", static_cast<int>(s.alg), bits(s.alpha), bits(s.beta), n, static_cast<int>(dt)), [&] {
        dnnl::eltwise_backward::desc d(s.alg, dnnl_ctx::plain_md({n}, dt), dnnl_ctx::plain_md({n}, dt), s.alpha,
                                       s.beta);
        dnnl::eltwise_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
        return EltwiseBwd{pd, dnnl::eltwise_backward(pd)};
      });
  dnnl::memory::desc const md = dnnl_ctx::plain_md({n}, dt);
  dnnl_ctx::run(b->prim, {{s.save_output ? DNNL_ARG_DST : DNNL_ARG_SRC, dnnl_ctx::mem(md, kept.raw())},
                          {DNNL_ARG_DIFF_DST, dnnl_ctx::mem(md, dy.raw())},
                          {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(md, dx.raw())}});
}

}  // namespace

Status unary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& kept = saved.tensors.at(0);
  UnarySpec const s = unary_spec(call);
  int64_t const n = kept.numel();
  Tensor dx(kept.shape(), kept.dtype());
  if (n > 0) {
    if (s.alg == algorithm::undef)
      kernels::pointwise_backward(s.loop, s.params, kept.data<float>(), gout[0].data<float>(), n, dx.data<float>());
    else
      eltwise_backward(s, kept, gout[0], dx);
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

void relu_in_place(Tensor& y) {
  int64_t const n = y.numel();
  if (n == 0) return;
  auto e = eltwise_fwd({algorithm::eltwise_relu_use_dst_for_bwd, 0.f, 0.f, true}, n, y.dtype());
  dnnl::memory const m = dnnl_ctx::mem(e->pd.dst_desc(), y.raw());
  dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, m}, {DNNL_ARG_DST, m}});
}

namespace {
struct AddRelu {
  dnnl::binary::primitive_desc pd;
  dnnl::binary prim;
};
}  // namespace

void add_relu_in_place(Tensor& y, Tensor const& z) {
  int64_t const n = y.numel();
  if (n == 0) return;
  auto e = dnnl_ctx::cached<AddRelu>(dnnl_ctx::key("add_relu", n, static_cast<int>(y.dtype())), [&] {
    dnnl::memory::desc const md = dnnl_ctx::plain_md({n}, y.dtype());
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(algorithm::binary_add, md, md, md), attr, dnnl_ctx::engine());
    return AddRelu{pd, dnnl::binary(pd)};
  });
  dnnl::memory const m = dnnl_ctx::mem(e->pd.dst_desc(), y.raw());
  dnnl_ctx::run(e->prim,
                {{DNNL_ARG_SRC_0, m}, {DNNL_ARG_SRC_1, dnnl_ctx::mem(e->pd.src1_desc(), z.raw())}, {DNNL_ARG_DST, m}});
}

Tensor relu_grad_from_output(Tensor const& y, Tensor const& dy) {
  Tensor dx(y.shape(), y.dtype());
  if (y.numel() > 0) eltwise_backward({algorithm::eltwise_relu_use_dst_for_bwd, 0.f, 0.f, true}, y, dy, dx);
  return dx;
}

namespace {

// ---- Clip: static bounds (ClipAttrs) run as oneDNN's clip; a bound computed at run time (then
// the bound slots stay inputs) runs as a loop that also differentiates the bounds ----

Status clip_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (in.size() < 2) return unary_forward(call, in, out, saved);
  graph::ClipAttrs const* a = attrs_of<graph::ClipAttrs>(call.op);
  Tensor bounds({2});
  bounds.data<float>()[0] = a ? a->min : -std::numeric_limits<float>::infinity();
  bounds.data<float>()[1] = a ? a->max : std::numeric_limits<float>::infinity();
  for (std::size_t k = 1; k < 3 && k < in.size(); ++k) {
    if (!in[k].defined()) continue;
    if (in[k].numel() != 1) return op_error(call, "bound input " + std::to_string(k) + " is not a scalar");
    bounds.data<float>()[k - 1] = in[k].data<float>()[0];
  }
  Tensor const& x = in[0];
  Tensor y(x.shape());
  kernels::clip_forward(x.data<float>(), x.numel(), bounds.data<float>()[0], bounds.data<float>()[1], y.data<float>());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, bounds};
  return Status::ok();
}

Status clip_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (saved.tensors.size() < 2) return unary_backward(call, saved, gout, wanted, grads, accumulate);
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors[0];
  float const lo = saved.tensors[1].data<float>()[0], hi = saved.tensors[1].data<float>()[1];
  Tensor dx;
  if (wants(wanted, 0)) dx = Tensor(x.shape());
  double dlo = 0, dhi = 0;
  kernels::clip_backward(x.data<float>(), gout[0].data<float>(), x.numel(), lo, hi,
                         dx.defined() ? dx.data<float>() : nullptr, &dlo, &dhi);
  for (std::size_t k : {std::size_t{1}, std::size_t{2}}) {
    if (!wants(wanted, k) || !has_input(call.op, k)) continue;
    Tensor& g = grad_slot(grads, k, call.graph.tensor(call.op.inputs[k]).shape.dims, accumulate);
    g.data<float>()[0] = (accumulate ? g.data<float>()[0] : 0.f) + static_cast<float>(k == 1 ? dlo : dhi);
  }
  if (dx.defined()) return emit_grad(call, grads, 0, dx, accumulate);
  return Status::ok();
}

// ---- Neg, Abs and Sign of integers (relative positions computed per micro-batch;
// kernels::hd::int_unary_at, which the CUDA kernel runs too); never differentiated ----

template <typename T>
void int_unary(kernels::hd::IntUnaryKind kind, Tensor const& x, Tensor& y) {
  T const* xp = x.data<T>();
  T* yp = y.data<T>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) yp[i] = kernels::hd::int_unary_at(kind, xp[i]);
}

Status int_unary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  using kernels::hd::IntUnaryKind;
  OpKind const t = call.op.kind();
  IntUnaryKind const kind = t == OpKind::kNeg   ? IntUnaryKind::kNeg
                            : t == OpKind::kAbs ? IntUnaryKind::kAbs
                                                : IntUnaryKind::kSign;
  Tensor const& x = in[0];
  Tensor y(x.shape(), x.dtype());
  RETURN_IF_ERROR(with_int_dtype(call, x.dtype(), [&](auto tag) {
    int_unary<decltype(tag)>(kind, x, y);
    return Status::ok();
  }));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

// ---- Clip of integers (token ids clamped into a vocabulary, DeBERTa's relative position
// buckets): the bounds stay inputs (graph/ops/activation.cc), each optional; never differentiated ----

template <typename T>
void int_clip(Tensor const& x, T const* lo, T const* hi, Tensor& y) {
  T const* xp = x.data<T>();
  T* yp = y.data<T>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) yp[i] = kernels::hd::int_clip_at(xp[i], lo, hi);
}

Status int_clip_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  Tensor const& x = in[0];
  for (std::size_t k = 1; k < 3 && k < in.size(); ++k)
    if (in[k].defined() && in[k].numel() != 1)
      return op_error(call, "bound input " + std::to_string(k) + " is not a scalar");
  auto bound = [&](std::size_t k, auto tag) {
    using T = decltype(tag);
    return k < in.size() && in[k].defined() ? in[k].data<T>() : nullptr;
  };
  Tensor y(x.shape(), x.dtype());
  RETURN_IF_ERROR(with_int_dtype(call, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    int_clip<T>(x, bound(1, T{}), bound(2, T{}), y);
    return Status::ok();
  }));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

// ---- PRelu: the slope (usually a weight) broadcasts to x ----

Status prelu_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& slope = in[1];
  std::vector<int64_t> shape;
  if (!kernels::broadcast_shapes(x.shape(), slope.shape(), shape) || shape != x.shape())
    return op_error(call, "slope " + slope.shape_string() + " does not broadcast to x " + x.shape_string());
  Tensor const s = expanded(slope, x.shape());
  Tensor y(x.shape());
  kernels::prelu_forward(x.data<float>(), s.data<float>(), x.numel(), y.data<float>());
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, slope};
  return Status::ok();
}

Status prelu_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined() || (!wants(wanted, 0) && !wants(wanted, 1))) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  Tensor const& slope = saved.tensors.at(1);
  Tensor const s = expanded(slope, x.shape());
  Tensor dx, dslope_full;
  if (wants(wanted, 0)) dx = Tensor(x.shape());
  if (wants(wanted, 1)) dslope_full = Tensor(x.shape());
  kernels::prelu_backward(x.data<float>(), s.data<float>(), gout[0].data<float>(), x.numel(),
                          dx.defined() ? dx.data<float>() : nullptr,
                          dslope_full.defined() ? dslope_full.data<float>() : nullptr);
  if (dslope_full.defined()) {
    Tensor& g = grad_slot(grads, 1, slope.shape(), accumulate);
    kernels::reduce_sum_to(dslope_full.data<float>(), x.shape(), g.data<float>(), slope.shape(), accumulate);
  }
  if (dx.defined()) return emit_grad(call, grads, 0, dx, accumulate);
  return Status::ok();
}

// ---- Min, Max, Sum, Mean over one or more inputs with numpy broadcasting ----

Status variadic_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, variadic_shape(call, in));
  OpKind const t = call.op.kind();
  std::vector<Tensor> keep;
  Tensor y;
  if (t == OpKind::kSum || t == OpKind::kMean) {
    y = expanded(in[0], shape);
    for (std::size_t k = 1; k < in.size(); ++k) y = binary_full(algorithm::binary_add, y, in[k]);
    if (t == OpKind::kMean && in.size() > 1) {
      float const inv = 1.f / static_cast<float>(in.size());
      float* p = y.data<float>();
      for (int64_t i = 0; i < y.numel(); ++i) p[i] *= inv;
    }
  } else {
    y = expanded(in[0], shape).clone();
    Tensor which = Tensor::zeros(shape, DType::kInt32);
    for (std::size_t k = 1; k < in.size(); ++k) {
      Tensor const xk = expanded(in[k], shape);
      kernels::select_step(xk.data<float>(), y.numel(), t == OpKind::kMax, static_cast<int32_t>(k), y.data<float>(),
                           which.data<int32_t>());
    }
    keep.push_back(which);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    for (Tensor const& x : in) keep.push_back(shape_tensor(x.shape()));
    saved->tensors = std::move(keep);
  }
  return Status::ok();
}

Status variadic_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& dy = gout[0];
  OpKind const t = call.op.kind();
  bool const select = t == OpKind::kMin || t == OpKind::kMax;
  std::size_t const n = saved.tensors.size() - (select ? 1 : 0);
  Tensor full = dy;
  if (t == OpKind::kMean && n > 1) {
    full = Tensor(dy.shape());
    for (int64_t i = 0; i < dy.numel(); ++i) full.data<float>()[i] = dy.data<float>()[i] / static_cast<float>(n);
  } else if (select) {
    full = Tensor(dy.shape());
  }
  for (std::size_t k = 0; k < n; ++k) {
    if (!wants(wanted, k)) continue;
    if (select)
      kernels::selected_grad(dy.data<float>(), saved.tensors[0].data<int32_t>(), static_cast<int32_t>(k), dy.numel(),
                             full.data<float>());
    std::vector<int64_t> const target = shape_of(saved.tensors[k + (select ? 1 : 0)]);
    Tensor& g = grad_slot(grads, k, target, accumulate);
    kernels::reduce_sum_to(full.data<float>(), dy.shape(), g.data<float>(), target, accumulate);
  }
  return Status::ok();
}

}  // namespace

CpuKernelFamily activation_kernels() {
  OpKernels const plain{unary_forward, unary_backward, unary_backward, no_check};
  OpKernels const parametric{unary_forward, unary_backward, unary_backward, require_attrs<graph::ActivationAttrs>};
  OpKernels const variadic{variadic_forward, variadic_backward, variadic_backward, variadic_check};
  CpuKernelFamily f;
  for (OpKind u :
       {OpKind::kReciprocal, OpKind::kSoftplus, OpKind::kSoftsign, OpKind::kHardSwish, OpKind::kSin, OpKind::kCos,
        OpKind::kTan, OpKind::kAsin, OpKind::kAcos, OpKind::kAtan, OpKind::kSinh, OpKind::kCosh, OpKind::kAsinh,
        OpKind::kAcosh, OpKind::kAtanh, OpKind::kSign, OpKind::kFloor, OpKind::kCeil, OpKind::kRound})
    f.push_back({u, {plain, 1}});
  for (OpKind p :
       {OpKind::kElu, OpKind::kSelu, OpKind::kCelu, OpKind::kHardSigmoid, OpKind::kThresholdedRelu, OpKind::kShrink})
    f.push_back({p, {parametric, 1}});
  f.push_back({OpKind::kClip, {{clip_forward, clip_backward, clip_backward, clip_check}, 1}});
  OpKernels const int_unary_kernels{int_unary_forward, no_gradient, no_gradient, no_check};
  f.push_back({OpKind::kNeg, {int_unary_kernels, 1, false, 0, {DType::kInt64, DType::kInt32, DType::kInt8}}});
  for (OpKind u : {OpKind::kAbs, OpKind::kSign}) f.push_back({u, {int_unary_kernels, 1, false, 0, kIntDTypes}});
  f.push_back({OpKind::kClip, {{int_clip_forward, no_gradient, no_gradient, int_clip_check}, 1, false, 0, kIntDTypes}});
  f.push_back({OpKind::kPRelu, {{prelu_forward, prelu_backward, prelu_backward, no_check}, 2}});
  // Min and Max of integers have their own entries (exec/cpu/binary.cc); Sum and Mean are float32
  // only, and the check says so for any other dtype.
  for (OpKind v : {OpKind::kMin, OpKind::kMax}) f.push_back({v, {variadic, 1, false, 0, {DType::kFloat32}}});
  for (OpKind v : {OpKind::kSum, OpKind::kMean}) f.push_back({v, {variadic, 1, false}});
  return f;
}

}  // namespace gp::exec::cpu
