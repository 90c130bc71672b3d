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
// standing where it was, written in `g`'s tensor ids, where tensor g.tensors().size() + k is
// `added[k]`; accounting refilled.
Result<OpGraph> rebuilt(OpGraph const& g, std::set<OpId> const& gone, std::map<OpId, Op> const& replaced,
                        std::set<TensorId> const& dropped, std::vector<TensorInfo> const& added = {}) {
  std::vector<TensorId> remap(g.tensors().size() + added.size(), kNoTensor);
  std::vector<TensorInfo> all = g.tensors();
  for (std::size_t k = 0; k < added.size(); ++k) {
    all.push_back(added[k]);
    all.back().id = static_cast<TensorId>(g.tensors().size() + k);
  }
  std::vector<TensorInfo> tensors;
  for (TensorInfo const& t : all) {
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

Result<OpGraph> fuse_matmul_operands(OpGraph const& g) {
  std::set<TensorId> const outputs(g.outputs().begin(), g.outputs().end());
  std::map<OpId, Op> replaced;  // the MatMuls, and Transposes whose perm keeps the innermost axis now
  std::set<OpId> gone;          // the Muls, Divs and Transposes folded into them
  std::set<TensorId> dropped;
  std::vector<TensorInfo> added;           // the re-permuted Transposes' outputs
  std::map<TensorId, int> constant_reads;  // of each folded factor, by the ops that leave
  // A tensor only one op reads, which no graph output is, made by an op not folded yet.
  auto private_to_one = [&](TensorId t) {
    TensorInfo const& info = g.tensor(t);
    return info.consumers.size() == 1 && !outputs.count(t) && info.producer != kNoOp && !gone.count(info.producer) &&
           !replaced.count(info.producer);
  };
  for (Op const& op : g.ops()) {
    if (op.kind() != ops::OpKind::kMatMul || op.inputs.size() != 2 || op.outputs.size() != 1) continue;
    Op out = op;
    graph::MatMulAttrs a = ops::matmul_attrs(op);
    double alpha = a.alpha;
    bool folded = false;
    auto fold_scale = [&](Op const& s, TensorId x, std::pair<double, TensorId> const& f) {
      alpha *= f.first;
      folded = true;
      gone.insert(s.id);
      dropped.insert(x);
      ++constant_reads[f.second];
    };
    for (std::size_t i = 0; i < 2; ++i) {
      bool& trans = i == 0 ? a.trans_a : a.trans_b;
      // Peel what feeds the operand: scales (Mul/Div by a constant), and one Transpose whose perm
      // brings the last axis next to last, in any order (HF's decomposed attention scales Kᵀ).
      for (int peel = 0; peel < 4; ++peel) {
        TensorId const x = out.inputs[i];
        if (!private_to_one(x)) break;
        Op const& p = g.op(g.tensor(x).producer);
        std::optional<std::pair<double, TensorId>> f;
        for (TensorId u : p.inputs)
          if (!f && (f = scale_of(g, p, u))) {
            fold_scale(p, x, *f);
            out.inputs[i] = u;
          }
        if (f) continue;
        auto const* t = std::get_if<TransposeAttrs>(&p.typed);
        if (trans || p.kind() != ops::OpKind::kTranspose || !t || p.inputs.size() != 1 || p.outputs.size() != 1) break;
        std::vector<int64_t> perm = t->perm;
        std::size_t const rank = perm.size();
        if (rank < 2 || rank != g.tensor(p.inputs[0]).shape.dims.size() ||
            perm[rank - 2] != static_cast<int64_t>(rank) - 1)
          break;
        std::swap(perm[rank - 2], perm[rank - 1]);  // keeps the innermost axis now
        trans = folded = true;
        dropped.insert(x);
        bool identity = true;
        for (std::size_t d = 0; d < rank; ++d) identity = identity && perm[d] == static_cast<int64_t>(d);
        if (identity) {
          gone.insert(p.id);
          out.inputs[i] = p.inputs[0];
          continue;
        }
        TensorInfo const& in = g.tensor(p.inputs[0]);
        TensorInfo kept = g.tensor(x);
        kept.name = kept.name + "_keep_inner";
        for (int k = 1; g.find_tensor(kept.name); ++k)
          kept.name = g.tensor(x).name + "_keep_inner_" + std::to_string(k);
        for (std::size_t d = 0; d < rank; ++d) kept.shape.dims[d] = in.shape.dims[static_cast<std::size_t>(perm[d])];
        TensorId const id = static_cast<TensorId>(g.tensors().size() + added.size());
        added.push_back(std::move(kept));
        Op moved = p;
        moved.typed = TransposeAttrs{perm};
        moved.attrs["perm"] = perm;
        moved.outputs[0] = id;
        replaced.emplace(p.id, std::move(moved));
        out.inputs[i] = id;
        break;  // the kept Transpose stays in front
      }
    }
    TensorId const y = op.outputs[0];  // a scaled product: s(MatMul(·, ·))
    TensorInfo const& yi = g.tensor(y);
    if (yi.consumers.size() == 1 && !outputs.count(y)) {
      Op const& s = g.op(yi.consumers[0]);
      if (auto f = scale_of(g, s, y)) {
        fold_scale(s, y, *f);
        out.outputs[0] = s.outputs[0];
      }
    }
    if (!folded) continue;
    a.alpha = static_cast<float>(alpha);
    out.typed = a;
    if (a.trans_a) out.attrs[kMatMulTransAAttr] = int64_t{1};
    if (a.trans_b) out.attrs[kMatMulTransBAttr] = int64_t{1};
    if (alpha != 1.0) out.attrs[kMatMulAlphaAttr] = alpha;
    replaced.emplace(op.id, std::move(out));
  }
  if (replaced.empty()) return g;
  for (auto const& [c, reads] : constant_reads)  // a factor nothing reads any more leaves too
    if (static_cast<std::size_t>(reads) == g.tensor(c).consumers.size() && !outputs.count(c)) dropped.insert(c);
  return rebuilt(g, gone, replaced, dropped, added);
}

}  // namespace gp::graph::onnx_import
