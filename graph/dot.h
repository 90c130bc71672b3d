// Graphviz DOT export of an operator DAG: ops are boxes labelled with type and name, graph inputs
// and outputs are ellipses, tensors are edges labelled with their shape.
#pragma once

#include <string>

#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::graph {

std::string to_dot(OpGraph const& graph);
Status write_dot(OpGraph const& graph, std::string const& path);

}  // namespace gp::graph
