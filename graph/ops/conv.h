// Conv over [N, C, spatial...]: what every backend checks before running one.
#pragma once

#include "core/status.h"
#include "graph/op_graph.h"

namespace gp::graph::ops {

// Typed attributes present and 1 to 3 spatial dims (the weight's rank).
Status conv_check(Op const& op, OpGraph const& graph);

}  // namespace gp::graph::ops
