// Data-movement ops whose output is a rearrangement of the input's elements: Transpose, Concat,
// Split, Slice, Gather. Each function checks the attributes against the actual input shapes.
#pragma once

#include <string_view>

#include "graph/ops/common.h"

namespace gp::graph::ops {

// Transpose's permutation (the dims reversed when the attribute is empty), checked against
// `shape`; `role` names that tensor in the message ("input", "gradient").
Result<std::vector<int64_t>> transpose_perm(Op const& op, std::vector<int64_t> const& shape,
                                            std::string_view role = "input");

// Concat: the inputs' shapes joined along the (normalised) axis.
struct ConcatShape {
  int64_t axis = 0;
  std::vector<int64_t> out_shape;
};
Result<ConcatShape> concat_shape(Op const& op, std::vector<std::vector<int64_t>> const& input_shapes);

// Split: one size per output along the (normalised) axis; equal chunks (the last one smaller)
// when the attribute lists none.
struct SplitShape {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
};
Result<SplitShape> split_shape(Op const& op, std::vector<int64_t> const& input_shape);

// Slice (ONNX clamping): the output shape, the input's row-major strides times the steps, and the
// offset of the first element in the input.
struct SliceGeometry {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> src_strides;
  int64_t offset = 0;
};
Result<SliceGeometry> slice_geometry(Op const& op, std::vector<int64_t> const& input_shape);

// Gather along the (normalised) axis: data viewed as [outer, axis_dim, inner]; the output is
// data_shape[:axis] + indices_shape + data_shape[axis+1:].
struct GatherShape {
  int64_t axis = 0;
  int64_t outer = 1, axis_dim = 0, inner = 1;
  std::vector<int64_t> out_shape;
};
Result<GatherShape> gather_shape(Op const& op, std::vector<int64_t> const& data_shape,
                                 std::vector<int64_t> const& indices_shape);

// Expand's output: the input broadcast against the target shape, whose batch dims (negative: a
// multiple of the batch) are made concrete from the input's batch or, when the input has none (a
// class token expanded to the batch), from `batch` (the micro-batch size, OpCall::batch).
Result<std::vector<int64_t>> expand_output_shape(OpGraph const& graph, Op const& op,
                                                 std::vector<int64_t> const& input_shape, int64_t batch);

}  // namespace gp::graph::ops
