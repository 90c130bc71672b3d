// Pattern fusion on the raw model, and the rewrites of nodes into ones graphpipe runs: CastLike
// (opset 15) into Cast to the type it is like, which shape inference knows; IsNaN into
// Not(Equal(x, x)) and IsInf into Equal(Abs(x), inf); DepthToSpace and SpaceToDepth into Reshape,
// Transpose, Reshape (sequences, DFT and STFT are expanded by the lowering). Torch 1.13 exports GELU
// as x*0.5*(1+erf(x/sqrt2)) (its tanh approximation as 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))))
// and, below opset 17, LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add; a linear
// layer on a rank >= 3 input as MatMul(x, Transpose(W)) + bias. Executors and the cost model want
// one operator for each, so the chains are replaced here, before anything else looks at the node
// types. A Relu after a BatchNormalization is fused into it (BatchNormAttrs::relu); a residual
// block's tail, BatchNormalization -> Add -> Relu, and what only feeds a MatMul (a Transpose of an
// operand, a constant scale) are fused after lowering, where every shape is known
// (onnx_import_fuse_graph.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <unordered_map>

#include "graph/onnx_import_raw.h"
#include "graph/ops/common.h"
#include "graph/ops/infer.h"

namespace gp::graph::onnx_import {
namespace {

class Matcher {
 public:
  explicit Matcher(RawModel const& m) : model_(m) {
    for (std::size_t i = 0; i < m.nodes.size(); ++i) {
      for (auto const& o : m.nodes[i].outputs) producer_[o] = static_cast<int>(i);
      for (auto const& in : m.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(static_cast<int>(i));
    }
    for (auto const& o : m.outputs) graph_outputs_.insert(o.name);
    // What a body (an If's branch, a Loop's or Scan's) reads stays as it is, as a graph output does:
    // no pattern fuses it away.
    for (RawNode const* n : all_nodes(m))
      for (auto const& b : n->bodies)
        for (auto const& sub : b.nodes) graph_outputs_.insert(sub.inputs.begin(), sub.inputs.end());
    for (auto const& init : m.initializers) initializers_[init.name] = &init;
  }

  RawNode const* producer(std::string const& name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? nullptr : &model_.nodes[static_cast<std::size_t>(it->second)];
  }
  int producer_index(std::string const& name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? -1 : it->second;
  }
  std::vector<int> const& consumers(std::string const& name) const {
    static std::vector<int> const none;
    auto it = consumers_.find(name);
    return it == consumers_.end() ? none : it->second;
  }
  // The only consumer of `name` (which is no graph output), or null.
  RawNode const* sole_consumer(std::string const& name, std::string const& type) const {
    auto const& c = consumers(name);
    if (c.size() != 1 || graph_outputs_.count(name)) return nullptr;
    RawNode const& n = model_.nodes[static_cast<std::size_t>(c[0])];
    return n.type == type && n.domain.empty() ? &n : nullptr;
  }
  bool internal(std::string const& name) const { return !graph_outputs_.count(name); }
  bool is_initializer(std::string const& name) const { return initializers_.count(name) > 0; }
  RawInitializer const* initializer(std::string const& name) const {
    auto it = initializers_.find(name);
    return it == initializers_.end() ? nullptr : it->second;
  }
  // The dims ONNX shape inference gave `name` (-1 where one is not a number), or nothing when it
  // gave none.
  std::optional<std::vector<int64_t>> dims(std::string const& name) const {
    if (RawInitializer const* init = initializer(name)) return init->dims;
    RawValueInfo const* info = nullptr;
    if (auto it = model_.value_info.find(name); it != model_.value_info.end() && it->second.has_shape)
      info = &it->second;
    for (auto const& v : model_.inputs)
      if (!info && v.name == name && v.has_shape) info = &v;
    if (!info) return std::nullopt;
    std::vector<int64_t> out;
    for (RawDim const& d : info->dims) out.push_back(d.value);
    return out;
  }
  // The rank ONNX shape inference gave `name`, or -1 when it gave none.
  int rank(std::string const& name) const {
    auto const d = dims(name);
    return d ? static_cast<int>(d->size()) : -1;
  }
  // A tensor name no node, initializer or graph input uses yet, from `base`.
  std::string fresh_name(std::string const& base) const {
    std::string name = base;
    for (int k = 1; used(name); ++k) name = base + "_" + std::to_string(k);
    claimed_.insert(name);
    return name;
  }

  // The data of a constant tensor: an initializer's (when read) or a Constant node's `value`.
  TensorData const* constant_data(std::string const& name) const {
    if (auto it = initializers_.find(name); it != initializers_.end()) return it->second->data.get();
    if (RawNode const* p = producer(name); p && p->type == "Constant")
      if (auto a = p->attrs.find("value"); a != p->attrs.end()) return std::get_if<TensorData>(&a->second);
    return nullptr;
  }

  // A scalar constant (Constant node or initializer with data).
  std::optional<double> scalar(std::string const& name) const {
    TensorData const* data = constant_data(name);
    if (RawNode const* p = producer(name); !data && p && p->type == "Constant" && !initializers_.count(name))
      if (auto f = p->attrs.find("value_float"); f != p->attrs.end()) return std::get<double>(f->second);
    if (!data || data->numel() != 1) return std::nullopt;
    if (data->dtype == DType::kFloat16 || data->dtype == DType::kBFloat16) return std::nullopt;
    return data->to_doubles()[0];
  }

  // An integer constant vector (Constant node or initializer with data).
  std::optional<std::vector<int64_t>> ints(std::string const& name) const {
    TensorData const* data = constant_data(name);
    if (!data || data->dtype != DType::kInt64) return std::nullopt;
    return data->to_int64s();
  }

  // The input of binary `n` other than `name`, or "" when `name` is not one of its inputs.
  static std::string other_input(RawNode const& n, std::string const& name) {
    if (n.inputs.size() != 2) return {};
    if (n.inputs[0] == name) return n.inputs[1];
    if (n.inputs[1] == name) return n.inputs[0];
    return {};
  }

  // Node index of `n` (a pointer into the model).
  int index_of(RawNode const* n) const { return static_cast<int>(n - model_.nodes.data()); }

 private:
  RawModel const& model_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<int>> consumers_;
  std::set<std::string> graph_outputs_;
  std::unordered_map<std::string, RawInitializer const*> initializers_;
  mutable std::set<std::string> claimed_;  // names fresh_name handed out

  bool used(std::string const& name) const {
    if (producer_.count(name) || consumers_.count(name) || initializers_.count(name) || claimed_.count(name))
      return true;
    return std::any_of(model_.inputs.begin(), model_.inputs.end(), [&](auto const& v) { return v.name == name; });
  }
};

bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) < 1e-4 * std::abs(want); }

std::string fused_name(std::string const& anchor, std::string const& from, std::string const& to) {
  if (anchor.empty()) return {};  // the lowering names unnamed nodes
  auto pos = anchor.rfind(from);
  if (pos != std::string::npos) return anchor.substr(0, pos) + to + anchor.substr(pos + from.size());
  return anchor + "_" + to;
}

struct Replacement {
  std::vector<int> removed;  // node indices
  int anchor = -1;           // index where the fused node goes (the chain's last node)
  RawNode fused;
  std::vector<RawNode> before, after;  // nodes the fused one needs, placed right before / after it
};

// The tail both GELU forms share, from `plus` = Add(1, f): Mul(x, plus) -> Mul(0.5), or
// Mul(Mul(x, 0.5), plus). Adds its nodes to r.removed and returns the output's name.
std::optional<std::string> match_gelu_tail(Matcher const& m, std::string const& x, RawNode const& plus,
                                           Replacement& r) {
  RawNode const* mul1 = m.sole_consumer(plus.outputs[0], "Mul");
  if (!mul1) return std::nullopt;
  std::string const other = Matcher::other_input(*mul1, plus.outputs[0]);
  if (other == x) {
    RawNode const* mul2 = m.sole_consumer(mul1->outputs[0], "Mul");
    if (!mul2 || !near(m.scalar(Matcher::other_input(*mul2, mul1->outputs[0])), 0.5)) return std::nullopt;
    r.removed.insert(r.removed.end(), {m.index_of(&plus), m.index_of(mul1), m.index_of(mul2)});
    return mul2->outputs[0];
  }
  RawNode const* half = m.producer(other);
  if (!half || half->type != "Mul" || !m.sole_consumer(other, "Mul")) return std::nullopt;
  std::string const hx = Matcher::other_input(*half, x);
  if (hx.empty() || !near(m.scalar(hx), 0.5)) return std::nullopt;
  r.removed.insert(r.removed.end(), {m.index_of(&plus), m.index_of(mul1), m.index_of(half)});
  return mul1->outputs[0];
}

// Erf GELU: Div(x, sqrt2) | Mul(x, 1/sqrt2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), or with the
// 0.5 applied to x first: Mul(x, 0.5) -> Mul(., 1+erf).
std::optional<Replacement> match_gelu(Matcher const& m, RawNode const& erf) {
  if (erf.inputs.size() != 1 || erf.outputs.size() != 1) return std::nullopt;
  RawNode const* scale = m.producer(erf.inputs[0]);
  if (!scale || !m.sole_consumer(scale->outputs[0], "Erf") || scale->inputs.size() != 2) return std::nullopt;
  std::string x = scale->inputs[0];
  if (scale->type == "Div") {
    if (!near(m.scalar(scale->inputs[1]), std::sqrt(2.0))) return std::nullopt;
  } else if (scale->type == "Mul") {
    if (near(m.scalar(scale->inputs[1]), 1 / std::sqrt(2.0)))
      x = scale->inputs[0];
    else if (near(m.scalar(scale->inputs[0]), 1 / std::sqrt(2.0)))
      x = scale->inputs[1];
    else
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  RawNode const* add = m.sole_consumer(erf.outputs[0], "Add");
  if (!add || !near(m.scalar(Matcher::other_input(*add, erf.outputs[0])), 1.0)) return std::nullopt;
  Replacement r;
  r.removed = {m.index_of(scale), m.index_of(&erf)};
  std::optional<std::string> const out = match_gelu_tail(m, x, *add, r);
  if (!out) return std::nullopt;
  r.anchor = *std::max_element(r.removed.begin(), r.removed.end());
  r.fused.type = "Gelu";
  r.fused.name = fused_name(erf.name, "Erf", "Gelu");
  r.fused.inputs = {x};
  r.fused.outputs = {*out};
  return r;
}

// The value `name` is x³: Mul(x, Mul(x, x)) with either operand order, or Pow(x, 3), used only
// here. Adds the nodes that compute it to `nodes`.
bool match_cube(Matcher const& m, std::string const& name, std::string const& x, std::vector<int>& nodes) {
  RawNode const* p = m.producer(name);
  if (!p || !p->domain.empty() || p->inputs.size() != 2 || m.consumers(name).size() != 1 || !m.internal(name))
    return false;
  if (p->type == "Pow") {
    if (p->inputs[0] != x || !near(m.scalar(p->inputs[1]), 3.0)) return false;
    nodes.push_back(m.index_of(p));
    return true;
  }
  if (p->type != "Mul") return false;
  std::string const sq = Matcher::other_input(*p, x);
  RawNode const* q = sq.empty() || sq == x ? nullptr : m.producer(sq);
  if (!q || q->type != "Mul" || !q->domain.empty() || q->inputs.size() != 2 || q->inputs[0] != x || q->inputs[1] != x ||
      m.consumers(sq).size() != 1 || !m.internal(sq))
    return false;
  nodes.insert(nodes.end(), {m.index_of(p), m.index_of(q)});
  return true;
}

// The scalar operand of Mul `n` when it is near `c`: the other operand's name, else "".
std::string times_constant(Matcher const& m, RawNode const& n, double c) {
  if (n.type != "Mul" || n.inputs.size() != 2) return {};
  if (near(m.scalar(n.inputs[0]), c)) return n.inputs[1];
  if (near(m.scalar(n.inputs[1]), c)) return n.inputs[0];
  return {};
}

// tanh GELU, anchored at the Tanh (torch 1.13 exports nn.GELU(approximate='tanh') this way):
// x³ -> Mul(0.044715) -> Add(x) -> Mul(√(2/π)) -> Tanh -> Add(1), then the shared tail.
std::optional<Replacement> match_tanh_gelu(Matcher const& m, RawNode const& tanh) {
  if (tanh.inputs.size() != 1 || tanh.outputs.size() != 1) return std::nullopt;
  RawNode const* scale = m.producer(tanh.inputs[0]);
  if (!scale || m.sole_consumer(scale->outputs[0], "Tanh") != &tanh) return std::nullopt;
  std::string const inner = times_constant(m, *scale, std::sqrt(2.0 / std::numbers::pi));
  RawNode const* add = inner.empty() ? nullptr : m.producer(inner);
  if (!add || add->type != "Add" || add->inputs.size() != 2 || m.sole_consumer(inner, "Mul") != scale)
    return std::nullopt;
  for (std::size_t i = 0; i < 2; ++i) {
    std::string const& x = add->inputs[i];
    std::string const& cubic = add->inputs[1 - i];
    RawNode const* coef = m.producer(cubic);
    if (!coef || m.sole_consumer(cubic, "Add") != add) continue;
    std::string const cube = times_constant(m, *coef, 0.044715);
    Replacement r;
    if (cube.empty() || !match_cube(m, cube, x, r.removed)) continue;
    RawNode const* plus = m.sole_consumer(tanh.outputs[0], "Add");
    if (!plus || !near(m.scalar(Matcher::other_input(*plus, tanh.outputs[0])), 1.0)) return std::nullopt;
    r.removed.insert(r.removed.end(), {m.index_of(coef), m.index_of(add), m.index_of(scale), m.index_of(&tanh)});
    std::optional<std::string> const out = match_gelu_tail(m, x, *plus, r);
    if (!out) return std::nullopt;
    r.anchor = *std::max_element(r.removed.begin(), r.removed.end());
    r.fused.type = "Gelu";
    r.fused.name = fused_name(tanh.name, "Tanh", "Gelu");
    r.fused.inputs = {x};
    r.fused.outputs = {*out};
    r.fused.attrs["approximate"] = AttrValue{std::string("tanh")};
    return r;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> ints_attr(RawNode const& n, std::string const& key) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return std::nullopt;
  if (auto v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return std::nullopt;
}

int64_t int_attr(RawNode const& n, std::string const& key, int64_t dflt) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return dflt;
  if (auto v = std::get_if<int64_t>(&it->second)) return *v;
  return dflt;
}

// Decomposed LayerNorm (torch, opset < 17), anchored at the first ReduceMean.
std::optional<Replacement> match_layernorm(Matcher const& m, RawModel const& model, RawNode const& mean) {
  if (mean.inputs.size() != 1 || int_attr(mean, "keepdims", 1) != 1) return std::nullopt;
  auto axes = ints_attr(mean, "axes");
  if (!axes || axes->empty()) return std::nullopt;
  std::string const& x = mean.inputs[0];
  // The normalised axes must be the trailing ones; negative axes say so without knowing the rank.
  std::vector<int64_t> a = *axes;
  if (a[0] >= 0) {
    auto vi = model.value_info.find(x);
    int64_t rank = -1;
    if (vi != model.value_info.end() && vi->second.has_shape) rank = static_cast<int64_t>(vi->second.dims.size());
    for (auto const& in : model.inputs)
      if (in.name == x && in.has_shape) rank = static_cast<int64_t>(in.dims.size());
    if (rank < 0) return std::nullopt;
    for (int64_t& v : a) v = v < 0 ? v : v - rank;
  }
  std::sort(a.begin(), a.end());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != -static_cast<int64_t>(a.size()) + static_cast<int64_t>(i)) return std::nullopt;

  RawNode const* sub = m.sole_consumer(mean.outputs[0], "Sub");
  if (!sub || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) return std::nullopt;
  auto const& dcons = m.consumers(sub->outputs[0]);
  if (dcons.size() != 2 || !m.internal(sub->outputs[0])) return std::nullopt;
  RawNode const* pow = nullptr;
  RawNode const* div = nullptr;
  for (int c : dcons) {
    RawNode const& n = model.nodes[static_cast<std::size_t>(c)];
    if (n.type == "Pow" && n.inputs[0] == sub->outputs[0]) pow = &n;
    if (n.type == "Div" && n.inputs[0] == sub->outputs[0]) div = &n;
  }
  if (!pow || !div || !near(m.scalar(pow->inputs[1]), 2.0)) return std::nullopt;
  RawNode const* var = m.sole_consumer(pow->outputs[0], "ReduceMean");
  if (!var || ints_attr(*var, "axes") != axes || int_attr(*var, "keepdims", 1) != 1) return std::nullopt;
  RawNode const* add_eps = m.sole_consumer(var->outputs[0], "Add");
  if (!add_eps) return std::nullopt;
  auto eps = m.scalar(Matcher::other_input(*add_eps, var->outputs[0]));
  if (!eps) return std::nullopt;
  RawNode const* sqrt = m.sole_consumer(add_eps->outputs[0], "Sqrt");
  if (!sqrt || m.sole_consumer(sqrt->outputs[0], "Div") != div || div->inputs[1] != sqrt->outputs[0])
    return std::nullopt;
  RawNode const* mul = m.sole_consumer(div->outputs[0], "Mul");
  if (!mul) return std::nullopt;
  std::string const scale = Matcher::other_input(*mul, div->outputs[0]);
  if (!m.is_initializer(scale)) return std::nullopt;
  Replacement r;
  r.removed = {m.index_of(&mean),   m.index_of(sub),  m.index_of(pow), m.index_of(var),
               m.index_of(add_eps), m.index_of(sqrt), m.index_of(div), m.index_of(mul)};
  r.fused.inputs = {x, scale};
  std::string out = mul->outputs[0];
  if (RawNode const* add = m.sole_consumer(out, "Add")) {
    std::string const bias = Matcher::other_input(*add, out);
    if (m.is_initializer(bias)) {
      r.removed.push_back(m.index_of(add));
      r.fused.inputs.push_back(bias);
      out = add->outputs[0];
    }
  }
  r.anchor = *std::max_element(r.removed.begin(), r.removed.end());
  r.fused.type = "LayerNormalization";
  r.fused.name = fused_name(mean.name, "ReduceMean", "LayerNormalization");
  r.fused.outputs = {out};
  r.fused.attrs["axis"] = AttrValue{a.front()};
  r.fused.attrs["epsilon"] = AttrValue{*eps};
  return r;
}

// Zero Pad -> AveragePool (torch's AvgPool2d with count_include_pad, e.g. Inception-v3): one
// AveragePool with the pads and count_include_pad=1.
std::optional<Replacement> match_pad_pool(Matcher const& m, RawNode const& pad) {
  if (pad.inputs.empty() || pad.outputs.size() != 1) return std::nullopt;
  auto mode = pad.attrs.find("mode");
  if (mode != pad.attrs.end() && std::get_if<std::string>(&mode->second) &&
      std::get<std::string>(mode->second) != "constant")
    return std::nullopt;
  std::optional<std::vector<int64_t>> pads = ints_attr(pad, "pads");
  if (!pads && pad.inputs.size() > 1) pads = m.ints(pad.inputs[1]);
  if (!pads || pads->size() % 2) return std::nullopt;
  if (pad.inputs.size() > 2 && !pad.inputs[2].empty() && m.scalar(pad.inputs[2]) != std::optional<double>(0.0))
    return std::nullopt;
  if (auto v = pad.attrs.find("value"); v != pad.attrs.end() && std::get<double>(v->second) != 0.0) return std::nullopt;
  std::size_t const rank = pads->size() / 2;
  if (rank < 3 || (*pads)[0] || (*pads)[1] || (*pads)[rank] || (*pads)[rank + 1]) return std::nullopt;
  RawNode const* pool = m.sole_consumer(pad.outputs[0], "AveragePool");
  if (!pool || pool->inputs[0] != pad.outputs[0]) return std::nullopt;
  auto ap = pool->attrs.find("auto_pad");
  if (ap != pool->attrs.end() && std::get<std::string>(ap->second) != "NOTSET") return std::nullopt;
  std::size_t const sp = rank - 2;
  std::vector<int64_t> merged = ints_attr(*pool, "pads").value_or(std::vector<int64_t>(2 * sp, 0));
  bool const had_pads = std::any_of(merged.begin(), merged.end(), [](int64_t p) { return p != 0; });
  if (merged.size() != 2 * sp || (had_pads && int_attr(*pool, "count_include_pad", 0) == 0)) return std::nullopt;
  for (std::size_t i = 0; i < sp; ++i) {
    merged[i] += (*pads)[2 + i];
    merged[sp + i] += (*pads)[rank + 2 + i];
  }
  Replacement r;
  r.removed = {m.index_of(&pad), m.index_of(pool)};
  r.anchor = m.index_of(pool);
  r.fused = *pool;
  r.fused.inputs[0] = pad.inputs[0];
  r.fused.attrs["pads"] = AttrValue{merged};
  r.fused.attrs["count_include_pad"] = AttrValue{int64_t{1}};
  return r;
}

RawNode constant_node(std::string name, std::vector<int64_t> const& values) {
  RawNode c;
  c.type = "Constant";
  c.outputs = {name};
  c.name = std::move(name);
  c.attrs["value"] = AttrValue{TensorData::from_int64s({static_cast<int64_t>(values.size())}, values)};
  return c;
}

// A linear layer as torch exports it for inputs of rank >= 2: MatMul(x, Transpose(W)) (or a
// MatMul by a 2-D weight W), then Add(bias) with a 1-D bias of the output width. It becomes one
// Gemm over the rows of x flattened to 2-D (transB for the transposed weight, the bias as C), with
// Reshapes around it for rank > 2, as ONNX Runtime's MatMulAddFusion does. The weight's
// transpose and the bias addition were two kernels per call on every backend; Gemm's kernels fuse
// both (cuBLASLt reads W transposed and adds the bias in its epilogue; oneDNN likewise), and
// under mixed precision the bias is added before the product is rounded to 16 bits, as in
// PyTorch's autocast Linear. Placed where the chain's last node was.
std::optional<Replacement> match_linear(Matcher const& m, RawModel const& model, RawNode const& mm) {
  if (mm.inputs.size() != 2 || mm.outputs.size() != 1) return std::nullopt;
  std::string const& x = mm.inputs[0];
  int const x_rank = m.rank(x);
  if (x_rank < 2 || (x_rank > 2 && model.opset < 10)) return std::nullopt;  // Slice's inputs are opset 10
  Replacement r;
  r.removed = {m.index_of(&mm)};
  // The weight: a 2-D float32 initializer, or the only use of a 2-D Transpose of one.
  std::string weight = mm.inputs[1];
  bool trans_b = false;
  if (RawNode const* t = m.producer(weight); t && t->type == "Transpose" && t->domain.empty()) {
    auto perm = ints_attr(*t, "perm");
    if (t->inputs.size() != 1 || (perm && *perm != std::vector<int64_t>{1, 0}) || m.consumers(weight).size() != 1 ||
        !m.internal(weight))
      return std::nullopt;
    weight = t->inputs[0];
    trans_b = true;
    r.removed.push_back(m.index_of(t));
  }
  RawInitializer const* w = m.initializer(weight);
  if (!w || w->dims.size() != 2 || w->dtype != DType::kFloat32) return std::nullopt;
  int64_t const k = trans_b ? w->dims[1] : w->dims[0];
  int64_t const n = trans_b ? w->dims[0] : w->dims[1];
  // The bias: Add(y, b) or Add(b, y) with b a 1-D initializer of width n and the weight's dtype.
  std::string bias, out = mm.outputs[0];
  if (RawNode const* add = m.sole_consumer(out, "Add")) {
    std::string const other = Matcher::other_input(*add, out);
    RawInitializer const* b = m.initializer(other);
    if (b && other != out && b->dims == std::vector<int64_t>{n} && b->dtype == w->dtype && add->outputs.size() == 1) {
      bias = other;
      out = add->outputs[0];
      r.removed.push_back(m.index_of(add));
    }
  }
  if (!trans_b && bias.empty()) return std::nullopt;  // nothing to fuse: MatMul by a weight is one kernel already
  r.anchor = *std::max_element(r.removed.begin(), r.removed.end());
  r.fused.type = "Gemm";
  r.fused.name = fused_name(mm.name, "MatMul", "Gemm");
  if (trans_b) r.fused.attrs["transB"] = AttrValue{int64_t{1}};
  r.fused.inputs = {x, weight};
  if (!bias.empty()) r.fused.inputs.push_back(bias);
  r.fused.outputs = {out};
  if (x_rank == 2) return r;
  // Rank > 2: rows = Reshape(x, [-1, k]); out = Reshape(Gemm(rows), Concat(Shape(x)[:-1], [n])).
  std::string const base = r.fused.name.empty() ? m.fresh_name("linear") : r.fused.name;
  auto node = [&](std::string const& type, std::string const& suffix, std::vector<std::string> inputs) {
    RawNode nd;
    nd.type = type;
    nd.name = m.fresh_name(base + "/" + suffix);
    nd.inputs = std::move(inputs);
    nd.outputs = {nd.name};
    return nd;
  };
  r.before.push_back(constant_node(m.fresh_name(base + "/rows_shape"), {-1, k}));
  r.before.push_back(node("Reshape", "rows", {x, r.before.back().outputs[0]}));
  r.fused.inputs[0] = r.before.back().outputs[0];
  r.before.push_back(node("Shape", "x_shape", {x}));
  std::string const x_shape = r.before.back().outputs[0];
  r.before.push_back(constant_node(m.fresh_name(base + "/lead_start"), {0}));
  r.before.push_back(constant_node(m.fresh_name(base + "/lead_end"), {-1}));
  r.before.push_back(node("Slice", "lead", {x_shape, r.before[3].outputs[0], r.before[4].outputs[0]}));
  r.before.push_back(constant_node(m.fresh_name(base + "/width"), {n}));
  r.before.push_back(node("Concat", "out_shape", {r.before[5].outputs[0], r.before[6].outputs[0]}));
  r.before.back().attrs["axis"] = AttrValue{int64_t{0}};
  std::string const rows_out = m.fresh_name(base + "/rows_out");
  r.fused.outputs = {rows_out};
  RawNode unflatten = node("Reshape", "unflatten", {rows_out, r.before.back().outputs[0]});
  unflatten.outputs = {out};
  r.after.push_back(std::move(unflatten));
  return r;
}

// BatchNormalization whose Y only a Relu reads: one BatchNormalization with the Relu fused
// (BatchNormAttrs::relu), writing the Relu's output. The CUDA backend's own BatchNorm kernels clip
// in their elementwise pass instead of a pass of its own, and backward masks dy by the output's sign
// (the CPU runs the same oneDNN passes as the ops apart). Placed where the BatchNormalization was, so its other
// outputs (the running statistics) are still produced before their readers.
std::optional<Replacement> match_batchnorm_relu(Matcher const& m, RawNode const& bn) {
  if (bn.outputs.empty() || bn.outputs[0].empty() || bn.attrs.count(kBatchNormReluAttr)) return std::nullopt;
  RawNode const* relu = m.sole_consumer(bn.outputs[0], "Relu");
  if (!relu || relu->inputs.size() != 1 || relu->outputs.size() != 1 || relu->outputs[0].empty()) return std::nullopt;
  Replacement r;
  r.removed = {m.index_of(&bn), m.index_of(relu)};
  r.anchor = m.index_of(&bn);
  r.fused = bn;
  r.fused.outputs[0] = relu->outputs[0];
  r.fused.attrs[kBatchNormReluAttr] = AttrValue{int64_t{1}};
  return r;
}

// The dtype of every tensor whose type the file or shape inference states: initializers, graph
// inputs and outputs, value_info.
std::unordered_map<std::string, DType> known_dtypes(RawModel const& model) {
  std::unordered_map<std::string, DType> dtype;
  for (auto const& init : model.initializers) dtype[init.name] = init.dtype;
  for (auto const* list : {&model.inputs, &model.outputs})
    for (auto const& v : *list) dtype[v.name] = v.dtype;
  for (auto const& [name, v] : model.value_info) dtype[name] = v.dtype;
  return dtype;
}

// Fresh names for the nodes and tensors a rewrite adds: none that a node, a node's output, an
// initializer or a graph input of `model` uses, nor one handed out before.
class FreshNames {
 public:
  explicit FreshNames(RawModel const& model) {
    for (RawNode const* n : all_nodes(model)) {  // bodies' names too
      used_.insert(n->name);
      for (auto const& o : n->outputs) used_.insert(o);
      for (auto const& b : n->bodies) used_.insert(b.inputs.begin(), b.inputs.end());
    }
    for (auto const& init : model.initializers) used_.insert(init.name);
    for (auto const& v : model.inputs) used_.insert(v.name);
  }
  std::string operator()(std::string const& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

// A Constant node holding `values` as a 1-D int64 tensor (a shape, sizes, axes), named from `base`.
RawNode int64s_constant(FreshNames& fresh, std::string const& base, std::vector<int64_t> const& values) {
  RawNode c;
  c.type = "Constant";
  c.name = fresh(base);
  c.outputs = {fresh(base + "_value")};
  c.attrs["value"] = TensorData::from_int64s({static_cast<int64_t>(values.size())}, values);
  return c;
}

// The same for float32 values of shape `dims` ({} for a scalar).
RawNode floats_constant(FreshNames& fresh, std::string const& base, std::vector<int64_t> dims,
                        std::vector<float> const& values) {
  RawNode c;
  c.type = "Constant";
  c.name = fresh(base);
  c.outputs = {fresh(base + "_value")};
  c.attrs["value"] = TensorData::from_floats(std::move(dims), values);
  return c;
}

}  // namespace

void fuse_patterns(RawModel& model, FuseOptions const& options) {
  std::vector<Replacement> reps;
  {
    Matcher m(model);
    std::set<int> taken;
    auto accept = [&](std::optional<Replacement> r) {
      if (!r) return;
      for (int i : r->removed)
        if (taken.count(i)) return;
      taken.insert(r->removed.begin(), r->removed.end());
      reps.push_back(std::move(*r));
    };
    for (auto const& n : model.nodes) {
      if (!n.domain.empty()) continue;
      if (n.type == "Erf")
        accept(match_gelu(m, n));
      else if (n.type == "Tanh")
        accept(match_tanh_gelu(m, n));
      else if (n.type == "Pad")
        accept(match_pad_pool(m, n));
      else if (n.type == "MatMul")
        accept(match_linear(m, model, n));
      else if (n.type == "ReduceMean" && model.opset < 18)
        accept(match_layernorm(m, model, n));
      else if (n.type == "BatchNormalization" && options.batchnorm_relu)
        accept(match_batchnorm_relu(m, n));
    }
  }
  if (reps.empty()) return;
  std::vector<bool> removed(model.nodes.size(), false);
  std::unordered_map<int, Replacement*> at_anchor;
  for (auto& r : reps) {
    for (int i : r.removed) removed[static_cast<std::size_t>(i)] = true;
    at_anchor[r.anchor] = &r;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < model.nodes.size(); ++i)
    if (!removed[i]) names.insert(model.nodes[i].name);
  std::vector<RawNode> nodes;
  nodes.reserve(model.nodes.size());
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    if (!removed[i]) {
      nodes.push_back(std::move(model.nodes[i]));
    } else if (auto it = at_anchor.find(static_cast<int>(i)); it != at_anchor.end()) {
      Replacement& r = *it->second;
      auto place = [&](RawNode n) {
        std::string const base = n.name;
        for (int k = 1; !base.empty() && names.count(n.name); ++k) n.name = base + "_" + std::to_string(k);
        names.insert(n.name);
        nodes.push_back(std::move(n));
      };
      for (RawNode& n : r.before) place(std::move(n));
      place(std::move(r.fused));
      for (RawNode& n : r.after) place(std::move(n));
    }
  }
  model.nodes = std::move(nodes);
}

namespace {

// Calls `rewrite` on a node list, then on every body of its (rewritten) nodes, nested ones too: the
// rewrites reach the nodes of If branches and Loop and Scan bodies as well as the graph's.
template <class Rewrite>
Status for_each_node_list(std::vector<RawNode>& nodes, Rewrite const& rewrite) {
  RETURN_IF_ERROR(rewrite(nodes));
  for (auto& n : nodes)
    for (auto& b : n.bodies) RETURN_IF_ERROR(for_each_node_list(b.nodes, rewrite));
  return Status::ok();
}

}  // namespace

void rewrite_cast_like(RawModel& model) {
  auto const dtype = known_dtypes(model);
  (void)for_each_node_list(model.nodes, [&](std::vector<RawNode>& list) {
    for (auto& n : list) {
      if (n.type != "CastLike" || !n.domain.empty() || n.inputs.size() != 2) continue;
      auto const it = dtype.find(n.inputs[1]);
      if (it == dtype.end()) continue;  // left for the unsupported-operator message
      n.type = "Cast";
      n.inputs.resize(1);
      n.attrs.erase("saturate");
      n.attrs["to"] = AttrValue{ops::onnx_of_dtype(it->second)};
    }
    return Status::ok();
  });
}

void rewrite_is_nan(RawModel& model) {
  FreshNames fresh(model);
  (void)for_each_node_list(model.nodes, [&](std::vector<RawNode>& list) {
    std::vector<RawNode> nodes;
    nodes.reserve(list.size());
    for (auto& n : list) {
      if (n.type != "IsNaN" || !n.domain.empty() || n.inputs.size() != 1 || n.outputs.size() != 1) {
        nodes.push_back(std::move(n));
        continue;
      }
      RawNode eq;
      eq.type = "Equal";
      eq.name = fresh(n.name + "/self_equal");
      eq.inputs = {n.inputs[0], n.inputs[0]};
      eq.outputs = {fresh(eq.name + "_output")};
      n.type = "Not";
      n.inputs = {eq.outputs[0]};
      n.attrs.clear();
      nodes.push_back(std::move(eq));
      nodes.push_back(std::move(n));
    }
    list = std::move(nodes);
    return Status::ok();
  });
}

namespace {

// IsInf as an Equal (of |x| for both signs) with the infinity it detects, in one node list.
void rewrite_is_inf_list(std::vector<RawNode>& list, std::unordered_map<std::string, DType> const& dtype,
                         FreshNames& fresh) {
  std::vector<RawNode> nodes;
  nodes.reserve(list.size());
  for (auto& n : list) {
    auto const t = n.type == "IsInf" && n.domain.empty() && n.inputs.size() == 1 && n.outputs.size() == 1
                       ? dtype.find(n.inputs[0])
                       : dtype.end();
    if (t == dtype.end() || (t->second != DType::kFloat32 && t->second != DType::kFloat64)) {
      nodes.push_back(std::move(n));  // left for the unsupported-operator message
      continue;
    }
    auto flag = [&](char const* key) {
      auto it = n.attrs.find(key);
      int64_t const* v = it == n.attrs.end() ? nullptr : std::get_if<int64_t>(&it->second);
      return !v || *v != 0;
    };
    bool const pos = flag("detect_positive"), neg = flag("detect_negative");
    // Both signs: |x| == inf; one: x == that infinity; neither: x == NaN, false everywhere.
    double const inf = std::numeric_limits<double>::infinity();
    double const target = pos ? inf : neg ? -inf : std::numeric_limits<double>::quiet_NaN();
    RawNode value;
    value.type = "Constant";
    value.name = fresh(n.name + "/infinity");
    value.outputs = {fresh(n.name + "/infinity_value")};
    TensorData d;
    d.dtype = t->second;
    if (d.dtype == DType::kFloat32) {
      auto const f = static_cast<float>(target);
      d.bytes.resize(sizeof f);
      std::memcpy(d.bytes.data(), &f, sizeof f);
    } else {
      d.bytes.resize(sizeof target);
      std::memcpy(d.bytes.data(), &target, sizeof target);
    }
    value.attrs["value"] = std::move(d);
    std::string operand = n.inputs[0];
    if (pos && neg) {
      RawNode abs;
      abs.type = "Abs";
      abs.name = fresh(n.name + "/abs");
      abs.inputs = {n.inputs[0]};
      abs.outputs = {fresh(n.name + "/abs_output")};
      operand = abs.outputs[0];
      nodes.push_back(std::move(abs));
    }
    n.type = "Equal";
    n.inputs = {operand, value.outputs[0]};
    n.attrs.clear();
    nodes.push_back(std::move(value));
    nodes.push_back(std::move(n));
  }
  list = std::move(nodes);
}

}  // namespace

void rewrite_is_inf(RawModel& model) {
  auto const dtype = known_dtypes(model);
  FreshNames fresh(model);
  (void)for_each_node_list(model.nodes, [&](std::vector<RawNode>& list) {
    rewrite_is_inf_list(list, dtype, fresh);
    return Status::ok();
  });
}

namespace {

// DepthToSpace and SpaceToDepth of one node list.
Status rewrite_depth_space_list(std::vector<RawNode>& list, Matcher const& m, FreshNames& fresh) {
  struct Plan {
    std::vector<int64_t> split, perm, merged;  // the first Reshape's shape, the Transpose, the last shape
  };
  std::map<int, Plan> plans;
  {
    for (std::size_t i = 0; i < list.size(); ++i) {
      RawNode const& n = list[i];
      bool const to_space = n.type == "DepthToSpace";
      if ((!to_space && n.type != "SpaceToDepth") || !n.domain.empty()) continue;
      std::string const where = n.type + " '" + n.name + "'";
      if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.inputs[0].empty())
        return invalid_argument(where + " needs one input and one output");
      auto a = n.attrs.find("blocksize");
      int64_t const* bp = a == n.attrs.end() ? nullptr : std::get_if<int64_t>(&a->second);
      if (!bp || *bp < 1 || *bp > 1024)
        return invalid_argument(where + ": blocksize " + (bp ? std::to_string(*bp) : std::string("missing")) +
                                " (it must be between 1 and 1024)");
      int64_t const b = *bp;
      std::string mode = "DCR";
      if (auto md = n.attrs.find("mode"); md != n.attrs.end())
        if (auto const* v = std::get_if<std::string>(&md->second)) mode = *v;
      if (to_space && mode != "DCR" && mode != "CRD")
        return invalid_argument(where + ": mode '" + mode + "' (ONNX defines DCR and CRD)");
      auto const dims = m.dims(n.inputs[0]);
      if (!dims || dims->size() != 4 || (*dims)[1] <= 0 || (*dims)[2] <= 0 || (*dims)[3] <= 0)
        return unsupported(
            where +
            ": graphpipe runs it as a Reshape and a Transpose, which needs its input's "
            "channels, height and width known at import (ONNX shape inference gave " +
            (dims ? "rank " + std::to_string(dims->size()) + " with unknown dims" : std::string("none")) +
            "); re-export with a static image size");
      int64_t const c = (*dims)[1], h = (*dims)[2], w = (*dims)[3];
      Plan p;
      if (to_space) {
        if (c % (b * b) != 0)
          return invalid_argument(where + ": " + std::to_string(c) + " channels do not divide into blocks of " +
                                  std::to_string(b) + "x" + std::to_string(b));
        int64_t const cb = c / (b * b);
        if (mode == "DCR") {
          p.split = {0, b, b, cb, h, w};
          p.perm = {0, 3, 4, 1, 5, 2};
        } else {
          p.split = {0, cb, b, b, h, w};
          p.perm = {0, 1, 4, 2, 5, 3};
        }
        p.merged = {0, cb, h * b, w * b};
      } else {
        if (h % b != 0 || w % b != 0)
          return invalid_argument(where + ": height " + std::to_string(h) + " and width " + std::to_string(w) +
                                  " must both be multiples of the blocksize " + std::to_string(b));
        p.split = {0, c, h / b, b, w / b, b};
        p.perm = {0, 3, 5, 1, 2, 4};
        p.merged = {0, c * b * b, h / b, w / b};
      }
      plans.emplace(static_cast<int>(i), std::move(p));
    }
  }
  if (plans.empty()) return Status::ok();
  std::vector<RawNode> nodes;
  nodes.reserve(list.size() + plans.size() * 4);
  for (std::size_t i = 0; i < list.size(); ++i) {
    RawNode& n = list[i];
    auto it = plans.find(static_cast<int>(i));
    if (it == plans.end()) {
      nodes.push_back(std::move(n));
      continue;
    }
    Plan const& p = it->second;
    RawNode split_shape = int64s_constant(fresh, n.name + "/blocks_shape", p.split);
    RawNode merged_shape = int64s_constant(fresh, n.name + "/merged_shape", p.merged);
    RawNode split;
    split.type = "Reshape";
    split.name = fresh(n.name + "/blocks");
    split.inputs = {n.inputs[0], split_shape.outputs[0]};
    split.outputs = {fresh(n.name + "/blocks_output")};
    RawNode transpose;
    transpose.type = "Transpose";
    transpose.name = fresh(n.name + "/permute");
    transpose.inputs = split.outputs;
    transpose.outputs = {fresh(n.name + "/permute_output")};
    transpose.attrs["perm"] = p.perm;
    n.type = "Reshape";
    n.attrs.clear();
    n.inputs = {transpose.outputs[0], merged_shape.outputs[0]};
    nodes.push_back(std::move(split_shape));
    nodes.push_back(std::move(split));
    nodes.push_back(std::move(transpose));
    nodes.push_back(std::move(merged_shape));
    nodes.push_back(std::move(n));
  }
  list = std::move(nodes);
  return Status::ok();
}

}  // namespace

Status rewrite_depth_space(RawModel& model) {
  Matcher const m(model);
  FreshNames fresh(model);
  return for_each_node_list(model.nodes,
                            [&](std::vector<RawNode>& list) { return rewrite_depth_space_list(list, m, fresh); });
}

bool rewritten_at_import(std::string const& type) {
  static std::set<std::string> const kRewritten = {"CastLike",     "IsNaN",        "IsInf",
                                                   "DepthToSpace", "SpaceToDepth", "GlobalMaxPool",
                                                   "GlobalLpPool", "LpPool",       "Upsample"};
  return kRewritten.count(type) > 0 || expanded_by_lowering(type);
}

namespace {

// GlobalMaxPool, GlobalLpPool, LpPool and Upsample of one node list.
Status rewrite_pooling_list(std::vector<RawNode>& list, Matcher const& m, FreshNames& fresh) {
  std::vector<RawNode> nodes;
  nodes.reserve(list.size());
  // Each helper appends its nodes and returns the value it makes.
  auto scalar = [&](std::string const& base, float v) {
    nodes.push_back(floats_constant(fresh, base, {}, {v}));
    return nodes.back().outputs[0];
  };
  auto add = [&](std::string const& type, std::string const& base, std::vector<std::string> inputs) {
    RawNode a;
    a.type = type;
    a.name = fresh(base);
    a.inputs = std::move(inputs);
    a.outputs = {fresh(base + "_output")};
    nodes.push_back(std::move(a));
    return nodes.back().outputs[0];
  };
  // |x|^p, and the p-th root of `sum` written to `y` (LpPool, GlobalLpPool).
  auto abs_pow = [&](std::string const& base, std::string const& x, int64_t p) {
    return add("Pow", base + "/abs_pow", {add("Abs", base + "/abs", {x}), scalar(base + "/p", static_cast<float>(p))});
  };
  auto root_to = [&](std::string const& base, std::string const& sum, int64_t p, std::string const& y) {
    RawNode root;
    root.type = "Pow";
    root.name = fresh(base + "/root");
    root.inputs = {sum, scalar(base + "/inverse_p", 1.f / static_cast<float>(p))};
    root.outputs = {y};
    nodes.push_back(std::move(root));
  };
  for (auto& n : list) {
    static std::set<std::string> const kRewritten = {"GlobalMaxPool", "GlobalLpPool", "LpPool", "Upsample"};
    if (!n.domain.empty() || !kRewritten.count(n.type)) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::string const where = n.type + " '" + n.name + "'";
    if (n.inputs.empty() || n.inputs[0].empty() || n.outputs.size() != 1)
      return invalid_argument(where + " needs an input and one output");
    if (n.type == "GlobalMaxPool" || n.type == "GlobalLpPool") {
      auto const dims = m.dims(n.inputs[0]);
      if (!dims || dims->size() < 3)
        return unsupported(where + ": graphpipe runs it as a reduction over the spatial axes, which needs its " +
                           "input's rank known at import (at least 3: batch, channels and a spatial axis)");
      std::vector<int64_t> axes;
      for (int64_t a = 2; a < static_cast<int64_t>(dims->size()); ++a) axes.push_back(a);
      bool const lp = n.type == "GlobalLpPool";
      int64_t const p = lp ? ops::attr_int(n.attrs, "p", 2) : 0;
      if (lp) {
        if (p < 1) return invalid_argument(where + ": p = " + std::to_string(p) + " (it must be at least 1)");
        n.inputs = {abs_pow(n.name, n.inputs[0], p)};  // (sum |x|^p)^(1/p) over the spatial axes
      }
      n.type = lp ? "ReduceSum" : "ReduceMax";
      n.attrs.clear();
      n.attrs["axes"] = axes;
      n.attrs["keepdims"] = int64_t{1};
      n.inputs.resize(1);
      std::string const y = n.outputs[0], name = n.name;
      if (lp) n.outputs[0] = fresh(name + "/sum_output");
      std::string const sum = n.outputs[0];
      nodes.push_back(std::move(n));
      if (lp) root_to(name, sum, p, y);
      continue;
    }
    if (n.type == "LpPool") {
      // (sum over the window of |x|^p)^(1/p): the window's average of |x|^p with the pads counted
      // (they add |0|^p = 0), times the window's size, to the power 1/p.
      int64_t const p = ops::attr_int(n.attrs, "p", 2);
      if (p < 1) return invalid_argument(where + ": p = " + std::to_string(p) + " (it must be at least 1)");
      auto const kernel = ops::attr_ints(n.attrs, "kernel_shape");
      if (!kernel || kernel->empty()) return invalid_argument(where + " has no kernel_shape");
      int64_t window = 1;
      for (int64_t k : *kernel) window *= k;
      // ceil_mode's last window may reach past the end pad, where count_include_pad divides by
      // fewer elements than the window's: the end pads are widened to reach as far instead, which
      // keeps the outputs and counts every window whole.
      std::string const auto_pad = ops::attr_string(n.attrs, "auto_pad", "NOTSET");
      if (ops::attr_int(n.attrs, "ceil_mode", 0) != 0 && auto_pad == "NOTSET") {
        std::size_t const sp = kernel->size();
        auto const dims = m.dims(n.inputs[0]);
        if (!dims || dims->size() != sp + 2 ||
            std::any_of(dims->begin() + 2, dims->end(), [](int64_t d) { return d <= 0; }))
          return unsupported(where + ": ceil_mode needs the input's spatial dims known at import");
        auto const strides = ops::attr_ints(n.attrs, "strides").value_or(std::vector<int64_t>(sp, 1));
        auto const dilations = ops::attr_ints(n.attrs, "dilations").value_or(std::vector<int64_t>(sp, 1));
        auto pads = ops::attr_ints(n.attrs, "pads").value_or(std::vector<int64_t>(2 * sp, 0));
        if (strides.size() != sp || dilations.size() != sp || pads.size() != 2 * sp)
          return invalid_argument(where + ": strides, dilations and pads need one value per spatial dim (" +
                                  std::to_string(sp) + ", pads two)");
        for (std::size_t i = 0; i < sp; ++i) {
          int64_t const in = (*dims)[2 + i], k = (*kernel)[i], st = strides[i], d = dilations[i];
          int64_t const out = ops::window_outputs(in, k, st, d, pads[i], pads[sp + i], true);
          if (out <= 0) return invalid_argument(where + ": the window is larger than the padded input");
          pads[sp + i] = std::max(pads[sp + i], ops::window_end_pad(in, k, st, d, pads[i], out));
        }
        n.attrs["pads"] = pads;
        n.attrs["ceil_mode"] = int64_t{0};
      }
      std::string const powered = abs_pow(n.name, n.inputs[0], p);
      std::string const y = n.outputs[0];
      RawNode avg = std::move(n);
      avg.type = "AveragePool";
      avg.attrs.erase("p");
      avg.attrs["count_include_pad"] = int64_t{1};
      avg.inputs = {powered};
      avg.outputs = {fresh(avg.name + "/average_output")};
      std::string const name = avg.name, mean = avg.outputs[0];
      nodes.push_back(std::move(avg));
      root_to(name, add("Mul", name + "/window_sum", {mean, scalar(name + "/window", static_cast<float>(window))}), p,
              y);
      continue;
    }
    // Upsample (opsets 7-9): Resize with opset 10's only coordinate mapping, asymmetric, and
    // nearest's floor; scales an attribute (opset 7) or the second input (opset 9).
    std::string mode = "nearest";
    if (auto md = n.attrs.find("mode"); md != n.attrs.end())
      if (auto const* v = std::get_if<std::string>(&md->second)) mode = *v;
    if (mode != "nearest" && mode != "linear")
      return invalid_argument(where + ": mode '" + mode + "' (ONNX defines nearest and linear)");
    std::string scales;
    if (auto sc = n.attrs.find("scales"); sc != n.attrs.end()) {
      auto const* v = std::get_if<std::vector<double>>(&sc->second);
      if (v == nullptr) return invalid_argument(where + ": its 'scales' attribute is not a list of floats");
      std::vector<float> const f(v->begin(), v->end());
      nodes.push_back(floats_constant(fresh, n.name + "/scales", {static_cast<int64_t>(f.size())}, f));
      scales = nodes.back().outputs[0];
    } else if (n.inputs.size() == 2 && !n.inputs[1].empty()) {
      scales = n.inputs[1];
    } else {
      return invalid_argument(where + " has no scales (an attribute before opset 9, the second input since)");
    }
    n.type = "Resize";
    n.attrs.clear();
    n.attrs["mode"] = mode;
    n.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
    n.attrs["nearest_mode"] = std::string("floor");
    n.inputs = {n.inputs[0], "", scales};
    nodes.push_back(std::move(n));
  }
  list = std::move(nodes);
  return Status::ok();
}

}  // namespace

Status rewrite_pooling_and_upsample(RawModel& model) {
  Matcher const m(model);
  FreshNames fresh(model);
  return for_each_node_list(model.nodes,
                            [&](std::vector<RawNode>& list) { return rewrite_pooling_list(list, m, fresh); });
}

}  // namespace gp::graph::onnx_import
