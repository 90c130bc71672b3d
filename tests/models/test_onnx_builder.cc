#include "graph/onnx_builder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

namespace gp::graph {
namespace {

namespace fs = std::filesystem;

// x [N, 4] -> Gemm(W [3, 4], b [3]) -> Relu -> y [N, 3]
OnnxModelBuilder small_model(uint64_t seed = 7, InitRule rule = InitRule::uniform(0.5)) {
  OnnxModelBuilder b("small", 17, seed);
  b.add_input("x", {kBatch, 4});
  b.add_initializer("w", {3, 4}, rule);
  b.add_initializer("b", {3}, InitRule::zeros());
  b.add_node("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}});
  b.add_node("Relu", {"h"}, {"y"});
  b.add_output("y", {kBatch, 3});
  return b;
}

fs::path temp_dir(std::string const& name) {
  fs::path dir = fs::temp_directory_path() / ("gp_builder_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<float> weight_values(OpGraph const& g, std::string const& name) {
  auto id = g.find_tensor(name);
  EXPECT_TRUE(id.has_value()) << name;
  auto const& data = g.tensor(*id).data;
  EXPECT_NE(data, nullptr) << name;
  if (!data) return {};
  return {data->as<float>(), data->as<float>() + data->numel()};
}

TEST(OnnxBuilder, SmallModelImportsWithShapesAndParams) {
  auto b = small_model();
  ASSERT_TRUE(b.check().is_ok()) << b.check().to_string();
  EXPECT_EQ(b.param_count(), 15);
  EXPECT_EQ(b.initializer_bytes(), 60);
  auto g = b.to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->tensor(g->inputs()[0]).shape, (Shape{{kBatch, 4}}));
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->tensor(g->outputs()[0]).shape, (Shape{{kBatch, 3}}));
  EXPECT_EQ(g->param_count(), 15);
  for (float v : weight_values(*g, "w")) EXPECT_LE(std::abs(v), 0.5f);
  for (float v : weight_values(*g, "b")) EXPECT_EQ(v, 0.f);
}

TEST(OnnxBuilder, WeightsAreDeterministicPerSeedAndName) {
  auto a = small_model(7).serialize();
  auto again = small_model(7).serialize();
  auto other = small_model(8).serialize();
  ASSERT_TRUE(a.is_ok() && again.is_ok() && other.is_ok());
  EXPECT_EQ(*a, *again);
  EXPECT_NE(*a, *other);
  EXPECT_EQ(a->size(), other->size());

  // Values depend on (seed, name), not on the order initializers were declared in.
  OnnxModelBuilder reordered("small", 17, 7);
  reordered.add_input("x", {kBatch, 4});
  reordered.add_initializer("b", {3}, InitRule::zeros());
  reordered.add_initializer("w", {3, 4}, InitRule::uniform(0.5));
  reordered.add_node("Gemm", {"x", "w", "b"}, {"h"}, {{"transB", int64_t{1}}});
  reordered.add_node("Relu", {"h"}, {"y"});
  reordered.add_output("y", {kBatch, 3});
  auto g1 = small_model(7).to_graph();
  auto g2 = reordered.to_graph();
  ASSERT_TRUE(g1.is_ok() && g2.is_ok());
  EXPECT_EQ(weight_values(*g1, "w"), weight_values(*g2, "w"));
}

TEST(OnnxBuilder, InitRulesHaveTheirDistributions) {
  OnnxModelBuilder b("rules", 17, 3);
  b.add_input("x", {kBatch, 256});
  b.add_initializer("n", {256, 256}, InitRule::normal(2.0));
  b.add_initializer("u", {256, 256}, InitRule::uniform(3.0));
  b.add_initializer("one", {256}, InitRule::ones());
  b.add_node("MatMul", {"x", "n"}, {"h1"});
  b.add_node("MatMul", {"h1", "u"}, {"h2"});
  b.add_node("Mul", {"h2", "one"}, {"y"});
  b.add_output("y", {kBatch, 256});
  auto g = b.to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  auto stats = [](std::vector<float> const& v) {
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += double(x) * x;
    double const mean = sum / v.size();
    return std::pair{mean, std::sqrt(sq / v.size() - mean * mean)};
  };
  auto [n_mean, n_std] = stats(weight_values(*g, "n"));
  EXPECT_NEAR(n_mean, 0.0, 0.03);
  EXPECT_NEAR(n_std, 2.0, 0.03);
  auto u = weight_values(*g, "u");
  auto [u_mean, u_std] = stats(u);
  EXPECT_NEAR(u_mean, 0.0, 0.03);
  EXPECT_NEAR(u_std, 3.0 / std::sqrt(3.0), 0.03);
  for (float x : u) ASSERT_LT(std::abs(x), 3.0f);
  for (float x : weight_values(*g, "one")) EXPECT_EQ(x, 1.f);
}

TEST(OnnxBuilder, ConstructionErrorsAreReported) {
  {
    OnnxModelBuilder b("dup");
    b.add_input("x", {kBatch, 4});
    b.add_initializer("x", {4}, InitRule::zeros());
    EXPECT_NE(b.status().message().find("'x' is defined twice"), std::string::npos) << b.status().message();
    EXPECT_FALSE(b.serialize().is_ok());
  }
  {
    OnnxModelBuilder b("undefined");
    b.add_input("x", {kBatch, 4});
    b.add_node("Relu", {"z"}, {"y"});
    EXPECT_NE(b.status().message().find("reads 'z', which is not defined"), std::string::npos);
  }
  {
    OnnxModelBuilder b("no_producer");
    b.add_input("x", {kBatch, 4});
    b.add_output("y", {kBatch, 4});
    auto s = b.serialize();
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.status().message().find("output 'y' is produced by no node"), std::string::npos);
  }
  {
    auto b = small_model();
    b.set_opset(12);
    auto s = b.serialize();
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.status().message().find("opset 12 is not supported; use 13..18"), std::string::npos);
  }
}

