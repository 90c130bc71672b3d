// Which initializers the importer trains: buffers (non-finite values, tensors that only feed masks,
// comparisons or indices) stay constants, weights keep training, and the trainable/frozen name
// patterns of the training config override the choice.
#include <gtest/gtest.h>

#include <limits>

#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "tests/graph/causal_attention_model.h"

namespace gp::graph {
namespace {

WeightChoice const& choice(OpGraph const& g, std::string const& name) {
  for (auto const& c : g.weight_choices())
    if (c.name == name) return c;
  ADD_FAILURE() << "no initializer " << name;
  static WeightChoice const none;
  return none;
}

TensorRole role(OpGraph const& g, std::string const& name) {
  auto t = g.find_tensor(name);
  return t ? g.tensor(*t).role : TensorRole::kActivation;
}

OpGraph must_import(OnnxModelBuilder const& b, ImportOptions const& o = {}) {
  auto g = b.to_graph(o);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? std::move(g).value() : OpGraph{};
}

TEST(Trainable, NegativeInfinityCausalMaskIsABufferNotAWeight) {
  OpGraph const g = must_import(testing::causal_attention());
  WeightChoice const& mask = choice(g, "attn.mask");
  EXPECT_FALSE(mask.trainable);
  EXPECT_EQ(mask.reason, "non-finite values");
  EXPECT_EQ(role(g, "attn.mask"), TensorRole::kConstant);
  // The real weights keep training, each with the rule that chose it.
  for (char const* w : {"attn.wq", "attn.wk", "attn.wv", "head.w"}) {
    EXPECT_TRUE(choice(g, w).trainable) << w;
    EXPECT_EQ(role(g, w), TensorRole::kWeight) << w;
  }
  EXPECT_EQ(choice(g, "head.w").reason, "weight of MatMul 'head'");
  EXPECT_EQ(choice(g, "attn.scale").reason, "single number");
  EXPECT_EQ(g.weights().size(), 4u);
  EXPECT_EQ(g.weight_choices().size(), 6u);
}

TEST(Trainable, AnInitializerThatOnlyFeedsAComparisonIsNotTrained) {
  // attn.bias reaches the graph through Expand (a rule that marks learned tensors) but only feeds
  // Equal, whose result is Where's condition: no gradient ever reaches it.
  OpGraph const g = must_import(testing::causal_attention({.mask_is_float_ones = true}));
  WeightChoice const& bias = choice(g, "attn.bias");
  EXPECT_FALSE(bias.trainable);
  EXPECT_EQ(bias.reason, "feeds only masks, comparisons or indices");
  EXPECT_NE(role(g, "attn.bias"), TensorRole::kWeight);
  EXPECT_EQ(choice(g, "attn.mask_shape").reason, "not a float tensor (int64)");
  EXPECT_EQ(g.weights().size(), 4u);
}

TEST(Trainable, IndicesAndWhereConditionsThroughViewsAreNotTrained) {
  // A float table cast to int64 and used as Gather indices, and a float tensor reshaped and
  // compared: both only reach index or condition slots.
  OnnxModelBuilder b("indices", 17, 1);
  auto x = b.add_input("x", {kBatch, 6});
  auto w = b.add_initializer("w", {6, 6}, InitRule::uniform(0.3));
  auto idx = b.add_initializer("idx_f", TensorData::from_floats({3}, {0, 2, 4}), false);
  auto keep = b.add_initializer("keep", TensorData::from_floats({2, 3}, {1, 0, 1, 1, 1, 0}), false);
  auto zero = b.add_initializer("zero", TensorData::from_floats({}, {0.f}), false);
  b.add_node("MatMul", {x, w}, {"h"});
  b.add_node("Cast", {idx}, {"idx"}, {{"to", int64_t{7}}});
  b.add_node("Gather", {"h", "idx"}, {"g"}, {{"axis", int64_t{1}}});
  b.add_node("Concat", {keep}, {"keep2"}, {{"axis", int64_t{0}}});
  b.add_node("Reshape", {"keep2", b.add_initializer("shape", TensorData::from_int64s({1}, {6}), false)}, {"k6"});
  b.add_node("Equal", {"k6", zero}, {"drop"});
  b.add_node("Where", {"drop", zero, "h"}, {"hm"});
  b.add_node("Concat", {"g", "hm"}, {"y"}, {{"axis", int64_t{1}}});
  b.add_output("y", {kBatch, 9});
  OpGraph const g = must_import(b);
  EXPECT_TRUE(choice(g, "w").trainable);
  EXPECT_FALSE(choice(g, "idx_f").trainable);
  EXPECT_EQ(choice(g, "idx_f").reason, "feeds only masks, comparisons or indices");
  EXPECT_FALSE(choice(g, "keep").trainable);  // Concat would mark it; it only feeds Equal
  EXPECT_EQ(choice(g, "keep").reason, "feeds only masks, comparisons or indices");
  EXPECT_EQ(g.weights().size(), 1u);
}

TEST(Trainable, NaNWeightsAreNeverTrained) {
  OnnxModelBuilder b("nan", 17, 1);
  auto x = b.add_input("x", {kBatch, 2});
  float const nan = std::numeric_limits<float>::quiet_NaN();
  auto w = b.add_initializer("w", TensorData::from_floats({2, 2}, {1, nan, 0, 1}), true);
  b.add_node("MatMul", {x, w}, {"y"});
  b.add_output("y", {kBatch, 2});
  OpGraph const g = must_import(b);
  EXPECT_FALSE(choice(g, "w").trainable);
  EXPECT_EQ(choice(g, "w").reason, "non-finite values");
}

TEST(Trainable, FrozenAndTrainablePatternsOverrideTheImporter) {
  ImportOptions o;
  o.frozen = {"attn.w?", "head.*"};
  o.trainable = {"attn.scale"};
  OpGraph const g = must_import(testing::causal_attention(), o);
  for (char const* w : {"attn.wq", "attn.wk", "attn.wv"}) {
    EXPECT_FALSE(choice(g, w).trainable) << w;
    EXPECT_EQ(choice(g, w).reason, "frozen by pattern 'attn.w?'") << w;
  }
  EXPECT_EQ(choice(g, "head.w").reason, "frozen by pattern 'head.*'");
  EXPECT_TRUE(choice(g, "attn.scale").trainable);
  EXPECT_EQ(choice(g, "attn.scale").reason, "trainable by pattern 'attn.scale'");
  EXPECT_EQ(role(g, "attn.scale"), TensorRole::kWeight);
  ASSERT_EQ(g.weights().size(), 1u);

  // Frozen wins over trainable; `*` matches any run, also an empty one.
  ImportOptions both;
  both.trainable = {"*w*"};
  both.frozen = {"attn.*"};
  OpGraph const g2 = must_import(testing::causal_attention(), both);
  ASSERT_EQ(g2.weights().size(), 1u);
  EXPECT_EQ(g2.tensor(g2.weights()[0]).name, "head.w");
  EXPECT_EQ(choice(g2, "head.w").reason, "trainable by pattern '*w*'");
}

// A tied weight as the dynamo exporter's optimizer leaves it: the output projection reads a folded
// copy of the embedding's transpose. The importer reads the copy as Transpose(embedding) again, so
// one weight trains, as in torch; naming the copy under `trainable` keeps it apart.
OnnxModelBuilder folded_tied_weight(std::vector<float> const& emb, std::vector<float> const& head) {
  OnnxModelBuilder b("tied", 17, 1);
  auto ids = b.add_input("ids", {kBatch, 3}, DType::kInt64);
  auto e = b.add_initializer("model.embed.weight", TensorData::from_floats({4, 2}, emb), true);
  auto h = b.add_initializer("val_7", TensorData::from_floats({2, 4}, head), true);
  b.add_node("Gather", {e, ids}, {"x"});
  b.add_node("MatMul", {"x", h}, {"logits"});
  b.add_output("logits", {kBatch, 3, 4});
  return b;
}

TEST(Trainable, AFoldedTransposeOfAWeightIsTiedToItAgain) {
  std::vector<float> const emb{0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f};
  std::vector<float> const transposed{0.1f, 0.3f, -0.5f, 0.7f, -0.2f, 0.4f, 0.6f, -0.8f};
  OpGraph const g = must_import(folded_tied_weight(emb, transposed));
  ASSERT_EQ(g.weights().size(), 1u);
  EXPECT_EQ(g.tensor(g.weights()[0]).name, "model.embed.weight");
  EXPECT_EQ(g.weight_choices().size(), 1u);  // the copy is gone
  EXPECT_NE(choice(g, "model.embed.weight").reason.find("the copy 'val_7' (retied)"), std::string::npos)
      << choice(g, "model.embed.weight").reason;
  int readers = 0;
  for (Op const& op : g.ops())
    for (TensorId t : op.inputs) readers += t == g.weights()[0];
  EXPECT_EQ(readers, 2);  // the Gather and the MatMul (its Transpose folded into trans_b)

  // Named under trainable, the copy stays a weight of its own.
  ImportOptions apart;
  apart.trainable = {"val_7"};
  EXPECT_EQ(must_import(folded_tied_weight(emb, transposed), apart).weights().size(), 2u);
  // Not the transpose (one value off), or a constant matrix: nothing is tied.
  std::vector<float> off = transposed;
  off[5] = 0.41f;
  EXPECT_EQ(must_import(folded_tied_weight(emb, off)).weights().size(), 2u);
  EXPECT_EQ(must_import(folded_tied_weight(std::vector<float>(8, 1.f), std::vector<float>(8, 1.f))).weights().size(),
            2u);
  // Two identity-initialised square weights are each other's transpose, and stay apart.
  OnnxModelBuilder eye("eye", 17, 1);
  auto x = eye.add_input("x", {kBatch, 2});
  auto a = eye.add_initializer("a", TensorData::from_floats({2, 2}, {1, 0, 0, 1}), true);
  auto b = eye.add_initializer("b", TensorData::from_floats({2, 2}, {1, 0, 0, 1}), true);
  eye.add_node("MatMul", {x, a}, {"h"});
  eye.add_node("MatMul", {"h", b}, {"y"});
  eye.add_output("y", {kBatch, 2});
  EXPECT_EQ(must_import(eye).weights().size(), 2u);
}

TEST(Trainable, PatternErrorsNameThePattern) {
  ImportOptions none;
  none.frozen = {"*.mask", "encoder.*"};
  auto g = testing::causal_attention().to_graph(none);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("frozen pattern 'encoder.*' matches no initializer"), std::string::npos)
      << g.status().message();

  ImportOptions mask;
  mask.trainable = {"attn.mask"};
  g = testing::causal_attention().to_graph(mask);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("trainable pattern 'attn.mask' matches initializer 'attn.mask'"),
            std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("non-finite"), std::string::npos) << g.status().message();

  ImportOptions ints;
  ints.trainable = {"attn.mask_*"};
  g = testing::causal_attention({.mask_is_float_ones = true}).to_graph(ints);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("initializer 'attn.mask_shape', which is not a float tensor"), std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace gp::graph
