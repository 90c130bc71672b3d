// FLOP and activation-byte accounting per op: the rules each op family registers (OpDef::cost,
// OpDef::saved; graph/ops/registry.h) and the helpers they share. graph/accounting.h states the
// rules and sums them over a graph.
#pragma once

#include <vector>

#include "graph/op_graph.h"

namespace gp::graph::ops {

struct OpDef;

struct SavedForBackward {
  std::vector<TensorId> tensors;       // batched tensors the VJP reads
  int64_t extra_bytes_per_sample = 0;  // state that is not a graph tensor (masks, statistics)
};

struct OpCost {
  double fwd_flops_per_sample = 0;
  double bwd_flops_per_sample = 0;  // input-grad + weight-grad
  double bwd_weight_flops_per_sample = 0;
  int64_t activation_bytes_per_sample = 0;
};

// FLOPs per element, forward and backward: of the output for cost_per_output_element, of input 0
// for cost_per_input_element.
struct ElemCost {
  double fwd = 0;
  double bwd = 0;
};

// One op and the graph's tensors (indexed by TensorId: OpGraph::tensors(), or the importer's list
// before finalize). Per sample: only tensors with the batch dimension count.
struct CostContext {
  Op const& op;
  OpDef const& def;
  std::vector<TensorInfo> const& tensors;

  TensorId input(std::size_t k) const { return k < op.inputs.size() ? op.inputs[k] : kNoTensor; }
  TensorId output0() const { return op.outputs.empty() ? kNoTensor : op.outputs[0]; }
  bool batched(TensorId t) const { return t != kNoTensor && tensors[t].shape.has_batch(); }
  // A batched operand that needs its gradient: not the model's own input data.
  bool needs_input_grad(TensorId t) const;
  // An operand that is not batched needs a gradient unless it is a plain constant or an input.
  bool needs_weight_grad(TensorId t) const;
  double elems(TensorId t) const;  // elements per sample; 0 without the batch dimension
  // Adds a batched tensor to `s` once (others are not kept per sample).
  void save(SavedForBackward& s, TensorId t) const;
};

// The FLOP fields of OpCost (activation bytes come from OpDef::saved).
using CostFn = OpCost (*)(CostContext const& c);
using SavedFn = void (*)(CostContext const& c, SavedForBackward& s);

OpCost cost_per_output_element(CostContext const& c);  // def.per_element x output elements
OpCost cost_per_input_element(CostContext const& c);   // def.per_element x input 0's elements
void save_input0(CostContext const& c, SavedForBackward& s);
void save_inputs01(CostContext const& c, SavedForBackward& s);
void save_output0(CostContext const& c, SavedForBackward& s);

// Product of |dims[from:]| (a batch dim counts as its multiple of one sample).
int64_t abs_product(std::vector<int64_t> const& dims, std::size_t from);

}  // namespace gp::graph::ops
