// The CUDA backend's logic family: comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual)
// of float32, int64, int32, int8, uint8 or bool operands and the boolean operators (Not, And, Or,
// Xor) into bool bytes, the bitwise ops of integers, and Where (any of those dtypes; the gradient to
// float32 x and y summed down to their shapes), Mod of float32 (its gradients summed down) and of integers, and
// ConstantOfShape and Range filled per micro-batch. Same inputs, outputs and
// conventions as the CPU's exec/cpu/logic.cc; kernels in kernels/cuda/logic.cu.
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/ops_common.h"
#include "exec/op_shared.h"
#include "graph/ops/common.h"
#include "graph/ops/logic.h"
#include "kernels/cuda/math.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

using graph::ops::is_boolean;

hd::LogicKind logic_kind(OpKind k) {
  switch (k) {
    case OpKind::kEqual:
      return hd::LogicKind::kEqual;
    case OpKind::kLess:
      return hd::LogicKind::kLess;
    case OpKind::kGreater:
      return hd::LogicKind::kGreater;
    case OpKind::kLessOrEqual:
      return hd::LogicKind::kLessOrEqual;
    case OpKind::kGreaterOrEqual:
      return hd::LogicKind::kGreaterOrEqual;
    case OpKind::kAnd:
      return hd::LogicKind::kAnd;
    case OpKind::kOr:
      return hd::LogicKind::kOr;
    default:
      return hd::LogicKind::kXor;
  }
}

Result<std::vector<int64_t>> broadcast(OpCall const& call, std::vector<Tensor> const& in, std::size_t arity) {
  std::vector<int64_t> shape;
  for (std::size_t i = 0; i < arity; ++i) {
    std::vector<int64_t> next;
    if (!hd::broadcast_shape(shape, in[i].shape(), next))
      return op_error(call, "input " + std::to_string(i) + " of shape " + in[i].shape_string() +
                                " does not broadcast to the others");
    shape = std::move(next);
  }
  return shape;
}

Result<hd::BinaryIndex> index_of(OpCall const& call, std::vector<int64_t> const& out, std::vector<int64_t> const& a,
                                 std::vector<int64_t> const& b) {
  hd::BinaryIndex index;
  if (!hd::make_binary_index(out, a, b, index))
    return op_error(call, "broadcasting to " + graph::ops::dims_string(out) + " needs more than " +
                              std::to_string(hd::kMaxBroadcastDims) + " dimensions after merging");
  return index;
}

// Both operands of one dtype (bool for And/Or/Xor).
Status predicate_check(graph::Op const& op, graph::OpGraph const& graph) {
  DType const a = graph.tensor(op.inputs.at(0)).dtype;
  bool const boolean_op = op.kind() == OpKind::kAnd || op.kind() == OpKind::kOr || op.kind() == OpKind::kXor;
  if (boolean_op && !is_boolean(a)) return unsupported("And/Or/Xor take bool operands");
  if (op.inputs.size() > 1 && graph.tensor(op.inputs[1]).dtype != a)
    return unsupported("operands of dtypes " + std::string(graph::dtype_name(a)) + " and " +
                       graph::dtype_name(graph.tensor(op.inputs[1]).dtype) + " (they must match)");
  return Status::ok();
}

template <typename T>
Status predicate_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, broadcast(call, in, 2));
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, index_of(call, shape, in[0].shape(), in[1].shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, DType::kBool));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::logic_binary<T>(logic_kind(call.op.kind()), index, in[0].data<T>(), in[1].data<T>(),
                                    y.data<uint8_t>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape()), shape_tensor(in[1].shape())};
  return Status::ok();
}

Status not_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (!is_boolean(graph.tensor(op.inputs.at(0)).dtype)) return unsupported("Not takes a bool operand");
  return Status::ok();
}

