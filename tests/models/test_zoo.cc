#include "models/zoo.h"

#include "graph/analysis.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

namespace gp::models {
namespace {

namespace fs = std::filesystem;
using graph::kBatch;

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (auto const& info : model_list()) names.push_back(info.name);
  return names;
}

std::string read_file(fs::path const& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

fs::path temp_dir(std::string const& name) {
  fs::path dir = fs::temp_directory_path() / ("gp_zoo_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The graph's inputs and output match what the generator declares, and the importer counts the
// same trainable parameters as the generator.
void expect_graph_matches(ZooModel const& model, graph::OpGraph const& g) {
  ASSERT_EQ(g.inputs().size(), model.inputs.size());
  for (std::size_t i = 0; i < model.inputs.size(); ++i) {
    auto const& t = g.tensor(g.inputs()[i]);
    EXPECT_EQ(t.name, model.inputs[i].name);
    EXPECT_EQ(t.shape, graph::Shape{model.inputs[i].dims}) << t.name;
    EXPECT_EQ(t.dtype, model.inputs[i].dtype) << t.name;
  }
  ASSERT_EQ(g.outputs().size(), 1u);
  auto const& out = g.tensor(g.outputs()[0]);
  EXPECT_EQ(out.name, model.output.name);
  EXPECT_EQ(out.shape, graph::Shape{model.output.dims});
  EXPECT_EQ(g.param_count(), model.builder.param_count());
  EXPECT_GT(g.fwd_flops_per_sample(), 0);
}

class ZooSizes : public ::testing::TestWithParam<std::tuple<std::string, Size>> {};

TEST_P(ZooSizes, BuildsChecksAndImports) {
  auto const& [name, size] = GetParam();
  auto model = build(name, size, {.seed = 1});
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Status checked = model->builder.check();
  ASSERT_TRUE(checked.is_ok()) << checked.to_string();
  int64_t const params = model->builder.param_count();
  if (size == Size::kTiny) {
    EXPECT_LE(params, 100'000) << name << " tiny must stay tiny";
  } else {
    EXPECT_GE(params, 1'000'000) << name;
    EXPECT_LE(params, 5'000'000) << name;
  }
  auto g = model->builder.to_graph(graph::ImportOptions{.run_checker = true, .load_weights = true});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  expect_graph_matches(*model, *g);
  for (graph::TensorId w : g->weights()) {
    EXPECT_NE(g->tensor(w).data, nullptr) << g->tensor(w).name;
  }
}

TEST_P(ZooSizes, Opset13ImportsToTheSameGraphCosts) {
  auto const& [name, size] = GetParam();
  auto m17 = build(name, size, {.seed = 1, .opset = 17});
  auto m13 = build(name, size, {.seed = 1, .opset = 13});
  ASSERT_TRUE(m17.is_ok() && m13.is_ok());
  ASSERT_TRUE(m13->builder.check().is_ok()) << m13->builder.check().to_string();
  auto g17 = m17->builder.to_graph(graph::ImportOptions{.load_weights = false});
  auto g13 = m13->builder.to_graph(graph::ImportOptions{.load_weights = false});
  ASSERT_TRUE(g17.is_ok()) << g17.status().to_string();
  ASSERT_TRUE(g13.is_ok()) << g13.status().to_string();
  expect_graph_matches(*m13, *g13);
  EXPECT_EQ(g13->param_count(), g17->param_count());
  // The decomposed LayerNorm is fused back by the importer: same operators by type.
  std::map<std::string, int> types13, types17;
  for (auto const& op : g13->ops()) ++types13[op.type];
  for (auto const& op : g17->ops()) ++types17[op.type];
  EXPECT_EQ(types13, types17);
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ZooSizes, ::testing::Combine(::testing::ValuesIn(model_names()), ::testing::Values(Size::kTiny, Size::kSmall)),
    [](auto const& info) { return std::get<0>(info.param) + "_" + size_name(std::get<1>(info.param)); });

// Paper sizes: the documented parameter counts (models/README.md), imported shape-only.
class ZooPaper : public ::testing::TestWithParam<std::pair<std::string, int64_t>> {};

TEST_P(ZooPaper, BuildsShapeOnlyWithTheDocumentedParameters) {
  auto const& [name, expected_params] = GetParam();
  auto model = build(name, Size::kPaper);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_EQ(model->builder.param_count(), expected_params);
  auto g = model->builder.to_graph(graph::ImportOptions{.run_checker = true, .load_weights = false});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  expect_graph_matches(*model, *g);
  for (graph::TensorId w : g->weights()) EXPECT_EQ(g->tensor(w).data, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooPaper,
                         ::testing::Values(std::pair<std::string, int64_t>{"mmt", 410'933'224},
                                           std::pair<std::string, int64_t>{"dlrm", 749'945'282},
                                           std::pair<std::string, int64_t>{"candle_uno", 637'669'377},
                                           std::pair<std::string, int64_t>{"inception", 7'005'832},
                                           std::pair<std::string, int64_t>{"transformer", 406'205'416},
                                           std::pair<std::string, int64_t>{"mlp", 138'347'496}),
                         [](auto const& info) { return info.param.first; });

// The widest antichain shows the branch structure: MMT's 4 encoder branches (each with its
// q/k/v projections side by side) against the one chain of its sequential control; DLRM's 7 + 7
// branches, CANDLE-Uno's 7 towers, Inception's 4 block branches, and an MLP chain.
TEST(Zoo, WidestAntichainReflectsTheBranches) {
  std::map<std::string, std::size_t> const expected{{"mmt", 12},       {"transformer", 3}, {"dlrm", 14},
                                                    {"candle_uno", 7}, {"inception", 4},   {"mlp", 1}};
  for (auto const& [name, width] : expected) {
    for (Size size : {Size::kTiny, Size::kPaper}) {
      auto g = build_graph(name, size, 0, /*load_weights=*/false);
      ASSERT_TRUE(g.is_ok()) << g.status().to_string();
      EXPECT_EQ(graph::widest_antichain(*g).size(), width) << name << " " << size_name(size);
    }
  }
}

TEST(Zoo, MmtPaperParametersMatchAHandCount) {
  int64_t const d = 1024, f = 4096;
  int64_t const layer = 2 * 2 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d);
  int64_t const proj = (1024 + 768 + 512 + 256) * d + 4 * d;
  int64_t const final_ln = 4 * 2 * d;
  int64_t const head = (4 * d * d + d) + (d * 1000 + 1000);
  auto model = build("mmt", Size::kPaper);
  ASSERT_TRUE(model.is_ok());
  EXPECT_EQ(model->builder.param_count(), 32 * layer + proj + final_ln + head);
}

TEST(Zoo, PaperDimensionsAreThoseOfTheEvaluation) {
  auto mmt = build("mmt", Size::kPaper);
  ASSERT_TRUE(mmt.is_ok());
  ASSERT_EQ(mmt->inputs.size(), 4u);
  EXPECT_EQ(mmt->inputs[0].dims, (std::vector<int64_t>{kBatch, 256, 1024}));
  auto dlrm = build("dlrm", Size::kPaper);
  ASSERT_TRUE(dlrm.is_ok());
  ASSERT_EQ(dlrm->inputs.size(), 14u);
  int sparse = 0;
  for (auto const& in : dlrm->inputs) {
    if (in.dtype != graph::DType::kInt64) continue;
    ++sparse;
    EXPECT_EQ(in.dims, (std::vector<int64_t>{kBatch, 100}));
    EXPECT_EQ(in.index_limit, 1'000'000);
  }
  EXPECT_EQ(sparse, 7);
  auto candle = build("candle_uno", Size::kPaper);
  ASSERT_TRUE(candle.is_ok());
  EXPECT_EQ(candle->inputs.size(), 7u);
  EXPECT_EQ(candle->task, Task::kRegression);
  EXPECT_EQ(candle->output.dims, (std::vector<int64_t>{kBatch, 1}));
}

TEST(Zoo, ExportIsDeterministicAndSeeded) {
  fs::path const dir = temp_dir("export");
  for (auto const& name : model_names()) {
    ASSERT_TRUE(export_model(name, Size::kTiny, (dir / "a.onnx").string(), {.build = {.seed = 5}}).is_ok());
    ASSERT_TRUE(export_model(name, Size::kTiny, (dir / "b.onnx").string(), {.build = {.seed = 5}}).is_ok());
    ASSERT_TRUE(export_model(name, Size::kTiny, (dir / "c.onnx").string(), {.build = {.seed = 6}}).is_ok());
    std::string const a = read_file(dir / "a.onnx"), b = read_file(dir / "b.onnx"), c = read_file(dir / "c.onnx");
    EXPECT_GT(a.size(), 1000u) << name;
    EXPECT_EQ(a, b) << name << ": two exports with the same seed differ";
    EXPECT_NE(a, c) << name << ": the seed does not change the weights";
    // Same structure, different weights.
    auto ga = graph::load_onnx((dir / "a.onnx").string());
    auto gc = graph::load_onnx((dir / "c.onnx").string());
    ASSERT_TRUE(ga.is_ok()) << ga.status().to_string();
    ASSERT_TRUE(gc.is_ok()) << gc.status().to_string();
    EXPECT_EQ(ga->num_ops(), gc->num_ops());
    EXPECT_EQ(ga->param_count(), gc->param_count());
  }
  fs::remove_all(dir);
}

TEST(Zoo, BuildGraphLoadsOrSkipsWeights) {
  auto with = build_graph("mlp", Size::kTiny, 3, true);
  auto without = build_graph("mlp", Size::kTiny, 3, false);
  ASSERT_TRUE(with.is_ok()) << with.status().to_string();
  ASSERT_TRUE(without.is_ok()) << without.status().to_string();
  EXPECT_EQ(with->param_count(), 6922);
  EXPECT_EQ(without->param_count(), 6922);
  for (graph::TensorId w : with->weights()) EXPECT_NE(with->tensor(w).data, nullptr);
  for (graph::TensorId w : without->weights()) EXPECT_EQ(without->tensor(w).data, nullptr);
}

TEST(Zoo, UnknownNamesAndSizesListTheValidOnes) {
  auto m = build("resnet", Size::kTiny);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("unknown model 'resnet'"), std::string::npos);
  EXPECT_NE(m.status().message().find("mmt, dlrm, candle_uno, inception, transformer, mlp"), std::string::npos)
      << m.status().message();
  auto s = parse_size("huge");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("use tiny, small or paper"), std::string::npos);
  auto o = build("mlp", Size::kTiny, {.opset = 11});
  ASSERT_FALSE(o.is_ok());
  EXPECT_NE(o.status().message().find("use 13..17"), std::string::npos);
}

// Trainable parameters of the transformer by hand: input projection, `layers` pre-norm encoder
// layers (2 LayerNorms, q/k/v/o, FFN), final LayerNorm, two-layer head.
int64_t transformer_params(int64_t in, int64_t layers, int64_t d, int64_t f, int64_t classes) {
  int64_t const layer = 2 * 2 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d);
  return (in * d + d) + layers * layer + 2 * d + (d * d + d) + (d * classes + classes);
}

TEST(ZooResize, LayerCountChangesTheOpCountLinearly) {
  std::map<int64_t, std::size_t> ops;
  std::map<int64_t, int64_t> params;
  for (int64_t layers : {1, 2, 5, 96}) {
    auto g = build_graph("transformer", Size::kTiny, {.layers = layers}, /*load_weights=*/false);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    ops[layers] = g->num_ops();
    params[layers] = g->param_count();
    EXPECT_EQ(params[layers], transformer_params(16, layers, 32, 64, 10)) << layers << " layers";
  }
  std::size_t const per_layer = ops[2] - ops[1];
  EXPECT_GT(per_layer, 10u);
  EXPECT_EQ(ops[5] - ops[2], 3 * per_layer);
  EXPECT_EQ(ops[96] - ops[2], 94 * per_layer);
  // 0 keeps the size's depth (tiny: 4 branches x 2 layers = 8); an explicit 8 builds the same graph.
  auto standard = build_graph("transformer", Size::kTiny, 0, false);
  auto eight = build_graph("transformer", Size::kTiny, {.layers = 8}, false);
  ASSERT_TRUE(standard.is_ok() && eight.is_ok());
  EXPECT_EQ(standard->num_ops(), eight->num_ops());
  EXPECT_EQ(standard->num_ops(), ops[1] + 7 * per_layer);
  // MMT: layers per branch, in each of the 4 branches.
  auto mmt1 = build_graph("mmt", Size::kTiny, {.layers = 1}, false);
  auto mmt3 = build_graph("mmt", Size::kTiny, {.layers = 3}, false);
  ASSERT_TRUE(mmt1.is_ok() && mmt3.is_ok());
  EXPECT_EQ(mmt3->num_ops() - mmt1->num_ops(), 4 * 2 * per_layer);
}

TEST(ZooResize, WidthChangesTheWeightsAsCounted) {
  // Paper: hidden 1024, 16 heads of 64, FFN 4 x hidden, input 1024, 1000 classes.
  auto wide = build("transformer", Size::kPaper, {.layers = 4, .hidden = 2048});
  ASSERT_TRUE(wide.is_ok()) << wide.status().to_string();
  EXPECT_EQ(wide->builder.param_count(), transformer_params(1024, 4, 2048, 8192, 1000));
  EXPECT_EQ(wide->builder.initializer_bytes(), 4 * wide->builder.param_count());  // fp32
  auto g = wide->builder.to_graph(graph::ImportOptions{.load_weights = false});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  expect_graph_matches(*wide, *g);
  // An explicit FFN width and head count (96 / 3 = 32 per head).
  auto narrow = build("transformer", Size::kPaper, {.layers = 2, .hidden = 96, .heads = 3, .ffn = 128});
  ASSERT_TRUE(narrow.is_ok()) << narrow.status().to_string();
  EXPECT_EQ(narrow->builder.param_count(), transformer_params(1024, 2, 96, 128, 1000));
  auto checked = narrow->builder.to_graph(graph::ImportOptions{.run_checker = true, .load_weights = true});
  ASSERT_TRUE(checked.is_ok()) << checked.status().to_string();
  auto standard = build("transformer", Size::kPaper);
  ASSERT_TRUE(standard.is_ok());
  EXPECT_EQ(standard->builder.param_count(), 406'205'416);
}

TEST(ZooResize, BadValuesSayWhatToChange) {
  auto message = [](std::string const& name, Size size, BuildOptions const& o) {
    auto m = build(name, size, o);
    EXPECT_FALSE(m.is_ok()) << name;
    if (m.is_ok()) return std::string();
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    return m.status().message();
  };
  EXPECT_NE(message("transformer", Size::kPaper, {.layers = -1}).find("layers -1 is out of range: use 1..2048"),
            std::string::npos);
  EXPECT_NE(message("transformer", Size::kPaper, {.layers = 5000}).find("layers 5000 is out of range"),
            std::string::npos);
  EXPECT_NE(message("transformer", Size::kPaper, {.hidden = 1 << 20}).find("hidden 1048576 is out of range"),
            std::string::npos);
  EXPECT_NE(message("transformer", Size::kPaper, {.hidden = 100})
                .find("hidden 100 is not a multiple of the paper head width 64: pick a multiple of it or give heads"),
            std::string::npos);
  EXPECT_NE(message("transformer", Size::kPaper, {.hidden = 100, .heads = 3})
                .find("hidden 100 is not divisible by 3 heads: pick heads dividing hidden"),
            std::string::npos);
  EXPECT_NE(message("mmt", Size::kTiny, {.heads = 5}).find("hidden 32 is not divisible by 5 heads"), std::string::npos);
  EXPECT_NE(message("dlrm", Size::kTiny, {.layers = 3})
                .find("model 'dlrm' has a fixed shape: layers/hidden/heads/ffn apply to mmt, transformer only"),
            std::string::npos);
  EXPECT_NE(message("transformer", Size::kTiny, {.ffn = -4}).find("ffn -4 is out of range"), std::string::npos);
}

}  // namespace
}  // namespace gp::models
