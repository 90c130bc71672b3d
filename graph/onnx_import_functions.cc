// Model-local functions (ModelProto.functions, which torch's dynamo exporter can write) inlined
// into the main graph with ONNX's inliner, after checking what ONNX's inliner does not: that no
// function calls itself (directly or through others), and that inlining does not expand the graph
// past the node limit (a chain of functions that each call the next twice doubles per level).
// Then the standard operators ONNX defines by a function body and graphpipe has no OpDef for
// (opset 23's Attention, RMSNormalization and RotaryEmbedding, GroupNormalization, Mish, ...)
// replaced by that body.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>
#include <onnx/inliner/inliner.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include "graph/onnx_namespace.h"

#include "graph/onnx_import_raw.h"
#include "graph/ops/registry.h"

namespace gp::graph::onnx_import {
namespace {

using FunctionKey = std::tuple<std::string, std::string, std::string>;  // domain, name, overload

FunctionKey key_of(onnx::FunctionProto const& f) { return {f.domain(), f.name(), f.overload()}; }
FunctionKey key_of(onnx::NodeProto const& n) { return {n.domain(), n.op_type(), n.overload()}; }
std::string name_of(FunctionKey const& k) {
  auto const& [domain, name, overload] = k;
  return (domain.empty() ? "" : domain + "::") + name + (overload.empty() ? "" : ":" + overload);
}

// Nodes of `nodes` once every call to a local function is inlined, If/Loop bodies included, capped
// at `cap`; fails on a call cycle. `state`: 1 while a function is on the call stack, 2 when done.
class ExpandedSize {
 public:
  ExpandedSize(onnx::ModelProto const& m, int64_t cap) : cap_(cap) {
    for (auto const& f : m.functions()) functions_.emplace(key_of(f), &f);
  }

  Result<int64_t> of(google::protobuf::RepeatedPtrField<onnx::NodeProto> const& nodes) {
    int64_t total = 0;
    for (auto const& n : nodes) {
      int64_t here = 1;
      auto const it = functions_.find(key_of(n));
      if (it != functions_.end()) {
        ASSIGN_OR_RETURN(here, of_function(it->first, it->second));
      } else {
        for (auto const& a : n.attribute()) {
          if (a.has_g()) {
            ASSIGN_OR_RETURN(int64_t const sub, of(a.g().node()));
            here = std::min(cap_, here + sub);
          }
          for (auto const& g : a.graphs()) {
            ASSIGN_OR_RETURN(int64_t const sub, of(g.node()));
            here = std::min(cap_, here + sub);
          }
        }
      }
      total = std::min(cap_, total + here);
    }
    return total;
  }

 private:
  Result<int64_t> of_function(FunctionKey const& k, onnx::FunctionProto const* f) {
    int& state = state_[k];
    if (state == 1)
      return unsupported("model-local function '" + name_of(k) +
                         "' calls itself (directly or through other functions); ONNX functions cannot recurse");
    if (state == 2) return size_[k];
    if (depth_ >= kMaxCallDepth)
      return unsupported("model-local functions call each other more than " + std::to_string(kMaxCallDepth) +
                         " deep (at '" + name_of(k) + "'); graphpipe refuses it");
    state = 1;
    ++depth_;
    auto const n = of(f->node());
    --depth_;
    if (!n.is_ok()) return n.status();
    state_[k] = 2;
    size_[k] = *n;
    return *n;
  }

