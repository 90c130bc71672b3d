// Views: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout at inference and Cast to the same
// type keep the input's elements in order and only change its shape.
#pragma once

#include <optional>

#include "graph/ops/common.h"

namespace gp::graph::ops {

// The output shape recorded in the graph with its batch dimension made concrete from the input
// (the importer folds shape inputs with the export-time batch; the graph knows the symbolic one).
// Empty when the graph's shape has no batch to follow or the element count would differ.
std::optional<std::vector<int64_t>> graph_output_shape(OpGraph const& graph, Op const& op,
                                                       std::vector<int64_t> const& input_shape);

Result<std::vector<int64_t>> view_output_shape(OpGraph const& graph, Op const& op,
                                               std::vector<int64_t> const& input_shape);

// The typed attributes the view ops need.
Status view_check(Op const& op, OpGraph const& graph);
// The CUDA backend runs Cast as a view, so only float32 → float32 (the CPU converts between types).
Status cast_check(Op const& op, OpGraph const& graph);
// What every backend's random ops (RandomUniformLike, RandomNormalLike, Bernoulli) run: float32
// draws, Bernoulli of float32 probabilities also into bool.
Status random_check(Op const& op, OpGraph const& graph);

}  // namespace gp::graph::ops
