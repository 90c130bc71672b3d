// Conv over [N, C, spatial...]: what every backend checks before running one.
#pragma once

#include "core/status.h"
#include "graph/op_graph.h"

namespace gp::graph::ops {

// Typed attributes present and 1 to 3 spatial dims (the weight's rank).
Status conv_check(Op const& op, OpGraph const& graph);

// A convolution's geometry from its typed attributes (pads explicit) and its operands' shapes: the
// one rule that import-time inference and every backend share.
//   Conv:          x [N, C, in...], w [K, C/group, k...]  ->  out_shape [N, K, out...]
//   ConvTranspose: x [N, C, in...], w [C, M/group, k...]  ->  out_shape [N, M, out...]; run as the
//   adjoint of the convolution from its output back to x, whose strides, dilations and pads these
//   are. Where that convolution covers only a block of the output (ConvTransposeAxis), `computed`
//   is the block's extent and `offset` where it starts, per spatial dim, and `embedded` is set.
// Errors (kInvalidArgument) name the shapes, not the op: callers add it.
struct ConvWindow {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> strides, dilations, pads_begin, pads_end;  // per spatial dim
  int64_t group = 1;
  std::vector<int64_t> computed, offset;  // ConvTranspose: per spatial dim; Conv: out and 0
  bool embedded = false;
};
Result<ConvWindow> conv_window(ConvAttrs const& a, std::vector<int64_t> const& x, std::vector<int64_t> const& w);
Result<ConvWindow> conv_transpose_window(ConvTransposeAttrs const& a, std::vector<int64_t> const& x,
                                         std::vector<int64_t> const& w);

// One spatial axis of a ConvTranspose (input `in`, kernel, stride, dilation, pads, output_padding):
// its output extent `out`, and the block the adjoint convolution computes. Libraries run the
// transpose as that convolution's backward data with pads >= 0 and output_padding < stride; for
// negative pads (an output_shape past the full output) or output_padding >= stride (reachable with
// a larger dilation) no convolution maps the whole output back onto the input, so the block that
// receives contributions is computed (`computed` long, pads `pad_begin`/`pad_end` >= 0) and placed
// at `offset` into zeros (the rest of the output gets no contribution, so only the bias).
// Otherwise `computed` is `out`, offset 0, the pads as given. A length <= 0 is the caller's error.
struct ConvTransposeAxis {
  int64_t out = 0, computed = 0, offset = 0, pad_begin = 0, pad_end = 0;
  bool embedded = false;
};
ConvTransposeAxis conv_transpose_axis(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                                      int64_t pad_end, int64_t output_padding);

}  // namespace gp::graph::ops
