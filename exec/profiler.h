// Measures per-operator forward, input-gradient and weight-gradient time on a backend at a few
// micro-batch sizes: the profile JSON that graph::MeasuredCostModel reads (graph/cost_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "graph/cost_model.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

struct ProfileOptions {
  std::vector<int64_t> samples = {1, 2, 4, 8};  // micro-batch sizes, ascending
  int repeats = 3;                              // timed calls per op and size (the minimum is kept)
  std::string model_name;
  std::function<void(int64_t samples)> on_size;  // progress callback (optional)
};

Result<graph::MeasuredProfile> profile_graph(graph::OpGraph const& graph, Backend& backend,
                                             ProfileOptions const& options);

}  // namespace gp::exec
