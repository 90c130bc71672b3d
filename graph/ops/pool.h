// MaxPool, AveragePool, GlobalAveragePool over [N, C, spatial...] with 1 to 3 spatial dims.
#pragma once

#include "graph/ops/common.h"

namespace gp::graph::ops {

// What an executor runs: 1 to 3 spatial dims, MaxPool without dilations or an Indices output.
Status pool_check(Op const& op, OpGraph const& graph);

// The window per spatial dim and the output shape [N, C, spatial out...]. pads_end is the end
// padding that yields the output size exactly (less than the attribute's when ceil_mode drops a
// window). A global pool's window is the whole plane.
struct PoolWindow {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> kernel, strides, pads_begin, pads_end;
};
Result<PoolWindow> pool_window(Op const& op, std::vector<int64_t> const& x_shape);

}  // namespace gp::graph::ops
