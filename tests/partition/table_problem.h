// Small hand-made Problems for partition tests: node times linear in the sample count, taken
// from a table, so expected stage costs can be worked out by hand.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "partition/problem.h"

namespace gp::partition::testing {

struct TableNode {
  double fwd_s = 0, bwd_input_s = 0, bwd_weight_s = 0;  // per sample
  int64_t weight_bytes = 0;
  int64_t activation_bytes_per_sample = 0;
};

class TableTimer : public NodeTimer {
 public:
  explicit TableTimer(std::vector<TableNode> rows) : rows_(std::move(rows)) {}
  NodeTime time(int node, int64_t samples, Device const& device) const override {
    TableNode const& r = rows_.at(node);
    double const s = static_cast<double>(samples) / device.speed;
    return {r.fwd_s * s, r.bwd_input_s * s, r.bwd_weight_s * s};
  }

 private:
  std::vector<TableNode> rows_;
};

// Nodes n0..n{k-1}; edges (src, dst, bytes per sample). Not finalized.
inline Problem table_problem(std::vector<TableNode> const& rows, std::vector<std::array<int64_t, 3>> const& edges,
                             int devices, int64_t memory_bytes, int64_t batch) {
  Problem p;
  p.model = "table";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.kind = "table";
    n.weight_bytes = rows[i].weight_bytes;
    n.activation_bytes_per_sample = rows[i].activation_bytes_per_sample;
    p.nodes.push_back(n);
  }
  for (auto const& e : edges) {
    Edge edge;
    edge.src = static_cast<int>(e[0]);
    edge.dst = static_cast<int>(e[1]);
    edge.bytes_per_sample = e[2];
    p.edges.push_back(edge);
  }
  p.timer = std::make_shared<TableTimer>(rows);
  p.cluster = Cluster::uniform(devices, memory_bytes);
  p.batch = batch;
  return p;
}

}  // namespace gp::partition::testing
