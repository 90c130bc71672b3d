// Elementwise operators: unary activations and math through oneDNN eltwise (where it has no
// algorithm with ONNX's formula, through kernels/activation), binary arithmetic with numpy
// broadcasting through oneDNN binary (backward by reductions), Dropout, and the activation family's
// table: Clip, PRelu, variadic Min/Max/Sum/Mean.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "kernels/dropout.h"
#include "kernels/activation.h"
#include "kernels/strided.h"

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

std::map<std::string, kernels::Pointwise, std::less<>> const& pointwise_ops() {
  using P = kernels::Pointwise;
  static std::map<std::string, P, std::less<>> const m = {
      {"Erf", P::kErf},
      {"Selu", P::kSelu},
      {"Celu", P::kCelu},
      {"Softsign", P::kSoftsign},
      {"HardSigmoid", P::kHardSigmoid},
      {"ThresholdedRelu", P::kThresholdedRelu},
      {"Sin", P::kSin},
      {"Cos", P::kCos},
      {"Tan", P::kTan},
      {"Asin", P::kAsin},
      {"Acos", P::kAcos},
      {"Atan", P::kAtan},
      {"Sinh", P::kSinh},
      {"Cosh", P::kCosh},
      {"Asinh", P::kAsinh},
      {"Acosh", P::kAcosh},
      {"Atanh", P::kAtanh},
      {"Sign", P::kSign},
      {"Floor", P::kFloor},
      {"Ceil", P::kCeil},
      {"Round", P::kRound},
  };
  return m;
}

UnarySpec unary_spec(OpCall const& call) {
  std::string const& t = call.op.type;
  if (t == "Relu") return {algorithm::eltwise_relu_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == "LeakyRelu") {
    auto const* a = attrs_of<graph::LeakyReluAttrs>(call.op);
    return {algorithm::eltwise_relu, a ? a->alpha : 0.01f, 0.f, false};
  }
  if (t == "Sigmoid") return {algorithm::eltwise_logistic_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == "Tanh") return {algorithm::eltwise_tanh_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == "Gelu") {
    auto const* a = attrs_of<graph::GeluAttrs>(call.op);
    return {a && a->tanh_approx ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf, 0.f, 0.f, false};
  }
  if (t == "Sqrt") return {algorithm::eltwise_sqrt_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == "Exp") return {algorithm::eltwise_exp_use_dst_for_bwd, 0.f, 0.f, true};
  if (t == "Log") return {algorithm::eltwise_log, 0.f, 0.f, false};
  if (t == "Abs") return {algorithm::eltwise_abs, 0.f, 0.f, false};
  if (t == "Neg") return {algorithm::eltwise_linear, -1.f, 0.f, false};
  if (t == "Reciprocal") return {algorithm::eltwise_pow, 1.f, -1.f, false};
  if (t == "Softplus") return {algorithm::eltwise_soft_relu, 0.f, 0.f, false};
  if (t == "HardSwish") return {algorithm::eltwise_hardswish, 0.f, 0.f, false};
  if (t == "Clip") {
    auto const* c = attrs_of<graph::ClipAttrs>(call.op);
    graph::ClipAttrs const bounds = c ? *c : graph::ClipAttrs{};
    return {algorithm::eltwise_clip_v2, bounds.min, bounds.max, false};
  }
  if (t == "Pow") {
    graph::TensorData const* e = constant_input(call.op, call.graph, 1);
    return {algorithm::eltwise_pow, 1.f, static_cast<float>(e->to_doubles().at(0)), false};
  }
  auto const* p = attrs_of<graph::ActivationAttrs>(call.op);
  graph::ActivationAttrs const a = p ? *p : graph::ActivationAttrs{};
  if (t == "Elu") return {algorithm::eltwise_elu, a.alpha, 0.f, false};
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

std::shared_ptr<EltwiseFwd const> eltwise_fwd(UnarySpec const& s, int64_t n) {
  return dnnl_ctx::cached<EltwiseFwd>(
      dnnl_ctx::key("eltwise_fwd", static_cast<int>(s.alg), bits(s.alpha), bits(s.beta), n), [&] {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, s.alg, dnnl_ctx::plain_md({n}), s.alpha,
                                      s.beta);
        dnnl::eltwise_forward::primitive_desc pd(d, dnnl_ctx::engine());
        return EltwiseFwd{pd, dnnl::eltwise_forward(pd)};
      });
}

}  // namespace

