// RawModel -> OpGraph: walks the nodes in file order (ONNX requires topological order), folds
// what is static, keeps the rest as operators with typed attributes and shapes computed by our
// own rules (with the symbolic batch: dims < 0 are multiples of N), then fills the accounting.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "graph/accounting.h"
#include "graph/onnx_import_fold.h"
#include "graph/onnx_import_raw.h"
#include "graph/ops/registry.h"

namespace gp::graph::onnx_import {
namespace {

using Dims = std::vector<int64_t>;

using ops::dim_str;
using ops::dims_str;

struct Val {
  DType dtype = DType::kFloat32;
  Dims dims;
  std::optional<SymArray> folded;          // a static value (folded, Constant, or read from an initializer)
  std::shared_ptr<TensorData const> data;  // an initializer's data
  bool initializer = false;
  bool trainable = false;
  TensorId tensor = kNoTensor;  // set once it is a graph tensor

  bool is_static() const { return !trainable && (folded || initializer); }
};

class Lowering {
 public:
  Lowering(RawModel model, bool first_dim_is_batch, std::vector<WeightChoice> choices, int64_t max_unrolled_nodes)
      : m_(std::move(model)),
        first_dim_is_batch_(first_dim_is_batch),
        choices_(std::move(choices)),
        max_unrolled_nodes_(max_unrolled_nodes) {}

  Result<OpGraph> run();

  // The lowering's own expansion of an operator type into others (the sequence operators, DFT,
  // STFT), or null for a type lowered as itself.
  using Expansion = Status (Lowering::*)(RawNode const&);
  static Expansion expansion_of(std::string const& type);

 private:
  Status add_inputs();
  Status lower_node(RawNode const& n);
  Status lower_if(RawNode const& n, std::vector<Val*> const& ins);
  Status lower_loop(RawNode const& n);
  Status lower_scan(RawNode const& n);
  RawBody body_instance(RawBody const& body, std::string const& suffix);
  Status lower_body(RawBody const& body, std::string const& context);
  Status alias(std::string const& where, std::string const& to, std::string const& from);
  Result<bool> static_condition(std::string const& where, std::string const& name, char const* what);
  Status check_unroll(std::string const& where, RawBody const& body, int64_t first, int64_t count) const;
  Status unrolled_outputs(RawNode const& n, std::string const& where, std::vector<std::string> const& current,
                          std::vector<std::vector<std::string>> stacked, std::vector<int64_t> const& axes,
                          std::vector<int64_t> const& reversed);
  Result<std::string> axes_part(RawNode const& n, std::string const& type, std::string const& x, int64_t axis);
  Status stack_values(RawNode const& n, std::vector<std::string> const& parts, int64_t axis, std::string const& out);
  void set_constant(std::string const& name, SymArray value);
  Status lower_sequence_op(RawNode const& n);
  Status lower_dft(RawNode const& n);
  Status lower_stft(RawNode const& n);
  Status lower_affine_grid(RawNode const& n);
  Result<std::optional<int64_t>> static_int_input(RawNode const& n, std::size_t k, char const* what);
  Result<Val*> node_input(RawNode const& n, std::size_t k);
  Result<std::string> lower_part(RawNode const& parent, std::string const& type, std::vector<std::string> inputs,
                                 std::string const& suffix, Attributes attrs = {}, std::string const& output = "");
  Result<std::vector<std::string> const*> sequence(RawNode const& n, std::size_t k);
  std::string fresh_value_name(std::string const& base);
  std::string constant_value(std::string const& base, SymArray value);
  std::string int64s_value(std::string const& base, std::vector<int64_t> const& values);
  Status keep(RawNode const& n, std::vector<Val*> const& ins);
  Result<std::optional<RawNode>> narrow_batch_constants(RawNode const& n, std::vector<Val*>& ins);
  Result<SymArray const*> sym(Val& v, std::string const& name);
  Result<SymArray const*> static_input(RawNode const& n, std::vector<Val*> const& ins, std::size_t k,
                                       std::string const& what);
  Result<TensorId> materialize(std::string const& name, Val& v);
  std::string op_name(RawNode const& n);
  Status check_against_onnx(std::string const& name, Dims const& dims) const;

