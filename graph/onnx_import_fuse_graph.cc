// Fusions on the lowered graph, where every tensor's shape is known (graph/onnx_import_raw.h).
#include <map>
#include <optional>
#include <set>

#include "graph/accounting.h"
#include "graph/onnx_import_raw.h"
#include "graph/ops/registry.h"

namespace gp::graph::onnx_import {
namespace {

struct Tail {
  OpId bn = kNoOp, add = kNoOp, relu = kNoOp;
  TensorId z = kNoTensor;
};

// The tail ending at Add `add`, or nothing.
std::optional<Tail> match_tail(OpGraph const& g, Op const& add, std::set<TensorId> const& outputs) {
  if (add.kind() != ops::OpKind::kAdd || add.inputs.size() != 2 || add.outputs.size() != 1) return std::nullopt;
  TensorInfo const& sum = g.tensor(add.outputs[0]);
  if (sum.consumers.size() != 1 || outputs.count(sum.id)) return std::nullopt;
  Op const& relu = g.op(sum.consumers[0]);
  if (relu.kind() != ops::OpKind::kRelu || relu.inputs.size() != 1 || relu.outputs.size() != 1) return std::nullopt;
  for (std::size_t k : {std::size_t{0}, std::size_t{1}}) {
    TensorInfo const& y = g.tensor(add.inputs[k]);
    TensorInfo const& z = g.tensor(add.inputs[1 - k]);
    if (y.id == z.id || y.producer == kNoOp || y.consumers.size() != 1 || outputs.count(y.id) ||
        y.shape.dims != z.shape.dims || y.dtype != z.dtype)
      continue;
    Op const& bn = g.op(y.producer);
    auto const* a = std::get_if<BatchNormAttrs>(&bn.typed);
    if (bn.kind() != ops::OpKind::kBatchNormalization || !a || a->relu || a->residual || bn.outputs.empty() ||
        bn.outputs[0] != y.id || bn.inputs.size() != kBatchNormResidualInput)
      continue;
    bool others_read = false;
    for (std::size_t o = 1; o < bn.outputs.size(); ++o)
      others_read = others_read || (bn.outputs[o] != kNoTensor &&
                                    (!g.tensor(bn.outputs[o]).consumers.empty() || outputs.count(bn.outputs[o])));
    if (others_read) continue;
    return Tail{bn.id, add.id, relu.id, z.id};
  }
  return std::nullopt;
}

}  // namespace

Result<OpGraph> fuse_residual_tails(OpGraph const& g) {
  std::set<TensorId> const outputs(g.outputs().begin(), g.outputs().end());
  std::map<OpId, Tail> at_add;  // by the Add's id
  std::set<OpId> gone;          // the BatchNorms and Relus that move into a fused op
  for (Op const& op : g.ops()) {
    std::optional<Tail> t = match_tail(g, op, outputs);
    if (!t || gone.count(t->bn)) continue;
    gone.insert({t->bn, t->relu});
    at_add.emplace(t->add, *t);
  }
  if (at_add.empty()) return g;
  // Tensors that leave: each BatchNorm's y and each Add's output.
  std::set<TensorId> dropped;
  for (auto const& [add, t] : at_add) {
    dropped.insert(g.op(t.bn).outputs[0]);
    dropped.insert(g.op(add).outputs[0]);
  }
  std::vector<TensorId> remap(g.tensors().size(), kNoTensor);
  std::vector<TensorInfo> tensors;
  for (TensorInfo const& t : g.tensors()) {
    if (dropped.count(t.id)) continue;
    TensorInfo copy = t;
    copy.id = static_cast<TensorId>(tensors.size());
    copy.producer = kNoOp;
    copy.consumers.clear();
    remap[t.id] = copy.id;
    tensors.push_back(std::move(copy));
  }
  auto ids = [&](std::vector<TensorId> v) {
    for (TensorId& t : v)
      if (t != kNoTensor) t = remap[t];
    return v;
  };
  std::vector<Op> ops;
  for (Op const& op : g.ops()) {
    if (gone.count(op.id)) continue;
    Op out = op;
    if (auto it = at_add.find(op.id); it != at_add.end()) {
      Tail const& t = it->second;
      out = g.op(t.bn);
      auto& a = std::get<BatchNormAttrs>(out.typed);
      a.relu = a.residual = true;
      out.attrs[kBatchNormReluAttr] = int64_t{1};
      out.attrs[kBatchNormAddAttr] = int64_t{1};
      out.inputs.push_back(t.z);
      out.outputs[0] = g.op(t.relu).outputs[0];
    }
    out.inputs = ids(out.inputs);
    out.outputs = ids(out.outputs);
    out.id = static_cast<OpId>(ops.size());
    ops.push_back(std::move(out));
  }
  fill_accounting(ops, tensors);
  OpGraph fused;
  fused.set_name(g.name());
  fused.set_weight_choices(g.weight_choices());
  for (TensorInfo& t : tensors) fused.add_tensor(std::move(t));
  for (Op& op : ops) fused.add_op(std::move(op));
  for (TensorId t : g.inputs()) fused.mark_input(remap[t]);
  for (TensorId t : g.outputs()) fused.mark_output(remap[t]);
  RETURN_IF_ERROR(fused.finalize());
  return fused;
}

}  // namespace gp::graph::onnx_import