namespace {
bool scalar_exponent(graph::Op const& op, graph::OpGraph const& graph) {
  graph::TensorData const* e = constant_input(op, graph, 1);
  return e != nullptr && e->numel() == 1;
}
}  // namespace

Status pow_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() < 2 || op.inputs[1] == graph::kNoTensor) return unsupported("Pow needs an exponent");
  DType const d = graph.tensor(op.inputs[1]).dtype;
  if (!scalar_exponent(op, graph) && d != DType::kFloat32)
    return unsupported("Pow '" + op.name + "' has a " + graph::dtype_name(d) + " exponent tensor (float32 only)");
  return Status::ok();
}

Status unary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  UnarySpec const s = unary_spec(call);
  Tensor y(x.shape());
  int64_t const n = x.numel();
  if (n > 0) {
    if (s.alg == algorithm::undef) {
      kernels::pointwise_forward(s.loop, s.params, x.data<float>(), n, y.data<float>());
    } else {
      auto e = eltwise_fwd(s, n);
      dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(e->pd.src_desc(), x.raw())},
                              {DNNL_ARG_DST, dnnl_ctx::mem(e->pd.dst_desc(), y.raw())}});
    }
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {s.save_output ? y : x};
  return Status::ok();
}

Status unary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& kept = saved.tensors.at(0);
  UnarySpec const s = unary_spec(call);
  int64_t const n = kept.numel();
  Tensor dx(kept.shape());
  if (n > 0) {
    if (s.alg == algorithm::undef) {
      kernels::pointwise_backward(s.loop, s.params, kept.data<float>(), gout[0].data<float>(), n, dx.data<float>());
    } else {
      auto f = eltwise_fwd(s, n);
      auto b = dnnl_ctx::cached<EltwiseBwd>(
          dnnl_ctx::key("eltwise_bwd", static_cast<int>(s.alg), bits(s.alpha), bits(s.beta), n), [&] {
            dnnl::eltwise_backward::desc d(s.alg, dnnl_ctx::plain_md({n}), dnnl_ctx::plain_md({n}), s.alpha, s.beta);
            dnnl::eltwise_backward::primitive_desc pd(d, dnnl_ctx::engine(), f->pd);
            return EltwiseBwd{pd, dnnl::eltwise_backward(pd)};
          });
      dnnl::memory::desc const md = dnnl_ctx::plain_md({n});
      dnnl_ctx::run(b->prim, {{s.save_output ? DNNL_ARG_DST : DNNL_ARG_SRC, dnnl_ctx::mem(md, kept.raw())},
                              {DNNL_ARG_DIFF_DST, dnnl_ctx::mem(md, gout[0].raw())},
                              {DNNL_ARG_DIFF_SRC, dnnl_ctx::mem(md, dx.raw())}});
    }
  }
  return emit_grad(call, grads, 0, dx, accumulate);
}

