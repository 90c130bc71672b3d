// Which initializers train: the weight-slot rules (what torch modules export as parameters), then
// the buffers that must not (non-finite values such as a -inf causal mask; tensors that only feed
// masks, comparisons or indices; sinusoidal position tables; constants a dynamo export's graph
// signature shows are not parameters), then the user's trainable/frozen name patterns.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "graph/onnx_import_fold.h"
#include "graph/onnx_import_raw.h"
#include "graph/ops/infer.h"
#include "graph/ops/registry.h"

namespace gp::graph::onnx_import {
namespace {

bool is_view_op(std::string const& t) {
  return t == "Transpose" || t == "Identity" || t == "Cast" || t == "Reshape" || t == "Unsqueeze" || t == "Squeeze" ||
         t == "Flatten";
}

std::string node_label(RawNode const& n) { return n.type + (n.name.empty() ? "" : " '" + n.name + "'"); }

// Float initializers that are trained, with the rule that marked each: those feeding a weight slot
// (Conv/Gemm/MatMul weights, normalisation scales and biases, embedding tables, tables GatherND or
// GatherElements index (a mixture of experts' stacked weights), recurrent weights),
// directly or through a view (Transpose of a weight, as torch exports nn.Linear on 3-D inputs); the
// bias added to a linear op's output; and the learned tensors torch modules add, multiply,
// concatenate, expand or tile into the activations (position embeddings, class tokens, GroupNorm's
// affine): an initializer of more than one element feeding Add/Sub/Mul/Concat/Expand/Tile. Single
// numbers there (scales, epsilons) stay constants.
std::map<std::string, std::string> weight_slot_rules(RawModel const& m) {
  // The initializers each value is made of: through views, and through the Slice/Split/Concat
  // chains torch wraps around recurrent weights (gates re-ordered).
  std::unordered_map<std::string, std::set<std::string>> roots;
  std::unordered_map<std::string, int64_t> elements;
  for (auto const& init : m.initializers)
    if (is_float_dtype(init.dtype)) {
      roots[init.name] = {init.name};
      int64_t n = 1;
      for (int64_t d : init.dims) n *= d;
      elements[init.name] = n;
    }
  std::unordered_map<std::string, std::string> producer_type;
  std::map<std::string, std::string> out;
  auto roots_of = [&](RawNode const& n, std::size_t k) -> std::set<std::string> const* {
    if (k >= n.inputs.size()) return nullptr;
    auto it = roots.find(n.inputs[k]);
    return it == roots.end() ? nullptr : &it->second;
  };
  auto mark = [&](RawNode const& n, std::size_t k, char const* what) {
    if (auto const* r = roots_of(n, k))
      for (auto const& name : *r) out.emplace(name, what + node_label(n));
  };
  auto mark_tensor = [&](RawNode const& n, std::size_t k) {  // a learned tensor, not a single number
    if (auto const* r = roots_of(n, k))
      for (auto const& name : *r)
        if (elements[name] > 1) out.emplace(name, "learned tensor in " + node_label(n));
  };
  auto produced_by_linear = [&](std::string const& name) {
    auto it = producer_type.find(name);
    return it != producer_type.end() && (it->second == "MatMul" || it->second == "Gemm" || it->second == "Conv");
  };
  for (RawNode const* node : all_nodes(m)) {  // If branches' nodes too
    RawNode const& n = *node;
    std::string const& t = n.type;
    // A sequence (resolved by the lowering) carries the roots of its elements: a weight chunked by
    // SplitToSequence and read by SequenceAt is still that weight.
    bool const seq_of_one = t == "SplitToSequence" || t == "SequenceAt" || t == "SequenceErase";
    // A Loop's or Scan's body input k is its input k (a carried value, a state, a scanned input's
    // elements) on the first pass.
    if ((t == "Loop" || t == "Scan") && !n.bodies.empty())
      for (std::size_t k = 0; k < n.inputs.size() && k < n.bodies[0].inputs.size(); ++k)
        if (auto const* r = roots_of(n, k)) roots[n.bodies[0].inputs[k]] = *r;
    if ((is_view_op(t) || t == "Slice" || t == "Split" || seq_of_one) && !n.inputs.empty())
      if (auto const* r = roots_of(n, 0))
        for (auto const& o : n.outputs) roots[o] = *r;
    if (t == "Concat" || t == "SequenceConstruct" || t == "SequenceInsert" || t == "ConcatFromSequence") {
      std::set<std::string> all;
      for (std::size_t k = 0; k < n.inputs.size(); ++k)
        if (auto const* r = roots_of(n, k)) all.insert(r->begin(), r->end());
      if (!all.empty() && !n.outputs.empty()) roots[n.outputs[0]] = all;
    }
    if (t == "Conv" || t == "ConvTranspose" || t == "BatchNormalization" || t == "LayerNormalization" ||
        t == "InstanceNormalization") {
      mark(n, 1, "weight of ");
      mark(n, 2, "bias of ");
    } else if (t == "Gemm" || t == "MatMul") {
      mark(n, 0, "operand of ");
      mark(n, 1, "weight of ");
      mark(n, 2, "bias of ");
    } else if (t == "LSTM" || t == "GRU" || t == "RNN") {  // W, R, B and LSTM's peepholes P
      for (std::size_t k : {1, 2, 3, 7}) mark(n, k, "weight of ");
    } else if (t == "Gather") {
      mark(n, 0, "embedding table of ");
    } else if (t == "GatherND" || t == "GatherElements") {  // a mixture of experts' weights, picked per token
      mark(n, 0, "table indexed by ");
    } else if (t == "PRelu") {
      mark(n, 1, "slope of ");
    } else if ((t == "Add" || t == "Sub") && n.inputs.size() == 2) {
      if (produced_by_linear(n.inputs[0])) mark(n, 1, "bias in ");
      if (produced_by_linear(n.inputs[1])) mark(n, 0, "bias in ");
      mark_tensor(n, 0);
      mark_tensor(n, 1);
    } else if (t == "Mul" || t == "Concat") {
      for (std::size_t k = 0; k < n.inputs.size(); ++k) mark_tensor(n, k);
    } else if (t == "Expand" || t == "Tile") {
      mark_tensor(n, 0);
    }
    for (auto const& o : n.outputs) producer_type[o] = t;
  }
  return out;
}

bool is_float_cast_target(int64_t onnx_type) {
  return onnx_type == 1 || onnx_type == 10 || onnx_type == 11 || onnx_type == 16;  // FLOAT, FLOAT16, DOUBLE, BFLOAT16
}

// Input slots whose value never gets a gradient (conditions, comparisons, indices, shapes, axes):
// the op's OpDef::grad_free, and a Cast's input where it casts to an integer or bool.
bool is_mask_slot(RawNode const& n, std::size_t k) {
  if (n.type == "Cast") return !is_float_cast_target(ops::attr_int(n.attrs, "to", 1));
  ops::OpDef const* def = ops::find_op(n.type);
  return def != nullptr && def->grad_free.contains(k);
}

// Values that reach a graph output through slots that carry gradients (`loss`), and values that
// reach a mask, comparison or index slot (`mask`). Nodes are in topological order (ONNX requires
// it), so one reverse pass is enough.
struct Reach {
  std::set<std::string> loss, mask;
  std::map<std::string, std::string> running_stats;  // BatchNormalization's mean and variance -> its node
};

void reach_nodes(std::vector<RawNode> const& nodes, Reach& r);

// Reach through a node with bodies, its nodes reading outer values walked where it stands. An If's
// outputs are its branches' (either may be taken), its condition a mask. A Loop's outputs are its
// body's after the condition, a Scan's its body's; body input k is the node's input k (a Loop's
// iteration number and condition masks), and a carried value's body output feeds its body input
// on the next pass, so the body is walked until nothing more is reached.
void reach_body_node(RawNode const& n, Reach& r) {
  auto pass_on = [&r](std::string const& from, std::string const& to) {
    if (from.empty() || to.empty()) return;
    if (r.loss.count(from)) r.loss.insert(to);
    if (r.mask.count(from)) r.mask.insert(to);
  };
  bool const loop = n.type == "Loop", scan = n.type == "Scan";
  if (!loop && !scan) {
    for (auto const& b : n.bodies) {
      for (std::size_t k = 0; k < n.outputs.size() && k < b.outputs.size(); ++k) pass_on(n.outputs[k], b.outputs[k]);
      reach_nodes(b.nodes, r);
    }
    if (!n.inputs.empty()) r.mask.insert(n.inputs[0]);
    return;
  }
  RawBody const& b = n.bodies.front();
  std::size_t const out_offset = loop ? 1 : 0;
  for (std::size_t k = 0; k < n.outputs.size() && k + out_offset < b.outputs.size(); ++k)
    pass_on(n.outputs[k], b.outputs[k + out_offset]);
  if (loop && !b.outputs.empty()) r.mask.insert(b.outputs[0]);
  // Carried values: a Loop's body inputs 2.. are fed by its outputs 1..; a Scan's states by its
  // first outputs (the inputs before its num_scan_inputs scanned ones).
  std::size_t const carried_in = loop ? 2 : 0;
  std::size_t const carried =
      loop ? (b.inputs.size() >= 2 ? b.inputs.size() - 2 : 0)
           : n.inputs.size() -
                 std::min<std::size_t>(n.inputs.size(), static_cast<std::size_t>(std::max<int64_t>(
                                                            0, ops::attr_int(n.attrs, "num_scan_inputs", 0))));
  for (std::size_t before = 0; before != r.loss.size() + r.mask.size();) {
    before = r.loss.size() + r.mask.size();
    reach_nodes(b.nodes, r);
    for (std::size_t j = 0; j < carried && carried_in + j < b.inputs.size() && out_offset + j < b.outputs.size(); ++j)
      pass_on(b.inputs[carried_in + j], b.outputs[out_offset + j]);
  }
  for (std::size_t k = 0; k < b.inputs.size() && k < n.inputs.size(); ++k) pass_on(b.inputs[k], n.inputs[k]);
  if (loop)
    for (std::size_t k = 0; k < 2 && k < n.inputs.size(); ++k)
      if (!n.inputs[k].empty()) r.mask.insert(n.inputs[k]);
}

void reach_nodes(std::vector<RawNode> const& nodes, Reach& r) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    RawNode const& n = *it;
    if (n.type == "BatchNormalization")
      for (std::size_t k : {3, 4})
        if (k < n.inputs.size()) r.running_stats[n.inputs[k]] = node_label(n);
    if (!n.bodies.empty()) {
      reach_body_node(n, r);
      continue;
    }
    bool out_loss = false, out_mask = false;
    for (auto const& o : n.outputs) {
      out_loss = out_loss || r.loss.count(o);
      out_mask = out_mask || r.mask.count(o);
    }
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      std::string const& x = n.inputs[k];
      if (x.empty()) continue;
      if (is_mask_slot(n, k)) {
        r.mask.insert(x);
        continue;
      }
      if (out_loss) r.loss.insert(x);
      if (out_mask) r.mask.insert(x);
    }
  }
}