TEST(OnnxBuilder, CheckerRejectsAShapeMismatch) {
  OnnxModelBuilder b("mismatch");
  b.add_input("x", {kBatch, 4});
  b.add_initializer("w", {5, 3}, InitRule::uniform(1));
  b.add_node("MatMul", {"x", "w"}, {"y"});
  b.add_output("y", {kBatch, 3});
  Status s = b.check();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("model 'mismatch' fails the ONNX checker"), std::string::npos) << s.message();
}

TEST(OnnxBuilder, FreshNamesAreUnique) {
  OnnxModelBuilder b("names");
  b.add_input("x", {kBatch, 4});
  EXPECT_EQ(b.fresh_name("h"), "h");
  EXPECT_EQ(b.fresh_name("x"), "x_1");
  b.add_node("Relu", {"x"}, {"x_1"});
  EXPECT_EQ(b.fresh_name("x"), "x_2");
}

TEST(OnnxBuilder, SaveInlineAndExternalGiveTheSameWeights) {
  fs::path const dir = temp_dir("save");
  OnnxModelBuilder b("wide", 17, 9);
  b.add_input("x", {kBatch, 16});
  b.add_initializer("w", {64, 16}, InitRule::uniform(0.5));
  b.add_initializer("b", {64}, InitRule::uniform(0.5));
  b.add_node("Gemm", {"x", "w", "b"}, {"y"}, {{"transB", int64_t{1}}});
  b.add_output("y", {kBatch, 64});
  ASSERT_TRUE(b.save((dir / "inline.onnx").string()).is_ok());
  EXPECT_FALSE(fs::exists(dir / "inline.onnx.data"));
  SaveOptions external{.external_data = SaveOptions::ExternalData::kAlways};
  ASSERT_TRUE(b.save((dir / "ext.onnx").string(), external).is_ok());
  ASSERT_TRUE(fs::exists(dir / "ext.onnx.data"));
  EXPECT_EQ(fs::file_size(dir / "ext.onnx.data"), 4096u);  // w only: b is below the 1 KiB inline size
  auto g_inline = load_onnx((dir / "inline.onnx").string());
  auto g_ext = load_onnx((dir / "ext.onnx").string());
  ASSERT_TRUE(g_inline.is_ok()) << g_inline.status().to_string();
  ASSERT_TRUE(g_ext.is_ok()) << g_ext.status().to_string();
  EXPECT_EQ(weight_values(*g_inline, "w"), weight_values(*g_ext, "w"));
  EXPECT_EQ(weight_values(*g_inline, "b"), weight_values(*g_ext, "b"));
  // No temporary file is left behind.
  int files = 0;
  for (auto const& entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 3);
  // Saving inline over an external save removes the stale data file; a model too small for
  // external data gets none.
  ASSERT_TRUE(b.save((dir / "ext.onnx").string()).is_ok());
  EXPECT_FALSE(fs::exists(dir / "ext.onnx.data"));
  ASSERT_TRUE(small_model().save((dir / "small.onnx").string(), external).is_ok());
  EXPECT_FALSE(fs::exists(dir / "small.onnx.data"));
  fs::remove_all(dir);
}

