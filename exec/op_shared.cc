#include "exec/op_shared.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "graph/ops/index.h"
#include "graph/ops/pool.h"
#include "kernels/hd/binary.h"

namespace gp::exec {

Result<kernels::hd::Reduction> reduction_of(OpCall const& call) {
  using kernels::hd::Reduction;
  static std::pair<OpKind, Reduction> const kinds[] = {
      {OpKind::kReduceSum, Reduction::kSum},       {OpKind::kReduceMean, Reduction::kMean},
      {OpKind::kReduceMax, Reduction::kMax},       {OpKind::kReduceMin, Reduction::kMin},
      {OpKind::kReduceProd, Reduction::kProd},     {OpKind::kReduceL1, Reduction::kL1},
      {OpKind::kReduceL2, Reduction::kL2},         {OpKind::kReduceSumSquare, Reduction::kSumSquare},
      {OpKind::kReduceLogSum, Reduction::kLogSum}, {OpKind::kReduceLogSumExp, Reduction::kLogSumExp}};
  for (auto const& [type, r] : kinds)
    if (call.op.kind() == type) return r;
  return op_error(call, "is not a reduction");
}

Result<IntReducePlan> int_reduce_plan(OpCall const& call, graph::ops::ReduceShape const& s,
                                      std::vector<int64_t> const& in_shape) {
  using kernels::hd::Reduction;
  IntReducePlan plan;
  ASSIGN_OR_RETURN(plan.kind, reduction_of(call));
  if (plan.kind != Reduction::kSum && plan.kind != Reduction::kProd && plan.kind != Reduction::kMax &&
      plan.kind != Reduction::kMin)
    return op_error(call, "has no integer reduction (ReduceSum, ReduceProd, ReduceMax and ReduceMin have)");
  std::vector<int64_t> keep = in_shape;  // the reduced axes as 1
  for (int64_t a : s.axes) keep[static_cast<std::size_t>(a)] = 1;
  if (!kernels::hd::make_reduce(in_shape, keep, plan.params))
    return op_error(call, "reducing " + graph::ops::dims_string(in_shape) + " keeps more than " +
                              std::to_string(kernels::hd::kMaxRank) + " dims after merging contiguous ones");
  plan.out_numel = kernels::hd::numel_of(keep);
  return plan;
}

Result<graph::ops::AxisSplit> softmax_axis_split(OpCall const& call, std::vector<int64_t> const& shape) {
  auto const* a = attrs_of<graph::SoftmaxAttrs>(call.op);
  return graph::ops::axis_split(call.op, a ? a->axis : -1, shape);
}

bool elementwise_cast_dtype(DType d) {
  switch (d) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kInt32:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

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

Status int_clip_check(graph::Op const& op, graph::OpGraph const& graph) {
  DType const d = graph.tensor(op.inputs.at(0)).dtype;
  for (std::size_t k = 1; k < op.inputs.size(); ++k) {
    if (!has_input(op, k)) continue;
    graph::TensorInfo const& t = graph.tensor(op.inputs[k]);
    if (t.dtype != d)
      return unsupported("Clip '" + op.name + "' has a bound of dtype " + graph::dtype_name(t.dtype) + " for " +
                         graph::dtype_name(d) + " values (a bound has the values' dtype)");
    if (std::any_of(t.shape.dims.begin(), t.shape.dims.end(), [](int64_t v) { return v != 1; }))
      return unsupported("Clip '" + op.name + "' has a bound that is not a scalar");
  }
  return Status::ok();
}

Status variadic_check(graph::Op const& op, graph::OpGraph const& graph) {
  for (std::size_t k = 0; k < op.inputs.size(); ++k) {
    if (op.inputs[k] == graph::kNoTensor)
      return unsupported(op.type + " '" + op.name + "' has an empty input " + std::to_string(k));
    DType const d = graph.tensor(op.inputs[k]).dtype;
    if (d != DType::kFloat32)
      return unsupported(op.type + " '" + op.name + "' has a " + graph::dtype_name(d) + " input " + std::to_string(k) +
                         " (float32 only)");
  }
  return Status::ok();
}

Result<std::vector<int64_t>> variadic_shape(OpCall const& call, std::vector<Tensor> const& in) {
  std::vector<int64_t> shape = in.at(0).shape();
  for (std::size_t k = 1; k < in.size(); ++k) {
    std::vector<int64_t> next;
    if (!kernels::hd::broadcast_shape(shape, in[k].shape(), next))
      return op_error(call, "input " + std::to_string(k) + " " + in[k].shape_string() +
                                " does not broadcast with the inputs before it");
    shape = std::move(next);
  }
  return shape;
}

kernels::hd::BinaryKind binary_kind_of(graph::ops::OpKind kind) {
  using graph::ops::OpKind;
  if (kind == OpKind::kAdd) return kernels::hd::BinaryKind::kAdd;
  if (kind == OpKind::kSub) return kernels::hd::BinaryKind::kSub;
  if (kind == OpKind::kMul) return kernels::hd::BinaryKind::kMul;
  if (kind == OpKind::kMax) return kernels::hd::BinaryKind::kMax;
  if (kind == OpKind::kMin) return kernels::hd::BinaryKind::kMin;
  return kernels::hd::BinaryKind::kDiv;
}

Status bitwise_check(graph::Op const& op, graph::OpGraph const& graph) {
  std::size_t const arity = op.kind() == OpKind::kBitwiseNot ? 1 : 2;
  if (op.inputs.size() != arity)
    return invalid_argument("has " + std::to_string(op.inputs.size()) + " inputs; it takes " + std::to_string(arity));
  DType const a = graph.tensor(op.inputs[0]).dtype;
  if (a != DType::kInt64 && a != DType::kInt32 && a != DType::kInt8 && a != DType::kUInt8)
    return unsupported("input 0 has dtype " + std::string(graph::dtype_name(a)) + " (int64, int32, int8 or uint8)");
  if (arity == 2) {
    if (op.inputs[1] == graph::kNoTensor) return invalid_argument("input 1 is missing");
    DType const b = graph.tensor(op.inputs[1]).dtype;
    if (b != a)
      return invalid_argument("inputs have dtypes " + std::string(graph::dtype_name(a)) + " and " +
                              graph::dtype_name(b) + "; they must match");
  }
  if (op.kind() == OpKind::kBitShift) return require_attrs<graph::BitShiftAttrs>(op, graph);
  return Status::ok();
}

kernels::hd::BitwiseKind bitwise_kind_of(graph::Op const& op) {
  using kernels::hd::BitwiseKind;
  switch (op.kind()) {
    case OpKind::kBitwiseAnd:
      return BitwiseKind::kAnd;
    case OpKind::kBitwiseOr:
      return BitwiseKind::kOr;
    case OpKind::kBitwiseXor:
      return BitwiseKind::kXor;
    case OpKind::kBitShift: {
      auto const* a = std::get_if<graph::BitShiftAttrs>(&op.typed);
      return a != nullptr && !a->left ? BitwiseKind::kShiftRight : BitwiseKind::kShiftLeft;
    }
    default:
      return BitwiseKind::kNot;
  }
}

Status one_hot_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::OneHotAttrs>(op, graph));
  DType const d = graph.tensor(op.outputs.at(0)).dtype;
  if (d != DType::kFloat32 && d != DType::kInt64 && d != DType::kInt32)
    return unsupported("an output of dtype " + std::string(graph::dtype_name(d)) + " (float32, int64 or int32 only)");
  return Status::ok();
}