  RawModel m_;
  bool first_dim_is_batch_;
  std::vector<WeightChoice> choices_;
  int64_t fixed_batch_ = 0;     // the inputs' first dimension when the file fixes it
  int64_t max_unrolled_nodes_;  // ImportOptions::max_nodes: what all unrolled loops may add up to
  int64_t unrolled_nodes_ = 0;  // the body nodes of every pass unrolled so far
  std::unordered_map<std::string, Val> vals_;
  // Sequences known at import (lower_sequence_op): each the names of its elements' values.
  std::unordered_map<std::string, std::vector<std::string>> sequences_;
  std::set<std::string> trainable_;
  std::set<std::string> used_;            // names read by some node or listed as graph outputs
  std::set<std::string> op_names_;        // claimed so far
  std::set<std::string> reserved_names_;  // every explicit node name: generated names avoid them
  std::map<std::string, int> unnamed_count_;
  // Where the node being lowered sits when it is not in the graph itself ("the branch an If takes
  // at import", "the body of Loop 'l'"), for the unsupported-operator message.
  std::string body_context_;
  std::vector<TensorInfo> tensors_;
  std::vector<Op> ops_;
  std::vector<TensorId> inputs_;
};

std::string Lowering::op_name(RawNode const& n) {
  if (!n.name.empty() && !op_names_.count(n.name)) {
    op_names_.insert(n.name);
    return n.name;
  }
  std::string const base = n.name.empty() ? n.type : n.name;
  std::string name;
  do {
    name = base + "_" + std::to_string(unnamed_count_[base]++);
  } while (op_names_.count(name) || reserved_names_.count(name));
  op_names_.insert(name);
  return name;
}

Result<SymArray const*> Lowering::sym(Val& v, std::string const& name) {
  if (v.folded) return &*v.folded;
  if (!v.data)
    return unsupported("value '" + name +
                       "' is needed at import time but its data was not loaded (load the "
                       "weights, or keep shape constants inside the model file)");
  ASSIGN_OR_RETURN(SymArray a, SymArray::from_data(*v.data));
  v.folded = std::move(a);
  return &*v.folded;
}

Result<SymArray const*> Lowering::static_input(RawNode const& n, std::vector<Val*> const& ins, std::size_t k,
                                               std::string const& what) {
  if (k >= ins.size() || !ins[k]) return static_cast<SymArray const*>(nullptr);
  if (!ins[k]->is_static())
    return unsupported("its " + what + " ('" + n.inputs[k] +
                       "') is computed at run time; graphpipe needs static shapes and attributes (only the first, "
                       "batch dimension of the inputs may be dynamic)");
  return sym(*ins[k], n.inputs[k]);
}

Result<TensorId> Lowering::materialize(std::string const& name, Val& v) {
  if (v.tensor != kNoTensor) return v.tensor;
  TensorInfo t;
  t.name = name;
  t.dtype = v.dtype;
  t.shape.dims = v.dims;
  if (v.trainable) {
    t.role = TensorRole::kWeight;
    t.data = v.data;
  } else if (v.initializer && !v.folded) {
    t.role = TensorRole::kConstant;
    t.data = v.data;
  } else {
    t.role = TensorRole::kConstant;
    ASSIGN_OR_RETURN(TensorData d, v.folded->to_data(name));
    t.data = std::make_shared<TensorData const>(std::move(d));
  }
  t.id = static_cast<TensorId>(tensors_.size());
  tensors_.push_back(std::move(t));
  v.tensor = tensors_.back().id;
  return v.tensor;
}

Status Lowering::check_against_onnx(std::string const& name, Dims const& dims) const {
  auto it = m_.value_info.find(name);
  if (it == m_.value_info.end() || !it->second.has_shape) return Status::ok();
  auto const& theirs = it->second.dims;
  if (theirs.size() != dims.size())
    return internal_error("tensor '" + name + "': graphpipe computes shape " + dims_str(dims) +
                          " but ONNX shape inference gives rank " + std::to_string(theirs.size()));
  for (std::size_t k = 0; k < dims.size(); ++k)
    if (dims[k] >= 0 && theirs[k].value >= 0 && theirs[k].value != dims[k])
      return internal_error("tensor '" + name + "': graphpipe computes shape " + dims_str(dims) +
                            " but ONNX shape inference gives dimension " + std::to_string(k) + " = " +
                            std::to_string(theirs[k].value));
  return Status::ok();
}

Status Lowering::add_inputs() {
  for (auto const& init : m_.initializers) {
    Val v;
    v.dtype = init.dtype;
    v.dims = init.dims;
    v.data = init.data;
    v.initializer = true;
    v.trainable = trainable_.count(init.name) > 0;
    vals_[init.name] = std::move(v);
  }
  for (auto const& in : m_.inputs) {
    if (!in.has_shape) return unsupported("input '" + in.name + "' has no shape; export the model with input shapes");
    Val v;
    v.dtype = in.dtype;
    for (std::size_t k = 0; k < in.dims.size(); ++k) {
      RawDim const& d = in.dims[k];
      if (k == 0 && first_dim_is_batch_) {
        v.dims.push_back(kBatch);
        if (d.value > 0) fixed_batch_ = d.value;
      } else if (d.value >= 0) {
        v.dims.push_back(d.value);
      } else {
        return unsupported("input '" + in.name + "' has a dynamic dimension " + std::to_string(k) +
                           (d.param.empty() ? std::string(" (unknown size)") : " ('" + d.param + "')") +
                           "; only the first (batch) dimension may be dynamic: export the model with a fixed size "
                           "for that dimension");
      }
    }
    TensorInfo t;
    t.name = in.name;
    t.dtype = in.dtype;
    t.shape.dims = v.dims;
    t.role = TensorRole::kInput;
    t.id = static_cast<TensorId>(tensors_.size());
    tensors_.push_back(t);
    v.tensor = t.id;
    inputs_.push_back(t.id);
    vals_[in.name] = std::move(v);
  }
  return Status::ok();
}

Status Lowering::lower_node(RawNode const& n) {
  if (Expansion const expand = expansion_of(n.type)) return (this->*expand)(n);
  if (!n.bodies.empty() && n.type == "Loop") return lower_loop(n);
  if (!n.bodies.empty() && n.type == "Scan") return lower_scan(n);
  if (n.type == "Identity" && n.inputs.size() == 1 && n.outputs.size() == 1 && sequences_.count(n.inputs[0]))
    return alias(n.type + " '" + n.name + "'", n.outputs[0], n.inputs[0]);
  std::vector<Val*> ins;
  for (auto const& name : n.inputs) {
    if (name.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    auto it = vals_.find(name);
    if (it == vals_.end())
      return invalid_argument("node '" + n.name + "' (" + n.type + ") reads '" + name + "', which nothing produces");
    ins.push_back(&it->second);
  }
  if (n.type == "Identity") {
    vals_[n.outputs[0]] = *ins[0];
    return Status::ok();
  }
  if (!n.bodies.empty()) return lower_if(n, ins);
  ops::OpDef const* def = ops::find_op(n.type);
  if (def == nullptr)  // only in a body: check_supported has seen every other node
    return unsupported("unsupported operator " + n.type + " (node '" + n.name + "', in " + body_context_ + ")");
  std::vector<ops::Dims> dims;
  std::vector<DType> dtypes;
  for (Val const* v : ins) {
    dims.push_back(v ? v->dims : ops::Dims{});
    dtypes.push_back(v ? v->dtype : DType::kFloat32);
  }
  // ONNX's arithmetic takes one type T for both inputs: a file that mixes them is invalid (torch
  // 2.15's dynamo exporter adds Wav2Vec2's bool mask to float scores at opset 25), named here
  // rather than at the backend's dtype check.
  if ((n.type == "Add" || n.type == "Sub" || n.type == "Mul" || n.type == "Div") && ins.size() == 2 && ins[0] &&
      ins[1] && ins[0]->dtype != ins[1]->dtype)
    return invalid_argument(n.type + " '" + n.name + "': its inputs are " + std::string(dtype_name(ins[0]->dtype)) +
                            " and " + std::string(dtype_name(ins[1]->dtype)) +
                            ", where ONNX requires one type for both (the file is invalid: ONNX Runtime refuses it "
                            "too; re-export it, e.g. at another opset)");
  // Pow of a float32 base by an integer exponent (ONNX allows it: torch.pow(x, ids)): the exponent
  // converted to float32 first, as the backends run float exponents (differentiated for the base
  // only: an integer exponent has no gradient).
  if (n.type == "Pow" && ins.size() == 2 && ins[0] && ins[1] && ins[0]->dtype == DType::kFloat32 &&
      !ops::is_float_dtype(ins[1]->dtype)) {
    RawNode pow = n;
    ASSIGN_OR_RETURN(pow.inputs[1], lower_part(n, "Cast", {n.inputs[1]}, "exponent_float",
                                               {{"to", AttrValue{ops::onnx_of_dtype(DType::kFloat32)}}}));
    return lower_node(pow);
  }
  auto store = [&](ops::Folded& folded) {
    auto& outs = *folded;
    for (std::size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) {
      Val v;
      v.dtype = outs[k].dtype;
      v.dims = outs[k].dims;
      v.folded = std::move(outs[k]);
      vals_[n.outputs[k]] = std::move(v);
    }
  };
  // A fold's error, naming the node once (fold functions name it by FoldContext::where).
  auto fold_error = [&n](Status const& s) {
    std::string const where = n.type + " '" + n.name + "'";
    return s.message().starts_with(where) ? s : s.with_context(where);
  };
  if (def != nullptr && def->folds_from_shape) {  // Shape, Size: whatever computes the input
    auto folded = fold_node(n, *def, std::vector<SymArray const*>(ins.size(), nullptr), dims, m_.opset, dtypes);
    if (!folded.is_ok()) return fold_error(folded.status());
    if (*folded) {
      store(*folded);
      return Status::ok();
    }
  }
  bool all_static = true;
  for (Val* v : ins) all_static &= !v || v->is_static();
  if (all_static && def != nullptr) {
    std::vector<SymArray const*> syms;
    bool have_data = true;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      if (!ins[k]) {
        syms.push_back(nullptr);
        continue;
      }
      if (!ins[k]->folded && !ins[k]->data) {
        have_data = false;
        break;
      }
      ASSIGN_OR_RETURN(SymArray const* s, sym(*ins[k], n.inputs[k]));
      syms.push_back(s);
    }
    if (have_data) {
      auto folded = fold_node(n, *def, syms, dims, m_.opset, dtypes);
      if (!folded.is_ok()) return fold_error(folded.status());
      if (*folded) {
        store(*folded);
        return Status::ok();
      }
    }
  }
  if (def == nullptr || def->infer == nullptr) {  // folded-only ops (Constant, Range, ...)
    for (std::size_t k = 0; k < ins.size(); ++k)
      if (ins[k] && !ins[k]->is_static())
        return unsupported(n.type + " '" + n.name + "': its input '" + n.inputs[k] +
                           "' is computed at run time, so its output shape is dynamic; only the first (batch) "
                           "dimension of the inputs may be dynamic");
    return unsupported(n.type + " '" + n.name +
                       "' cannot be folded (its value is too large or of an unsupported type)");
  }
  if (fixed_batch_ > 1) {
    ASSIGN_OR_RETURN(std::optional<RawNode> narrowed, narrow_batch_constants(n, ins));
    if (narrowed) return keep(*narrowed, ins);
  }
  return keep(n, ins);
}

// An If whose condition is known at import (a test of shapes: TorchScript writes one before
// scatter_reduce, scripted code for every Python `if`) is the branch it takes: that branch's
// nodes are lowered in its place, its outputs become the If's, and the other branch is never read.
// A condition computed from the data at run time is control flow graphpipe does not run.
Status Lowering::lower_if(RawNode const& n, std::vector<Val*> const& ins) {
  std::string const where = "If '" + n.name + "'";
  if (ins.empty() || !ins[0] || !ins[0]->is_static())
    return unsupported(where +
                       ": its condition is computed at run time from the data (data-dependent control "
                       "flow); graphpipe imports an If only when its condition is known at import, and takes "
                       "that branch");
  ASSIGN_OR_RETURN(SymArray const* cond, sym(*ins[0], n.inputs[0]));
  if (cond->has_batch() || cond->numel() != 1)
    return unsupported(where + ": its condition " + dims_str(cond->dims) +
                       (cond->has_batch() ? " depends on the batch size" : " is not one value"));
  bool const taken = cond->is_float() ? cond->f[0] != 0 : cond->i[0] != 0;
  RawBody const& body = n.bodies.at(taken ? 0 : 1);
  RETURN_IF_ERROR(lower_body(body, "the branch an If takes at import"));
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    auto it = vals_.find(body.outputs.at(k));
    if (it == vals_.end())
      return invalid_argument(where + ": its " + (taken ? "then" : "else") + " branch's output '" + body.outputs[k] +
                              "' is never produced");
    if (!n.outputs[k].empty()) vals_[n.outputs[k]] = it->second;
  }
  return Status::ok();
}

// The nodes of an If's branch, a Loop's or Scan's body (an instance of it), where the If, Loop or
// Scan stands; `context` names the body in messages.
Status Lowering::lower_body(RawBody const& body, std::string const& context) {
  std::string const outer = std::exchange(body_context_, context);
  for (auto const& sub : body.nodes) {
    Status const s = lower_node(sub);
    if (!s.is_ok()) {
      body_context_ = outer;
      return s;
    }
  }
  body_context_ = outer;
  return Status::ok();
}

// `to` holds what `from` holds: the same value, or the same sequence.
Status Lowering::alias(std::string const& where, std::string const& to, std::string const& from) {
  if (auto s = sequences_.find(from); s != sequences_.end()) {
    std::vector<std::string> elems = s->second;
    sequences_[to] = std::move(elems);
    return Status::ok();
  }
  auto v = vals_.find(from);
  if (v == vals_.end()) return invalid_argument(where + " reads '" + from + "', which nothing produces");
  Val copy = v->second;
  vals_[to] = std::move(copy);
  return Status::ok();
}

// A Loop's condition: one value known at import.
Result<bool> Lowering::static_condition(std::string const& where, std::string const& name, char const* what) {
  auto it = vals_.find(name);
  if (it == vals_.end()) return invalid_argument(where + ": its " + what + " '" + name + "' is never produced");
  if (!it->second.is_static())
    return unsupported(where + ": its " + what + " ('" + name +
                       "') is computed at run time from the data (data-dependent control flow); graphpipe unrolls "
                       "a loop only when its trip count and condition are known at import");
  ASSIGN_OR_RETURN(SymArray const* c, sym(it->second, name));
  if (c->has_batch()) return unsupported(where + ": its " + what + " ('" + name + "') depends on the batch size");
  if (c->numel() != 1) return invalid_argument(where + ": its " + what + " ('" + name + "') is not one value");
  return c->is_float() ? c->f[0] != 0 : c->i[0] != 0;
}

// Unrolling repeats the body's nodes once per pass: one loop runs at most kMaxUnrolledPasses, and
// the passes of all loops, nested ones multiplying, add at most ImportOptions::max_nodes nodes.
constexpr int64_t kMaxUnrolledPasses = 16384;

// Before passes [first, first + count) of a loop: all of a for loop's or Scan's at once, one at a
// time where a condition may stop the loop early.
Status Lowering::check_unroll(std::string const& where, RawBody const& body, int64_t first, int64_t count) const {
  auto const per_pass = static_cast<int64_t>(std::max<std::size_t>(body.nodes.size(), 1));
  if (first + count > kMaxUnrolledPasses || count > (max_unrolled_nodes_ - unrolled_nodes_) / per_pass)
    return unsupported(where + ": unrolling it takes more than " + std::to_string(kMaxUnrolledPasses) +
                       " passes, or more than " + std::to_string(max_unrolled_nodes_) +
                       " unrolled nodes with the loops before it (its body has " + std::to_string(per_pass) +
                       "), graphpipe's limit (ImportOptions::max_nodes); export the model with the loop written "
                       "out, or a shorter one");
  return Status::ok();
}

// A copy of `body` for one pass of an unrolled Loop or Scan: every name the body defines (its
// inputs, its nodes' outputs, nested bodies' too) gets `suffix` (made unique), reads of those names
// follow, and reads of outer values stay; node names get the suffix too. Each pass's values are
// thus distinct tensors of the graph.
RawBody Lowering::body_instance(RawBody const& body, std::string const& suffix) {
  std::unordered_map<std::string, std::string> renamed;
  std::set<std::string> taken;
  auto define = [&](std::string const& name) {
    if (name.empty() || renamed.count(name)) return;
    std::string fresh = name + suffix;
    for (int k = 1; vals_.count(fresh) || sequences_.count(fresh) || used_.count(fresh) || taken.count(fresh); ++k)
      fresh = name + suffix + "_" + std::to_string(k);
    taken.insert(fresh);
    renamed.emplace(name, std::move(fresh));
  };
  std::function<void(RawBody const&)> collect = [&](RawBody const& b) {
    for (auto const& x : b.inputs) define(x);
    for (auto const& node : b.nodes) {
      for (auto const& o : node.outputs) define(o);
      for (auto const& sub : node.bodies) collect(sub);
    }
  };
  collect(body);
  auto read = [&](std::string const& name) {
    auto const it = renamed.find(name);
    std::string const& r = it == renamed.end() ? name : it->second;
    if (!r.empty()) used_.insert(r);
    return r;
  };
  std::function<RawBody(RawBody const&)> copy = [&](RawBody const& b) {
    RawBody out;
    for (auto const& x : b.inputs) out.inputs.push_back(renamed.at(x));
    for (auto const& node : b.nodes) {
      RawNode c;
      c.name = node.name.empty() ? std::string() : node.name + suffix;
      c.type = node.type;
      c.domain = node.domain;
      c.attrs = node.attrs;
      for (auto const& x : node.inputs) c.inputs.push_back(x.empty() ? x : read(x));
      for (auto const& o : node.outputs) c.outputs.push_back(o.empty() ? o : renamed.at(o));
      for (auto const& sub : node.bodies) c.bodies.push_back(copy(sub));
      out.nodes.push_back(std::move(c));
    }
    for (auto const& o : b.outputs) out.outputs.push_back(read(o));
    return out;
  };
  return copy(body);
}

// A Loop whose trip count and condition are known at import (TorchScript writes one for a scripted
// Python loop: MViTv2's pooling attention splits its tensor in one, into a sequence) is unrolled:
// its body lowered once per pass, the iteration number a constant, the carried values (tensors or
// sequences) handed from pass to pass, each scan output the passes' values stacked on a new first
// axis. The condition each pass computes must be known at import too; a loop whose passes depend
// on the data is control flow graphpipe does not run.
Status Lowering::lower_loop(RawNode const& n) {
  std::string const where = "Loop '" + n.name + "'";
  RawBody const& body = n.bodies.at(0);
  if (n.inputs.size() < 2)
    return invalid_argument(where + " needs its trip count and condition inputs (either may be empty)");
  std::size_t const carried = n.inputs.size() - 2;
  if (body.inputs.size() != carried + 2 || body.outputs.size() < carried + 1)
    return invalid_argument(where + ": its body has " + std::to_string(body.inputs.size()) + " inputs and " +
                            std::to_string(body.outputs.size()) + " outputs for " + std::to_string(carried) +
                            " carried values (it takes the iteration number, the condition and the carried values, "
                            "and gives the condition, the carried values and its scan outputs)");
  std::size_t const scans = body.outputs.size() - 1 - carried;
  if (n.outputs.size() > carried + scans)
    return invalid_argument(where + " has " + std::to_string(n.outputs.size()) + " outputs; its body gives " +
                            std::to_string(carried + scans));
  ASSIGN_OR_RETURN(std::optional<int64_t> trips, static_int_input(n, 0, "trip count"));
  if (trips && *trips < 0) trips = 0;
  // Without a condition input the loop is a for loop: the body's condition is ignored (ONNX's
  // semantics), and the trip count alone says how many passes it runs.
  bool const has_condition = !n.inputs[1].empty();
  bool running = true;
  if (has_condition) {
    ASSIGN_OR_RETURN(running, static_condition(where, n.inputs[1], "condition"));
  } else if (!trips) {
    return invalid_argument(where + " has neither a trip count nor a condition, so it never ends");
  } else {
    RETURN_IF_ERROR(check_unroll(where, body, 0, *trips));
  }
  std::vector<std::string> current(n.inputs.begin() + 2, n.inputs.end());
  std::vector<std::vector<std::string>> stacked(scans);
  for (int64_t pass = 0; running && (!trips || pass < *trips); ++pass) {
    if (has_condition) RETURN_IF_ERROR(check_unroll(where, body, pass, 1));
    unrolled_nodes_ += static_cast<int64_t>(body.nodes.size());
    RawBody const inst = body_instance(body, "/iter" + std::to_string(pass));
    SymArray i;
    i.dtype = DType::kInt64;
    i.i = {pass};
    set_constant(inst.inputs[0], std::move(i));
    SymArray c;
    c.dtype = DType::kBool;
    c.i = {1};
    set_constant(inst.inputs[1], std::move(c));
    for (std::size_t j = 0; j < carried; ++j) RETURN_IF_ERROR(alias(where, inst.inputs[2 + j], current[j]));
    RETURN_IF_ERROR(lower_body(inst, "the body of " + where));
    if (has_condition) {
      ASSIGN_OR_RETURN(running, static_condition(where, inst.outputs[0], "body's condition"));
    }
    for (std::size_t j = 0; j < carried; ++j) current[j] = inst.outputs[1 + j];
    for (std::size_t k = 0; k < scans; ++k) stacked[k].push_back(inst.outputs[1 + carried + k]);
  }
  return unrolled_outputs(n, where, current, std::move(stacked), std::vector<int64_t>(scans, 0),
                          std::vector<int64_t>(scans, 0));
}

// A Scan (opset 9 and later) over inputs whose scanned axis has a length known at import is
// unrolled: its body lowered once per element, each scanned input's element a Gather at that
// position (from the end for direction 1), the states handed from pass to pass, each scan output
// the passes' values stacked along its axis (in reverse for direction 1).
Status Lowering::lower_scan(RawNode const& n) {
  std::string const where = "Scan '" + n.name + "'";
  if (m_.opset < 9)
    return unsupported(where +
                       ": Scan of opset 8 (a batch axis and sequence_lens) is not imported; export at opset 9 or "
                       "later");
  RawBody const& body = n.bodies.at(0);
  int64_t const m = ops::attr_int(n.attrs, "num_scan_inputs", -1);
  if (m < 1 || m > static_cast<int64_t>(n.inputs.size()))
    return invalid_argument(where + ": num_scan_inputs " + std::to_string(m) + " for " +
                            std::to_string(n.inputs.size()) + " inputs");
  std::size_t const states = n.inputs.size() - static_cast<std::size_t>(m);
  if (body.inputs.size() != n.inputs.size() || body.outputs.size() < states)
    return invalid_argument(where + ": its body has " + std::to_string(body.inputs.size()) + " inputs and " +
                            std::to_string(body.outputs.size()) + " outputs for " + std::to_string(states) +
                            " states and " + std::to_string(m) + " scanned inputs");
  std::size_t const scans = body.outputs.size() - states;
  if (n.outputs.size() > states + scans)
    return invalid_argument(where + " has " + std::to_string(n.outputs.size()) + " outputs; its body gives " +
                            std::to_string(states + scans));
  auto ints = [&](char const* key, std::size_t count) -> Result<std::vector<int64_t>> {
    auto const it = n.attrs.find(key);
    if (it == n.attrs.end()) return std::vector<int64_t>(count, 0);
    auto const* v = std::get_if<std::vector<int64_t>>(&it->second);
    if (v == nullptr || v->size() != count)
      return invalid_argument(where + ": '" + key + "' needs " + std::to_string(count) + " values");
    return *v;
  };
  ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, ints("scan_input_axes", static_cast<std::size_t>(m)));
  ASSIGN_OR_RETURN(std::vector<int64_t> in_dirs, ints("scan_input_directions", static_cast<std::size_t>(m)));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, ints("scan_output_axes", scans));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_dirs, ints("scan_output_directions", scans));
  int64_t length = -1;
  for (std::size_t k = 0; k < static_cast<std::size_t>(m); ++k) {
    ASSIGN_OR_RETURN(Val * x, node_input(n, states + k));
    if (x == nullptr) return invalid_argument(where + " needs scanned input " + std::to_string(k));
    auto const rank = static_cast<int64_t>(x->dims.size());
    int64_t& axis = in_axes[k];
    if (axis < -rank || axis >= rank)
      return invalid_argument(where + ": scan axis " + std::to_string(axis) + " is outside the rank " +
                              std::to_string(rank) + " of '" + n.inputs[states + k] + "'");
    if (axis < 0) axis += rank;
    int64_t const len = x->dims[static_cast<std::size_t>(axis)];
    if (len < 0)
      return unsupported(where + ": it scans '" + n.inputs[states + k] + "' along axis " + std::to_string(axis) +
                         ", whose length is the batch size; graphpipe unrolls a Scan over a length known at import");
    if (length >= 0 && len != length)
      return invalid_argument(where + ": its scanned inputs have lengths " + std::to_string(length) + " and " +
                              std::to_string(len));
    length = len;
  }
  RETURN_IF_ERROR(check_unroll(where, body, 0, length));
  std::vector<std::string> current(n.inputs.begin(), n.inputs.begin() + static_cast<std::ptrdiff_t>(states));
  std::vector<std::vector<std::string>> stacked(scans);
  for (int64_t pass = 0; pass < length; ++pass) {
    std::string const suffix = "/iter" + std::to_string(pass);
    unrolled_nodes_ += static_cast<int64_t>(body.nodes.size());
    RawBody const inst = body_instance(body, suffix);
    for (std::size_t j = 0; j < states; ++j) RETURN_IF_ERROR(alias(where, inst.inputs[j], current[j]));
    for (std::size_t k = 0; k < static_cast<std::size_t>(m); ++k) {
      SymArray at;
      at.dtype = DType::kInt64;
      at.i = {in_dirs[k] != 0 ? length - 1 - pass : pass};
      std::string const index = constant_value(inst.inputs[states + k] + "/position", std::move(at));
      RETURN_IF_ERROR(lower_part(n, "Gather", {n.inputs[states + k], index}, "element" + suffix, {{"axis", in_axes[k]}},
                                 inst.inputs[states + k])
                          .status());
    }
    RETURN_IF_ERROR(lower_body(inst, "the body of " + where));
    for (std::size_t j = 0; j < states; ++j) current[j] = inst.outputs[j];
    for (std::size_t k = 0; k < scans; ++k) stacked[k].push_back(inst.outputs[states + k]);
  }
  return unrolled_outputs(n, where, current, std::move(stacked), out_axes, out_dirs);
}