Status not_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(Tensor y, empty(in[0].shape(), DType::kBool));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::logical_not(in[0].data<uint8_t>(), y.data<uint8_t>(), y.numel(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

// A comparison is a step: zero gradient for a float32 operand that asks (as on the CPU).
Status predicate_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  for (std::size_t i = 0; i < saved.tensors.size(); ++i)
    RETURN_IF_ERROR(emit_zero_grad(call, wanted, grads, i, shape_of(saved.tensors[i]), accumulate));
  return Status::ok();
}

// ---- Where ----

Status where_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() != 3) return invalid_argument("Where takes three inputs");
  if (!is_boolean(graph.tensor(op.inputs[0]).dtype)) return unsupported("Where's condition must be bool");
  DType const x = graph.tensor(op.inputs[1]).dtype;
  if (graph.tensor(op.inputs[2]).dtype != x) return unsupported("Where's x and y have different dtypes");
  if (x != DType::kFloat32 && x != DType::kInt64 && x != DType::kInt32 && x != DType::kInt8 && !is_boolean(x))
    return unsupported("Where's x and y of dtype " + std::string(graph::dtype_name(x)) +
                       " (float32, int64, int32, int8, uint8 and bool run on CUDA)");
  return Status::ok();
}

template <typename T>
Status where_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, broadcast(call, in, 3));
  ASSIGN_OR_RETURN(hd::BinaryIndex const cx, index_of(call, shape, in[0].shape(), in[1].shape()));
  ASSIGN_OR_RETURN(hd::BinaryIndex const yy, index_of(call, shape, in[2].shape(), in[2].shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, in[1].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::where<T>(cx, yy, in[0].data<uint8_t>(), in[1].data<T>(), in[2].data<T>(), y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], shape_tensor(in[1].shape()), shape_tensor(in[2].shape())};
  return Status::ok();
}

Status where_dispatch(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  switch (in.at(1).dtype()) {
    case DType::kFloat32:
      return where_forward<float>(call, in, out, saved);
    case DType::kInt64:
      return where_forward<int64_t>(call, in, out, saved);
    case DType::kInt32:
      return where_forward<int32_t>(call, in, out, saved);
    case DType::kInt8:
      return where_forward<int8_t>(call, in, out, saved);
    case DType::kBool:
    case DType::kUInt8:
      return where_forward<uint8_t>(call, in, out, saved);
    default:
      return op_error(call, "x and y of dtype " + std::string(graph::dtype_name(in[1].dtype())) +
                                " (float32, int64, int32 and bool run on CUDA)");
  }
}

// dy where the condition picked x (to x) or y (to y), summed down to that operand's shape.
Status where_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& cond = saved.tensors.at(0);
  Tensor const& dy = gout[0];
  ASSIGN_OR_RETURN(hd::BinaryIndex const cd, index_of(call, dy.shape(), cond.shape(), dy.shape()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
    if (!wants(wanted, i)) continue;
    ASSIGN_OR_RETURN(Tensor full, empty(dy.shape()));
    GP_CUDA_CHECK(
        kc::where_grad<float>(cd, cond.data<uint8_t>(), dy.data<float>(), i == 1, full.data<float>(), stream));
    ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, full, shape_of(saved.tensors.at(i)), 1.f));
    RETURN_IF_ERROR(emit_grad(call, grads, i, g, accumulate));
  }
  return Status::ok();
}

// ---- ConstantOfShape and Range whose shape or length holds the batch: filled per micro-batch ----