Status one_hot_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const&,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  return emit_zero_grad(call, wanted, grads, 0, shape_of(saved.tensors.at(0)), accumulate);
}

Result<kernels::hd::LrnParams> lrn_params(OpCall const& call, std::vector<int64_t> const& x_shape) {
  auto const& a = *attrs_of<graph::LrnAttrs>(call.op);
  if (x_shape.size() < 3) return op_error(call, "input " + dims_string(x_shape) + " needs N, C and spatial dims");
  kernels::hd::LrnParams p;
  p.channels = x_shape[1];
  p.spatial = 1;
  for (std::size_t d = 2; d < x_shape.size(); ++d) p.spatial *= x_shape[d];
  p.size = a.size;
  p.alpha = a.alpha;
  p.beta = a.beta;
  p.bias = a.bias;
  return p;
}

Result<kernels::hd::LrnParams> lrn_backward_params(OpCall const& call, Saved const& saved,
                                                   std::vector<Tensor> const& gout) {
  if (saved.tensors.size() != 2) return op_error(call, "backward without a saved forward pass");
  Tensor const& x = saved.tensors[0];
  if (gout.empty() || gout[0].shape() != x.shape())
    return op_error(call, "output gradient does not have the input's shape " + x.shape_string());
  return lrn_params(call, x.shape());
}