// An unrolled Loop's or Scan's outputs: first the last pass's carried values (`current`), then each
// scan output k the passes' values (`stacked[k]`, in reverse where `reversed[k]`) stacked along
// `axes[k]`.
Status Lowering::unrolled_outputs(RawNode const& n, std::string const& where, std::vector<std::string> const& current,
                                  std::vector<std::vector<std::string>> stacked, std::vector<int64_t> const& axes,
                                  std::vector<int64_t> const& reversed) {
  for (std::size_t j = 0; j < current.size() && j < n.outputs.size(); ++j)
    if (!n.outputs[j].empty()) RETURN_IF_ERROR(alias(where, n.outputs[j], current[j]));
  for (std::size_t k = 0; current.size() + k < n.outputs.size(); ++k) {
    std::string const& out = n.outputs[current.size() + k];
    if (out.empty()) continue;
    if (stacked[k].empty())
      return unsupported(where + " runs no pass, so its scan output '" + out +
                         "' is empty, with a shape only its body's values would give; graphpipe needs one pass");
    if (reversed[k] != 0) std::reverse(stacked[k].begin(), stacked[k].end());
    RETURN_IF_ERROR(stack_values(n, stacked[k], axes[k], out));
  }
  return Status::ok();
}

// An Unsqueeze or Squeeze of `x` at `axis`, in the form of the model's opset.
Result<std::string> Lowering::axes_part(RawNode const& n, std::string const& type, std::string const& x, int64_t axis) {
  if (m_.opset >= 13) return lower_part(n, type, {x, int64s_value(x + "/axes", {axis})}, type);
  return lower_part(n, type, {x}, type, {{"axes", std::vector<int64_t>{axis}}});
}

