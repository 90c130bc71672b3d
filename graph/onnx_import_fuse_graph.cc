// Fusions on the lowered graph, where every tensor's shape is known (graph/onnx_import_raw.h).
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "graph/accounting.h"
#include "graph/onnx_import_raw.h"
#include "graph/ops/linalg.h"
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

// A copy of `g` without the ops `gone` and the tensors `dropped`, each op in `replaced` (by id)
// standing where it was, written in `g`'s tensor ids; accounting refilled.
Result<OpGraph> rebuilt(OpGraph const& g, std::set<OpId> const& gone, std::map<OpId, Op> const& replaced,
                        std::set<TensorId> const& dropped) {
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
    auto it = replaced.find(op.id);
    Op out = it != replaced.end() ? it->second : op;
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

// The value of a one-element float constant (a folded one included), or nothing.
std::optional<double> scalar_constant(TensorInfo const& c) {
  if (c.role != TensorRole::kConstant || !c.data || c.data->numel() != 1 || !ops::is_float_dtype(c.dtype))
    return std::nullopt;
  double const v = c.data->to_doubles()[0];
  if (!std::isfinite(v) || v == 0) return std::nullopt;
  return v;
}

// Op `s` is x·c, c·x or x/c with c a one-element float constant, writing x's shape and dtype: the
// factor and c's id.
std::optional<std::pair<double, TensorId>> scale_of(OpGraph const& g, Op const& s, TensorId x) {
  bool const mul = s.kind() == ops::OpKind::kMul, div = s.kind() == ops::OpKind::kDiv;
  if ((!mul && !div) || s.inputs.size() != 2 || s.outputs.size() != 1 || (div && s.inputs[0] != x)) return std::nullopt;
  TensorId const c = s.inputs[0] == x ? s.inputs[1] : s.inputs[0];
  if (c == x || (s.inputs[0] != x && s.inputs[1] != x)) return std::nullopt;
  std::optional<double> const v = scalar_constant(g.tensor(c));
  TensorInfo const& in = g.tensor(x);
  TensorInfo const& out = g.tensor(s.outputs[0]);
  if (!v || out.shape.dims != in.shape.dims || out.dtype != in.dtype) return std::nullopt;
  return std::pair{div ? 1.0 / *v : *v, c};
}

}  // namespace

Result<OpGraph> fuse_residual_tails(OpGraph const& g) {
  std::set<TensorId> const outputs(g.outputs().begin(), g.outputs().end());
  std::map<OpId, Op> at_add;   // the fused BatchNorm, by the Add's id
  std::set<OpId> gone;         // the BatchNorms and Relus that move into a fused op
  std::set<TensorId> dropped;  // each BatchNorm's y and each Add's output
  for (Op const& op : g.ops()) {
    std::optional<Tail> t = match_tail(g, op, outputs);
    if (!t || gone.count(t->bn)) continue;
    gone.insert({t->bn, t->relu});
    Op out = g.op(t->bn);
    auto& a = std::get<BatchNormAttrs>(out.typed);
    a.relu = a.residual = true;
    out.attrs[kBatchNormReluAttr] = int64_t{1};
    out.attrs[kBatchNormAddAttr] = int64_t{1};
    out.inputs.push_back(t->z);
    out.outputs[0] = g.op(t->relu).outputs[0];
    dropped.insert({g.op(t->bn).outputs[0], op.outputs[0]});
    at_add.emplace(t->add, std::move(out));
  }
  if (at_add.empty()) return g;
  return rebuilt(g, gone, at_add, dropped);
}

Result<OpGraph> fuse_matmul_scales(OpGraph const& g) {
  std::set<TensorId> const outputs(g.outputs().begin(), g.outputs().end());
  std::map<OpId, Op> fused;  // the scaled MatMuls
  std::set<OpId> gone;       // the Muls and Divs folded into them
  std::set<TensorId> dropped;
  std::map<TensorId, int> constant_reads;  // of each folded factor, by the ops that leave
  // A tensor only one op reads, which no graph output is.
  auto private_to_one = [&](TensorId t) { return g.tensor(t).consumers.size() == 1 && !outputs.count(t); };
  for (Op const& op : g.ops()) {
    if (op.kind() != ops::OpKind::kMatMul || op.inputs.size() != 2 || op.outputs.size() != 1) continue;
    Op out = op;
    graph::MatMulAttrs a = ops::matmul_attrs(op);
    double alpha = a.alpha;
    bool folded = false;
    auto fold = [&](Op const& s, TensorId x, std::pair<double, TensorId> const& f) {
      alpha *= f.first;
      folded = true;
      gone.insert(s.id);
      dropped.insert(x);
      ++constant_reads[f.second];
    };
    for (std::size_t i = 0; i < 2; ++i) {  // a scaled operand: MatMul(s(u), ·)
      TensorId const x = op.inputs[i];
      OpId const p = g.tensor(x).producer;
      if (p == kNoOp || gone.count(p) || !private_to_one(x)) continue;
      Op const& s = g.op(p);
      for (TensorId u : s.inputs) {
        if (u == x) continue;
        if (auto f = scale_of(g, s, u)) {
          fold(s, x, *f);
          out.inputs[i] = u;
          break;
        }
      }
    }
    TensorId const y = op.outputs[0];  // a scaled product: s(MatMul(·, ·))
    if (private_to_one(y)) {
      Op const& s = g.op(g.tensor(y).consumers[0]);
      if (auto f = scale_of(g, s, y)) {
        fold(s, y, *f);
        out.outputs[0] = s.outputs[0];
      }
    }
    if (!folded) continue;
    a.alpha = static_cast<float>(alpha);
    out.typed = a;
    out.attrs[kMatMulAlphaAttr] = alpha;
    fused.emplace(op.id, std::move(out));
  }
  if (fused.empty()) return g;
  for (auto const& [c, reads] : constant_reads)  // a factor nothing reads any more leaves too
    if (static_cast<std::size_t>(reads) == g.tensor(c).consumers.size() && !outputs.count(c)) dropped.insert(c);
  return rebuilt(g, gone, fused, dropped);
}

}  // namespace gp::graph::onnx_import