  static constexpr int kMaxCallDepth = 64;
  int64_t cap_;
  int depth_ = 0;
  std::map<FunctionKey, onnx::FunctionProto const*> functions_;
  std::map<FunctionKey, int> state_;
  std::map<FunctionKey, int64_t> size_;
};

// The schema of a node to expand at `opset`, or null: standard domain, no OpDef, a function body.
onnx::OpSchema const* function_schema(onnx::NodeProto const& n, int opset) {
  if (!is_standard_domain(n.domain()) || ops::find_op(n.op_type()) != nullptr || rewritten_at_import(n.op_type()))
    return nullptr;
  onnx::OpSchema const* s = onnx::OpSchemaRegistry::Schema(n.op_type(), opset, "");
  if (s == nullptr || !(s->HasFunction() || s->HasContextDependentFunction())) return nullptr;
  return s;
}

// Every value's type the graph states (after shape inference): inputs, value_info, outputs and
// initializers. A context-dependent function body (Attention's) is built from its inputs' types.
std::unordered_map<std::string, onnx::TypeProto> value_types(onnx::GraphProto const& g) {
  std::unordered_map<std::string, onnx::TypeProto> types;
  for (auto const* list : {&g.input(), &g.value_info(), &g.output()})
    for (auto const& v : *list) types[v.name()] = v.type();
  for (auto const& t : g.initializer()) {
    onnx::TypeProto type;
    auto* tensor = type.mutable_tensor_type();
    tensor->set_elem_type(t.data_type());
    for (int64_t d : t.dims()) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    types[t.name()] = std::move(type);
  }
  return types;
}

// The body ONNX defines for `schema` at `opset`, called as `n` with inputs of `types`: its
// function where it has one, else the one built from the call's context; false when ONNX builds
// none. ONNX's exceptions pass through.
bool build_body(onnx::OpSchema const& schema, onnx::NodeProto const& n, std::vector<onnx::TypeProto> const& types,
                int opset, onnx::FunctionProto& body) {
  if (onnx::FunctionProto const* f = schema.HasFunction() ? schema.GetFunction(opset) : nullptr) {
    body = *f;
    return true;
  }
  return schema.BuildContextDependentFunction(onnx::FunctionBodyBuildContextImpl(n, types), body, opset);
}

bool has_subgraphs(onnx::FunctionProto const& body) {
  for (auto const& b : body.node())
    for (auto const& a : b.attribute())
      if (a.has_g() || a.graphs_size() > 0) return true;
  return false;
}

// The body of `n` at `opset`; an error names the node.
Result<onnx::FunctionProto> function_body(onnx::NodeProto const& n, onnx::OpSchema const& schema, int opset,
                                          std::unordered_map<std::string, onnx::TypeProto> const& types,
                                          std::string const& what) {
  std::vector<onnx::TypeProto> inputs;
  for (auto const& x : n.input()) {
    auto const it = types.find(x);
    inputs.push_back(x.empty() || it == types.end() ? onnx::TypeProto{} : it->second);
  }
  onnx::FunctionProto body;
  try {
    if (!build_body(schema, n, inputs, opset, body))
      return unsupported(what + ": ONNX has no function body for it at opset " + std::to_string(opset) +
                         " (re-export with another opset, or without this operator)");
  } catch (std::exception const& e) {
    return invalid_argument(what + ": ONNX cannot build its function body: " + e.what());
  }
  if (has_subgraphs(body))
    return unsupported(what + ": its function body has subgraphs, which graphpipe does not expand");
  return body;
}

// Replaces the main graph's function-op nodes by their bodies. Names inside a body get the prefix
// "<node>/fn<k>/" (k counts up until no value or node name of the graph starts with it).
class FunctionExpander {
 public:
  FunctionExpander(onnx::ModelProto& model, int64_t max_nodes)
      : model_(model), opset_(static_cast<int>(standard_opset(model))), max_nodes_(max_nodes) {
    onnx::GraphProto const& g = model.graph();
    for (auto const* list : {&g.input(), &g.value_info(), &g.output()})
      for (auto const& v : *list) taken_.insert(v.name());
    for (auto const& t : g.initializer()) taken_.insert(t.name());
    for (auto const& n : g.node()) {
      taken_.insert(n.name());
      for (auto const& o : n.output()) taken_.insert(o);
    }
  }

  bool needed() const {
    return std::any_of(model_.graph().node().begin(), model_.graph().node().end(),
                       [&](onnx::NodeProto const& n) { return function_schema(n, opset_) != nullptr; });
  }

  Status run() {
    // A context-dependent body needs its inputs' types: infer them once (errors surface later,
    // when the import's own shape inference runs).
    try {
      onnx::shape_inference::InferShapes(model_);
    } catch (std::exception const&) {
    }
    types_ = value_types(model_.graph());
    std::deque<onnx::NodeProto> todo(model_.graph().node().begin(), model_.graph().node().end());
    std::vector<onnx::NodeProto> out;
    int64_t expansions = 0;
    while (!todo.empty()) {
      onnx::NodeProto n = std::move(todo.front());
      todo.pop_front();
      onnx::OpSchema const* schema = function_schema(n, opset_);
      if (schema == nullptr) {
        out.push_back(std::move(n));
        continue;
      }
      std::string const what = n.op_type() + (n.name().empty() ? "" : " '" + n.name() + "'");
      if (++expansions > max_nodes_ || static_cast<int64_t>(out.size() + todo.size()) > max_nodes_)
        return unsupported("expanding the function operators (" + what + ", ...) makes more than " +
                           std::to_string(max_nodes_) + " nodes, graphpipe's limit: is it the right file?");
      ASSIGN_OR_RETURN(onnx::FunctionProto const body, function_body(n, *schema, opset_, types_, what));
      std::vector<onnx::NodeProto> nodes = substitute(n, *schema, body);
      // The body's nodes go first in the queue: a nested function op among them expands in turn.
      for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) todo.push_front(std::move(*it));
    }
    auto* nodes = model_.mutable_graph()->mutable_node();
    nodes->Clear();
    for (auto& n : out) *nodes->Add() = std::move(n);
    return Status::ok();
  }