Reach reach(RawModel const& m) {
  Reach r;
  for (auto const& o : m.outputs) r.loss.insert(o.name);
  reach_nodes(m.nodes, r);
  return r;
}

bool has_non_finite(TensorData const& d) {
  std::size_t const n = d.bytes.size() / dtype_size(d.dtype);
  switch (d.dtype) {
    case DType::kFloat32:
      for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(d.as<float>()[i])) return true;
      return false;
    case DType::kFloat64:
      for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(d.as<double>()[i])) return true;
      return false;
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint16_t const exponent = d.dtype == DType::kFloat16 ? 0x7C00 : 0x7F80;  // all ones: inf or NaN
      for (std::size_t i = 0; i < n; ++i) {
        uint16_t bits = 0;
        std::memcpy(&bits, d.bytes.data() + 2 * i, 2);
        if ((bits & exponent) == exponent) return true;
      }
      return false;
    }
    default:
      return false;
  }
}

// A float32/float64 tensor holding a value of magnitude 1e30 or more: no learned weight does; a mask
// does (HF writes float32's lowest value, -3.4e38, where attention is masked, and a fixed-batch
// export folds that mask into an initializer added to the scores).
bool has_mask_extremes(TensorData const& d) {
  auto any_extreme = [](auto const* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      if (std::abs(static_cast<double>(x[i])) >= 1e30) return true;
    return false;
  };
  if (d.dtype == DType::kFloat32) return any_extreme(d.as<float>(), d.bytes.size() / sizeof(float));
  if (d.dtype == DType::kFloat64) return any_extreme(d.as<double>(), d.bytes.size() / sizeof(double));
  return false;
}