namespace {

algorithm binary_alg(std::string const& type) {
  if (type == "Add") return algorithm::binary_add;
  if (type == "Sub") return algorithm::binary_sub;
  if (type == "Mul") return algorithm::binary_mul;
  return algorithm::binary_div;
}

struct BinaryPrim {
  dnnl::binary::primitive_desc pd;
  dnnl::binary prim;
};

// dst = a ∘ b where a has the output shape and b broadcasts to it.
Tensor binary_full(algorithm alg, Tensor const& a, Tensor const& b) {
  std::vector<int64_t> const shape = a.shape();
  std::vector<int64_t> const b_shape = kernels::pad_shape(b.shape(), shape.size());
  Tensor y(shape);
  if (y.numel() == 0) return y;
  auto e = dnnl_ctx::cached<BinaryPrim>(
      dnnl_ctx::key("binary", static_cast<int>(alg), dnnl_ctx::key_dims(shape), dnnl_ctx::key_dims(b_shape)), [&] {
        dnnl::binary::desc d(alg, dnnl_ctx::plain_md(shape), dnnl_ctx::plain_md(b_shape), dnnl_ctx::plain_md(shape));
        dnnl::binary::primitive_desc pd(d, dnnl_ctx::engine());
        return BinaryPrim{pd, dnnl::binary(pd)};
      });
  dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC_0, dnnl_ctx::mem(dnnl_ctx::plain_md(shape), a.raw())},
                          {DNNL_ARG_SRC_1, dnnl_ctx::mem(dnnl_ctx::plain_md(b_shape), b.raw())},
                          {DNNL_ARG_DST, dnnl_ctx::mem(dnnl_ctx::plain_md(shape), y.raw())}});
  return y;
}

Tensor expanded(Tensor const& x, std::vector<int64_t> const& shape) {
  if (x.shape() == shape) return x;
  Tensor y(shape);
  kernels::expand(x.data<float>(), x.shape(), y.data<float>(), shape);
  return y;
}

}  // namespace

Status binary_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (graph::TensorId t : op.inputs)
    if (t == graph::kNoTensor || graph.tensor(t).dtype != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a non-float32 input (only float32 arithmetic is supported)");
  return Status::ok();
}

Status binary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  std::vector<int64_t> shape;
  if (!kernels::broadcast_shapes(a.shape(), b.shape(), shape))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " do not broadcast");
  algorithm const alg = binary_alg(call.op.type);
  bool const commutative = alg == algorithm::binary_add || alg == algorithm::binary_mul;
  Tensor y;
  if (a.shape() == shape || kernels::pad_shape(a.shape(), shape.size()) == shape) {
    y = binary_full(alg, a.reshaped(shape), b);
  } else if (commutative && kernels::pad_shape(b.shape(), shape.size()) == shape) {
    y = binary_full(alg, b.reshaped(shape), a);
  } else {
    y = binary_full(alg, expanded(a, shape), b);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    if (alg == algorithm::binary_mul) {
      saved->tensors = {a, b};
    } else if (alg == algorithm::binary_div) {
      saved->tensors = {shape_tensor(a.shape()), b, y};
    } else {
      saved->tensors = {shape_tensor(a.shape()), shape_tensor(b.shape())};
    }
  }
  return Status::ok();
}

Status binary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& dy = gout[0];
  algorithm const alg = binary_alg(call.op.type);
  auto reduce_into = [&](std::size_t i, Tensor const& full, std::vector<int64_t> const& shape, float sign) {
    Tensor& g = grad_slot(grads, i, shape, accumulate);
    if (sign > 0) {
      kernels::reduce_sum_to(full.data<float>(), full.shape(), g.data<float>(), shape, accumulate);
    } else {
      Tensor r(shape);
      kernels::reduce_sum_to(full.data<float>(), full.shape(), r.data<float>(), shape, false);
      float* gp = g.data<float>();
      float const* rp = r.data<float>();
      for (int64_t k = 0; k < r.numel(); ++k) gp[k] = (accumulate ? gp[k] : 0.f) - rp[k];
    }
  };
  if (alg == algorithm::binary_add || alg == algorithm::binary_sub) {
    if (wants(wanted, 0)) reduce_into(0, dy, shape_of(saved.tensors.at(0)), 1.f);
    if (wants(wanted, 1)) reduce_into(1, dy, shape_of(saved.tensors.at(1)), alg == algorithm::binary_sub ? -1.f : 1.f);
  } else if (alg == algorithm::binary_mul) {
    Tensor const& a = saved.tensors.at(0);
    Tensor const& b = saved.tensors.at(1);
    if (wants(wanted, 0)) reduce_into(0, binary_full(algorithm::binary_mul, dy, b), a.shape(), 1.f);
    if (wants(wanted, 1)) reduce_into(1, binary_full(algorithm::binary_mul, dy, a), b.shape(), 1.f);
  } else {
    // y = a / b: da = dy / b, db = −(dy / b) · y
    Tensor const& b = saved.tensors.at(1);
    Tensor const& y = saved.tensors.at(2);
    Tensor const dy_b = binary_full(algorithm::binary_div, dy, b);
    if (wants(wanted, 0)) reduce_into(0, dy_b, shape_of(saved.tensors.at(0)), 1.f);
    if (wants(wanted, 1)) reduce_into(1, binary_full(algorithm::binary_mul, dy_b, y), b.shape(), -1.f);
  }
  return Status::ok();
}