 private:
  std::string fresh_prefix(onnx::NodeProto const& n) {
    std::string const base = n.name().empty() ? n.op_type() : n.name();
    for (;;) {
      std::string p = base + "/fn" + std::to_string(next_++) + "/";
      bool const clash = std::any_of(taken_.begin(), taken_.end(),
                                     [&](std::string const& t) { return t.compare(0, p.size(), p) == 0; });
      if (!clash) return p;
    }
  }

  // The body's nodes with the call's inputs, outputs and attributes in place of the formal ones.
  std::vector<onnx::NodeProto> substitute(onnx::NodeProto const& call, onnx::OpSchema const& schema,
                                          onnx::FunctionProto const& body) {
    std::string const prefix = fresh_prefix(call);
    std::unordered_map<std::string, std::string> names;
    for (int i = 0; i < body.input_size(); ++i) names[body.input(i)] = i < call.input_size() ? call.input(i) : "";
    for (int i = 0; i < body.output_size() && i < call.output_size(); ++i)
      if (!call.output(i).empty()) names[body.output(i)] = call.output(i);
    std::map<std::string, onnx::AttributeProto> attrs;
    for (auto const& [name, a] : schema.attributes())
      if (a.default_value.type() != onnx::AttributeProto::UNDEFINED) attrs[name] = a.default_value;
    for (auto const& a : call.attribute()) attrs[a.name()] = a;
    auto rename = [&](std::string const& v) -> std::string {
      if (v.empty()) return v;
      auto const it = names.find(v);
      if (it != names.end()) return it->second;
      std::string fresh = prefix + v;
      taken_.insert(fresh);
      names.emplace(v, fresh);
      return fresh;
    };
    std::vector<onnx::NodeProto> nodes;
    for (int k = 0; k < body.node_size(); ++k) {
      onnx::NodeProto const& b = body.node(k);
      onnx::NodeProto n;
      n.set_op_type(b.op_type());
      n.set_domain(b.domain());
      n.set_name(prefix + (b.name().empty() ? b.op_type() + std::to_string(k) : b.name()));
      taken_.insert(n.name());
      for (auto const& x : b.input()) n.add_input(rename(x));
      for (auto const& y : b.output()) n.add_output(rename(y));
      for (auto const& a : b.attribute()) {
        if (a.ref_attr_name().empty()) {
          *n.add_attribute() = a;
        } else if (auto const it = attrs.find(a.ref_attr_name()); it != attrs.end()) {
          onnx::AttributeProto& copy = *n.add_attribute() = it->second;
          copy.set_name(a.name());
        }
      }
      nodes.push_back(std::move(n));
    }
    return nodes;
  }

  onnx::ModelProto& model_;
  int opset_;
  int64_t max_nodes_;
  int next_ = 0;
  std::unordered_set<std::string> taken_;
  std::unordered_map<std::string, onnx::TypeProto> types_;
};

}  // namespace

bool is_standard_domain(std::string const& domain) { return domain.empty() || domain == "ai.onnx"; }

int64_t standard_opset(onnx::ModelProto const& m) {
  int64_t opset = 0;
  for (auto const& o : m.opset_import())
    if (is_standard_domain(o.domain())) opset = o.version();
  return opset;
}

Status expand_function_ops(onnx::ModelProto& model, int64_t max_nodes) {
  FunctionExpander expander(model, max_nodes);
  if (!expander.needed()) return Status::ok();
  return expander.run();
}