// A sinusoidal position table: positions along its first axis of more than one element, channels
// along the rest, and every channel c either s*cos(t*f_c) or a*sin(t*f_c) of the position t, with
// one amplitude s over the cosine channels (rows start at position 0). Rotary embeddings' cos/sin
// tables (the dynamo exporter folds them out of the inv_freq buffer: they then look like tensors
// multiplied into the activations) and fixed sinusoidal encodings (Vaswani et al.'s buffer) are such
// tables; torch keeps them as buffers. A column passes when it follows the recurrence of a sampled
// sinusoid, x[t+1] + x[t-1] = k x[t] with |k| <= 2 (2cos f), to within float32 rounding of its
// argument; at least one column must oscillate (k clearly below 2), so constant, all-zero and
// linear tables are not taken for one. Float32 and float64 only (the tolerance is float32's; the
// executor trains float32 models, and a float16/bfloat16 table is left to the frozen: patterns).
bool is_position_table(RawInitializer const& init) {
  if ((init.dtype != DType::kFloat32 && init.dtype != DType::kFloat64) || !init.data) return false;
  std::vector<int64_t> dims;
  for (int64_t d : init.dims)
    if (d != 1) dims.push_back(d);
  if (dims.size() != 2 || dims[0] < 4 || dims[1] < 1) return false;
  int64_t const rows = dims[0], cols = dims[1];
  bool const f32 = init.dtype == DType::kFloat32;
  if (init.data->bytes.size() != static_cast<std::size_t>(rows * cols) * (f32 ? sizeof(float) : sizeof(double)))
    return false;
  // Read in place: this runs on large embedding tables too.
  float const* x32 = init.data->as<float>();
  double const* x64 = init.data->as<double>();
  auto at = [&](int64_t t, int64_t c) { return f32 ? static_cast<double>(x32[t * cols + c]) : x64[t * cols + c]; };
  double amplitude = 0;
  for (int64_t e = 0; e < rows * cols; ++e) amplitude = std::max(amplitude, std::abs(f32 ? x32[e] : x64[e]));
  if (amplitude == 0) return false;
  // float32 rounds the position times the frequency (HF computes both in float32): an error that
  // grows with the position. The check is loose by that and no looser.
  double const eps = f32 ? 6e-8 : 1e-15;
  double const tol = amplitude * eps * (100.0 + 16.0 * static_cast<double>(rows));
  // Row 0 first, which rejects a learned table at once: sin(0) = 0, or one cosine amplitude.
  double first = 0;
  for (int64_t c = 0; c < cols; ++c) {
    double const v = at(0, c);
    if (std::abs(v) <= tol) continue;
    if (first == 0) first = v;
    if (std::abs(v - first) > tol) return false;
  }
  bool oscillates = false;
  for (int64_t c = 0; c < cols; ++c) {
    double num = 0, den = 0;
    for (int64_t t = 1; t + 1 < rows; ++t) {
      num += at(t, c) * (at(t + 1, c) + at(t - 1, c));
      den += at(t, c) * at(t, c);
    }
    bool const cosine = std::abs(at(0, c)) > tol;
    if (den <= tol * tol * static_cast<double>(rows)) {  // a zero column: sin(0 t), or nothing
      if (cosine) return false;
      for (int64_t t = 0; t < rows; ++t)
        if (std::abs(at(t, c)) > tol) return false;
      continue;
    }
    double const k = num / den;
    if (std::abs(k) > 2 + 1e-6) return false;
    for (int64_t t = 1; t + 1 < rows; ++t)
      if (std::abs(at(t + 1, c) + at(t - 1, c) - k * at(t, c)) > 4 * tol) return false;
    // s cos(t f), s the cosine columns' one amplitude (row 0, checked above): x[1] = s cos f = s k / 2.
    if (cosine && std::abs(at(1, c) - at(0, c) * k / 2) > 4 * tol) return false;
    oscillates = oscillates || k < 2 - 1e-3;
  }
  return oscillates;
}