// Values of one shape stacked along a new `axis` of the result (negative: from its end) into `out`:
// each unsqueezed there, then concatenated.
Status Lowering::stack_values(RawNode const& n, std::vector<std::string> const& parts, int64_t axis,
                              std::string const& out) {
  std::string const where = n.type + " '" + n.name + "'";
  if (parts.empty()) return invalid_argument(where + " stacks no values");
  auto const it = vals_.find(parts.front());
  if (it == vals_.end()) return invalid_argument(where + " reads '" + parts.front() + "', which nothing produces");
  auto const rank = static_cast<int64_t>(it->second.dims.size());
  if (axis < -rank - 1 || axis > rank)
    return invalid_argument(where + ": axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank + 1));
  if (axis < 0) axis += rank + 1;
  RawNode concat;
  concat.type = "Concat";
  concat.name = n.name;
  concat.attrs["axis"] = axis;
  for (std::string const& e : parts) {
    ASSIGN_OR_RETURN(std::string u, axes_part(n, "Unsqueeze", e, axis));
    concat.inputs.push_back(std::move(u));
  }
  concat.outputs = {out};
  return lower_node(concat);
}

// A name no value, sequence or graph name holds yet.
std::string Lowering::fresh_value_name(std::string const& base) {
  std::string name = base;
  for (int k = 1; vals_.count(name) || sequences_.count(name) || used_.count(name); ++k)
    name = base + "_" + std::to_string(k);
  used_.insert(name);
  return name;
}

Lowering::Expansion Lowering::expansion_of(std::string const& type) {
  static std::map<std::string, Expansion> const kExpansions = {{"SplitToSequence", &Lowering::lower_sequence_op},
                                                               {"SequenceAt", &Lowering::lower_sequence_op},
                                                               {"SequenceConstruct", &Lowering::lower_sequence_op},
                                                               {"SequenceEmpty", &Lowering::lower_sequence_op},
                                                               {"SequenceInsert", &Lowering::lower_sequence_op},
                                                               {"SequenceErase", &Lowering::lower_sequence_op},
                                                               {"SequenceLength", &Lowering::lower_sequence_op},
                                                               {"ConcatFromSequence", &Lowering::lower_sequence_op},
                                                               {"DFT", &Lowering::lower_dft},
                                                               {"STFT", &Lowering::lower_stft},
                                                               {"AffineGrid", &Lowering::lower_affine_grid}};
  auto const it = kExpansions.find(type);
  return it == kExpansions.end() ? nullptr : it->second;
}

// `name` holds a value known at import.
void Lowering::set_constant(std::string const& name, SymArray value) {
  Val v;
  v.dtype = value.dtype;
  v.dims = value.dims;
  v.folded = std::move(value);
  vals_[name] = std::move(v);
}

// A constant value built at import (a DFT's matrix, a Split's sizes) under a fresh name.
std::string Lowering::constant_value(std::string const& base, SymArray value) {
  std::string const name = fresh_value_name(base);
  set_constant(name, std::move(value));
  return name;
}

// An int64 vector constant (a Split's sizes, a Squeeze's axes) under a fresh name.
std::string Lowering::int64s_value(std::string const& base, std::vector<int64_t> const& values) {
  SymArray a;
  a.dtype = DType::kInt64;
  a.i = values;
  a.dims = {static_cast<int64_t>(values.size())};
  return constant_value(base, std::move(a));
}

Result<std::vector<std::string> const*> Lowering::sequence(RawNode const& n, std::size_t k) {
  if (k >= n.inputs.size() || n.inputs[k].empty())
    return invalid_argument(n.type + " '" + n.name + "' needs a sequence as input " + std::to_string(k));
  auto it = sequences_.find(n.inputs[k]);
  if (it == sequences_.end())
    return invalid_argument(n.type + " '" + n.name + "' reads '" + n.inputs[k] +
                            "', which is no sequence graphpipe built at import");
  return &it->second;
}

// Sequences whose structure is known at import: TorchScript writes torch.split, chunk,
// tensor_split and unbind with sizes computed from shapes as SplitToSequence read by SequenceAt,
// and the dynamo exporter x.chunk without its optimizer (ShuffleNetV2's channel split). A sequence is the list of its
// elements' values and never reaches the graph: SplitToSequence is a Split (each piece squeezed without keepdims),
// SequenceAt an element, SequenceConstruct/Insert/Erase/Empty edit the list, SequenceLength is a constant and
// ConcatFromSequence a Concat (of the elements unsqueezed with new_axis). Sizes and positions must
// be known at import; a sequence of data-dependent length is refused.
Status Lowering::lower_sequence_op(RawNode const& n) {
  std::string const where = n.type + " '" + n.name + "'";
  auto value = [&](std::size_t k) { return node_input(n, k); };
  // A position input (SequenceAt, Insert, Erase): a static integer in [-count, count] (end inclusive
  // for Insert), or `fallback` when omitted.
  auto position = [&](std::size_t k, int64_t count, bool end_ok, int64_t fallback) -> Result<int64_t> {
    ASSIGN_OR_RETURN(Val * v, value(k));
    if (v == nullptr) return fallback;
    if (!v->is_static())
      return unsupported(where + ": its position ('" + n.inputs[k] +
                         "') is computed at run time; graphpipe resolves sequences at import");
    ASSIGN_OR_RETURN(SymArray const* p, sym(*v, n.inputs[k]));
    if (p->is_float() || p->has_batch() || p->numel() != 1)
      return invalid_argument(where + ": its position must be one integer");
    int64_t const at = p->i[0] < 0 ? p->i[0] + count : p->i[0];
    if (at < 0 || at > count || (at == count && !end_ok))
      return invalid_argument(where + ": position " + std::to_string(p->i[0]) + " is outside a sequence of " +
                              std::to_string(count));
    return at;
  };
  if (n.outputs.size() != 1 || n.outputs[0].empty()) return invalid_argument(where + " needs one output");
  std::string const& out = n.outputs[0];
  bool const inputs_form = m_.opset >= 13;  // Split's sizes: an input, else an attribute
  if (n.type == "SequenceEmpty") {
    sequences_[out] = {};
  } else if (n.type == "SequenceConstruct") {
    for (std::size_t k = 0; k < n.inputs.size(); ++k) RETURN_IF_ERROR(value(k).status());
    sequences_[out] = n.inputs;
  } else if (n.type == "SequenceAt") {
    ASSIGN_OR_RETURN(auto const* seq, sequence(n, 0));
    if (n.inputs.size() < 2 || n.inputs[1].empty()) return invalid_argument(where + " needs a position");
    ASSIGN_OR_RETURN(int64_t const at, position(1, static_cast<int64_t>(seq->size()), false, 0));
    vals_[out] = vals_.at((*seq)[static_cast<std::size_t>(at)]);
  } else if (n.type == "SequenceInsert") {
    ASSIGN_OR_RETURN(auto const* seq, sequence(n, 0));
    ASSIGN_OR_RETURN(Val * v, value(1));
    if (v == nullptr) return invalid_argument(where + " needs a tensor to insert");
    std::vector<std::string> elems = *seq;
    auto const count = static_cast<int64_t>(elems.size());
    ASSIGN_OR_RETURN(int64_t const at, position(2, count, true, count));
    elems.insert(elems.begin() + at, n.inputs[1]);
    sequences_[out] = std::move(elems);
  } else if (n.type == "SequenceErase") {
    ASSIGN_OR_RETURN(auto const* seq, sequence(n, 0));
    std::vector<std::string> elems = *seq;
    auto const count = static_cast<int64_t>(elems.size());
    if (count == 0) return invalid_argument(where + " erases from an empty sequence");
    ASSIGN_OR_RETURN(int64_t const at, position(1, count, false, count - 1));
    elems.erase(elems.begin() + at);
    sequences_[out] = std::move(elems);
  } else if (n.type == "SequenceLength") {
    ASSIGN_OR_RETURN(auto const* seq, sequence(n, 0));
    Val v;
    v.dtype = DType::kInt64;
    SymArray a;
    a.i = {static_cast<int64_t>(seq->size())};
    v.folded = std::move(a);
    vals_[out] = std::move(v);
  } else if (n.type == "ConcatFromSequence") {
    ASSIGN_OR_RETURN(auto const* seq, sequence(n, 0));
    if (seq->empty()) return invalid_argument(where + " concatenates an empty sequence");
    int64_t const axis = ops::attr_int(n.attrs, "axis", 0);
    std::vector<std::string> const elems = *seq;  // lowering the Unsqueezes may grow sequences_
    // new_axis: a new axis at `axis` of the result (rank r + 1), each element unsqueezed there.
    if (ops::attr_int(n.attrs, "new_axis", 0) != 0) return stack_values(n, elems, axis, out);
    RawNode concat;
    concat.type = "Concat";
    concat.name = n.name;
    concat.attrs["axis"] = axis;
    concat.inputs = elems;
    concat.outputs = {out};
    RETURN_IF_ERROR(lower_node(concat));
  } else {  // SplitToSequence
    ASSIGN_OR_RETURN(Val * x, value(0));
    if (x == nullptr) return invalid_argument(where + " needs an input");
    auto const rank = static_cast<int64_t>(x->dims.size());
    int64_t axis = ops::attr_int(n.attrs, "axis", 0);
    if (axis < -rank || axis >= rank)
      return invalid_argument(where + ": axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    int64_t const d = x->dims[static_cast<std::size_t>(axis)];
    if (d < 0) return unsupported(where + ": it splits the batch dimension into a sequence");
    constexpr int64_t kMaxPieces = 4096;  // a file cannot make the importer build a Split of billions
    std::vector<int64_t> sizes;
    bool squeeze = false;
    ASSIGN_OR_RETURN(Val * split, value(1));
    if (split != nullptr) {
      if (!split->is_static())
        return unsupported(where + ": its split sizes ('" + n.inputs[1] +
                           "') are computed at run time; graphpipe resolves sequences at import");
      ASSIGN_OR_RETURN(SymArray const* s, sym(*split, n.inputs[1]));
      if (s->is_float() || s->has_batch()) return invalid_argument(where + ": its split sizes must be integers");
      if (s->dims.empty()) {  // one size: pieces of it, the last one smaller
        int64_t const size = s->i.at(0);
        if (size <= 0) return invalid_argument(where + ": split size " + std::to_string(size) + " is not positive");
        if (d > 0 && (d - 1) / size >= kMaxPieces)
          return unsupported(where + ": more than " + std::to_string(kMaxPieces) + " pieces");
        for (int64_t at = 0; at < d; at += size) sizes.push_back(std::min(size, d - at));
      } else {
        if (s->numel() > kMaxPieces)
          return unsupported(where + ": more than " + std::to_string(kMaxPieces) + " pieces");
        sizes = s->i;
      }
    } else {  // pieces of one element, squeezed unless keepdims
      if (d > kMaxPieces) return unsupported(where + ": more than " + std::to_string(kMaxPieces) + " pieces");
      sizes.assign(static_cast<std::size_t>(d), 1);
      squeeze = ops::attr_int(n.attrs, "keepdims", 1) == 0;
    }
    std::vector<std::string> elems;
    if (!sizes.empty()) {
      RawNode op;
      op.type = "Split";
      op.name = n.name;
      op.inputs = {n.inputs[0]};
      op.attrs["axis"] = axis;
      if (inputs_form)
        op.inputs.push_back(int64s_value(out + "/sizes", sizes));
      else
        op.attrs["split"] = sizes;
      for (std::size_t k = 0; k < sizes.size(); ++k)
        op.outputs.push_back(fresh_value_name(out + "/" + std::to_string(k)));
      RETURN_IF_ERROR(lower_node(op));
      elems = op.outputs;
    }
    if (squeeze)
      for (std::string& e : elems) {
        ASSIGN_OR_RETURN(e, axes_part(n, "Squeeze", e, axis));
      }
    sequences_[out] = std::move(elems);
  }
  return Status::ok();
}

// DFT (opsets 17 and 20; torch.fft in a dynamo export, FNet's token mixing) as the linear map it
// is: the axis moved next to the trailing real/imaginary dim, the two flattened, a MatMul with the
// constant matrix of cosines and sines (zero rows past dft_length, 1/N for the inverse), the result
// unflattened to [..., K, 2] and moved back. Both backends run and differentiate those ops; the
// matrix is (n·c) x 2K for an input of n points of c components (1: real, 2: complex) and K
// outputs, so its size is capped.
// The DFT coefficient of input point m, component i (0 real, 1 imaginary), for output bin k,
// component o, of an N-point transform: e^{sign 2 pi i k m / N} times `scale`, as
// (a + bi)(re + im i) = (a re - b im) + (a im + b re) i.
double dft_coefficient(int64_t m, int64_t k, int64_t len, int64_t i, int64_t o, bool inverse, double scale) {
  double const theta = 2 * M_PI * static_cast<double>(k * m % len) / static_cast<double>(len);
  double const re = std::cos(theta) * scale, im = (inverse ? 1.0 : -1.0) * std::sin(theta) * scale;
  return i == 0 ? (o == 0 ? re : im) : (o == 0 ? -im : re);
}

// One node of what the lowering expands `parent` into, lowered at once: named after the parent, its
// output `output` or a fresh name.
Result<std::string> Lowering::lower_part(RawNode const& parent, std::string const& type,
                                         std::vector<std::string> inputs, std::string const& suffix, Attributes attrs,
                                         std::string const& output) {
  RawNode op;
  op.type = type;
  op.name = parent.name + "/" + suffix;
  op.inputs = std::move(inputs);
  op.attrs = std::move(attrs);
  op.outputs = {output.empty() ? fresh_value_name(parent.outputs.at(0) + "/" + suffix) : output};
  RETURN_IF_ERROR(lower_node(op));
  return op.outputs[0];
}

// Input k of a node the lowering expands (null when omitted).
Result<Val*> Lowering::node_input(RawNode const& n, std::size_t k) {
  if (k >= n.inputs.size() || n.inputs[k].empty()) return static_cast<Val*>(nullptr);
  auto it = vals_.find(n.inputs[k]);
  if (it == vals_.end())
    return invalid_argument(n.type + " '" + n.name + "' reads '" + n.inputs[k] + "', which nothing produces");
  return &it->second;
}

// Input k as one integer known at import (nullopt when omitted).
Result<std::optional<int64_t>> Lowering::static_int_input(RawNode const& n, std::size_t k, char const* what) {
  std::string const where = n.type + " '" + n.name + "'";
  ASSIGN_OR_RETURN(Val * v, node_input(n, k));
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_static()) return unsupported(where + ": its " + what + " ('" + n.inputs[k] + "') is computed at run time");
  ASSIGN_OR_RETURN(SymArray const* a, sym(*v, n.inputs[k]));
  if (a->has_batch())
    return unsupported(where + ": its " + what + " ('" + n.inputs[k] + "') depends on the batch size");
  if (a->is_float() || a->numel() != 1) return invalid_argument(where + ": its " + what + " must be one integer");
  return std::optional<int64_t>(a->i[0]);
}

Status Lowering::lower_dft(RawNode const& n) {
  std::string const where = "DFT '" + n.name + "'";
  auto input = [&](std::size_t k) { return node_input(n, k); };
  auto static_int = [&](std::size_t k, char const* what) { return static_int_input(n, k, what); };
  if (n.outputs.size() != 1 || n.outputs[0].empty()) return invalid_argument(where + " needs one output");
  ASSIGN_OR_RETURN(Val * x, input(0));
  if (x == nullptr) return invalid_argument(where + " needs an input");
  if (x->dtype != DType::kFloat32)
    return unsupported(where + ": input of dtype " + std::string(dtype_name(x->dtype)) + " (float32 only)");
  Dims const dims = x->dims;
  auto const r = static_cast<int64_t>(dims.size());
  if (r < 2 || (dims.back() != 1 && dims.back() != 2))
    return invalid_argument(where + ": its input " + dims_str(dims) +
                            " must end in a dimension of 1 (real) or 2 (real and imaginary parts)");
  int64_t const c = dims.back();
  int64_t axis = ops::attr_int(n.attrs, "axis", 1);
  if (m_.opset >= 20) {
    ASSIGN_OR_RETURN(std::optional<int64_t> a, static_int(2, "axis"));
    axis = a.value_or(-2);
  }
  if (axis < -r || axis > r - 2 || (axis < 0 && axis > -2))
    return invalid_argument(where + ": axis " + std::to_string(axis) + " is not a signal axis of " + dims_str(dims));
  if (axis < 0) axis += r;
  int64_t const points = dims[static_cast<std::size_t>(axis)];
  if (points < 0) return unsupported(where + ": it transforms along the batch dimension");
  ASSIGN_OR_RETURN(std::optional<int64_t> length, static_int(1, "dft_length"));
  int64_t const len = length.value_or(points);
  if (len <= 0) return invalid_argument(where + ": dft_length " + std::to_string(len) + " is not positive");
  bool const inverse = ops::attr_int(n.attrs, "inverse", 0) != 0;
  bool const onesided = ops::attr_int(n.attrs, "onesided", 0) != 0;
  if (onesided && (c == 2 || inverse))
    return unsupported(where + ": a one-sided " + (inverse ? "inverse DFT" : "DFT of a complex input") +
                       " (only a real input's forward transform is one-sided)");
  int64_t const outs = onesided ? len / 2 + 1 : len;
  int64_t const rows = points * c, cols = 2 * outs;
  constexpr int64_t kMaxMatrix = int64_t{1} << 24;
  if (rows > kMaxMatrix / cols)
    return unsupported(where + ": graphpipe computes a DFT as a product with its " + std::to_string(rows) + " x " +
                       std::to_string(cols) + " matrix of cosines and sines, over the limit of " +
                       std::to_string(kMaxMatrix) + " elements");
  // W[(m, i), (k, o)]: input point m, component i (0 real, 1 imaginary) to output k, component o.
  SymArray w;
  w.dtype = DType::kFloat32;
  w.dims = {rows, cols};
  w.f.assign(static_cast<std::size_t>(rows * cols), 0.0);
  double const scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  for (int64_t m = 0; m < std::min(points, len); ++m)
    for (int64_t k = 0; k < outs; ++k)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t o = 0; o < 2; ++o)
          w.f[static_cast<std::size_t>((m * c + i) * cols + k * 2 + o)] =
              dft_coefficient(m, k, len, i, o, inverse, scale);
  std::string const& out = n.outputs[0];
  std::string const matrix = constant_value(out + "/dft_matrix", std::move(w));
  // The signal axis next to the components: perm moves `axis` to r - 2.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < r - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(r - 1);
  bool const moved = axis != r - 2;
  std::string cur = n.inputs[0];
  if (moved) {
    ASSIGN_OR_RETURN(cur, lower_part(n, "Transpose", {cur}, "signal_last", {{"perm", perm}}));
  }
  std::vector<int64_t> flat(static_cast<std::size_t>(r - 2), 0);  // 0: copy the dim (the batch too)
  flat.push_back(rows);
  ASSIGN_OR_RETURN(cur, lower_part(n, "Reshape", {cur, int64s_value(out + "/flat_shape", flat)}, "flatten"));
  ASSIGN_OR_RETURN(cur, lower_part(n, "MatMul", {cur, matrix}, "matmul"));
  std::vector<int64_t> unflat(static_cast<std::size_t>(r - 2), 0);
  unflat.push_back(outs);
  unflat.push_back(2);
  ASSIGN_OR_RETURN(
      cur, lower_part(n, "Reshape", {cur, int64s_value(out + "/shape", unflat)}, "unflatten", {}, moved ? "" : out));
  if (moved) {
    std::vector<int64_t> back(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) back[static_cast<std::size_t>(perm[i])] = static_cast<int64_t>(i);
    ASSIGN_OR_RETURN(cur, lower_part(n, "Transpose", {cur}, "signal_back", {{"perm", back}}, out));
  }
  return Status::ok();
}

