// Every op is resolved to its OpDef once (by the importer, else by OpGraph::add_op), and the
// run-time shape rules an OpDef carries agree with the shapes the importer inferred: on every zoo
// model and torch fixture, each op's run_shape over its inputs' shapes at a concrete batch gives its outputs' shapes
// at that batch.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include <onnx/defs/schema.h>
#include "graph/onnx_namespace.h"

#include "graph/onnx_import.h"
#include "graph/ops/common.h"
#include "graph/ops/conv.h"
#include "graph/ops/linalg.h"
#include "graph/ops/registry.h"
#include "models/zoo.h"
#include "tests/test_data.h"

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

// A backend names the op around every kernel's error once: an op_error from inside the kernel keeps
// its one "<type> '<name>': " (the first H200 run found "Gather 'g': Gather 'g': index 9 ..." from
// the CUDA backend's index and division-by-zero checks, where the CPU says it once).
TEST(OpDef, AnOpsErrorNamesTheOpOnce) {
  Op op;
  op.type = "Gather";
  op.name = "g";
  Status const inner = ops::op_error(op, "index 9 (position 1) is out of range");
  EXPECT_EQ(ops::in_op(inner, op).message(), "Gather 'g': index 9 (position 1) is out of range");
  EXPECT_EQ(ops::in_op(inner, op).code(), inner.code());
  EXPECT_EQ(ops::in_op(internal_error("cudaMemcpyAsync failed"), op).message(), "Gather 'g': cudaMemcpyAsync failed");
  Status const named = unsupported("Gather 'g' on cuda runs float16 data, got float32");
  EXPECT_EQ(ops::in_op(named, op).message(), named.message());
  Op other = op;
  other.name = "g2";  // another op's error is not this op's
  EXPECT_EQ(ops::in_op(inner, other).message(), "Gather 'g2': Gather 'g': index 9 (position 1) is out of range");
  EXPECT_TRUE(ops::in_op(Status::ok(), op).is_ok());
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

// The ops whose inputs broadcast numpy-style against each other, as their families define them
// (the importer narrows a fixed-batch export's constants only there).
TEST(OpDef, BroadcastingOpsAreTheElementwiseOnesWithSeveralInputs) {
  std::vector<std::string> broadcasting;
  for (auto const& [type, def] : ops::op_table())
    if (def.broadcasts) broadcasting.push_back(type);
  std::vector<std::string> const want = {"Add",        "And",         "BitShift", "BitwiseAnd", "BitwiseOr",
                                         "BitwiseXor", "Div",         "Equal",    "Greater",    "GreaterOrEqual",
                                         "Less",       "LessOrEqual", "Max",      "Mean",       "Min",
                                         "Mod",        "Mul",         "Or",       "Pow",        "Sub",
                                         "Sum",        "Where",       "Xor"};
  EXPECT_EQ(broadcasting, want);
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

// The same over the models a current PyTorch exported (tests/data/torch2: HF BERT, GPT-2, Llama,
// ViT, Swin, ConvNeXt, torchvision CNNs, ...), whose Conv, Gemm, MatMul, LayerNormalization and
// index ops the zoo does not all have; every op type with a shared rule is checked somewhere.
TEST(OpDef, RunShapesMatchTheImportedShapesOnEveryTorchFixture) {
  int64_t const batch = 3;
  std::set<std::string> types;
  int fixtures = 0;
  for (auto const& dir : std::filesystem::directory_iterator(testing::test_data_dir() / "torch2")) {
    if (!std::filesystem::exists(dir.path() / "model.onnx")) continue;
    std::string const name = dir.path().filename().string();
    auto g = load_onnx((dir.path() / "model.onnx").string());
    ASSERT_TRUE(g.is_ok()) << name << ": " << g.status().message();
    ++fixtures;
    for (Op const& op : g->ops()) {
      if (op.def == nullptr || op.def->run_shape == nullptr) continue;
      std::vector<ops::Dims> in;
      for (TensorId t : op.inputs) in.push_back(t == kNoTensor ? ops::Dims{} : g->tensor(t).shape.concrete(batch));
      auto outs = op.def->run_shape(*g, op, in, batch);
      ASSERT_TRUE(outs.is_ok()) << name << " " << op.name << ": " << outs.status().message();
      ASSERT_LE(outs->size(), op.outputs.size()) << name << " " << op.name;
      for (std::size_t k = 0; k < outs->size(); ++k)
        EXPECT_EQ((*outs)[k], g->tensor(op.outputs[k]).shape.concrete(batch)) << name << " " << op.name;
      types.insert(op.type);
    }
  }
  EXPECT_GE(fixtures, 30);
  for (char const* t : {"Conv", "Gemm", "MatMul", "LayerNormalization", "MaxPool", "Gather", "Concat"})
    EXPECT_TRUE(types.count(t)) << t << " was not checked";
}

// The shared rules by hand: ONNX's output sizes (a ceil_mode window past the input dropped, a
// ConvTranspose output_shape beyond the full output embedded) and mismatches named.
TEST(OpDef, WindowConvAndGemmRules) {
  EXPECT_EQ(ops::window_outputs(7, 3, 2, 1, 0, 0), 3);
  EXPECT_EQ(ops::window_outputs(7, 3, 2, 2, 0, 0), 2);  // the dilated kernel spans 5
  EXPECT_EQ(ops::window_outputs(6, 3, 2, 1, 0, 0), 2);
  EXPECT_EQ(ops::window_outputs(6, 3, 2, 1, 0, 0, true), 3);  // ceil: a last partial window
  EXPECT_EQ(ops::window_outputs(4, 1, 2, 1, 0, 1, true), 2);  // not one starting in the end pad
  EXPECT_EQ(ops::window_outputs(2, 5, 1, 1, 0, 0), 0);
  ConvAttrs conv;
  conv.strides = {2, 2}, conv.dilations = {1, 1}, conv.pads = {1, 1, 1, 1};
  auto w = ops::conv_window(conv, {4, 3, 9, 8}, {16, 3, 3, 3});
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_EQ(w->out_shape, (ops::Dims{4, 16, 5, 4}));
  auto bad = ops::conv_window(conv, {4, 2, 9, 8}, {16, 3, 3, 3});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("input channels 2 do not match weight [16,3,3,3] with group 1"),
            std::string::npos)
      << bad.status().message();
  ConvTransposeAttrs up;
  up.strides = {2}, up.dilations = {1}, up.output_padding = {0}, up.pads = {-1, 0};  // one past the full output
  auto t = ops::conv_transpose_window(up, {1, 2, 3}, {2, 5, 3});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->out_shape, (ops::Dims{1, 5, 8}));
  EXPECT_TRUE(t->embedded);
  EXPECT_EQ(t->computed, ops::Dims{7});
  EXPECT_EQ(t->offset, ops::Dims{1});
  auto g = ops::gemm_dims({4, 6}, {5, 6}, false, true);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(std::vector<int64_t>({g->m, g->n, g->k}), std::vector<int64_t>({4, 5, 6}));
  auto inner = ops::gemm_dims({4, 6}, {5, 6}, false, false);
  ASSERT_FALSE(inner.is_ok());
  EXPECT_NE(inner.status().message().find("inner dimensions differ: A [4,6], B [5,6]"), std::string::npos);
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

// OpDef::grad_free (the inputs no gradient flows into, which the importer never trains an
// initializer through) against ONNX's own schemas: an input ONNX declares non-differentiable is
// grad-free here and a differentiable one is not, except where graphpipe's kernels give a
// gradient ONNX does not (the cases below, each with its reason).
TEST(OpDef, GradFreeInputsAreOnnxsNonDifferentiableOnes) {
  std::set<std::pair<std::string, std::size_t>> const differentiated_here = {
      {"GridSample", 1},  // the grid: a spatial transformer learns it
      {"LSTM", 5},        // the initial states: a learned h0/c0 trains, as in torch
      {"LSTM", 6},       {"GRU", 5}, {"RNN", 5}, {"Clip", 1},  // a bound computed at run time
      {"Clip", 2},       {"Mod", 1},                           // the divisor
  };
  int checked = 0;
  std::set<std::pair<std::string, std::size_t>> used;
  for (auto const& [type, def] : ops::op_table()) {
    onnx::OpSchema const* schema = onnx::OpSchemaRegistry::Schema(type, 23, "");
    ASSERT_NE(schema, nullptr) << type;
    auto const& inputs = schema->inputs();
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      auto const category = inputs[k].GetDifferentiationCategory();
      if (category == onnx::OpSchema::Unknown) continue;  // e.g. Range, ConstantOfShape: ours decide
      bool const onnx_free = category == onnx::OpSchema::NonDifferentiable;
      bool const ours_free = def.grad_free.contains(k);
      if (differentiated_here.count({type, k})) {
        used.insert({type, k});
        EXPECT_TRUE(onnx_free && !ours_free) << type << " input " << k << " (" << inputs[k].GetName() << ")";
        continue;
      }
      ++checked;
      EXPECT_EQ(ours_free, onnx_free) << type << " input " << k << " (" << inputs[k].GetName() << "): ONNX declares it "
                                      << (onnx_free ? "non-differentiable" : "differentiable");
    }
  }
  EXPECT_EQ(used.size(), differentiated_here.size());  // no stale exception
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace gp::graph