// Whether the values of an initializer the weight-slot rules marked can make it a buffer (a mask,
// a position table): those added, multiplied or gathered into the activations can; the weights of
// Conv/Gemm/MatMul, normalisations, recurrent layers and PRelu cannot, and are not read.
bool reads_values(std::string const& rule) {
  for (char const* slot : {"weight of ", "operand of ", "slope of "})
    if (rule.rfind(slot, 0) == 0) return false;
  return true;
}

// Glob matching: `*` any run of characters (also none), `?` exactly one.
bool glob_match(std::string_view pattern, std::string_view name) {
  std::size_t p = 0, s = 0, star = std::string_view::npos, mark = 0;
  while (s < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[s])) {
      ++p;
      ++s;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = s;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      s = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string first_match(std::vector<std::string> const& patterns, std::string const& name) {
  for (auto const& p : patterns)
    if (glob_match(p, name)) return p;
  return {};
}

// Why a finite initializer the weight-slot rules left out is a constant.
std::string constant_reason(RawInitializer const& init, Reach const& r) {
  if (!is_float_dtype(init.dtype)) return std::string("not a float tensor (") + dtype_name(init.dtype) + ")";
  int64_t elements = 1;
  for (int64_t d : init.dims) elements *= d;
  if (elements == 1) return "single number";
  if (auto it = r.running_stats.find(init.name); it != r.running_stats.end())
    return "running statistics of " + it->second;
  if (!r.loss.count(init.name) && r.mask.count(init.name)) return "feeds only masks, comparisons or indices";
  if (!r.loss.count(init.name) && !r.mask.count(init.name)) return "reaches no output";
  return "not in a weight slot (a constant operand)";
}

}  // namespace

