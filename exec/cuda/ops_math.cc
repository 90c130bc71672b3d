// The CUDA backend's math operators: activations, Pow (a constant scalar exponent as an
// activation, a tensor exponent broadcast), broadcasting arithmetic (backward summed down to each
// input's shape), Softmax, LayerNormalization, Dropout, ReduceSum/ReduceMean. Same inputs, outputs
// and conventions as the CPU ops (exec/cpu/activation.cc, binary.cc, reduce.cc, norm.cc, view.cc);
// kernels in kernels/cuda/math.h.
#include <algorithm>

#include "exec/cuda/ops_common.h"
#include "kernels/cuda/math.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

int64_t numel_of(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- activations (and Pow with a constant scalar exponent) ----

struct UnarySpec {
  hd::UnaryKind kind = hd::UnaryKind::kRelu;
  float alpha = 0.f;
};

Result<UnarySpec> unary_spec(OpCall const& call) {
  std::string const& t = call.op.type;
  if (t == "Relu") return UnarySpec{hd::UnaryKind::kRelu};
  if (t == "LeakyRelu") {
    auto const* a = attrs_of<graph::LeakyReluAttrs>(call.op);
    return UnarySpec{hd::UnaryKind::kLeakyRelu, a ? a->alpha : 0.01f};
  }
  if (t == "Sigmoid") return UnarySpec{hd::UnaryKind::kSigmoid};
  if (t == "Tanh") return UnarySpec{hd::UnaryKind::kTanh};
  if (t == "Gelu") {
    auto const* a = attrs_of<graph::GeluAttrs>(call.op);
    return UnarySpec{a && a->tanh_approx ? hd::UnaryKind::kGeluTanh : hd::UnaryKind::kGeluErf};
  }
  if (t == "Sqrt") return UnarySpec{hd::UnaryKind::kSqrt};
  if (t == "Erf") return UnarySpec{hd::UnaryKind::kErf};
  if (t == "Exp") return UnarySpec{hd::UnaryKind::kExp};
  if (t == "Log") return UnarySpec{hd::UnaryKind::kLog};
  if (t == "Abs") return UnarySpec{hd::UnaryKind::kAbs};
  if (t == "Neg") return UnarySpec{hd::UnaryKind::kNeg};
  if (t == "Pow") {
    graph::TensorData const* e = constant_input(call.op, call.graph, 1);
    if (e == nullptr || e->numel() != 1) return op_error(call, "the exponent must be a constant scalar");
    return UnarySpec{hd::UnaryKind::kPow, static_cast<float>(e->to_doubles().at(0))};
  }
  return op_error(call, "not an elementwise activation");
}

template <typename T>
Status unary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(UnarySpec const s, unary_spec(call));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::unary_forward<T>(s.kind, s.alpha, x.data<T>(), y.data<T>(), x.numel(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {hd::unary_backward_uses_output(s.kind) ? y : x};
  return Status::ok();
}

template <typename T>
Status unary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& kept = saved.tensors.at(0);
  ASSIGN_OR_RETURN(UnarySpec const s, unary_spec(call));
  ASSIGN_OR_RETURN(Tensor dx, empty(kept.shape(), kept.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(
      kc::unary_backward<T>(s.kind, s.alpha, kept.data<T>(), gout[0].data<T>(), dx.data<T>(), kept.numel(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- Add, Sub, Mul, Div ----

hd::BinaryKind binary_kind(std::string const& type) {
  if (type == "Add") return hd::BinaryKind::kAdd;
  if (type == "Sub") return hd::BinaryKind::kSub;
  if (type == "Mul") return hd::BinaryKind::kMul;
  return hd::BinaryKind::kDiv;
}

Status binary_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (graph::TensorId t : op.inputs)
    if (t == graph::kNoTensor || graph.tensor(t).dtype != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a non-float32 input (only float32 arithmetic is supported)");
  return Status::ok();
}

// a ∘ b broadcast to `shape`.
template <typename T>
Result<Tensor> apply_binary(OpCall const& call, hd::BinaryKind kind, Tensor const& a, Tensor const& b,
                            std::vector<int64_t> const& shape) {
  hd::BinaryIndex index;
  if (!hd::make_binary_index(shape, a.shape(), b.shape(), index))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " need more than " +
                              std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
  ASSIGN_OR_RETURN(Tensor y, empty(shape, a.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::binary<T>(kind, index, a.data<T>(), b.data<T>(), y.data<T>(), stream));
  return y;
}

// scale · full summed down to `target` (a new tensor).
template <typename T>
Result<Tensor> sum_down(OpCall const& call, Tensor const& full, std::vector<int64_t> const& target, float scale) {
  hd::SumIndex index;
  if (!hd::make_sum_index(full.shape(), target, index))
    return op_error(call, "summing " + full.shape_string() + " down needs more than " +
                              std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
  ASSIGN_OR_RETURN(Tensor g, empty(target, full.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::sum_to<T>(index, full.data<T>(), scale, g.data<T>(), stream));
  return g;
}

template <typename T>
Status binary_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  std::vector<int64_t> shape;
  if (!hd::broadcast_shape(a.shape(), b.shape(), shape))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " do not broadcast");
  hd::BinaryKind const kind = binary_kind(call.op.type);
  ASSIGN_OR_RETURN(Tensor y, apply_binary<T>(call, kind, a, b, shape));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) {
    if (kind == hd::BinaryKind::kMul) {
      saved->tensors = {a, b};
    } else if (kind == hd::BinaryKind::kDiv) {
      saved->tensors = {shape_tensor(a.shape()), b, y};
    } else {
      saved->tensors = {shape_tensor(a.shape()), shape_tensor(b.shape())};
    }
  }
  return Status::ok();
}

template <typename T>
Status binary_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined() || !(wants(wanted, 0) || wants(wanted, 1))) return Status::ok();
  Tensor const& dy = gout[0];
  std::vector<int64_t> const& shape = dy.shape();
  hd::BinaryKind const kind = binary_kind(call.op.type);
  auto grad = [&](std::size_t i, Tensor const& full, std::vector<int64_t> const& target, float scale) -> Status {
    ASSIGN_OR_RETURN(Tensor g, sum_down<T>(call, full, target, scale));
    return emit_grad(call, grads, i, g, accumulate);
  };
  if (kind == hd::BinaryKind::kAdd || kind == hd::BinaryKind::kSub) {
    if (wants(wanted, 0)) RETURN_IF_ERROR(grad(0, dy, shape_of(saved.tensors.at(0)), 1.f));
    if (wants(wanted, 1))
      RETURN_IF_ERROR(grad(1, dy, shape_of(saved.tensors.at(1)), kind == hd::BinaryKind::kSub ? -1.f : 1.f));
  } else if (kind == hd::BinaryKind::kMul) {
    Tensor const& a = saved.tensors.at(0);
    Tensor const& b = saved.tensors.at(1);
    for (std::size_t i = 0; i < 2; ++i) {
      if (!wants(wanted, i)) continue;
      ASSIGN_OR_RETURN(Tensor full, apply_binary<T>(call, hd::BinaryKind::kMul, dy, i == 0 ? b : a, shape));
      RETURN_IF_ERROR(grad(i, full, (i == 0 ? a : b).shape(), 1.f));
    }
  } else {
    // y = a / b: da = dy / b, db = −(dy / b) · y
    Tensor const& b = saved.tensors.at(1);
    Tensor const& y = saved.tensors.at(2);
    ASSIGN_OR_RETURN(Tensor dy_b, apply_binary<T>(call, hd::BinaryKind::kDiv, dy, b, shape));
    if (wants(wanted, 0)) RETURN_IF_ERROR(grad(0, dy_b, shape_of(saved.tensors.at(0)), 1.f));
    if (wants(wanted, 1)) {
      ASSIGN_OR_RETURN(Tensor full, apply_binary<T>(call, hd::BinaryKind::kMul, dy_b, y, shape));
      RETURN_IF_ERROR(grad(1, full, b.shape(), -1.f));
    }
  }
  return Status::ok();
}

// ---- Pow ----

// A constant scalar exponent runs as an activation (UnaryKind::kPow); any other exponent (a
// tensor, a weight, a constant of several elements) broadcasts with the base like the binary
// operators, as on the CPU (exec/cpu/binary.cc).
bool scalar_exponent(graph::Op const& op, graph::OpGraph const& graph) {
  graph::TensorData const* e = constant_input(op, graph, 1);
  return e != nullptr && e->numel() == 1;
}

Status pow_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() < 2 || op.inputs[1] == graph::kNoTensor) return unsupported("Pow needs an exponent");
  DType const d = graph.tensor(op.inputs[1]).dtype;
  if (!scalar_exponent(op, graph) && d != DType::kFloat32)
    return unsupported("Pow '" + op.name + "' has a " + graph::dtype_name(d) + " exponent tensor (float32 only)");
  return Status::ok();
}

Result<hd::BinaryIndex> pow_index(OpCall const& call, std::vector<int64_t> const& shape, Tensor const& a,
                                  Tensor const& b) {
  hd::BinaryIndex index;
  if (!hd::make_binary_index(shape, a.shape(), b.shape(), index))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " need more than " +
                              std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
  return index;
}

template <typename T>
Status pow_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  if (scalar_exponent(call.op, call.graph)) return unary_forward<T>(call, in, out, saved);
  if (in.size() < 2 || !in[1].defined()) return op_error(call, "the exponent input is missing");
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  std::vector<int64_t> shape;
  if (!hd::broadcast_shape(a.shape(), b.shape(), shape))
    return op_error(call, "shapes " + a.shape_string() + " and " + b.shape_string() + " do not broadcast");
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, pow_index(call, shape, a, b));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, a.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::pow_forward<T>(index, a.data<T>(), b.data<T>(), y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {a, b, y};
  return Status::ok();
}

// da = Σ dy·b·a^(b−1) and db = Σ dy·a^b·ln a, each summed down to its operand's shape.
template <typename T>
Status pow_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (scalar_exponent(call.op, call.graph)) return unary_backward<T>(call, saved, gout, wanted, grads, accumulate);
  if (!gout.at(0).defined() || !(wants(wanted, 0) || wants(wanted, 1))) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Tensor const& y = saved.tensors.at(2);
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, pow_index(call, y.shape(), a, b));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  for (std::size_t i = 0; i < 2; ++i) {
    if (!wants(wanted, i)) continue;
    hd::PowOperand const wrt = i == 0 ? hd::PowOperand::kBase : hd::PowOperand::kExponent;
    ASSIGN_OR_RETURN(Tensor full, empty(y.shape(), y.dtype()));
    GP_CUDA_CHECK(kc::pow_backward<T>(wrt, index, a.data<T>(), b.data<T>(), y.data<T>(), gout[0].data<T>(),
                                      full.data<T>(), stream));
    Tensor const& operand = i == 0 ? a : b;
    Tensor g;
    if (operand.numel() == full.numel()) {
      g = full.reshaped(operand.shape());  // not broadcast: nothing to sum
    } else {
      ASSIGN_OR_RETURN(g, sum_down<T>(call, full, operand.shape(), 1.f));
    }
    RETURN_IF_ERROR(emit_grad(call, grads, i, g, accumulate));
  }
  return Status::ok();
}