TEST(OnnxBuilder, SaveToAMissingFolderWritesNothing) {
  fs::path const dir = temp_dir("missing");
  Status s = small_model().save((dir / "nope" / "m.onnx").string());
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("does not exist"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST(OnnxBuilder, ShapeOnlySaveIsSparseAndPassesTheChecker) {
  fs::path const dir = temp_dir("shape_only");
  OnnxModelBuilder b("big", 17, 1);
  b.add_input("x", {kBatch, 4096});
  b.add_initializer("w", {4096, 16384}, InitRule::normal(0.01));  // 256 MiB, never computed
  b.add_node("MatMul", {"x", "w"}, {"y"});
  b.add_output("y", {kBatch, 16384});
  fs::path const path = dir / "big.onnx";
  ASSERT_TRUE(b.save(path.string(), SaveOptions{.shape_only = true}).is_ok());
  EXPECT_LT(fs::file_size(path), 4096u);
  EXPECT_EQ(fs::file_size(dir / "big.onnx.data"), uintmax_t{4096} * 16384 * 4);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "big.onnx.data").c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 1 << 20) << "the data file of a shape-only save must stay sparse";
  auto g = load_onnx(path.string(), ImportOptions{.run_checker = true, .load_weights = false});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->param_count(), int64_t{4096} * 16384);
  fs::remove_all(dir);
}

TEST(OnnxBuilder, ShapeOnlyGraphHasNoWeightData) {
  auto b = small_model();
  auto g = b.to_graph(ImportOptions{.load_weights = false});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->param_count(), 15);
  for (TensorId w : g->weights()) EXPECT_EQ(g->tensor(w).data, nullptr) << g->tensor(w).name;
}

TEST(OnnxBuilder, ConstantsAndAttributesRoundTrip) {
  OnnxModelBuilder b("attrs", 13);
  b.add_input("x", {kBatch, 2, 6});
  b.add_constant("shape", TensorData::from_int64s({2}, {0, 12}));
  b.add_node("Reshape", {"x", "shape"}, {"flat"});
  b.add_node("Softmax", {"flat"}, {"y"}, {{"axis", int64_t{-1}}});
  b.add_output("y", {kBatch, 12});
  ASSERT_TRUE(b.check().is_ok()) << b.check().to_string();
  auto g = b.to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->tensor(g->outputs()[0]).shape, (Shape{{kBatch, 12}}));
  EXPECT_EQ(g->param_count(), 0);
}

}  // namespace
}  // namespace gp::graph