Status constant_of_shape_forward(OpCall const& call, std::vector<Tensor> const&, std::vector<Tensor>& out, Saved*) {
  auto const* a = attrs_of<graph::ConstantOfShapeAttrs>(call.op);
  if (a == nullptr) return op_error(call, "has no typed attributes");
  auto const shape = graph::ops::constant_of_shape_output_shape(*a, call.batch);
  if (!shape) return op_error(call, shape.status().message());
  DType const dtype = call.graph.tensor(call.op.outputs[0]).dtype;
  ASSIGN_OR_RETURN(Tensor y, empty(*shape, dtype));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  switch (dtype) {
    case DType::kFloat32:
      GP_CUDA_CHECK(kc::fill_value(y.data<float>(), y.numel(), static_cast<float>(a->value), stream));
      break;
    case DType::kInt64:
      GP_CUDA_CHECK(kc::fill_value(y.data<int64_t>(), y.numel(), static_cast<int64_t>(a->value), stream));
      break;
    case DType::kInt32:
      GP_CUDA_CHECK(kc::fill_value(y.data<int32_t>(), y.numel(), static_cast<int32_t>(a->value), stream));
      break;
    default:
      GP_CUDA_CHECK(kc::fill_value(y.data<uint8_t>(), y.numel(), static_cast<uint8_t>(a->value != 0), stream));
      break;
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

Status range_forward(OpCall const& call, std::vector<Tensor> const&, std::vector<Tensor>& out, Saved*) {
  auto const* a = attrs_of<graph::RangeAttrs>(call.op);
  if (a == nullptr) return op_error(call, "has no typed attributes");
  auto const shape = graph::ops::range_output_shape(*a, call.batch);
  if (!shape) return op_error(call, shape.status().message());
  DType const dtype = call.graph.tensor(call.op.outputs[0]).dtype;
  ASSIGN_OR_RETURN(Tensor y, empty(*shape, dtype));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (dtype == DType::kInt32)
    GP_CUDA_CHECK(kc::iota(y.data<int32_t>(), y.numel(), a->start, a->delta, stream));
  else
    GP_CUDA_CHECK(kc::iota(y.data<int64_t>(), y.numel(), a->start, a->delta, stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

// ---- Mod of float32 (hd::mod_value, the CPU's own) and of int64, int32, int8 and uint8 (hd::int_mod_value) ----

Status mod_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, broadcast(call, in, 2));
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, index_of(call, shape, in[0].shape(), in[1].shape()));
  bool const fmod = attrs_of<graph::ModAttrs>(call.op)->fmod;
  ASSIGN_OR_RETURN(Tensor y, empty(shape, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::mod_forward(index, in[0].data<float>(), in[1].data<float>(), fmod, y.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {in[0], in[1]};
  return Status::ok();
}

// Integer Mod (positions and buckets computed per micro-batch): never differentiated; a zero
// divisor is the CPU's error, naming the first output element it hit, at once or with the step's
// deferred checks.
template <typename T>
Status int_mod_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  if (in[0].dtype() != in[1].dtype()) return op_error(call, "inputs of different dtypes");
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, broadcast(call, in, 2));
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, index_of(call, shape, in[0].shape(), in[1].shape()));
  bool const fmod = attrs_of<graph::ModAttrs>(call.op)->fmod;
  ASSIGN_OR_RETURN(Tensor y, empty(shape, in[0].dtype()));
  ASSIGN_OR_RETURN(Tensor flag, index_flag());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::int_mod<T>(index, in[0].data<T>(), in[1].data<T>(), fmod, y.data<T>(),
                               static_cast<unsigned long long*>(flag.raw()), stream));
  RETURN_IF_ERROR(check_position_flag(flag, [op = &call.op](uint64_t at) {
    return graph::ops::op_error(*op, "integer division by zero at output element " + std::to_string(at));
  }));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

// ---- the bitwise family of int64, int32, int8 and uint8 (hd::bitwise_value, the CPU's own) ----

// Never differentiated; BitwiseNot reads its one input as both operands.
template <typename T>
Status bitwise_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved*) {
  std::size_t const arity = call.op.kind() == OpKind::kBitwiseNot ? 1 : 2;
  if (arity == 2 && in[0].dtype() != in[1].dtype()) return op_error(call, "inputs of different dtypes");
  ASSIGN_OR_RETURN(std::vector<int64_t> const shape, broadcast(call, in, arity));
  Tensor const& b = in[arity - 1];
  ASSIGN_OR_RETURN(hd::BinaryIndex const index, index_of(call, shape, in[0].shape(), b.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(shape, in[0].dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::bitwise<T>(bitwise_kind_of(call.op), index, in[0].data<T>(), b.data<T>(), y.data<T>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  return Status::ok();
}

Status mod_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if ((!wants(wanted, 0) && !wants(wanted, 1)) || gout.empty() || !gout[0].defined()) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Tensor const& dy = gout[0];
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, dy, a.shape(), 1.f));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, g, accumulate));
  }
  if (wants(wanted, 1)) {
    ASSIGN_OR_RETURN(hd::BinaryIndex const index, index_of(call, dy.shape(), a.shape(), b.shape()));
    ASSIGN_OR_RETURN(Tensor full, empty(dy.shape(), DType::kFloat32));
    ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
    GP_CUDA_CHECK(kc::mod_b_grad(index, a.data<float>(), b.data<float>(), dy.data<float>(),
                                 attrs_of<graph::ModAttrs>(call.op)->fmod, full.data<float>(), stream));
    ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, full, b.shape(), 1.f));
    RETURN_IF_ERROR(emit_grad(call, grads, 1, g, accumulate));
  }
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> logic_kernels() {
  std::vector<KernelEntry> t;
  auto add_typed = [&](OpKind k, DType d, OpKernels const& kernels, std::size_t min_inputs) {
    t.push_back({k, d, kernels, min_inputs});
  };
  for (OpKind k : {OpKind::kEqual, OpKind::kLess, OpKind::kGreater, OpKind::kLessOrEqual, OpKind::kGreaterOrEqual}) {
    add_typed(k, DType::kFloat32, {predicate_forward<float>, predicate_backward, predicate_backward, predicate_check},
              2);
    add_typed(k, DType::kInt64, {predicate_forward<int64_t>, predicate_backward, predicate_backward, predicate_check},
              2);
    add_typed(k, DType::kInt32, {predicate_forward<int32_t>, predicate_backward, predicate_backward, predicate_check},
              2);
    add_typed(k, DType::kInt8, {predicate_forward<int8_t>, predicate_backward, predicate_backward, predicate_check}, 2);
    // bool and uint8 compare as unsigned bytes
    for (DType b : {DType::kBool, DType::kUInt8})
      add_typed(k, b, {predicate_forward<uint8_t>, predicate_backward, predicate_backward, predicate_check}, 2);
  }
  // Bool tensors are one byte (kBool, or kUInt8 as Dropout's mask).
  for (DType b : {DType::kBool, DType::kUInt8}) {
    for (OpKind k : {OpKind::kAnd, OpKind::kOr, OpKind::kXor})
      add_typed(k, b, {predicate_forward<uint8_t>, predicate_backward, predicate_backward, predicate_check}, 2);
    add_typed(OpKind::kNot, b, {not_forward, predicate_backward, predicate_backward, not_check}, 1);
    // Where's entry is keyed by its first input, the condition; x and y pick the kernel.
    add_typed(OpKind::kWhere, b, {where_dispatch, where_backward, where_backward, where_check}, 3);
  }
  add_typed(OpKind::kMod, DType::kFloat32, {mod_forward, mod_backward, mod_backward, require_attrs<graph::ModAttrs>},
            2);
  add_typed(OpKind::kMod, DType::kInt64,
            {int_mod_forward<int64_t>, no_gradient, no_gradient, require_attrs<graph::ModAttrs>}, 2);
  add_typed(OpKind::kMod, DType::kInt32,
            {int_mod_forward<int32_t>, no_gradient, no_gradient, require_attrs<graph::ModAttrs>}, 2);
  add_typed(OpKind::kMod, DType::kInt8,
            {int_mod_forward<int8_t>, no_gradient, no_gradient, require_attrs<graph::ModAttrs>}, 2);
  add_typed(OpKind::kMod, DType::kUInt8,
            {int_mod_forward<uint8_t>, no_gradient, no_gradient, require_attrs<graph::ModAttrs>}, 2);
  auto add_bitwise = [&](DType d, ForwardFn forward) {
    for (OpKind k : {OpKind::kBitwiseAnd, OpKind::kBitwiseOr, OpKind::kBitwiseXor, OpKind::kBitShift})
      add_typed(k, d, {forward, no_gradient, no_gradient, bitwise_check}, 2);
    add_typed(OpKind::kBitwiseNot, d, {forward, no_gradient, no_gradient, bitwise_check}, 1);
  };
  add_bitwise(DType::kInt64, bitwise_forward<int64_t>);
  add_bitwise(DType::kInt32, bitwise_forward<int32_t>);
  add_bitwise(DType::kInt8, bitwise_forward<int8_t>);
  add_bitwise(DType::kUInt8, bitwise_forward<uint8_t>);
  // Without data inputs an op's entry is found under float32.
  add_typed(OpKind::kConstantOfShape, DType::kFloat32,
            {constant_of_shape_forward, no_gradient, no_gradient, require_attrs<graph::ConstantOfShapeAttrs>}, 0);
  add_typed(OpKind::kRange, DType::kFloat32,
            {range_forward, no_gradient, no_gradient, require_attrs<graph::RangeAttrs>}, 0);
  return t;
}

}  // namespace gp::exec::cuda
