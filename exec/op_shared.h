// Host-side pieces of op kernels that both backends' kernel tables share (each backend wrote them
// again before): the reduction kind of a Reduce* op (kernels/hd/reduce.h's per-row math), the axis
// split of the ops along one axis (Softmax, LogSoftmax, Hardmax), Clip's check, the variadic
// Min/Max/Sum/Mean's check and broadcast output shape; integer Add/Sub/Mul/Div's check and kind,
// the bitwise family's,
// the check of a Concat of integer or bool parts, OneHot's check, LRN's, GridSample's and pooling's
// parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/op_kernels.h"
#include "graph/ops/reduce.h"
#include "kernels/hd/activation.h"
#include "kernels/hd/binary.h"
#include "kernels/hd/index.h"
#include "kernels/hd/move.h"
#include "kernels/hd/norm.h"
#include "kernels/hd/reduce.h"

namespace gp::exec {

// ReduceSum, ReduceMean, ReduceMax, ..., ReduceLogSumExp as hd::Reduction.
Result<kernels::hd::Reduction> reduction_of(OpCall const& call);

// An integer ReduceSum, ReduceProd, ReduceMax or ReduceMin (kernels/hd/index.h's int_reduce_at,
// which both backends run per output element): its kind, and its parameters over an input of
// `in_shape` reduced as `s` says (s.noop handled by the caller: the output is the input).
struct IntReducePlan {
  kernels::hd::Reduction kind = kernels::hd::Reduction::kSum;
  kernels::hd::ReduceParams params;
  int64_t out_numel = 0;
};
Result<IntReducePlan> int_reduce_plan(OpCall const& call, graph::ops::ReduceShape const& s,
                                      std::vector<int64_t> const& in_shape);

// Softmax, LogSoftmax, Hardmax: `shape` as [outer, dim, inner] around the op's axis (default -1).
Result<graph::ops::AxisSplit> softmax_axis_split(OpCall const& call, std::vector<int64_t> const& shape);

// The dtypes a Cast converts between element by element (kernels/hd/view.h's cast_value, which
// both backends run): float32, float64, int64, int32, int8, uint8 and bool.
bool elementwise_cast_dtype(DType d);

// Clip: a bound given as an input (computed at run time) is a float32 scalar.
Status clip_check(graph::Op const& op, graph::OpGraph const& graph);
// Clip of integers: each bound present a scalar of x's dtype.
Status int_clip_check(graph::Op const& op, graph::OpGraph const& graph);
// Whether input k of `op` is present.
inline bool has_input(graph::Op const& op, std::size_t k) {
  return k < op.inputs.size() && op.inputs[k] != graph::kNoTensor;
}

// Min, Max, Sum, Mean: every input present and float32.
Status variadic_check(graph::Op const& op, graph::OpGraph const& graph);
// Their output shape: the inputs broadcast together (numpy), left to right.
Result<std::vector<int64_t>> variadic_shape(OpCall const& call, std::vector<Tensor> const& in);

// Add, Sub, Mul, Div as hd::BinaryKind (any other kind: Div).
kernels::hd::BinaryKind binary_kind_of(graph::ops::OpKind kind);
// Integer Add, Sub, Mul, Div (kernels/hd/activation.h's int_binary_op): two inputs of one dtype.
Status int_binary_check(graph::Op const& op, graph::OpGraph const& graph);
// The bitwise family (kernels/hd/binary.h's bitwise_value): BitwiseNot's one input, or two of one
// dtype, int64, int32, int8 or uint8 (BitShift with its direction).
Status bitwise_check(graph::Op const& op, graph::OpGraph const& graph);
// Its kind: BitShift's from its direction (attributes the check found).
kernels::hd::BitwiseKind bitwise_kind_of(graph::Op const& op);
// Integer Max/Min: one or more inputs of one dtype (folded pairwise by the binary kernels; one input
// is copied).
Status int_extremum_check(graph::Op const& op, graph::OpGraph const& graph);

// OneHot: its attributes, and an output (the values' dtype) of float32, int64 or int32.
Status one_hot_check(graph::Op const& op, graph::OpGraph const& graph);
// OneHot is piecewise constant in its indices: float32 indices (which may depend on weights) get
// zeros of the shape forward saved (saved.tensors[0], shape_tensor of the indices).
Status one_hot_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                        std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate);
// LRN over x: its attributes and x seen as [N, C, S] (an error naming the op when x has fewer
// than 3 dims).
Result<kernels::hd::LrnParams> lrn_params(OpCall const& call, std::vector<int64_t> const& x_shape);
// The same for a backward pass, after checking that `saved` holds a forward pass's {x, d} and the
// output gradient has x's shape.
Result<kernels::hd::LrnParams> lrn_backward_params(OpCall const& call, Saved const& saved,
                                                   std::vector<Tensor> const& gout);
// GridSample of x at grid: the attributes and sizes (graph::ops::grid_sample_output_shape's rule;
// its error, naming the op, otherwise).
Result<kernels::hd::GridSampleParams> grid_sample_params(OpCall const& call, std::vector<int64_t> const& x,
                                                         std::vector<int64_t> const& grid);
// GridSample's output shape from its parameters: [N, C, Ho, Wo], or [N, C, Do, Ho, Wo].
std::vector<int64_t> grid_sample_y_shape(kernels::hd::GridSampleParams const& p);
// The same for a backward pass, after checking that `saved` holds a forward pass's {x, grid} and
// the output gradient has the output's shape.
Result<kernels::hd::GridSampleParams> grid_sample_backward_params(OpCall const& call, Saved const& saved,
                                                                  std::vector<Tensor> const& gout);
// Col2Im of x: its sizes (graph::ops::col2im_shape's checks; its error, naming the op, otherwise).
Result<kernels::hd::Col2ImParams> col2im_params(OpCall const& call, std::vector<int64_t> const& x);
// Its output's shape, [N, C, image...].
std::vector<int64_t> col2im_y_shape(OpCall const& call, kernels::hd::Col2ImParams const& p);
// The same for a backward pass, after checking that `saved` holds the forward's x shape and the
// output gradient has the output's shape.
Result<kernels::hd::Col2ImParams> col2im_backward_params(OpCall const& call, Saved const& saved,
                                                         std::vector<Tensor> const& gout);
// What both backends report for a zero divisor of an integer Div.
inline constexpr char kIntegerDivisionByZero[] = "integer division by zero";
// Concat of integer or bool parts (index pairs, ids, masks), copied as bytes: every part one dtype.
Status concat_bytes_check(graph::Op const& op, graph::OpGraph const& graph);

// MaxPool, AveragePool, GlobalAveragePool of an input of shape `x`: kernels/hd/pool.h's window
// parameters and the output shape `y` (CUDA's pooling; the CPU's MaxPool Indices); max pooling's
// int32 arg-max refuses an input plane past its range.
Status pool_params(OpCall const& call, std::vector<int64_t> const& x, kernels::hd::PoolParams& p,
                   std::vector<int64_t>& y);

}  // namespace gp::exec
