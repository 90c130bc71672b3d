// Which initializers the importer trains: buffers (non-finite values, tensors that only feed masks,
// comparisons or indices, sinusoidal position tables) stay constants, weights keep training, and the trainable/frozen
// name patterns of the training config override the choice.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
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

// A mixture of experts' stacked weights, picked per token by GatherND (transformers' batched_mm
// experts in Mixtral and Qwen2-MoE) or GatherElements, are weights: before, they stayed constants
// and only the router trained.
TEST(Trainable, TablesGatherNDAndGatherElementsIndexAreWeights) {
  auto g = load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,2] x) => (float[N,3] y, float[N,3] z)
    <float[2,4] router = {1, 0, -1, 2, 0.5, 1, 0, -2},
     float[4,3,2] experts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
     float[4,3] table = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> {
      logits = MatMul(x, router)
      pick = ArgMax<axis = 1, keepdims = 1>(logits)
      w = GatherND(experts, pick)
      two = Constant<value = int64[1] {2}>()
      column = Unsqueeze(x, two)
      product = MatMul(w, column)
      y = Squeeze(product, two)
      three = Constant<value = int64[2] {1, 3}>()
      rows = Expand(pick, three)
      z = GatherElements<axis = 0>(table, rows)
    })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_TRUE(choice(*g, "experts").trainable);
  EXPECT_EQ(choice(*g, "experts").reason, "table indexed by GatherND");
  EXPECT_EQ(role(*g, "experts"), TensorRole::kWeight);
  EXPECT_TRUE(choice(*g, "table").trainable);
  EXPECT_EQ(choice(*g, "table").reason, "table indexed by GatherElements");
  // Here the router only picks (ArgMax): no gradient reaches it.
  EXPECT_FALSE(choice(*g, "router").trainable);
  EXPECT_EQ(choice(*g, "router").reason, "feeds only masks, comparisons or indices");
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

// HF's attention masks hold float32's lowest value where attention is masked; a fixed-batch
// export folds the mask into an initializer added to the scores, which no learned weight is.
TEST(Trainable, AMaskOfFloat32sLowestValueIsNotTrained) {
  OnnxModelBuilder b("mask", 17, 1);
  auto x = b.add_input("x", {kBatch, 4, 4});
  float const lowest = std::numeric_limits<float>::lowest();
  std::vector<float> mask(16, 0.f);
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) mask[static_cast<std::size_t>(i * 4 + j)] = lowest;
  b.add_node("Add", {x, b.add_initializer("mask", TensorData::from_floats({1, 4, 4}, mask), true)}, {"y"});
  std::vector<float> large(16, 1e20f);  // large, but no mask's
  b.add_node("Mul", {"y", b.add_initializer("scale", TensorData::from_floats({1, 4, 4}, large), true)}, {"z"});
  b.add_output("z", {kBatch, 4, 4});
  OpGraph const g = must_import(b);
  EXPECT_FALSE(choice(g, "mask").trainable);
  EXPECT_EQ(choice(g, "mask").reason, kMaskValuesReason);
  EXPECT_TRUE(choice(g, "scale").trainable);
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