void retie_transposed_copies(RawModel& model, ImportOptions const& options) {
  // Float32 matrices with data, by their (rows, cols).
  std::map<std::pair<int64_t, int64_t>, std::vector<std::size_t>> by_dims;
  for (std::size_t i = 0; i < model.initializers.size(); ++i) {
    RawInitializer const& init = model.initializers[i];
    if (init.dtype != DType::kFloat32 || init.dims.size() != 2 || !init.data || init.dims[0] < 2 || init.dims[1] < 2)
      continue;
    if (init.data->bytes.size() != static_cast<std::size_t>(init.dims[0] * init.dims[1]) * sizeof(float)) continue;
    by_dims[{init.dims[0], init.dims[1]}].push_back(i);
  }
  // B [n, m] is A [m, n] transposed, bit for bit; A holds two or more distinct values and, square,
  // is not symmetric (two identity-initialised weights would otherwise pass for one).
  auto is_transpose = [](RawInitializer const& a, RawInitializer const& b) {
    int64_t const m = a.dims[0], n = a.dims[1];
    auto const* x = reinterpret_cast<uint32_t const*>(a.data->bytes.data());
    auto const* y = reinterpret_cast<uint32_t const*>(b.data->bytes.data());
    bool distinct = false, asymmetric = m != n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (x[i * n + j] != y[j * m + i]) return false;
        distinct = distinct || x[i * n + j] != x[0];
        asymmetric = asymmetric || x[i * n + j] != x[j * n + i];
      }
    return distinct && asymmetric;
  };
  std::set<std::size_t> copies, originals;
  for (auto const& [dims, list] : by_dims)
    for (std::size_t b : list) {
      if (!first_match(options.trainable, model.initializers[b].name).empty() ||
          !first_match(options.frozen, model.initializers[b].name).empty())
        continue;
      auto partners = by_dims.find({dims.second, dims.first});
      if (partners == by_dims.end()) continue;
      for (std::size_t a : partners->second) {
        if (a >= b || copies.count(a) || originals.count(b)) continue;
        if (!is_transpose(model.initializers[a], model.initializers[b])) continue;
        copies.insert(b);
        originals.insert(a);
        model.retied.emplace_back(model.initializers[b].name, model.initializers[a].name);
        break;
      }
    }
  if (copies.empty()) return;
  std::vector<RawNode> transposes;
  for (auto const& [copy, original] : model.retied) {
    RawNode t;
    t.name = copy + "_retied";
    t.type = "Transpose";
    t.attrs["perm"] = std::vector<int64_t>{1, 0};
    t.inputs = {original};
    t.outputs = {copy};
    transposes.push_back(std::move(t));
  }
  std::vector<RawInitializer> kept;
  for (std::size_t i = 0; i < model.initializers.size(); ++i)
    if (!copies.count(i)) kept.push_back(std::move(model.initializers[i]));
  model.initializers = std::move(kept);
  model.nodes.insert(model.nodes.begin(), std::make_move_iterator(transposes.begin()),
                     std::make_move_iterator(transposes.end()));
}

