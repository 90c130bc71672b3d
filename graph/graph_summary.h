// The numbers `graphpipe inspect` reports about a model, computed once from an OpGraph.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/op_graph.h"

namespace gp::graph {

struct TensorSummary {
  std::string name;
  std::string shape;  // "[N,3,224,224]"
  std::string dtype;
};

struct GraphSummary {
  std::string name;
  std::vector<TensorSummary> inputs, outputs;
  std::map<std::string, int64_t> ops_by_type;
  int64_t fused_batchnorm_relus = 0;  // BatchNormalizations with their Relu fused at import
  int64_t fused_matmuls = 0;          // MatMuls with a transposed operand or a scale fused at import
  int64_t num_ops = 0;
  int64_t param_tensors = 0;
  int64_t param_count = 0;
  int64_t param_bytes = 0;
  double fwd_flops_per_sample = 0;
  double bwd_flops_per_sample = 0;
  double bwd_weight_flops_per_sample = 0;
  int64_t activation_bytes_per_sample = 0;  // kept for backward, each tensor once
  int64_t fork_points = 0;
  int64_t join_points = 0;
  int64_t branches = 0;
  std::vector<std::string> widest_antichain;  // op names
};

GraphSummary summarize(OpGraph const& graph);

// `graphpipe inspect --json`: the summary and every initializer (whether it trains, and why), as
// JSON text (2-space indent). The CLI prints it; the Python package's Model reads it.
std::string inspect_json(GraphSummary const& summary, std::vector<WeightChoice> const& choices);

}  // namespace gp::graph