// STFT (opset 17; torch.stft in a dynamo export, a spectrogram front end) as the strided
// convolution it is: the signal [B, L, c] as c channels, one output channel per bin and component
// whose kernel is the window times that bin's DFT coefficients, stride frame_step; the result
// [B, 2K, frames] reshaped and transposed to [B, frames, K, 2]. The window and sizes must be known
// at import.
Status Lowering::lower_stft(RawNode const& n) {
  std::string const where = "STFT '" + n.name + "'";
  if (n.outputs.size() != 1 || n.outputs[0].empty()) return invalid_argument(where + " needs one output");
  ASSIGN_OR_RETURN(Val * x, node_input(n, 0));
  if (x == nullptr) return invalid_argument(where + " needs a signal");
  if (x->dtype != DType::kFloat32)
    return unsupported(where + ": signal of dtype " + std::string(dtype_name(x->dtype)) + " (float32 only)");
  Dims const dims = x->dims;
  if (dims.size() != 3 || (dims[2] != 1 && dims[2] != 2))
    return invalid_argument(where + ": its signal " + dims_str(dims) +
                            " must be [batch, length, 1] (real) or [batch, length, 2] (complex)");
  int64_t const c = dims[2], length = dims[1];
  if (length < 0) return unsupported(where + ": its signal's length is the batch size");
  ASSIGN_OR_RETURN(std::optional<int64_t> step, static_int_input(n, 1, "frame_step"));
  if (!step || *step <= 0) return invalid_argument(where + " needs a positive frame_step");
  ASSIGN_OR_RETURN(std::optional<int64_t> frame_length, static_int_input(n, 3, "frame_length"));
  std::vector<double> window;
  ASSIGN_OR_RETURN(Val * wv, node_input(n, 2));
  if (wv != nullptr) {
    if (!wv->is_static()) return unsupported(where + ": its window ('" + n.inputs[2] + "') is computed at run time");
    ASSIGN_OR_RETURN(SymArray const* w, sym(*wv, n.inputs[2]));
    if (!w->is_float() || w->dims.size() != 1)
      return invalid_argument(where + ": its window must be a 1-D float tensor");
    window = w->f;
  }
  if (!frame_length && window.empty()) return invalid_argument(where + " needs a window or a frame_length");
  int64_t const frame = frame_length.value_or(static_cast<int64_t>(window.size()));
  if (!window.empty() && static_cast<int64_t>(window.size()) != frame)
    return invalid_argument(where + ": its window has " + std::to_string(window.size()) + " values for frames of " +
                            std::to_string(frame));
  if (frame <= 0 || frame > length)
    return invalid_argument(where + ": frames of " + std::to_string(frame) + " do not fit a signal of " +
                            std::to_string(length));
  if (window.empty()) window.assign(static_cast<std::size_t>(frame), 1.0);
  bool const onesided = ops::attr_int(n.attrs, "onesided", 1) != 0;
  if (onesided && c == 2)
    return invalid_argument(where + ": onesided needs a real signal (set onesided = 0 for a complex one)");
  int64_t const bins = onesided ? frame / 2 + 1 : frame, frames = (length - frame) / *step + 1;
  constexpr int64_t kMaxKernel = int64_t{1} << 24;
  if (2 * bins * c > kMaxKernel / frame)
    return unsupported(where + ": graphpipe computes an STFT as a convolution whose kernel has " +
                       std::to_string(2 * bins * c * frame) + " elements, over the limit of " +
                       std::to_string(kMaxKernel));
  SymArray kernel;  // [2K, c, F]
  kernel.dtype = DType::kFloat32;
  kernel.dims = {2 * bins, c, frame};
  kernel.f.assign(static_cast<std::size_t>(2 * bins * c * frame), 0.0);
  for (int64_t k = 0; k < bins; ++k)
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t m = 0; m < frame; ++m)
          kernel.f[static_cast<std::size_t>(((k * 2 + o) * c + i) * frame + m)] =
              window[static_cast<std::size_t>(m)] * dft_coefficient(m, k, frame, i, o, false, 1.0);
  std::string const& out = n.outputs[0];
  std::string const weight = constant_value(out + "/stft_kernel", std::move(kernel));
  ASSIGN_OR_RETURN(std::string cur,
                   lower_part(n, "Transpose", {n.inputs[0]}, "channels", {{"perm", std::vector<int64_t>{0, 2, 1}}}));
  ASSIGN_OR_RETURN(cur, lower_part(n, "Conv", {cur, weight}, "frames",
                                   {{"kernel_shape", std::vector<int64_t>{frame}},
                                    {"strides", std::vector<int64_t>{*step}},
                                    {"pads", std::vector<int64_t>{0, 0}}}));
  ASSIGN_OR_RETURN(cur, lower_part(n, "Reshape", {cur, int64s_value(out + "/shape", {0, bins, 2, frames})}, "bins"));
  ASSIGN_OR_RETURN(
      cur, lower_part(n, "Transpose", {cur}, "frames_first", {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}, out));
  return Status::ok();
}

