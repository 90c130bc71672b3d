// Reductions (Reduce*), the softmax family (Softmax, LogSoftmax, Hardmax), CumSum, ArgMax/ArgMin, TopK:
// the shape functions the importer and every backend share. Each checks the attributes against the
// actual input shape.
#pragma once

#include "graph/ops/common.h"

namespace gp::graph::ops {

// Reduce*: the input seen as `rows` rows of `cols` reduced elements once its dims are permuted to
// `perm` (the kept axes, then the reduced ones). `out_shape` follows keepdims; a noop reduction
// (noop_with_empty_axes) is the identity: rows = numel, cols = 1, out_shape = the input's shape.
struct ReduceShape {
  bool noop = false;
  std::vector<int64_t> axes;       // normalised, sorted
  std::vector<int64_t> perm;       // kept axes then reduced axes
  std::vector<int64_t> out_shape;  // the output's shape
  int64_t rows = 1, cols = 1;
};
Result<ReduceShape> reduce_shape(Op const& op, std::vector<int64_t> const& input_shape);

// An op along one axis: the input seen as [outer, dim, inner] (dim is the axis' size).
struct AxisSplit {
  int64_t axis = 0;  // normalised
  int64_t outer = 1, dim = 1, inner = 1;
};
Result<AxisSplit> axis_split(Op const& op, int64_t axis, std::vector<int64_t> const& input_shape);

// ArgMax/ArgMin's output shape (the axis kept as 1 or dropped).
std::vector<int64_t> arg_reduce_shape(AxisSplit const& s, std::vector<int64_t> const& input_shape, bool keepdims);

// TopK over an input of `input_shape`: the axis split, and the shape of both outputs (the axis
// cut to k); an error when k exceeds the axis.
struct TopKShape {
  AxisSplit split;
  int64_t k = 0;
  std::vector<int64_t> out_shape;
};
Result<TopKShape> topk_shape(Op const& op, std::vector<int64_t> const& input_shape);

}  // namespace gp::graph::ops