// A dynamo export's graph signature names the tensors torch does not train: BART's final_logits_bias
// is a buffer of zeros added to the logits, which the slot rules take for a learned bias (torch 2.15's
// BART trained it, 3.1e-2 from torch's third loss). Without a signature (a TorchScript export) the
// rules decide, and `frozen:` keeps it out.
TEST(Trainable, BuffersInTheExportedGraphSignatureAreNotTrained) {
  OnnxModelBuilder b("signature", 17, 1);
  auto x = b.add_input("x", {kBatch, 2});
  auto w = b.add_initializer("m.lm_head.weight", TensorData::from_floats({2, 3}, {1, 2, 3, 4, 5, 6}), true);
  auto bias = b.add_initializer("m.final_logits_bias", TensorData::from_floats({1, 3}, {0, 0, 0}), true);
  b.add_node("MatMul", {x, w}, {"h"});
  b.add_node("Add", {"h", bias}, {"y"});
  b.add_output("y", {kBatch, 3});
  auto bytes = b.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  ONNX_NAMESPACE::ModelProto plain;
  ASSERT_TRUE(plain.ParseFromString(*bytes));
  auto import = [&](std::string const& signature, ImportOptions const& o = {}) {
    ONNX_NAMESPACE::ModelProto m = plain;
    m.set_ir_version(10);
    if (!signature.empty()) {
      auto* prop = m.mutable_graph()->add_metadata_props();
      prop->set_key("pkg.torch.export.ExportedProgram.graph_signature");
      prop->set_value(signature);
    }
    auto g = load_onnx_bytes(m.SerializeAsString(), "signature", o);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    return g.is_ok() ? std::move(g).value() : OpGraph{};
  };
  OpGraph const torchscript = import("");
  EXPECT_TRUE(choice(torchscript, "m.final_logits_bias").trainable);
  ImportOptions frozen;
  frozen.frozen = {"*final_logits_bias"};
  EXPECT_FALSE(choice(import("", frozen), "m.final_logits_bias").trainable);

  // A parameter the optimizer folded away (the tied embedding) leaves the signature incomplete:
  // its parameters no longer decide, its buffers still do.
  std::string const signature =
      "\n# inputs\np_m_model_shared_weight: PARAMETER target='m.model.shared.weight'\n"
      "p_m_lm_head_weight: PARAMETER target='m.lm_head.weight'\n"
      "b_m_final_logits_bias: BUFFER target='m.final_logits_bias' persistent=True\n"
      "x: USER_INPUT\n\n# outputs\ny: USER_OUTPUT\n";
  OpGraph const dynamo = import(signature);
  EXPECT_FALSE(choice(dynamo, "m.final_logits_bias").trainable);
  EXPECT_EQ(choice(dynamo, "m.final_logits_bias").reason, kExportedBufferReason);
  EXPECT_EQ(role(dynamo, "m.final_logits_bias"), TensorRole::kConstant);
  EXPECT_TRUE(choice(dynamo, "m.lm_head.weight").trainable);
  ImportOptions trained;
  trained.trainable = {"m.final_logits_bias"};
  EXPECT_TRUE(choice(import(signature, trained), "m.final_logits_bias").trainable);
  // A constant tensor the signature lists is not trained either.
  std::string constant = signature;
  constant.replace(constant.find("BUFFER"), 6, "CONSTANT_TENSOR");
  EXPECT_FALSE(choice(import(constant), "m.final_logits_bias").trainable);
}