Status dropout_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  auto const* attrs = attrs_of<graph::DropoutAttrs>(call.op);
  float const ratio = attrs ? attrs->ratio : 0.5f;
  out.assign(call.op.outputs.size(), Tensor());
  bool const active = call.training && ratio > 0.f;
  Tensor mask(x.shape(), DType::kUInt8);
  if (active) {
    Tensor y(x.shape());
    kernels::dropout_forward(x.data<float>(), x.numel(), ratio, call.rng_seed, y.data<float>(), mask.data<uint8_t>());
    out[0] = y;
  } else {
    std::memset(mask.raw(), 1, mask.nbytes());
    out[0] = x;
  }
  if (out.size() > 1) out[1] = mask.reshaped(x.shape());  // kUInt8 holds ONNX's bool mask
  if (saved) {
    saved->tensors.clear();
    if (active) saved->tensors.push_back(mask);
  }
  return Status::ok();
}

Status dropout_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  if (saved.tensors.empty()) return emit_grad(call, grads, 0, gout[0], accumulate);
  auto const* attrs = attrs_of<graph::DropoutAttrs>(call.op);
  Tensor dx(gout[0].shape());
  kernels::dropout_backward(gout[0].data<float>(), saved.tensors[0].data<uint8_t>(), dx.numel(),
                            attrs ? attrs->ratio : 0.5f, dx.data<float>());
  return emit_grad(call, grads, 0, dx, accumulate);
}

// Pow with a constant scalar exponent is a oneDNN eltwise; with a tensor exponent it broadcasts
// like the binary operators and runs as plain loops.
Status pow_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (scalar_exponent(call.op, call.graph)) return unary_forward(call, in, out, saved);
  if (in.size() < 2 || !in[1].defined()) return op_error(call, "the exponent input is missing");
  std::vector<int64_t> shape;
  if (!kernels::broadcast_shapes(in[0].shape(), in[1].shape(), shape))
    return op_error(call, "shapes " + in[0].shape_string() + " and " + in[1].shape_string() + " do not broadcast");
  Tensor const a = expanded(in[0], shape), b = expanded(in[1], shape);
  Tensor y(shape);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::pow(a.data<float>()[i], b.data<float>()[i]);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1], y};
  return Status::ok();
}

Status pow_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (scalar_exponent(call.op, call.graph)) return unary_backward(call, saved, gout, wanted, grads, accumulate);
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(2);
  Tensor const a = expanded(saved.tensors.at(0), y.shape()), b = expanded(saved.tensors.at(1), y.shape());
  float const* dy = gout[0].data<float>();
  for (std::size_t i = 0; i < 2; ++i) {
    if (!wants(wanted, i)) continue;
    Tensor full(y.shape());
    for (int64_t k = 0; k < y.numel(); ++k) {
      float const av = a.data<float>()[k], bv = b.data<float>()[k];
      // d(a^b)/da = b·a^(b−1); d(a^b)/db = a^b·ln a
      full.data<float>()[k] = dy[k] * (i == 0 ? bv * std::pow(av, bv - 1.f) : y.data<float>()[k] * std::log(av));
    }
    std::vector<int64_t> const target = saved.tensors[i].shape();
    Tensor& g = grad_slot(grads, i, target, accumulate);
    kernels::reduce_sum_to(full.data<float>(), full.shape(), g.data<float>(), target, accumulate);
  }
  return Status::ok();
}

