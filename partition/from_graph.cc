#include "partition/from_graph.h"

#include <algorithm>
#include <map>

namespace gp::partition {

graph::DeviceSpec device_spec(Device const& device) {
  return {device.peak_flops, device.memory_bandwidth, device.speed};
}

namespace {

class GraphTimer : public NodeTimer {
 public:
  GraphTimer(std::shared_ptr<graph::OpGraph const> graph, std::shared_ptr<graph::CostModel const> cost,
             std::vector<graph::OpId> ops)
      : graph_(std::move(graph)), cost_(std::move(cost)), ops_(std::move(ops)) {}
  NodeTime time(int node, int64_t samples, Device const& device) const override {
    graph::OpTime const t = cost_->op_time(*graph_, ops_[node], samples, device_spec(device));
    return {t.fwd_s, t.bwd_input_s, t.bwd_weight_s};
  }

 private:
  std::shared_ptr<graph::OpGraph const> graph_;
  std::shared_ptr<graph::CostModel const> cost_;
  std::vector<graph::OpId> ops_;
};

}  // namespace

Result<Problem> problem_from_graph(std::shared_ptr<graph::OpGraph const> graph,
                                   std::shared_ptr<graph::CostModel const> cost, Cluster cluster, int64_t batch) {
  if (!graph || !graph->finalized()) return invalid_argument("problem_from_graph: the graph is not finalized");
  if (!cost) return invalid_argument("problem_from_graph: no cost model");
  if (graph->num_ops() == 0) return invalid_argument("model '" + graph->name() + "' has no operators");
  std::vector<graph::OpId> const& order = graph->topo_order();
  std::vector<int> node_of(graph->num_ops(), -1);
  for (std::size_t i = 0; i < order.size(); ++i) node_of[order[i]] = static_cast<int>(i);

  Problem p;
  p.model = graph->name();
  // A weight's bytes count at its first reader in node order (SharedWeight::readers[0]).
  std::vector<char> counted(graph->tensors().size(), 0);
  for (graph::OpId id : order) {
    graph::Op const& op = graph->op(id);
    Node node;
    node.name = op.name;
    node.kind = op.type;
    for (graph::TensorId t : op.inputs) {
      if (t == graph::kNoTensor || graph->tensor(t).role != graph::TensorRole::kWeight || counted[t]) continue;
      counted[t] = 1;
      node.weight_bytes += graph->tensor(t).static_bytes();
    }
    node.activation_bytes_per_sample = graph::CostModel::activation_bytes_per_sample(*graph, id);
    p.nodes.push_back(std::move(node));
  }
  // One edge per (producer, consumer); tensors in the producer's output order.
  std::map<std::pair<int, int>, Edge> edges;
  for (graph::OpId id : order) {
    for (graph::TensorId t : graph->op(id).outputs) {
      if (t == graph::kNoTensor) continue;
      graph::TensorInfo const& info = graph->tensor(t);
      std::vector<graph::OpId> consumers = info.consumers;
      std::sort(consumers.begin(), consumers.end());
      consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
      for (graph::OpId c : consumers) {
        Edge& e = edges[{node_of[id], node_of[c]}];
        e.src = node_of[id];
        e.dst = node_of[c];
        if (info.shape.has_batch()) {
          e.tensors.push_back(info.name);
          e.bytes_per_sample += info.bytes_per_sample();
        }
      }
    }
  }
  for (auto& [key, e] : edges) p.edges.push_back(std::move(e));
  // Trainable weights read by several operators (SharedWeight), in tensor order.
  for (graph::TensorId t = 0; t < static_cast<graph::TensorId>(graph->tensors().size()); ++t) {
    graph::TensorInfo const& info = graph->tensor(t);
    if (info.role != graph::TensorRole::kWeight) continue;
    std::vector<int> readers;
    for (graph::OpId c : info.consumers) readers.push_back(node_of[c]);
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    if (readers.size() >= 2) p.shared_weights.push_back({info.name, info.static_bytes(), std::move(readers)});
  }
  p.timer = std::make_shared<GraphTimer>(graph, cost, order);
  p.cluster = std::move(cluster);
  p.batch = batch;
  RETURN_IF_ERROR(p.finalize());
  return p;
}

}  // namespace gp::partition