// torch's dynamo exporter, by default, optimizes the file of an untrained model by merging equal
// initializers: every LayerNorm scale of ones becomes one tensor, which would then train as one
// (timm's EdgeNeXt: stem.1.weight read by 4 LayerNorms). The graph signature shows it: parameters
// the file no longer holds. The weight still trains, with a warning naming the fix; a weight read
// twice without such a signature (DeBERTa's projection applied to two inputs) draws none.
TEST(Trainable, AWeightTheDynamoOptimizerMergedIsNamedInAWarning) {
  OnnxModelBuilder b("merged", 17, 1);
  auto x = b.add_input("x", {kBatch, 3});
  auto ones = b.add_initializer("ln1.weight", TensorData::from_floats({3}, {1, 1, 1}), true);
  auto bias = b.add_initializer("ln1.bias", TensorData::from_floats({3}, {0.1f, 0.2f, 0.3f}), true);
  b.add_node("LayerNormalization", {x, ones, bias}, {"h"});
  b.add_node("LayerNormalization", {"h", ones, bias}, {"y"});
  b.add_output("y", {kBatch, 3});
  auto bytes = b.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  ONNX_NAMESPACE::ModelProto plain;
  ASSERT_TRUE(plain.ParseFromString(*bytes));
  auto import = [&](std::string const& signature) {
    ONNX_NAMESPACE::ModelProto m = plain;
    m.set_ir_version(10);
    if (!signature.empty()) {
      auto* prop = m.mutable_graph()->add_metadata_props();
      prop->set_key("pkg.torch.export.ExportedProgram.graph_signature");
      prop->set_value(signature);
    }
    auto g = load_onnx_bytes(m.SerializeAsString(), "merged", {});
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    return g.is_ok() ? std::move(g).value() : OpGraph{};
  };
  std::string const merged =
      "\n# inputs\np_ln1_weight: PARAMETER target='ln1.weight'\np_ln1_bias: PARAMETER target='ln1.bias'\n"
      "p_ln2_weight: PARAMETER target='ln2.weight'\np_ln2_bias: PARAMETER target='ln2.bias'\n"
      "x: USER_INPUT\n\n# outputs\ny: USER_OUTPUT\n";
  OpGraph const g = import(merged);
  EXPECT_TRUE(choice(g, "ln1.weight").trainable);
  std::string const& w = choice(g, "ln1.weight").warning;
  EXPECT_NE(w.find("weight 'ln1.weight' (every element 1) is read as a weight by 2 operators"), std::string::npos) << w;
  EXPECT_NE(w.find("2 parameters of the exported program are not in the file (ln2.bias, ln2.weight)"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("optimize=False"), std::string::npos) << w;
  // Not one value: no merge of equal initializers made it.
  EXPECT_TRUE(choice(g, "ln1.bias").warning.empty());
  // No signature (a TorchScript file), or one the file matches: no warning.
  EXPECT_TRUE(choice(import(""), "ln1.weight").warning.empty());
  std::string const complete =
      "\n# inputs\np_ln1_weight: PARAMETER target='ln1.weight'\n"
      "p_ln1_bias: PARAMETER target='ln1.bias'\nx: USER_INPUT\n\n# outputs\ny: USER_OUTPUT\n";
  EXPECT_TRUE(choice(import(complete), "ln1.weight").warning.empty());
}

// A weight split into a sequence (TorchScript's chunk of a parameter) and read back by SequenceAt
// feeds the MatMul's weight slot as that weight: it trains.
TEST(Trainable, AWeightSplitIntoASequenceStillTrains) {
  auto g = load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,2] x) => (float[N,3] y)
    <float[2,6] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> {
      three = Constant <value = int64 {3}> ()
      seq = SplitToSequence <axis = 1> (w, three)
      one = Constant <value = int64 {1}> ()
      half = SequenceAt(seq, one)
      y = MatMul(x, half)
    })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_TRUE(choice(*g, "w").trainable);
  EXPECT_EQ(choice(*g, "w").reason, "weight of MatMul");
  EXPECT_EQ(role(*g, "w"), TensorRole::kWeight);
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

// A [T, D] table multiplied (or added) into activations x [batch, T, D], imported with `o`.
WeightChoice table_choice(std::vector<int64_t> dims, std::vector<float> const& values, std::string const& op = "Mul",
                          ImportOptions const& o = {}) {
  OnnxModelBuilder b("table", 17, 1);
  std::vector<int64_t> x_dims{kBatch};
  for (int64_t d : dims)
    if (d != 1) x_dims.push_back(d);
  auto x = b.add_input("x", x_dims);
  auto t = b.add_initializer("table", TensorData::from_floats(dims, values), true);
  b.add_node(op, {x, t}, {"y"});
  b.add_output("y", x_dims);
  return choice(must_import(b, o), "table");
}

// HF's rotary tables, computed as transformers does in float32: inv_freq = 1 / base^(2i/d),
// freqs = t * inv_freq, emb = cat(freqs, freqs) (or each frequency twice in a row, GPT-J's
// layout), then cos(emb) * scale and sin(emb) * scale.
std::vector<float> rotary_table(int64_t positions, int64_t d, bool cosine, float scale = 1.f, bool interleaved = false,
                                float base = 10000.f) {
  std::vector<float> out(static_cast<std::size_t>(positions * d));
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t c = 0; c < d; ++c) {
      int64_t const i = interleaved ? c / 2 : c % (d / 2);
      float const inv_freq = 1.f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(d));
      float const arg = static_cast<float>(t) * inv_freq;
      out[static_cast<std::size_t>(t * d + c)] = (cosine ? std::cos(arg) : std::sin(arg)) * scale;
    }
  return out;
}