// AffineGrid (opset 20; torch's F.affine_grid in a TorchScript export, a spatial transformer) as
// the product it is: each output point's normalised coordinates (x, y[, z], 1), a constant
// [K + 1, P] over the P = H·W (or D·H·W) points, times theta [N, K, K + 1]; the result [N, K, P]
// transposed and reshaped to [N, (D,) H, W, K]. The spatial sizes must be known at import (the
// batch entry need not). Coordinates follow torch: align_corners spans [-1, 1] from the first
// point's centre to the last's, otherwise the points are pixel centres; an axis of one point sits
// at 0 either way (the ONNX reference divides by zero there).
Status Lowering::lower_affine_grid(RawNode const& n) {
  std::string const where = "AffineGrid '" + n.name + "'";
  if (n.outputs.size() != 1 || n.outputs[0].empty()) return invalid_argument(where + " needs one output");
  ASSIGN_OR_RETURN(Val * theta, node_input(n, 0));
  ASSIGN_OR_RETURN(Val * size_val, node_input(n, 1));
  if (theta == nullptr || size_val == nullptr) return invalid_argument(where + " needs theta and size");
  if (theta->dtype != DType::kFloat32)
    return unsupported(where + ": theta of dtype " + std::string(dtype_name(theta->dtype)) + " (float32 only)");
  if (!size_val->is_static())
    return unsupported(where + ": its size ('" + n.inputs[1] +
                       "') is computed at run time; graphpipe needs the grid's spatial sizes at import");
  ASSIGN_OR_RETURN(SymArray const* size, sym(*size_val, n.inputs[1]));
  if (size->is_float() || size->dims.size() != 1 || (size->numel() != 4 && size->numel() != 5))
    return invalid_argument(where + ": its size must be 4 (N, C, H, W) or 5 (N, C, D, H, W) integers");
  auto const k = static_cast<int64_t>(size->numel()) - 2;  // spatial axes, the points' coordinates
  Dims spatial;
  for (int64_t d = 2; d < 2 + k; ++d) {
    auto const j = static_cast<std::size_t>(d);
    if (!size->b.empty() && size->b[j] != 0)
      return unsupported(where + ": its spatial size " + std::to_string(d - 2) + " depends on the batch size");
    if (size->i[j] <= 0)
      return invalid_argument(where + ": spatial size " + std::to_string(size->i[j]) + " is not positive");
    spatial.push_back(size->i[j]);
  }
  if (theta->dims.size() != 3 || theta->dims[1] != k || theta->dims[2] != k + 1)
    return invalid_argument(where + ": theta " + dims_str(theta->dims) + " must be [N, " + std::to_string(k) + ", " +
                            std::to_string(k + 1) + "] for a size of " + std::to_string(k + 2) + " entries");
  int64_t points = 1;
  constexpr int64_t kMaxPoints = int64_t{1} << 22;
  for (int64_t d : spatial) {
    if (points > kMaxPoints / d)
      return unsupported(where + ": a grid of more than " + std::to_string(kMaxPoints) + " points");
    points *= d;
  }
  bool const align_corners = ops::attr_int(n.attrs, "align_corners", 0) != 0;
  auto coordinate = [&](int64_t i, int64_t steps) {
    if (steps <= 1) return 0.0;
    double const x = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(steps - 1);
    return align_corners ? x : x * static_cast<double>(steps - 1) / static_cast<double>(steps);
  };
  // base[c, p]: point p's coordinate c, x (the last spatial axis) first, then 1.
  SymArray base;
  base.dtype = DType::kFloat32;
  base.dims = {k + 1, points};
  base.f.assign(static_cast<std::size_t>((k + 1) * points), 1.0);
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (int64_t a = k - 1; a >= 0; --a) {  // a: spatial axis, the last varying fastest
      int64_t const steps = spatial[static_cast<std::size_t>(a)];
      int64_t const i = rest % steps;
      rest /= steps;
      base.f[static_cast<std::size_t>((k - 1 - a) * points + p)] = static_cast<float>(coordinate(i, steps));
    }
  }
  std::string const& out = n.outputs[0];
  std::string const matrix = constant_value(out + "/base_grid", std::move(base));
  ASSIGN_OR_RETURN(std::string cur, lower_part(n, "MatMul", {n.inputs[0], matrix}, "points"));
  ASSIGN_OR_RETURN(cur,
                   lower_part(n, "Transpose", {cur}, "coordinates_last", {{"perm", std::vector<int64_t>{0, 2, 1}}}));
  Dims shape{0};  // 0: the batch, copied
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  shape.push_back(k);
  ASSIGN_OR_RETURN(cur, lower_part(n, "Reshape", {cur, int64s_value(out + "/shape", shape)}, "grid", {}, out));
  return Status::ok();
}