namespace {

// ---- Clip: static bounds (ClipAttrs) run as oneDNN's clip; a bound computed at run time (then
// the bound slots stay inputs) runs as a loop that also differentiates the bounds ----

bool has_input(graph::Op const& op, std::size_t k) { return k < op.inputs.size() && op.inputs[k] != graph::kNoTensor; }

Status clip_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ClipAttrs>(op, graph));
  for (std::size_t k = 1; k < op.inputs.size(); ++k) {
    if (!has_input(op, k)) continue;
    graph::TensorInfo const& t = graph.tensor(op.inputs[k]);
    if (t.dtype != DType::kFloat32)
      return unsupported("Clip '" + op.name + "' has a " + graph::dtype_name(t.dtype) + " bound (float32 only)");
    if (std::any_of(t.shape.dims.begin(), t.shape.dims.end(), [](int64_t d) { return d != 1; }))
      return unsupported("Clip '" + op.name + "' has a bound that is not a scalar");
  }
  return Status::ok();
}

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

Status variadic_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (std::size_t k = 0; k < op.inputs.size(); ++k) {
    if (!has_input(op, k)) return unsupported(op.type + " '" + op.name + "' has an empty input " + std::to_string(k));
    DType const d = graph.tensor(op.inputs[k]).dtype;
    if (d != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a " + graph::dtype_name(d) + " input " + std::to_string(k) +
                         " (float32 only)");
  }
  return Status::ok();
}

Status variadic_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  std::vector<int64_t> shape = in[0].shape();
  for (std::size_t k = 1; k < in.size(); ++k) {
    std::vector<int64_t> next;
    if (!kernels::broadcast_shapes(shape, in[k].shape(), next))
      return op_error(call, "input " + std::to_string(k) + " " + in[k].shape_string() +
                                " does not broadcast with the inputs before it");
    shape = std::move(next);
  }
  std::string const& t = call.op.type;
  std::vector<Tensor> keep;
  Tensor y;
  if (t == "Sum" || t == "Mean") {
    y = expanded(in[0], shape);
    for (std::size_t k = 1; k < in.size(); ++k) y = binary_full(algorithm::binary_add, y, in[k]);
    if (t == "Mean" && in.size() > 1) {
      float const inv = 1.f / static_cast<float>(in.size());
      float* p = y.data<float>();
      for (int64_t i = 0; i < y.numel(); ++i) p[i] *= inv;
    }
  } else {
    y = expanded(in[0], shape).clone();
    Tensor which = Tensor::zeros(shape, DType::kInt32);
    for (std::size_t k = 1; k < in.size(); ++k) {
      Tensor const xk = expanded(in[k], shape);
      kernels::select_step(xk.data<float>(), y.numel(), t == "Max", static_cast<int32_t>(k), y.data<float>(),
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
  std::string const& t = call.op.type;
  bool const select = t == "Min" || t == "Max";
  std::size_t const n = saved.tensors.size() - (select ? 1 : 0);
  Tensor full = dy;
  if (t == "Mean" && n > 1) {
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
  for (char const* u : {"Reciprocal", "Softplus", "Softsign", "HardSwish", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
                        "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Sign", "Floor", "Ceil", "Round"})
    f.push_back({u, {plain, 1}});
  for (char const* p : {"Elu", "Selu", "Celu", "HardSigmoid", "ThresholdedRelu"}) f.push_back({p, {parametric, 1}});
  f.push_back({"Clip", {{clip_forward, clip_backward, clip_backward, clip_check}, 1}});
  f.push_back({"PRelu", {{prelu_forward, prelu_backward, prelu_backward, no_check}, 2}});
  for (char const* v : {"Min", "Max", "Sum", "Mean"}) f.push_back({v, {variadic, 1, false}});
  return f;
}

}  // namespace gp::exec::cpu