Result<kernels::hd::GridSampleParams> grid_sample_params(OpCall const& call, std::vector<int64_t> const& x,
                                                         std::vector<int64_t> const& grid) {
  auto const& a = *attrs_of<graph::GridSampleAttrs>(call.op);
  auto const out = graph::ops::grid_sample_output_shape(x, grid);
  if (!out.is_ok()) return op_error(call, out.status().message());
  kernels::hd::GridSampleParams p;
  p.volumetric = x.size() == 5;
  std::size_t const s = p.volumetric ? 1 : 0;  // the depth's dim, if any, comes first
  p.n = x[0];
  p.c = x[1];
  if (p.volumetric) {
    p.d = x[2];
    p.dout = grid[1];
  }
  p.h = x[2 + s];
  p.w = x[3 + s];
  p.ho = grid[1 + s];
  p.wo = grid[2 + s];
  p.nearest = a.mode == graph::GridSampleMode::kNearest;
  p.cubic = a.mode == graph::GridSampleMode::kCubic;
  if (p.cubic && p.volumetric) return op_error(call, "cubic GridSample samples 4-D x [N,C,H,W] only");
  p.align = a.align_corners;
  p.padding = static_cast<int>(a.padding);
  return p;
}

std::vector<int64_t> grid_sample_y_shape(kernels::hd::GridSampleParams const& p) {
  if (p.volumetric) return {p.n, p.c, p.dout, p.ho, p.wo};
  return {p.n, p.c, p.ho, p.wo};
}

Result<kernels::hd::GridSampleParams> grid_sample_backward_params(OpCall const& call, Saved const& saved,
                                                                  std::vector<Tensor> const& gout) {
  if (saved.tensors.size() != 2) return op_error(call, "backward without a saved forward pass");
  ASSIGN_OR_RETURN(kernels::hd::GridSampleParams const p,
                   grid_sample_params(call, saved.tensors[0].shape(), saved.tensors[1].shape()));
  if (gout.empty() || gout[0].shape() != grid_sample_y_shape(p))
    return op_error(call, "output gradient does not have the output's shape");
  return p;
}

Result<kernels::hd::Col2ImParams> col2im_params(OpCall const& call, std::vector<int64_t> const& x) {
  auto const& a = *attrs_of<graph::Col2ImAttrs>(call.op);
  auto const shape = graph::ops::col2im_shape(a, x);
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  kernels::hd::Col2ImParams p;
  p.n = x[0];
  p.c = shape->out[1];
  std::size_t const sp = a.image.size(), slot0 = 3 - sp;
  for (std::size_t i = 0; i < sp; ++i) {
    p.image[slot0 + i] = a.image[i];
    p.kernel[slot0 + i] = a.block[i];
    p.stride[slot0 + i] = a.strides[i];
    p.dil[slot0 + i] = a.dilations[i];
    p.pad[slot0 + i] = a.pads[i];
    p.blocks[slot0 + i] = shape->blocks[i];
  }
  return p;
}