// A model exported with a fixed batch size B computes what does not depend on the sample (HF's
// causal mask, [B, 1, T, T]) as constants of B equal rows. Where such a constant meets the batch
// in a broadcasting op, this node reads it narrowed to one row, which broadcasts over any batch as
// its B equal rows did; rows that differ cannot follow another batch size, and the error says to
// re-export with a dynamic batch.
// Returns the node reading the narrowed constants (ins point at them), or nothing when none is.
Result<std::optional<RawNode>> Lowering::narrow_batch_constants(RawNode const& n, std::vector<Val*>& ins) {
  std::optional<RawNode> out;
  ops::OpDef const* def = ops::find_op(n.type);
  if (def == nullptr || !def->broadcasts) return out;
  std::size_t rank = 0;
  for (Val const* v : ins)
    if (v) rank = std::max(rank, v->dims.size());
  std::vector<bool> batch(rank, false);  // aligned positions where an input holds the batch
  for (Val const* v : ins)
    if (v)
      for (std::size_t q = 0; q < v->dims.size(); ++q)
        batch[rank - v->dims.size() + q] = batch[rank - v->dims.size() + q] || v->dims[q] < 0;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    Val* v = ins[k];
    if (!v || !v->is_static() || (!v->folded && !v->data)) continue;  // no data: the broadcast error says why
    for (std::size_t q = 0; q < v->dims.size(); ++q) {
      if (!batch[rank - v->dims.size() + q] || v->dims[q] != fixed_batch_) continue;
      ASSIGN_OR_RETURN(SymArray const* a, sym(*v, n.inputs[k]));
      if (a->has_batch()) continue;
      int64_t outer = 1, inner = 1;
      for (std::size_t d = 0; d < q; ++d) outer *= v->dims[d];
      for (std::size_t d = q + 1; d < v->dims.size(); ++d) inner *= v->dims[d];
      auto const equal_rows = [&](auto const& x) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t r = 1; r < fixed_batch_; ++r)
            for (int64_t e = 0; e < inner; ++e)
              if (x[static_cast<std::size_t>((o * fixed_batch_ + r) * inner + e)] !=
                  x[static_cast<std::size_t>(o * fixed_batch_ * inner + e)])
                return false;
        return true;
      };
      if (!(a->is_float() ? equal_rows(a->f) : equal_rows(a->i)))
        return unsupported(n.type + " '" + n.name + "': its input '" + n.inputs[k] + "' " + dims_str(v->dims) +
                           " is a constant with the batch size " + std::to_string(fixed_batch_) +
                           " the model was exported with, whose rows differ, so it cannot follow another batch "
                           "size: re-export the model with a dynamic batch dimension (torch.onnx.export(..., "
                           "dynamic_shapes=...) or dynamic_axes=...)");
      SymArray one;
      one.dtype = a->dtype;
      one.dims = v->dims;
      one.dims[q] = 1;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < inner; ++e) {
          std::size_t const at = static_cast<std::size_t>(o * fixed_batch_ * inner + e);
          if (a->is_float())
            one.f.push_back(a->f[at]);
          else
            one.i.push_back(a->i[at]);
        }
      Val narrowed;
      narrowed.dtype = v->dtype;
      narrowed.dims = one.dims;
      narrowed.folded = std::move(one);
      std::string const name = n.inputs[k] + "_one_row";
      if (!out) out = n;
      out->inputs[k] = name;
      ins[k] = &vals_.try_emplace(name, std::move(narrowed)).first->second;
      break;
    }
  }
  return out;
}