Status inline_local_functions(onnx::ModelProto& model, int64_t max_nodes) {
  if (model.functions_size() == 0) return Status::ok();
  ExpandedSize sizes(model, max_nodes + 1);
  ASSIGN_OR_RETURN(int64_t const nodes, sizes.of(model.graph().node()));
  if (nodes > max_nodes)
    return unsupported("inlining the model-local functions makes more than " + std::to_string(max_nodes) +
                       " nodes, graphpipe's limit: is it the right file?");
  try {
    onnx::inliner::InlineLocalFunctions(model, /*convert_version=*/false);
  } catch (std::exception const& e) {
    return invalid_argument(std::string("ONNX's inliner cannot inline the model-local functions: ") + e.what());
  }
  // The inliner leaves the functions whose opset imports differ from the model's.
  if (model.functions_size() > 0) {
    std::string names;
    for (auto const& f : model.functions()) names += (names.empty() ? "" : ", ") + name_of(key_of(f));
    return unsupported("model-local function(s) " + names +
                       " import opset versions other than the model's, so they cannot be inlined: re-export the "
                       "model with one opset version");
  }
  return Status::ok();
}

}  // namespace gp::graph::onnx_import

namespace gp::graph {

namespace {

// Whether the body ONNX builds for `schema` (at its own version; every input given, as a float
// tensor of rank 4 where the input allows float, else of its first allowed type; a required number
// attribute 1) holds only operators graphpipe imports, through nested function operators too, and
// no subgraphs. The import can still refuse a use whose body has an unsupported form (a dtype, an
// attribute value); ONNX's node tests of these operators pass (tests/exec/test_onnx_node_conformance.cc).
bool body_runs(onnx::OpSchema const& schema, int depth = 0) {
  if (depth > 8) return false;
  onnx::NodeProto node;
  node.set_op_type(schema.Name());
  std::vector<onnx::TypeProto> types;
  for (std::size_t i = 0; i < schema.inputs().size(); ++i) {
    node.add_input("i" + std::to_string(i));
    auto const& allowed = schema.inputs()[i].GetTypes();
    if (allowed.empty()) return false;
    onnx::DataType const fp = onnx::Utils::DataTypeUtils::ToType("tensor(float)");
    onnx::DataType const pick = allowed.count(fp) > 0 ? fp : *allowed.begin();
    onnx::TypeProto type = onnx::Utils::DataTypeUtils::ToTypeProto(pick);
    if (type.has_tensor_type())
      for (int d = 0; d < 4; ++d) type.mutable_tensor_type()->mutable_shape()->add_dim();
    types.push_back(std::move(type));
  }
  for (std::size_t i = 0; i < schema.outputs().size(); ++i) node.add_output("o" + std::to_string(i));
  for (auto const& [name, a] : schema.attributes()) {  // a required number: 1 (GroupNormalization's num_groups)
    if (!a.required) continue;
    onnx::AttributeProto& value = *node.add_attribute();
    value.set_name(name);
    value.set_type(a.type);
    if (a.type == onnx::AttributeProto::INT) value.set_i(1);
    if (a.type == onnx::AttributeProto::FLOAT) value.set_f(1.f);
  }
  onnx::FunctionProto body;
  try {
    if (!onnx_import::build_body(schema, node, types, schema.SinceVersion(), body)) return false;
  } catch (std::exception const&) {
    return false;
  }
  if (onnx_import::has_subgraphs(body)) return false;
  auto const& supported = onnx_import::supported_op_types();
  for (auto const& n : body.node()) {
    if (!onnx_import::is_standard_domain(n.domain())) return false;
    if (std::binary_search(supported.begin(), supported.end(), n.op_type()) ||
        onnx_import::rewritten_at_import(n.op_type()))
      continue;
    onnx::OpSchema const* inner = onnx::OpSchemaRegistry::Schema(n.op_type(), schema.SinceVersion(), "");
    if (inner == nullptr || !(inner->HasFunction() || inner->HasContextDependentFunction()) ||
        !body_runs(*inner, depth + 1))
      return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> const& function_op_types() {
  static std::vector<std::string> const types = [] {
    std::vector<std::string> found;
    for (auto const& s : onnx::OpSchemaRegistry::get_all_schemas()) {
      if (!s.domain().empty() || s.Deprecated() || !(s.HasFunction() || s.HasContextDependentFunction()) ||
          ops::find_op(s.Name()) != nullptr || onnx_import::rewritten_at_import(s.Name()))
        continue;
      if (body_runs(s)) found.push_back(s.Name());
    }
    std::sort(found.begin(), found.end());
    return found;
  }();
  return types;
}

}  // namespace gp::graph