// ---- Softmax ----

struct AxisView {
  int64_t outer = 1, axis = 1, inner = 1;
};

Result<AxisView> softmax_view(OpCall const& call, std::vector<int64_t> const& shape) {
  auto const* a = attrs_of<graph::SoftmaxAttrs>(call.op);
  int64_t const rank = static_cast<int64_t>(shape.size());
  int64_t axis = a ? a->axis : -1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1))
    return op_error(call, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  AxisView v;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? v.outer : (i == axis ? v.axis : v.inner)) *= shape[i];
  return v;
}

template <typename T>
Status softmax_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(AxisView const v, softmax_view(call, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::softmax_forward<T>(x.data<T>(), v.outer, v.axis, v.inner, y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {y};
  return Status::ok();
}

template <typename T>
Status softmax_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  Tensor const& y = saved.tensors.at(0);
  ASSIGN_OR_RETURN(AxisView const v, softmax_view(call, y.shape()));
  ASSIGN_OR_RETURN(Tensor dx, empty(y.shape(), y.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(
      kc::softmax_backward<T>(y.data<T>(), gout[0].data<T>(), v.outer, v.axis, v.inner, dx.data<T>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- LayerNormalization ----

struct RowView {
  int64_t axis = 0, rows = 1, cols = 1;
};

RowView layernorm_view(OpCall const& call, std::vector<int64_t> const& shape) {
  auto const& a = *attrs_of<graph::LayerNormAttrs>(call.op);
  RowView v;
  int64_t const rank = static_cast<int64_t>(shape.size());
  v.axis = a.axis < 0 ? a.axis + rank : a.axis;
  for (int64_t i = 0; i < rank; ++i) (i < v.axis ? v.rows : v.cols) *= shape[i];
  return v;
}

bool layernorm_has_bias(OpCall const& call) {
  return call.op.inputs.size() > 2 && call.op.inputs[2] != graph::kNoTensor;
}

template <typename T>
Status layernorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::LayerNormAttrs>(call.op);
  Tensor const& x = in[0];
  RowView const v = layernorm_view(call, x.shape());
  bool const bias = layernorm_has_bias(call) && in.size() > 2 && in[2].defined();
  if (in[1].numel() != v.cols || (bias && in[2].numel() != v.cols))
    return op_error(call, "scale/bias must have " + std::to_string(v.cols) + " elements");
  // ONNX's Mean and InvStdDev outputs have the input's shape with the normalised dims set to 1.
  std::vector<int64_t> stat_shape = x.shape();
  for (std::size_t i = static_cast<std::size_t>(v.axis); i < stat_shape.size(); ++i) stat_shape[i] = 1;
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(Tensor mean, empty(stat_shape, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor rstd, empty(stat_shape, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::layernorm_forward<T>(x.data<T>(), in[1].data<T>(), bias ? in[2].data<T>() : nullptr, v.rows, v.cols,
                                         a.epsilon, y.data<T>(), mean.data<float>(), rstd.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1) out[1] = mean;
  if (out.size() > 2) out[2] = rstd;
  if (saved) saved->tensors = {x, in[1], mean, rstd};
  return Status::ok();
}

// Only the gradients wanted: B (input) and W (scale, bias) calls do not repeat each other's work.
template <typename T>
Status layernorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  bool const bias = layernorm_has_bias(call);
  bool const want_params = wants(wanted, 1) || (bias && wants(wanted, 2));
  if (!(wants(wanted, 0) || want_params) || !gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  Tensor const& scale = saved.tensors.at(1);
  float const* mean = saved.tensors.at(2).data<float>();
  float const* rstd = saved.tensors.at(3).data<float>();
  RowView const v = layernorm_view(call, x.shape());
  T const* dy = gout[0].data<T>();
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(Tensor dx, empty(x.shape(), x.dtype()));
    GP_CUDA_CHECK(kc::layernorm_backward_input<T>(x.data<T>(), scale.data<T>(), mean, rstd, dy, v.rows, v.cols,
                                                  dx.data<T>(), stream));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  }
  if (!want_params) return Status::ok();
  ASSIGN_OR_RETURN(Tensor scratch, empty({kc::layernorm_params_scratch(v.rows, v.cols)}, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor dscale, empty(scale.shape(), scale.dtype()));
  Tensor dbias;
  if (bias) {
    ASSIGN_OR_RETURN(dbias, empty(scale.shape(), scale.dtype()));
  }
  GP_CUDA_CHECK(kc::layernorm_backward_params<T>(x.data<T>(), mean, rstd, dy, v.rows, v.cols, scratch.data<float>(),
                                                 dscale.data<T>(), bias ? dbias.data<T>() : nullptr, stream));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (bias && wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dbias, accumulate));
  return Status::ok();
}

// ---- Dropout ----

float dropout_ratio(OpCall const& call) {
  auto const* a = attrs_of<graph::DropoutAttrs>(call.op);
  return a ? a->ratio : 0.5f;
}

template <typename T>
Status dropout_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  float const ratio = dropout_ratio(call);
  bool const active = call.training && ratio > 0.f;
  out.assign(call.op.outputs.size(), Tensor());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  Tensor mask;
  if (active || out.size() > 1) {
    ASSIGN_OR_RETURN(mask, empty(x.shape(), DType::kUInt8));  // kUInt8 holds ONNX's bool mask
  }
  if (active) {
    ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
    GP_CUDA_CHECK(kc::dropout_forward<T>(x.data<T>(), x.numel(), ratio, call.rng_seed, y.data<T>(),
                                         mask.data<uint8_t>(), stream));
    out[0] = y;
  } else {
    out[0] = x;
    if (mask.nbytes() > 0) GP_CUDA_CHECK(cudaMemsetAsync(mask.raw(), 1, mask.nbytes(), stream));
  }
  if (out.size() > 1) out[1] = mask;
  if (saved) {
    saved->tensors.clear();
    if (active) saved->tensors.push_back(mask);
  }
  return Status::ok();
}

template <typename T>
Status dropout_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  if (saved.tensors.empty()) return emit_grad(call, grads, 0, gout[0], accumulate);
  Tensor const& mask = saved.tensors[0];
  ASSIGN_OR_RETURN(Tensor dx, empty(gout[0].shape(), gout[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::dropout_backward<T>(gout[0].data<T>(), mask.data<uint8_t>(), dx.numel(), dropout_ratio(call),
                                        dx.data<T>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

// ---- ReduceSum, ReduceMean ----

bool reduce_listed(std::vector<int64_t> const& axes, int64_t i, int64_t rank) {
  return axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end() ||
         std::find(axes.begin(), axes.end(), i - rank) != axes.end();
}

// The input's shape with the reduced axes set to 1.
std::vector<int64_t> reduce_keep_shape(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& axes = attrs_of<graph::ReduceAttrs>(call.op)->axes;
  std::vector<int64_t> keep = in_shape;
  int64_t const rank = static_cast<int64_t>(in_shape.size());
  for (int64_t i = 0; i < rank; ++i)
    if (reduce_listed(axes, i, rank)) keep[i] = 1;
  return keep;
}

template <typename T>
Status reduce_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& attrs = *attrs_of<graph::ReduceAttrs>(call.op);
  Tensor const& x = in[0];
  std::vector<int64_t> const keep = reduce_keep_shape(call, x.shape());
  int64_t const kept = numel_of(keep);
  float const scale = call.op.type == "ReduceMean" && kept > 0
                          ? static_cast<float>(static_cast<double>(kept) / static_cast<double>(x.numel()))
                          : 1.f;
  ASSIGN_OR_RETURN(Tensor y, sum_down<T>(call, x, keep, scale));
  if (!attrs.keepdims) {
    // Drop exactly the listed axes (a size-1 axis may or may not be listed).
    std::vector<int64_t> squeezed;
    int64_t const rank = x.rank();
    for (int64_t i = 0; i < rank; ++i)
      if (!reduce_listed(attrs.axes, i, rank)) squeezed.push_back(keep[i]);
    y = y.reshaped(squeezed);
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(x.shape())};
  return Status::ok();
}

template <typename T>
Status reduce_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0) || !gout.at(0).defined()) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  std::vector<int64_t> const keep = reduce_keep_shape(call, in_shape);
  int64_t const n = numel_of(in_shape);
  float const scale = call.op.type == "ReduceMean" && n > 0
                          ? static_cast<float>(static_cast<double>(numel_of(keep)) / static_cast<double>(n))
                          : 1.f;
  hd::BinaryIndex index;
  if (!hd::make_binary_index(in_shape, keep, keep, index))
    return op_error(call, "the input's layout needs more than " + std::to_string(hd::kMaxBroadcastDims) +
                              " dimensions after merging");
  ASSIGN_OR_RETURN(Tensor g, empty(in_shape, gout[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::broadcast_scaled<T>(index, gout[0].data<T>(), scale, g.data<T>(), stream));
  return emit_grad(call, grads, 0, g, accumulate);
}

// noop_with_empty_axes=1 without axes (ReduceAttrs::noop) is the identity; the CUDA kernels reduce.
Status reduce_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ReduceAttrs>(op, graph));
  if (attrs_of<graph::ReduceAttrs>(op)->noop)
    return unsupported("noop_with_empty_axes=1 without axes is not implemented on CUDA yet (run with --backend cpu)");
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> math_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const unary{unary_forward<float>, unary_backward<float>, unary_backward<float>, no_check};
  OpKernels const binary{binary_forward<float>, binary_backward<float>, binary_backward<float>, binary_check};
  OpKernels const reduce{reduce_forward<float>, reduce_backward<float>, reduce_backward<float>, reduce_check};
  std::vector<KernelEntry> t;
  for (char const* u : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Sqrt", "Erf", "Exp", "Log", "Abs", "Neg"})
    t.push_back({u, f32, unary, 1});
  t.push_back({"Pow", f32, {pow_forward<float>, pow_backward<float>, pow_backward<float>, pow_check}, 1});
  for (char const* b : {"Add", "Sub", "Mul", "Div"}) t.push_back({b, f32, binary, 2});
  t.push_back(
      {"Softmax", f32, {softmax_forward<float>, softmax_backward<float>, softmax_backward<float>, no_check}, 1});
  t.push_back({"LayerNormalization",
               f32,
               {layernorm_forward<float>, layernorm_backward<float>, layernorm_backward<float>,
                require_attrs<graph::LayerNormAttrs>},
               2});
  t.push_back(
      {"Dropout", f32, {dropout_forward<float>, dropout_backward<float>, dropout_backward<float>, no_check}, 1});
  t.push_back({"ReduceMean", f32, reduce, 1});
  t.push_back({"ReduceSum", f32, reduce, 1});
  return t;
}

}  // namespace gp::exec::cuda