Status Lowering::keep(RawNode const& n, std::vector<Val*> const& ins) {
  ops::OpDef const* def = ops::find_op(n.type);
  if (def == nullptr || def->infer == nullptr)
    return unsupported(n.type + " '" + n.name + "': no shape rule for this operator");
  if (ins.empty() || !ins[0]) return invalid_argument(n.type + " '" + n.name + "': the first input is missing");
  ops::InferContext c;
  c.type = n.type;
  c.name = n.name;
  c.opset = m_.opset;
  c.attrs = n.attrs;
  c.outputs = n.outputs;
  c.fixed_batch = fixed_batch_;
  for (Val const* v : ins) {
    ops::InputDesc d;
    if (v) {
      d.present = true;
      d.dtype = v->dtype;
      d.dims = v->dims;
    }
    c.inputs.push_back(std::move(d));
  }
  c.value_of = [&](std::size_t k, std::string const& what) { return static_input(n, ins, k, what); };
  auto kept = def->infer(c);
  if (!kept.is_ok() && fixed_batch_ > 1 &&
      kept.status().message().find("against " + std::to_string(fixed_batch_)) != std::string::npos)
    return Status(kept.status().code(),
                  n.type + " '" + n.name + "': " + kept.status().message() +
                      " (the model was exported with a fixed batch size of " + std::to_string(fixed_batch_) +
                      ", which this op's operands spell as a number: re-export it with a "
                      "dynamic batch dimension, torch.onnx.export(..., dynamic_shapes=...) or dynamic_axes=...)");
  if (!kept.is_ok()) return kept.status().with_context(n.type + " '" + n.name + "'");
  for (std::size_t k = kept->outs.size(); k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty() && used_.count(n.outputs[k]))
      return unsupported(n.type + " '" + n.name + "': output " + std::to_string(k) + " ('" + n.outputs[k] +
                         "') is used, but graphpipe only computes this operator's first " +
                         std::to_string(kept->outs.size()) + " output(s)");
  Op op;
  op.name = op_name(n);
  op.type = n.type;
  op.def = def;
  op.domain = n.domain;
  op.attrs = n.attrs;
  op.typed = kept->typed;
  for (std::size_t k : kept->data_inputs) {
    if (k >= n.inputs.size() || n.inputs[k].empty()) {
      op.inputs.push_back(kNoTensor);
      continue;
    }
    ASSIGN_OR_RETURN(TensorId t, materialize(n.inputs[k], *ins[k]));
    op.inputs.push_back(t);
  }
  for (std::size_t k = 0; k < kept->outs.size(); ++k) {
    auto const& [dtype, dims] = kept->outs[k];
    RETURN_IF_ERROR(check_against_onnx(n.outputs[k], dims));
    int batch_axes = 0;
    for (int64_t d : dims) batch_axes += d < 0;
    if (batch_axes > 1)
      return unsupported(n.type + " '" + n.name + "': output '" + n.outputs[k] + "' would have shape " +
                         dims_str(dims) + " with the batch in more than one dimension");
    TensorInfo t;
    t.name = n.outputs[k];
    t.dtype = dtype;
    t.shape.dims = dims;
    t.role = TensorRole::kActivation;
    t.id = static_cast<TensorId>(tensors_.size());
    tensors_.push_back(t);
    Val v;
    v.dtype = dtype;
    v.dims = dims;
    v.tensor = t.id;
    vals_[n.outputs[k]] = std::move(v);
    op.outputs.push_back(t.id);
  }
  op.id = static_cast<OpId>(ops_.size());
  ops_.push_back(std::move(op));
  return Status::ok();
}

Result<OpGraph> Lowering::run() {
  for (auto const& c : choices_)
    if (c.trainable) trainable_.insert(c.name);
  for (RawNode const* n : all_nodes(m_)) {  // If branches' nodes too
    for (auto const& in : n->inputs) used_.insert(in);
    for (auto const& b : n->bodies) used_.insert(b.outputs.begin(), b.outputs.end());
    if (!n->name.empty()) reserved_names_.insert(n->name);
  }
  for (auto const& o : m_.outputs) used_.insert(o.name);
  RETURN_IF_ERROR(add_inputs());
  for (auto const& n : m_.nodes) RETURN_IF_ERROR(lower_node(n));

  std::vector<TensorId> outputs;
  for (auto const& o : m_.outputs) {
    auto it = vals_.find(o.name);
    if (it == vals_.end()) return invalid_argument("graph output '" + o.name + "' is never produced");
    ASSIGN_OR_RETURN(TensorId t, materialize(o.name, it->second));
    outputs.push_back(t);
  }
  fill_accounting(ops_, tensors_);

  OpGraph g;
  g.set_name(m_.name);
  g.set_weight_choices(std::move(choices_));
  for (auto& t : tensors_) g.add_tensor(std::move(t));
  for (auto& op : ops_) g.add_op(std::move(op));
  for (TensorId t : inputs_) g.mark_input(t);
  for (TensorId t : outputs) g.mark_output(t);
  RETURN_IF_ERROR(g.finalize());
  return g;
}

}  // namespace

bool expanded_by_lowering(std::string const& type) { return Lowering::expansion_of(type) != nullptr; }

std::vector<std::string> const& supported_op_types() {
  static std::vector<std::string> const types = ops::op_types();
  return types;
}

Result<OpGraph> lower(RawModel model, bool first_dim_is_batch, std::vector<WeightChoice> choices,
                      int64_t max_unrolled_nodes) {
  Lowering l(std::move(model), first_dim_is_batch, std::move(choices), max_unrolled_nodes);
  return l.run();
}

}  // namespace gp::graph::onnx_import
