// Host-side pieces of op kernels that both backends' kernel tables share (each backend wrote them
// again before): the reduction kind of a Reduce* op (kernels/hd/reduce.h's per-row math), the axis
// split of the ops along one axis (Softmax, LogSoftmax, Hardmax) and the variadic
// Min/Max/Sum/Mean's check and broadcast output shape.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/op_kernels.h"
#include "graph/ops/reduce.h"
#include "kernels/hd/reduce.h"

namespace gp::exec {

// ReduceSum, ReduceMean, ReduceMax, ..., ReduceLogSumExp as hd::Reduction.
Result<kernels::hd::Reduction> reduction_of(OpCall const& call);

// Softmax, LogSoftmax, Hardmax: `shape` as [outer, dim, inner] around the op's axis (default -1).
Result<graph::ops::AxisSplit> softmax_axis_split(OpCall const& call, std::vector<int64_t> const& shape);

// Min, Max, Sum, Mean: every input present and float32.
Status variadic_check(graph::Op const& op, graph::OpGraph const& graph);
// Their output shape: the inputs broadcast together (numpy), left to right.
Result<std::vector<int64_t>> variadic_shape(OpCall const& call, std::vector<Tensor> const& in);

}  // namespace gp::exec