Result<kernels::hd::Col2ImParams> col2im_backward_params(OpCall const& call, Saved const& saved,
                                                         std::vector<Tensor> const& gout) {
  if (saved.tensors.size() != 1) return op_error(call, "backward without a saved forward pass");
  std::vector<int64_t> const x = shape_of(saved.tensors[0]);
  ASSIGN_OR_RETURN(kernels::hd::Col2ImParams const p, col2im_params(call, x));
  if (gout.empty() || gout[0].shape() != col2im_y_shape(call, p))
    return op_error(call, "output gradient does not have the output's shape");
  return p;
}

std::vector<int64_t> col2im_y_shape(OpCall const& call, kernels::hd::Col2ImParams const& p) {
  std::vector<int64_t> y{p.n, p.c};
  auto const& image = attrs_of<graph::Col2ImAttrs>(call.op)->image;
  y.insert(y.end(), image.begin(), image.end());
  return y;
}

Status int_extremum_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.empty()) return invalid_argument("needs an input");
  DType const a = graph.tensor(op.inputs[0]).dtype;
  for (graph::TensorId t : op.inputs) {
    if (t == graph::kNoTensor) return invalid_argument("an input is missing");
    if (graph.tensor(t).dtype != a)
      return invalid_argument("inputs have dtypes " + std::string(graph::dtype_name(a)) + " and " +
                              graph::dtype_name(graph.tensor(t).dtype) + "; they must match");
  }
  return Status::ok();
}

Status int_binary_check(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.size() != 2 || op.inputs[1] == graph::kNoTensor) return invalid_argument("needs two inputs");
  DType const a = graph.tensor(op.inputs[0]).dtype, b = graph.tensor(op.inputs[1]).dtype;
  if (a != b)
    return invalid_argument("inputs have dtypes " + std::string(graph::dtype_name(a)) + " and " + graph::dtype_name(b) +
                            "; they must match");
  return Status::ok();
}

Status concat_bytes_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ConcatAttrs>(op, graph));
  DType const d = graph.tensor(op.inputs.at(0)).dtype;
  for (std::size_t i = 1; i < op.inputs.size(); ++i)
    if (op.inputs[i] != graph::kNoTensor && graph.tensor(op.inputs[i]).dtype != d)
      return invalid_argument("input " + std::to_string(i) + " has dtype " +
                              graph::dtype_name(graph.tensor(op.inputs[i]).dtype) + ", input 0 " +
                              graph::dtype_name(d) + "; they must match");
  return Status::ok();
}

Status pool_params(OpCall const& call, std::vector<int64_t> const& x, kernels::hd::PoolParams& p,
                   std::vector<int64_t>& y) {
  namespace hd = kernels::hd;
  auto const& a = *attrs_of<graph::PoolAttrs>(call.op);
  bool const global = a.kind == graph::PoolKind::kGlobalAverage;
  hd::PoolMode const mode = a.kind == graph::PoolKind::kMax    ? hd::PoolMode::kMax
                            : (a.count_include_pad && !global) ? hd::PoolMode::kAverageIncludePad
                                                               : hd::PoolMode::kAverageExcludePad;
  ASSIGN_OR_RETURN(graph::ops::PoolWindow const w, graph::ops::pool_window(call.op, x));
  hd::pool_params(x, w.out_shape, w.kernel, w.strides, w.dilations, w.pads_begin, w.counted_pads_end, mode, p);
  y = w.out_shape;
  if (mode == hd::PoolMode::kMax && hd::pool_in_plane(p) > std::numeric_limits<int32_t>::max())
    return unsupported(call.op.type + " '" + call.op.name + "': the arg-max is int32, the input plane of " +
                       dims_string(x) + " is larger");
  return Status::ok();
}

}  // namespace gp::exec
