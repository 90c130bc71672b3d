// Autodiff of an OpGraph or of a stage's subgraph: which tensors need gradients, which operators
// run a VJP (in reverse topological order), where gradients accumulate (a tensor with several
// consumers), and a liveness analysis of forward activations: a tensor is dropped after its last
// forward use unless it leaves the stage; only operators that run backward keep `Saved` state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

struct AutodiffPlan {
  std::vector<graph::OpId> forward_order;      // the stage's operators, topological
  std::vector<graph::OpId> backward_order;     // operators with a VJP to run, reverse topological
  std::vector<graph::TensorId> stage_inputs;   // consumed inside, produced outside (graph inputs too)
  std::vector<graph::TensorId> stage_outputs;  // produced inside, consumed outside or graph outputs
  std::vector<graph::TensorId> input_grads;    // stage inputs that get a gradient (sent upstream)
  std::vector<graph::TensorId> weights;        // trainable weights the stage uses (role kWeight, float)

  // Indexed by tensor id.
  std::vector<bool> requires_grad;    // a gradient w.r.t. this tensor is computed
  std::vector<bool> trainable;        // a trainable weight of this stage
  std::vector<int> last_forward_use;  // position in forward_order after which forward drops it (-1: never used)
  std::vector<int> grad_fan_in;       // number of backward operators that add into its gradient
  // Indexed by op id.
  std::vector<bool> in_stage;
  std::vector<bool> runs_backward;    // keeps Saved in forward and runs a VJP
  std::vector<bool> has_weight_grad;  // has trainable weight inputs (a W part in B/W split schedules)

  bool is_stage_output(graph::TensorId t) const;
  // Estimate from the importer's accounting: activation bytes per sample kept for backward.
  int64_t saved_bytes_per_sample = 0;
};

// `ops` empty: the whole graph. A weight's gradient is wanted when it is trainable (role kWeight,
// float); a stage input's when it is a float activation produced upstream from a float weight (one
// computed from constants alone, as a causal mask, gets none).
Result<AutodiffPlan> plan_autodiff(graph::OpGraph const& graph, std::vector<graph::OpId> const& ops = {});

// A one-line human summary: ops, backward ops, weights, saved bytes per sample.
std::string describe(AutodiffPlan const& plan, graph::OpGraph const& graph);

}  // namespace gp::exec
