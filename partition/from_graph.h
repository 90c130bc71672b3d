// An operator graph as a planner Problem: one node per operator (in the graph's topological
// order), one edge per (producer op, consumer op) pair carrying the batched tensors between them
// (tensors without a batch dimension are dependencies of 0 bytes), node times from a CostModel on
// the cluster's reference device, weight and activation bytes from the importer's accounting.
#pragma once

#include <memory>

#include "graph/cost_model.h"
#include "graph/op_graph.h"
#include "partition/problem.h"

namespace gp::partition {

// The graph and the cost model are shared with the Problem's timer. Returns a finalized Problem;
// change its flags or micro-batch candidates and call finalize() again if needed.
Result<Problem> problem_from_graph(std::shared_ptr<graph::OpGraph const> graph,
                                   std::shared_ptr<graph::CostModel const> cost, Cluster cluster, int64_t batch);

// The DeviceSpec a cost model sees for a cluster device.
graph::DeviceSpec device_spec(Device const& device);

}  // namespace gp::partition