TEST(Trainable, SinusoidalPositionTablesAreBuffersNotWeights) {
  // Rotary cos/sin as the dynamo exporter folds them out of inv_freq ([1, 1, T, d]), with YaRN's
  // attention scale, in GPT-J's interleaved layout, and a long table (float32's rounding of t * f
  // grows with t); and Vaswani et al.'s fixed encoding (sin and cos columns alternating) added.
  for (bool cosine : {true, false}) {
    SCOPED_TRACE(cosine ? "cos" : "sin");
    EXPECT_EQ(table_choice({1, 1, 8, 4}, rotary_table(8, 4, cosine)).reason, kPositionTableReason);
    EXPECT_EQ(table_choice({1, 16, 8}, rotary_table(16, 8, cosine, 0.8f)).reason, kPositionTableReason);
    EXPECT_EQ(table_choice({16, 8}, rotary_table(16, 8, cosine, 1.f, true)).reason, kPositionTableReason);
    EXPECT_EQ(table_choice({4096, 64}, rotary_table(4096, 64, cosine, 1.f, false, 500000.f)).reason,
              kPositionTableReason);
  }
  std::vector<float> pe(16 * 6);
  for (int t = 0; t < 16; ++t)
    for (int i = 0; i < 3; ++i) {
      float const arg = static_cast<float>(t) / std::pow(10000.f, static_cast<float>(2 * i) / 6.f);
      pe[static_cast<std::size_t>(t * 6 + 2 * i)] = std::sin(arg);
      pe[static_cast<std::size_t>(t * 6 + 2 * i + 1)] = std::cos(arg);
    }
  WeightChoice const fixed = table_choice({16, 6}, pe, "Add");
  EXPECT_FALSE(fixed.trainable);
  EXPECT_EQ(fixed.reason, kPositionTableReason);
  // Named under trainable, a table trains.
  ImportOptions o;
  o.trainable = {"tab*"};
  EXPECT_TRUE(table_choice({16, 6}, pe, "Add", o).trainable);
}

TEST(Trainable, LearnedTablesThatAreNotSinusoidsStillTrain) {
  auto trained = [](std::vector<int64_t> dims, std::vector<float> const& v) {
    WeightChoice const c = table_choice(std::move(dims), v);
    EXPECT_TRUE(c.trainable) << c.reason;
    return c.trainable;
  };
  std::vector<float> random(16 * 8);
  uint32_t state = 12345;
  for (float& v : random) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  EXPECT_TRUE(trained({16, 8}, random));
  EXPECT_TRUE(trained({16, 8}, std::vector<float>(16 * 8, 1.f)));  // constant: a position-free scale
  std::vector<float> ramp(16 * 8);                                 // linear in t: no oscillation
  for (int t = 0; t < 16; ++t)
    for (int c = 0; c < 8; ++c) ramp[static_cast<std::size_t>(t * 8 + c)] = 0.01f * static_cast<float>(t * (c + 1));
  EXPECT_TRUE(trained({16, 8}, ramp));
  // One value off by 2e-4, a cosine with a phase (cos(t f + 0.3)), and cosines of unequal amplitudes.
  std::vector<float> off = rotary_table(16, 8, true);
  off[37] += 2e-4f;
  EXPECT_TRUE(trained({16, 8}, off));
  std::vector<float> phase(16 * 8), amplitudes = rotary_table(16, 8, true);
  for (int t = 0; t < 16; ++t)
    for (int c = 0; c < 8; ++c) {
      phase[static_cast<std::size_t>(t * 8 + c)] = std::cos(static_cast<float>(t) * 0.5f * (c + 1) + 0.3f);
      amplitudes[static_cast<std::size_t>(t * 8 + c)] *= 1.f + 0.1f * static_cast<float>(c);
    }
  EXPECT_TRUE(trained({16, 8}, phase));
  EXPECT_TRUE(trained({16, 8}, amplitudes));
  // Three positions are too few to tell.
  EXPECT_TRUE(trained({3, 8}, rotary_table(3, 8, true)));
}

