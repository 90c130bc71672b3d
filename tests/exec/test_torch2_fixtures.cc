// Models exported by a current PyTorch (tests/data/torch2, written by
// scripts/export_torch2_fixtures.py with both exporters: dynamo, IR version 10 and opset 20, and
// TorchScript, opset 17, also with every module a model-local function; Llama and GPT-2 also by
// dynamo with a fixed batch of 3, as torch.onnx.export does by default), torch.nn models,
// Hugging Face GPT-2 (language model and sequence classifier), BERT, DistilBERT, ViT, Llama and
// Qwen2, and torchvision ConvNeXt, EfficientNet and Swin with stochastic depth, from tiny configurations,
// import and train 3 SGD steps on the batch stored beside them with the losses torch computed for
// the same steps, within 2e-6 relative. No Python runs here: the files are the contract.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "exec/cpu/cpu_backend.h"
#include "exec/data.h"
#include "exec/trainer.h"
#include "graph/onnx_import.h"

namespace gp::exec {
namespace {

namespace fs = std::filesystem;

fs::path const kFixtures = fs::path(GP_SOURCE_DIR) / "tests" / "data" / "torch2";

// Fixtures graphpipe cannot import yet, with the words of the refusal: the test fails once they
// import, so the entry goes and the losses are checked.
std::map<std::string, std::string> const kKnownGaps = {};

class Torch2Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Torch2Fixture, ImportsAndTrainsLikeTorch) {
  fs::path const dir = kFixtures / GetParam();
  std::ifstream in(dir / "reference.json");
  ASSERT_TRUE(in.good()) << "missing " << dir / "reference.json";
  auto const ref = nlohmann::json::parse(in);
  // Buffers a TorchScript file cannot mark as such (BART's final_logits_bias), frozen as a user does
  // with the training config's `frozen:`.
  graph::ImportOptions options;
  if (ref.contains("freeze")) options.frozen = ref.at("freeze").get<std::vector<std::string>>();
  auto g = graph::load_onnx((dir / "model.onnx").string(), options);
  if (auto gap = kKnownGaps.find(GetParam()); gap != kKnownGaps.end()) {
    ASSERT_FALSE(g.is_ok()) << GetParam() << " imports now: remove it from kKnownGaps";
    EXPECT_NE(g.status().message().find(gap->second), std::string::npos) << g.status().message();
    GTEST_SKIP() << "known gap: " << g.status().message();
  }
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  // The constants the dynamo exporter's optimizer folded out of buffers (a rotary embedding's
  // cos/sin tables, which look like learned tensors multiplied into the activations): the export
  // script found them by value from torch's module (reference.json's "frozen"), the importer by
  // their shape as sinusoids; torch does not train them, and neither does graphpipe.
  std::set<std::string> tables, folded;
  for (auto const& w : g->weight_choices())
    if (w.reason == graph::kPositionTableReason) tables.insert(w.name);
  if (ref.contains("frozen")) folded = ref.at("frozen").get<std::set<std::string>>();
  EXPECT_EQ(tables, folded);

