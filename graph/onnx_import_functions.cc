// Model-local functions (ModelProto.functions, which torch's dynamo exporter can write) inlined
// into the main graph with ONNX's inliner, after checking what ONNX's inliner does not: that no
// function calls itself (directly or through others), and that inlining does not expand the graph
// past the node limit (a chain of functions that each call the next twice doubles per level).
#include <map>
#include <set>
#include <tuple>

#include <onnx/inliner/inliner.h>
#include <onnx/onnx_pb.h>
#include "graph/onnx_namespace.h"

#include "graph/onnx_import_raw.h"

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

}  // namespace

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
