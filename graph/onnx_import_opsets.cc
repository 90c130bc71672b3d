// Opsets 24-28 (ONNX 1.19 to 1.23; torch 2.15's exporters write them with opset_version=24 and
// up). graphpipe builds against ONNX 1.18, whose schemas end at opset 23: its checker, shape
// inference and function bodies serve every operator that did not change after it, which is all
// but these. Opset 24 added Swish (rewritten here as the Sigmoid and Mul it is) and TensorScatter,
// and Attention's nonpad_kv_seqlen input; opset 25 Attention's sliding window (left_window_size,
// right_window_size); 26 BitCast and CumProd; 27 LinearAttention and CausalConvWithState, and
// Range's stash_type; 28 SwiGLU and SpaceToDepth's mode. Every other
// change in those opsets adds element types (float8e8m0, int2, float6, bfloat16 for more ops),
// which the importer's dtype check names when a model uses them. Runs before ONNX's checker, which
// would refuse an operator ONNX 1.18 does not know with its own words.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include "graph/onnx_namespace.h"

#include "graph/onnx_import_raw.h"
#include "graph/ops/registry.h"

namespace gp::graph::onnx_import {
namespace {

constexpr int64_t kLastKnownOpset = 23;  // ONNX 1.18's

onnx::AttributeProto const* attribute(onnx::NodeProto const& n, std::string const& name) {
  for (auto const& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::string node_label(onnx::NodeProto const& n) { return n.op_type() + " '" + n.name() + "'"; }

class NewerOpsets {
 public:
  NewerOpsets(onnx::ModelProto& model, int64_t opset) : model_(model), opset_(opset) { collect_names(model.graph()); }

  // Whether a node was rewritten or lost an attribute.
  Result<bool> run() {
    RETURN_IF_ERROR(adapt(*model_.mutable_graph()->mutable_node()));
    for (auto& f : *model_.mutable_functions()) RETURN_IF_ERROR(adapt(*f.mutable_node()));
    if (unknown_.empty()) return rewritten_;
    std::string list;
    for (auto const& u : unknown_) list += (list.empty() ? "" : "; ") + u;
    return unsupported("unsupported operator (added after opset " + std::to_string(kLastKnownOpset) + "): " + list +
                       ". graphpipe reads opsets up to 28 but not the operators they added, except Swish "
                       "(re-export with opset_version 23 or lower, where torch writes them as older operators)");
  }

 private:
  void collect_names(onnx::GraphProto const& g) {
    for (auto const& n : g.node()) {
      for (auto const& o : n.output()) used_.insert(o);
      for (auto const& a : n.attribute()) {
        if (a.has_g()) collect_names(a.g());
        for (auto const& sub : a.graphs()) collect_names(sub);
      }
    }
    for (auto const& i : g.input()) used_.insert(i.name());
    for (auto const& t : g.initializer()) used_.insert(t.name());
  }

  std::string fresh(std::string const& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

  Status adapt(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (auto& n : nodes) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) RETURN_IF_ERROR(adapt(*a.mutable_g()->mutable_node()));
        for (auto& sub : *a.mutable_graphs()) RETURN_IF_ERROR(adapt(*sub.mutable_node()));
      }
      if (!is_standard_domain(n.domain())) {
        *out.Add() = std::move(n);
        continue;
      }
      if (n.op_type() == "Swish") {
        RETURN_IF_ERROR(swish(n, out));
        rewritten_ = true;
        continue;
      }
      RETURN_IF_ERROR(adapt_attention(n));
      RETURN_IF_ERROR(drop_new_attributes(n));
      if (ops::find_op(n.op_type()) == nullptr && !rewritten_at_import(n.op_type()) &&
          onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset_), "") == nullptr)
        unknown_.insert(node_label(n));
      *out.Add() = std::move(n);
    }
    nodes.Swap(&out);
    return Status::ok();
  }

