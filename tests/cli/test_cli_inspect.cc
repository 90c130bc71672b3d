// `graphpipe inspect` on the real binary: which initializers train and why, as one summary line,
// as a table with --weights, and in --json.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/onnx_builder.h"
#include "tests/graph/causal_attention_model.h"

namespace fs = std::filesystem;

namespace {

std::string slurp(fs::path const& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class InspectWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gp_cli_inspect_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model_ = (dir_ / "causal.onnx").string();
    ASSERT_TRUE(gp::testing::causal_attention().save(model_).is_ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string inspect(std::string const& flags) {
    fs::path const out = dir_ / "out.txt";
    std::string const cmd = std::string(GP_GRAPHPIPE_BIN) + " inspect " + model_ + " " + flags + " >" + out.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return slurp(out);
  }

  fs::path dir_;
  std::string model_;
};

TEST_F(InspectWeights, OneLineByDefault) {
  std::string const out = inspect("");
  EXPECT_NE(out.find("trainable    4 of 6 initializers; not trained: 1 non-finite values, 1 single number"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("attn.mask"), std::string::npos) << out;  // no per-initializer lines
}

TEST_F(InspectWeights, WeightsFlagListsEachWithItsReason) {
  std::string const out = inspect("--weights");
  std::string mask_line, head_line;
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t const end = out.find('\n', pos);
    std::string const line = out.substr(pos, end - pos);
    if (line.find("attn.mask ") != std::string::npos) mask_line = line;
    if (line.find("head.w ") != std::string::npos) head_line = line;
    pos = end == std::string::npos ? out.size() : end + 1;
  }
  EXPECT_NE(mask_line.find("[4,4]"), std::string::npos) << out;
  EXPECT_NE(mask_line.find(" no "), std::string::npos) << mask_line;
  EXPECT_NE(mask_line.find("non-finite values"), std::string::npos) << mask_line;
  EXPECT_NE(head_line.find(" yes "), std::string::npos) << head_line;
  EXPECT_NE(head_line.find("weight of MatMul 'head'"), std::string::npos) << head_line;
}

TEST_F(InspectWeights, JsonListsEveryInitializer) {
  auto const j = nlohmann::json::parse(inspect("--json"));
  ASSERT_TRUE(j.contains("initializers"));
  ASSERT_EQ(j["initializers"].size(), 6u);
  bool saw_mask = false;
  for (auto const& c : j["initializers"]) {
    if (c["name"] != "attn.mask") continue;
    saw_mask = true;
    EXPECT_EQ(c["trainable"], false);
    EXPECT_EQ(c["reason"], "non-finite values");
    EXPECT_EQ(c["dtype"], "float32");
    EXPECT_EQ(c["shape"], nlohmann::json::array({4, 4}));
  }
  EXPECT_TRUE(saw_mask);
}

// x -> Conv -> BatchNorm -> Relu: inspect counts the BatchNorm with its Relu fused in; the root's
// --no-fusion (before or after the subcommand) keeps the Relu an operator of its own.
TEST_F(InspectWeights, TheBatchNormsFusedReluIsCountedAndNoFusionKeepsItApart) {
  using gp::graph::InitRule;
  gp::graph::OnnxModelBuilder b("conv_bn_relu", 17, 1);
  auto x = b.add_input("x", {gp::graph::kBatch, 2, 5, 5});
  auto w = b.add_initializer("conv.w", {3, 2, 3, 3}, InitRule::uniform(0.4));
  auto s = b.add_initializer("bn.scale", {3}, InitRule::uniform(1.0));
  auto bb = b.add_initializer("bn.bias", {3}, InitRule::uniform(0.2));
  auto m = b.add_initializer("bn.mean", {3}, InitRule::zeros(), false);
  auto v = b.add_initializer("bn.var", {3}, InitRule::ones(), false);
  b.add_node("Conv", {x, w}, {"c"}, {{"kernel_shape", std::vector<int64_t>{3, 3}}});
  b.add_node("BatchNormalization", {"c", s, bb, m, v}, {"n"});
  b.add_node("Relu", {"n"}, {"y"});
  b.add_output("y", {gp::graph::kBatch, 3, 3, 3});
  model_ = (dir_ / "conv_bn_relu.onnx").string();
  ASSERT_TRUE(b.save(model_).is_ok());
  std::string const fused = inspect("");
  EXPECT_NE(fused.find("operators    2\n"), std::string::npos) << fused;
  EXPECT_NE(fused.find("(1 with the Relu after it fused in)"), std::string::npos) << fused;
  EXPECT_EQ(fused.find("  Relu "), std::string::npos) << fused;
  std::string const apart = inspect("--no-fusion");
  EXPECT_NE(apart.find("operators    3\n"), std::string::npos) << apart;
  EXPECT_NE(apart.find("  Relu "), std::string::npos) << apart;
  EXPECT_EQ(apart.find("fused in"), std::string::npos) << apart;
}

}  // namespace

namespace {

// inspect says which backends run the model, every op checked with its dtypes (the CUDA table is
// static: no GPU needed): a Cast to float16 (the CUDA backend's mixed precision has it, the CPU
// refuses it) is named on the CPU's line.
TEST(InspectBackends, EachBackendSaysWhetherItRunsEveryOp) {
  fs::path const dir = fs::temp_directory_path() / ("gp_cli_inspect_backends_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  gp::graph::OnnxModelBuilder b("half");
  std::string const x = b.add_input("x", {gp::graph::kBatch, 4});
  b.add_node("Relu", {x}, {"r"});
  b.add_node("Cast", {"r"}, {"h"}, {{"to", int64_t{10}}}, "to_half");
  b.add_output("h", {gp::graph::kBatch, 4}, gp::graph::DType::kFloat16);
  std::string const model = (dir / "half.onnx").string();
  ASSERT_TRUE(b.save(model).is_ok());
  fs::path const out = dir / "out.txt";
  std::string const cmd = std::string(GP_GRAPHPIPE_BIN) + " inspect " + model + " >" + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string const text = slurp(out);
  fs::remove_all(dir);
  std::size_t const cpu = text.find("runs on      cpu: ");
  ASSERT_NE(cpu, std::string::npos) << text;
  std::string const cpu_line = text.substr(cpu, text.find('\n', cpu) - cpu);
  EXPECT_NE(cpu_line.find("cannot run on the cpu backend"), std::string::npos) << cpu_line;
  EXPECT_NE(cpu_line.find("'to_half'"), std::string::npos) << cpu_line;
  std::size_t const cuda = text.find("cuda: ", cpu);
  ASSERT_NE(cuda, std::string::npos) << text;
  std::string const cuda_line = text.substr(cuda, text.find('\n', cuda) - cuda);
#ifdef GP_HAVE_CUDA
  EXPECT_EQ(cuda_line.rfind("cuda: every op", 0), 0u) << cuda_line;
#else
  EXPECT_EQ(cuda_line.rfind("cuda: not in this build", 0), 0u) << cuda_line;
#endif
}

}  // namespace
