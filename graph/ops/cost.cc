#include "graph/ops/cost.h"

#include <algorithm>

#include "graph/ops/registry.h"

namespace gp::graph::ops {

bool CostContext::needs_input_grad(TensorId t) const { return batched(t) && tensors[t].role != TensorRole::kInput; }

bool CostContext::needs_weight_grad(TensorId t) const {
  return t != kNoTensor && !tensors[t].shape.has_batch() && tensors[t].role != TensorRole::kConstant &&
         tensors[t].role != TensorRole::kInput;
}

double CostContext::elems(TensorId t) const {
  return batched(t) ? static_cast<double>(tensors[t].shape.elements_per_sample()) : 0.0;
}

void CostContext::save(SavedForBackward& s, TensorId t) const {
  if (batched(t) && std::find(s.tensors.begin(), s.tensors.end(), t) == s.tensors.end()) s.tensors.push_back(t);
}

OpCost cost_per_output_element(CostContext const& c) {
  OpCost r;
  double const out_e = c.elems(c.output0());
  r.fwd_flops_per_sample = c.def.per_element.fwd * out_e;
  r.bwd_flops_per_sample = c.def.per_element.bwd * out_e;
  return r;
}

OpCost cost_per_input_element(CostContext const& c) {
  OpCost r;
  double const in_e = c.elems(c.input(0));
  r.fwd_flops_per_sample = c.def.per_element.fwd * in_e;
  r.bwd_flops_per_sample = c.def.per_element.bwd * in_e;
  return r;
}

void save_input0(CostContext const& c, SavedForBackward& s) { c.save(s, c.input(0)); }

void save_inputs01(CostContext const& c, SavedForBackward& s) {
  c.save(s, c.input(0));
  c.save(s, c.input(1));
}

void save_output0(CostContext const& c, SavedForBackward& s) { c.save(s, c.output0()); }

int64_t abs_product(std::vector<int64_t> const& dims, std::size_t from) {
  int64_t n = 1;
  for (std::size_t k = from; k < dims.size(); ++k) n *= dims[k] < 0 ? -dims[k] : dims[k];
  return n;
}

}  // namespace gp::graph::ops
