// Every op is resolved to its OpDef once (by the importer, else by OpGraph::add_op), and the
// run-time shape rules an OpDef carries agree with the shapes the importer inferred: on every zoo
// model, each op's run_shape over its inputs' shapes at a concrete batch gives its outputs' shapes
// at that batch.
#include <gtest/gtest.h>

#include "graph/ops/registry.h"
#include "models/zoo.h"

namespace gp::graph {
namespace {

TEST(OpDef, TheImporterResolvesEveryOp) {
  for (auto const& info : models::model_list()) {
    auto g = models::build_graph(info.name, models::Size::kTiny, 0, /*load_weights=*/false);
    ASSERT_TRUE(g.is_ok()) << info.name << ": " << g.status().message();
    for (Op const& op : g->ops()) {
      ASSERT_NE(op.def, nullptr) << info.name << " " << op.name;
      EXPECT_EQ(op.def, ops::find_op(op.type)) << info.name << " " << op.name;
    }
  }
}

TEST(OpDef, AddOpResolvesHandBuiltOpsFromTheirType) {
  OpGraph g;
  TensorInfo x;
  x.name = "x";
  x.shape = Shape{{kBatch, 4}};
  x.role = TensorRole::kInput;
  TensorId const in = g.add_tensor(x);
  g.mark_input(in);
  TensorInfo y;
  y.name = "y";
  y.shape = Shape{{kBatch, 4}};
  TensorId const out = g.add_tensor(y);
  Op relu;
  relu.name = "relu";
  relu.type = "Relu";
  relu.inputs = {in};
  relu.outputs = {out};
  OpId const id = g.add_op(relu);
  Op unknown;
  unknown.name = "unknown";
  unknown.type = "NoSuchOp";
  unknown.inputs = {out};
  OpId const other = g.add_op(unknown);
  EXPECT_EQ(g.op(id).def, ops::find_op("Relu"));
  EXPECT_EQ(g.op(other).def, nullptr);
  EXPECT_EQ(g.op(id).kind(), ops::OpKind::kRelu);
  EXPECT_EQ(g.op(other).kind(), ops::OpKind::kUnknown);
}

// Every type the op table defines has an OpKind and back: the enum is what exec compares.
TEST(OpDef, EveryOpTypeHasAKindAndEveryKindADefinition) {
  std::size_t kinds = 0;
  for (auto const& [type, def] : ops::op_table()) {
    EXPECT_NE(def.kind, ops::OpKind::kUnknown) << type;
    EXPECT_EQ(ops::op_kind_name(def.kind), type);
    EXPECT_EQ(ops::op_kind(type), def.kind);
  }
#define GP_COUNT_KIND(name)                        \
  ++kinds;                                         \
  if (ops::OpDef const* def = ops::find_op(#name)) \
    EXPECT_EQ(def->kind, ops::OpKind::k##name);    \
  else                                             \
    ADD_FAILURE() << #name " has an OpKind but no OpDef";
  GP_OP_KINDS(GP_COUNT_KIND)
#undef GP_COUNT_KIND
  EXPECT_EQ(kinds, ops::op_table().size());
  EXPECT_EQ(ops::op_kind("NoSuchOp"), ops::OpKind::kUnknown);
  EXPECT_EQ(ops::op_kind_name(ops::OpKind::kUnknown), "");
}

// What the executor asks of an op instead of its type name: which ops carry training state (the
// running statistics that export and checkpoints keep) and which compute weight gradients in B.
TEST(OpDef, StateAndWeightGradientPassesAreTheNormalisations) {
  std::vector<std::string> with_state, grads_in_b;
  for (auto const& [type, def] : ops::op_table()) {
    if (!def.state_inputs.empty()) with_state.push_back(type);
    if (def.weight_grads_in_b) grads_in_b.push_back(type);
  }
  EXPECT_EQ(with_state, std::vector<std::string>{"BatchNormalization"});
  EXPECT_EQ(ops::find_op("BatchNormalization")->state_inputs, (std::vector<std::size_t>{3, 4}));
  EXPECT_EQ(grads_in_b, (std::vector<std::string>{"BatchNormalization", "LayerNormalization"}));
}

TEST(OpDef, RunShapesMatchTheImportedShapesOnEveryZooModel) {
  int64_t const batch = 3;
  int checked = 0;
  for (auto const& info : models::model_list()) {
    auto g = models::build_graph(info.name, models::Size::kTiny, 0, /*load_weights=*/false);
    ASSERT_TRUE(g.is_ok()) << info.name << ": " << g.status().message();
    for (Op const& op : g->ops()) {
      if (op.def == nullptr || op.def->run_shape == nullptr) continue;
      std::vector<ops::Dims> in;
      for (TensorId t : op.inputs) in.push_back(t == kNoTensor ? ops::Dims{} : g->tensor(t).shape.concrete(batch));
      auto outs = op.def->run_shape(*g, op, in, batch);
      ASSERT_TRUE(outs.is_ok()) << info.name << " " << op.name << ": " << outs.status().message();
      ASSERT_LE(outs->size(), op.outputs.size()) << info.name << " " << op.name;
      for (std::size_t k = 0; k < outs->size(); ++k)
        EXPECT_EQ((*outs)[k], g->tensor(op.outputs[k]).shape.concrete(batch)) << info.name << " " << op.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// The comparison can fail: outputs made concrete at another batch than the inputs differ.
TEST(OpDef, RunShapeComparisonCanFail) {
  auto g = models::build_graph("transformer", models::Size::kTiny, 0, /*load_weights=*/false);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  int differing = 0;
  for (Op const& op : g->ops()) {
    if (op.def == nullptr || op.def->run_shape == nullptr) continue;
    std::vector<ops::Dims> in;
    for (TensorId t : op.inputs) in.push_back(t == kNoTensor ? ops::Dims{} : g->tensor(t).shape.concrete(3));
    auto outs = op.def->run_shape(*g, op, in, 3);
    ASSERT_TRUE(outs.is_ok()) << op.name << ": " << outs.status().message();
    differing += !outs->empty() && (*outs)[0] != g->tensor(op.outputs[0]).shape.concrete(4);
  }
  EXPECT_GT(differing, 0);
}

}  // namespace
}  // namespace gp::graph