// Every element of a float32 tensor of more than one element is the same value (returned).
std::optional<float> uniform_value(RawInitializer const& init) {
  if (init.dtype != DType::kFloat32 || !init.data) return std::nullopt;
  std::size_t const n = init.data->bytes.size() / sizeof(float);
  float const* x = init.data->as<float>();
  if (n < 2) return std::nullopt;
  for (std::size_t i = 1; i < n; ++i)
    if (x[i] != x[0]) return std::nullopt;
  return x[0];
}

// A trainable weight of one repeated value that several operators read as a weight (an input after
// their first), in a dynamo export whose graph signature lists parameters the file no longer has
// (`missing`, some named): torch's dynamo exporter optimizes an untrained model's file by merging
// equal initializers (every LayerNorm scale of ones becomes one tensor; zero biases are dropped),
// so parameters torch trains apart would train as one. Empty when the weight does not look so (a
// weight a module reads twice, as DeBERTa's projections, is no merge).
std::string merged_weight_warning(RawInitializer const& init, std::vector<std::string> const& readers,
                                  std::vector<std::string> const& missing) {
  if (readers.size() < 2 || missing.empty()) return {};
  std::optional<float> const v = uniform_value(init);
  if (!v) return {};
  std::string names;
  for (std::size_t i = 0; i < readers.size() && i < 3; ++i) names += (i ? ", " : "") + readers[i];
  if (readers.size() > 3) names += ", ...";
  char value[32];
  std::snprintf(value, sizeof value, "%g", static_cast<double>(*v));
  std::string gone;
  for (std::size_t i = 0; i < missing.size() && i < 2; ++i) gone += (i ? ", " : "") + missing[i];
  if (missing.size() > 2) gone += ", ...";
  return "weight '" + init.name + "' (every element " + value + ") is read as a weight by " +
         std::to_string(readers.size()) + " operators (" + names + ") and " + std::to_string(missing.size()) +
         " parameters of the exported program are not in the file (" + gone +
         "): torch's dynamo exporter merged equal initializers of the untrained model into one, so weights torch "
         "trains apart train as one here; export with torch.onnx.export(..., optimize=False)";
}