  // Swish(x) = x · sigmoid(alpha · x) (alpha 1 by default: SiLU).
  Status swish(onnx::NodeProto const& n, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
    if (n.input_size() != 1 || n.output_size() != 1 || n.input(0).empty())
      return invalid_argument(node_label(n) + " needs one input and one output");
    float alpha = 1.f;
    if (onnx::AttributeProto const* a = attribute(n, "alpha")) alpha = a->f();
    std::string const base = n.name().empty() ? n.output(0) : n.name();
    std::string scaled = n.input(0);
    if (alpha != 1.f) {
      onnx::NodeProto& c = *out.Add();
      c.set_op_type("Constant");
      c.set_name(fresh(base + "/alpha"));
      c.add_output(c.name());
      onnx::AttributeProto& v = *c.add_attribute();
      v.set_name("value_float");
      v.set_type(onnx::AttributeProto::FLOAT);
      v.set_f(alpha);
      onnx::NodeProto& m = *out.Add();
      m.set_op_type("Mul");
      m.set_name(fresh(base + "/scaled"));
      m.add_input(n.input(0));
      m.add_input(c.output(0));
      m.add_output(m.name());
      scaled = m.output(0);
    }
    onnx::NodeProto& s = *out.Add();
    s.set_op_type("Sigmoid");
    s.set_name(fresh(base + "/sigmoid"));
    s.add_input(scaled);
    s.add_output(s.name());
    onnx::NodeProto& y = *out.Add();
    y.set_op_type("Mul");
    y.set_name(fresh(base + "/swish"));
    y.add_input(n.input(0));
    y.add_input(s.output(0));
    y.add_output(n.output(0));
    return Status::ok();
  }

  // Attributes ONNX 1.18's checker does not know, dropped where they change nothing graphpipe
  // imports: Range's stash_type (opset 27) acts on float16 and bfloat16 ranges only, and
  // SpaceToDepth's mode (opset 28) DCR is what it did before; CRD is refused.
  Status drop_new_attributes(onnx::NodeProto& n) {
    char const* name = n.op_type() == "Range" ? "stash_type" : n.op_type() == "SpaceToDepth" ? "mode" : nullptr;
    if (name == nullptr) return Status::ok();
    auto& attrs = *n.mutable_attribute();
    for (int k = 0; k < attrs.size(); ++k) {
      if (attrs.Get(k).name() != name) continue;
      if (n.op_type() == "SpaceToDepth" && attrs.Get(k).s() != "DCR")
        return unsupported(node_label(n) + ": mode '" + attrs.Get(k).s() +
                           "' (opset 28) is not imported, only DCR (re-export with opset_version 23 or lower)");
      attrs.DeleteSubrange(k, 1);
      rewritten_ = true;
      break;
    }
    return Status::ok();
  }

  // Attention at opset 24 and later expands as ONNX 1.18's opset-23 body, which is the same
  // computation unless the newer input or attributes are used (window sizes of -1, no window, are
  // dropped).
  Status adapt_attention(onnx::NodeProto& n) {
    if (n.op_type() != "Attention") return Status::ok();
    if (n.input_size() > 6 && !n.input(6).empty())
      return unsupported(node_label(n) +
                         ": its nonpad_kv_seqlen input (opset 24: the valid lengths of a key-value cache, "
                         "for inference) is not imported (export the model for training, without a cache)");
    auto& attrs = *n.mutable_attribute();
    for (int k = attrs.size() - 1; k >= 0; --k) {
      std::string const& name = attrs.Get(k).name();
      if (name != "left_window_size" && name != "right_window_size") continue;
      if (attrs.Get(k).i() != -1)
        return unsupported(node_label(n) + ": its " + name + " " + std::to_string(attrs.Get(k).i()) +
                           " (opset 25's sliding window) is not imported (re-export with opset_version 23, where "
                           "the window is an attention mask)");
      attrs.DeleteSubrange(k, 1);
      rewritten_ = true;
    }
    return Status::ok();
  }

  onnx::ModelProto& model_;
  int64_t opset_;
  std::set<std::string> used_;
  std::set<std::string> unknown_;
  bool rewritten_ = false;
};

}  // namespace

Result<bool> adapt_newer_opset(onnx::ModelProto& model, int64_t opset) {
  if (opset <= kLastKnownOpset) return false;
  return NewerOpsets(model, opset).run();
}

}  // namespace gp::graph::onnx_import