  TrainConfig c;
  c.loss = LossKind::kCrossEntropy;
  c.batch = ref.at("batch").get<int64_t>();
  c.steps = ref.at("steps").get<int64_t>();
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.lr = ref.at("lr").get<float>();
  c.optimizer.momentum = ref.at("momentum").get<float>();
  c.data.kind = DataConfig::Kind::kNpy;
  c.data.inputs = {(dir / "input_0.npy").string()};
  c.data.labels = (dir / "labels.npy").string();
  auto data = make_data_source(c.data, *g, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  CpuBackend be;
  auto t = Trainer::create(c, *g, be, std::move(data).value());
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ASSERT_TRUE((*t)->run(nullptr).is_ok());

  auto const want = ref.at("losses").get<std::vector<double>>();
  auto const& got = (*t)->losses();
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t k = 0; k < want.size(); ++k) {
    double const rel = std::abs(got[k] - want[k]) / std::max(std::abs(want[k]), 1e-3);
    worst = std::max(worst, rel);
    // Every fixture agrees within 1.6e-7 (float reassociation over 3 steps); the bound was 1e-4 until
    // Mixtral passed it at 1.5e-5 with its experts' weights untrained (GatherND's table was not a
    // weight slot): a missed weight moves the loss by more than rounding does.
    EXPECT_LE(rel, 2e-6) << "loss of step " << k + 1 << ": graphpipe " << got[k] << ", torch " << want[k] << " ("
                         << ref.at("exporter").get<std::string>() << " exporter, opset " << ref.at("opset")
                         << ", torch " << ref.at("versions").at("torch").get<std::string>() << ")";
  }
  std::printf("[torch2] %-20s %zu steps, worst loss difference from torch %.1e relative\n", GetParam().c_str(),
              want.size(), worst);
}

INSTANTIATE_TEST_SUITE_P(
    Torch2, Torch2Fixture,
    ::testing::Values("mlp_dynamo", "mlp_torchscript", "cnn_dynamo", "cnn_torchscript", "encoder_dynamo",
                      "encoder_torchscript", "mlp_functions", "cnn_functions", "ops_dynamo", "ops_torchscript",
                      "gpt2_dynamo", "gpt2_torchscript", "bert_dynamo", "bert_torchscript", "llama_dynamo",
                      "qwen2_dynamo", "distilbert_dynamo", "distilbert_torchscript", "vit_dynamo", "vit_torchscript",
                      "gpt2cls_dynamo", "gpt2cls_torchscript", "convnext_dynamo", "convnext_torchscript",
                      "efficientnet_dynamo", "efficientnet_torchscript", "swin_dynamo", "swin_torchscript",
                      "adaptive_dynamo", "roberta_dynamo", "roberta_torchscript", "gpt2tied_dynamo",
                      "gpt2tied_torchscript", "llama_static", "gpt2_static", "shuffle_dynamo", "shuffle_torchscript",
                      "moe_dynamo", "moe_torchscript", "mixtral_dynamo", "deepseek_dynamo", "deepseek_torchscript",
                      "upscale_dynamo", "upscale_torchscript", "recurrent_dynamo", "recurrent_torchscript",
                      "stn_dynamo", "stn_torchscript", "stncubic_dynamo", "stncubic_torchscript", "stn3d_dynamo",
                      // F.affine_grid: ONNX AffineGrid in the TorchScript file, decomposed by dynamo.
                      "affine_dynamo", "affine_torchscript", "fold_dynamo", "fold_torchscript", "scattermax_dynamo",
                      "scattermax_torchscript", "indexput_dynamo", "unpool_dynamo",
                      // tensor_split: TorchScript's Loop building a sequence, unrolled at import.
                      "tokensplit_dynamo", "tokensplit_torchscript",
                      // Encoder-decoders, audio, a state-space model, XLNet's [T, N] layout.
                      "t5_torchscript", "bart_dynamo", "bart_torchscript", "longt5_torchscript", "pegasus_dynamo",
                      "pegasus_torchscript", "xlnet_dynamo", "xlnet_torchscript", "mamba_dynamo", "whisper_dynamo",
                      "whisper_torchscript", "wav2vec2_dynamo", "wav2vec2_torchscript", "fnet_dynamo", "stft_dynamo",
                      // Opset 23: Attention and RMSNormalization, imported as their ONNX function bodies.
                      "llama_opset23", "qwen2_opset23", "gpt2_opset23",
                      // Opset 25, the newest torch writes itself: Attention of opset 24 and 25,
                      // expanded as ONNX 1.18's opset-23 body (graph/onnx_import_opsets.cc).
                      "llama_opset25", "qwen2_opset25", "gpt2_opset25"));

}  // namespace
}  // namespace gp::exec
