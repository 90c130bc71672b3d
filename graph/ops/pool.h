// MaxPool, AveragePool, GlobalAveragePool over [N, C, spatial...] with 1 to 3 spatial dims.
#pragma once

#include "graph/ops/common.h"

namespace gp::graph::ops {

// What an executor runs: 1 to 3 spatial dims, MaxPool without an Indices output.
Status pool_check(Op const& op, OpGraph const& graph);

// The window per spatial dim and the output shape [N, C, spatial out...]. pads_end is the end
// padding that yields the output size exactly (less than the attribute's when ceil_mode drops a
// window, more when ceil_mode adds one). A global pool's window is the whole plane. A dilated window
// takes every dilations[i]-th element: kernel[i] of them spanning (kernel[i] - 1) * dilations[i] + 1.
// counted_pads_end is the attribute's end padding: with count_include_pad a window is divided by its
// elements inside the input padded by pads_begin and counted_pads_end (ONNX's and PyTorch's rule; a
// window ceil_mode added may reach past it).
struct PoolWindow {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, counted_pads_end;
};
Result<PoolWindow> pool_window(Op const& op, std::vector<int64_t> const& x_shape);

}  // namespace gp::graph::ops