// Planning imports without the weights (ImportOptions::load_weights false), but the choices that
// look at values must come out as training's: the values of a position table (or a -inf mask) and
// of a tied embedding's folded copy are read for the choice, a weight's dropped after it, a
// constant's kept; other weights are not read.
TEST(Trainable, WithoutTheWeightsTheChoiceStillSeesTablesAndTiedCopies) {
  OnnxModelBuilder b("plan", 17, 1);
  auto ids = b.add_input("ids", {kBatch, 16}, DType::kInt64);
  std::vector<float> emb(32 * 8), head(8 * 32), other(8 * 16);
  for (std::size_t i = 0; i < emb.size(); ++i) emb[i] = 0.01f * static_cast<float>((i * 37) % 101) - 0.5f;
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 8; ++c) head[static_cast<std::size_t>(c * 32 + r)] = emb[static_cast<std::size_t>(r * 8 + c)];
  for (std::size_t i = 0; i < other.size(); ++i) other[i] = 0.02f * static_cast<float>(i % 7);
  auto e = b.add_initializer("embed", TensorData::from_floats({32, 8}, emb), true);
  auto h = b.add_initializer("val_9", TensorData::from_floats({8, 32}, head), true);
  // Two matrices of each other's transposed shape: no embedding, so neither is read.
  auto w = b.add_initializer("w", TensorData::from_floats({8, 16}, other), true);
  auto w2 = b.add_initializer("w2", TensorData::from_floats({16, 8}, other), true);
  // A weight read through a Transpose (torch's nn.Linear on 3-D inputs), of a position table's shape.
  auto w3 = b.add_initializer("w3", TensorData::from_floats({1, 16, 8}, other), true);
  auto cos = b.add_initializer("cos", TensorData::from_floats({1, 16, 8}, rotary_table(16, 8, true)), true);
  b.add_node("Gather", {e, ids}, {"x"});
  b.add_node("Mul", {"x", cos}, {"xr"});
  b.add_node("MatMul", {"xr", w}, {"y16"});
  b.add_node("MatMul", {"y16", w2}, {"y8"});
  b.add_node("Reshape", {w3, b.add_initializer("w3_shape", TensorData::from_int64s({2}, {16, 8}), false)}, {"w3_2d"});
  b.add_node("Transpose", {"w3_2d"}, {"w3_t"}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.add_node("MatMul", {"y8", "w3_t"}, {"y16b"});
  b.add_node("MatMul", {"y16b", w2}, {"y"});
  b.add_node("MatMul", {"y", h}, {"logits"});
  b.add_output("logits", {kBatch, 16, 32});
  for (bool weights : {true, false}) {
    SCOPED_TRACE(weights ? "with weights" : "without");
    OpGraph const g = must_import(b, ImportOptions{.load_weights = weights});
    EXPECT_EQ(choice(g, "cos").reason, kPositionTableReason);
    EXPECT_NE(choice(g, "embed").reason.find("(retied)"), std::string::npos) << choice(g, "embed").reason;
    EXPECT_EQ(g.weights().size(), 4u);  // embed, w, w2 and w3
    for (char const* name : {"embed", "w", "w2", "w3"})
      EXPECT_EQ(g.tensor(*g.find_tensor(name)).data != nullptr, weights) << name;
    EXPECT_NE(g.tensor(*g.find_tensor("cos")).data, nullptr);  // a constant keeps its data
  }
  // An additive causal mask of -inf (a buffer a torch model registers) is such a table too.
  OnnxModelBuilder m("mask", 17, 1);
  auto scores = m.add_input("scores", {kBatch, 16, 16});
  std::vector<float> mask(16 * 16, 0.f);
  for (int i = 0; i < 16; ++i)
    for (int j = i + 1; j < 16; ++j)
      mask[static_cast<std::size_t>(i * 16 + j)] = -std::numeric_limits<float>::infinity();
  auto mk = m.add_initializer("mask", TensorData::from_floats({16, 16}, mask), false);
  m.add_node("Add", {scores, mk}, {"masked"});
  m.add_node("Softmax", {"masked"}, {"p"}, {{"axis", int64_t{-1}}});
  m.add_output("p", {kBatch, 16, 16});
  for (bool weights : {true, false})
    EXPECT_EQ(choice(must_import(m, ImportOptions{.load_weights = weights}), "mask").reason, "non-finite values")
        << (weights ? "with weights" : "without");
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