Result<std::vector<WeightChoice>> choose_trainable(RawModel const& m, ImportOptions const& options) {
  std::map<std::string, std::string> const rules = weight_slot_rules(m);
  // The operators that read each value as a weight (an input after their first).
  std::map<std::string, std::vector<std::string>> weight_readers;
  for (RawNode const* n : all_nodes(m))
    for (std::size_t k = 1; k < n->inputs.size(); ++k)
      if (!n->inputs[k].empty()) weight_readers[n->inputs[k]].push_back(node_label(*n));
  Reach const r = reach(m);
  for (auto const* list : {&options.trainable, &options.frozen})
    for (auto const& p : *list) {
      bool any = false;
      for (auto const& init : m.initializers) any = any || glob_match(p, init.name);
      if (!any)
        return invalid_argument(std::string(list == &options.trainable ? "trainable" : "frozen") + " pattern '" + p +
                                "' matches no initializer of the model (run `graphpipe inspect MODEL --weights` for "
                                "their names)");
    }
  // A dynamo export whose graph signature lists every parameter as an initializer folded none of
  // them into another: its other float initializers are constants it computed, not parameters. (When
  // some parameter is missing, its folded copies, transposed weights and gathered position rows,
  // are initializers of other names that must train: the slot rules decide.)
  bool const signature_complete = [&] {
    if (!m.exported_parameters || m.exported_parameters->empty()) return false;
    std::set<std::string> names;
    for (auto const& init : m.initializers) names.insert(init.name);
    return std::all_of(m.exported_parameters->begin(), m.exported_parameters->end(),
                       [&](std::string const& p) { return names.count(p) > 0; });
  }();
  // The exported program's parameters the file does not hold (merged or dropped by the exporter).
  std::vector<std::string> missing_parameters;
  if (m.exported_parameters) {
    std::set<std::string> names;
    for (auto const& init : m.initializers) names.insert(init.name);
    for (auto const& p : *m.exported_parameters)
      if (!names.count(p)) missing_parameters.push_back(p);
  }
  std::vector<WeightChoice> out;
  for (auto const& init : m.initializers) {
    WeightChoice c;
    c.name = init.name;
    c.dtype = init.dtype;
    c.dims = init.dims;
    std::string const frozen = first_match(options.frozen, init.name);
    std::string const forced = first_match(options.trainable, init.name);
    bool const is_float = is_float_dtype(init.dtype);
    bool const non_finite = is_float && init.data && has_non_finite(*init.data);
    auto const rule = rules.find(init.name);
    bool const value_rule = rule != rules.end() && reads_values(rule->second);  // its values may make it a buffer
    if (!frozen.empty()) {
      c.reason = "frozen by pattern '" + frozen + "'";
    } else if (!forced.empty()) {
      if (!is_float || non_finite)
        return invalid_argument("trainable pattern '" + forced + "' matches initializer '" + init.name + "', which " +
                                (is_float ? "holds non-finite values (inf/NaN)" : "is not a float tensor") +
                                " and cannot train: narrow the pattern or add the name to 'frozen'");
      c.trainable = true;
      c.reason = "trainable by pattern '" + forced + "'";
    } else if (non_finite) {
      c.reason = "non-finite values";
    } else if (rule != rules.end() && !r.loss.count(init.name) && r.mask.count(init.name)) {
      c.reason = "feeds only masks, comparisons or indices";
    } else if (value_rule && init.data && has_mask_extremes(*init.data)) {
      c.reason = std::string(kMaskValuesReason);
    } else if (value_rule && is_position_table(init)) {
      c.reason = std::string(kPositionTableReason);
    } else if (rule != rules.end() && m.exported_buffers.count(init.name)) {
      c.reason = std::string(kExportedBufferReason);
    } else if (rule != rules.end() && signature_complete && !m.exported_parameters->count(init.name)) {
      c.reason = std::string(kNotAParameterReason);
    } else if (rule != rules.end()) {
      c.trainable = true;
      c.reason = rule->second;
      for (auto const& [copy, original] : m.retied)
        if (original == init.name)
          c.reason += "; also read as its transpose where the file has the copy '" + copy + "' (retied)";
      if (auto const it = weight_readers.find(init.name); it != weight_readers.end())
        c.warning = merged_weight_warning(init, it->second, missing_parameters);
    } else {
      c.reason = constant_reason(init, r);
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace gp::graph::onnx_import
