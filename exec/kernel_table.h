// The shape every backend's kernel table has: entries keyed by (op definition, dtype of the op's
// data input), added by OpKind so that a misspelt op does not compile. A backend finds an op's
// entry once (Backend::resolve) and derives what it does not run from the op table minus its keys.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "exec/backend.h"
#include "graph/op_graph.h"
#include "graph/ops/registry.h"

namespace gp::exec {

// The op table's definition of `kind`; a kind without one is a programming error (std::logic_error).
inline graph::ops::OpDef const& op_def(graph::ops::OpKind kind) {
  graph::ops::OpDef const* def = graph::ops::find_op(graph::ops::op_kind_name(kind));
  if (def == nullptr)
    throw std::logic_error("op kind " + std::to_string(static_cast<int>(kind)) + " has no definition in the op table");
  return *def;
}

// The dtype that picks an op's kernel: its first input's (float32 when it has none).
inline DType data_dtype(graph::Op const& op, graph::OpGraph const& graph) {
  if (op.inputs.empty() || op.inputs[0] == graph::kNoTensor) return DType::kFloat32;
  return graph.tensor(op.inputs[0]).dtype;
}

// The op's definition: resolved at import (Op::def), else looked up by type (an Op built by hand).
inline graph::ops::OpDef const* def_of(graph::Op const& op) { return op.def ? op.def : graph::ops::find_op(op.type); }

template <typename Entry>
class KernelTable {
 public:
  using Key = std::pair<graph::ops::OpDef const*, DType>;

  // Adds the entry of (kind, dtype); a key added twice is a programming error (std::logic_error).
  void add(graph::ops::OpKind kind, DType dtype, Entry entry) {
    graph::ops::OpDef const* def = &op_def(kind);
    if (!entries_.emplace(Key{def, dtype}, std::move(entry)).second)
      throw std::logic_error("kernel for '" + std::string(graph::ops::op_kind_name(kind)) + "' (" +
                             graph::dtype_name(dtype) + ") listed twice");
    defs_.insert(def);
  }
  // Null when the table has no entry for (def, dtype).
  Entry const* find(graph::ops::OpDef const* def, DType dtype) const {
    auto it = entries_.find(Key{def, dtype});
    return it == entries_.end() ? nullptr : &it->second;
  }
  Entry const* find(graph::Op const& op, graph::OpGraph const& graph) const {
    return find(def_of(op), data_dtype(op, graph));
  }
  // The entry a call runs: the one `owner` resolved for it (OpCall::kernel, made by
  // Backend::resolve as ResolvedKernel{owner, entry}), else looked up here (null: not in the table).
  Entry const* entry_for(Backend const& owner, OpCall const& call) const {
    if (call.kernel.backend == &owner) return static_cast<Entry const*>(call.kernel.entry);
    return find(call.op, call.graph);
  }
  // Whether some dtype of the op has an entry.
  bool runs(graph::ops::OpDef const* def) const { return defs_.count(def) > 0; }
  bool runs(graph::Op const& op) const { return runs(def_of(op)); }
  std::map<Key, Entry> const& entries() const { return entries_; }
  // The op types with an entry, sorted and distinct.
  std::vector<std::string> op_types() const {
    std::set<std::string> names;
    for (graph::ops::OpDef const* def : defs_) names.emplace(graph::ops::op_kind_name(def->kind));
    return {names.begin(), names.end()};
  }

 private:
  std::map<Key, Entry> entries_;
  std::set<graph::ops::OpDef const*> defs_;
};

// Whether a forward call gives its kernel what the entry needs: at least `min_inputs` inputs,
// each of those defined (a kernel reads them unchecked). kInvalidArgument naming the op otherwise.
inline Status check_forward_inputs(OpCall const& call, std::size_t min_inputs, std::vector<Tensor> const& inputs) {
  if (inputs.size() < min_inputs)
    return invalid_argument(call.op.type + " '" + call.op.name + "': given " + std::to_string(inputs.size()) +
                            " inputs, needs " + std::to_string(min_inputs));
  for (std::size_t i = 0; i < min_inputs; ++i)
    if (!inputs[i].defined())
      return invalid_argument(call.op.type + " '" + call.op.name + "': input " + std::to_string(i) + " is undefined");
  return Status::ok();
}

// Backend::backward_weight's request: slot i is wanted when weight_grads[i] is defined (the
// accumulator to add into); empty when none is, and the call has nothing to do.
inline std::vector<bool> wanted_weight_grads(std::vector<Tensor> const& weight_grads) {
  std::vector<bool> wanted(weight_grads.size(), false);
  bool any = false;
  for (std::size_t i = 0; i < weight_grads.size(); ++i) {
    wanted[i] = weight_grads[i].defined();
    any = any || wanted[i];
  }
  if (!any) wanted.clear();
  return wanted;
}

}  // namespace gp::exec
