// Real models exported by torch.onnx.export (scripts/export_torch.py, run with Debian's python3
// and torch 1.13) in TRAINING mode without constant folding, opsets 13 and 17, imported here.
// The files are written once into the build folder and shared by every test process (ctest runs
// each test in its own process, perhaps in parallel: a lock file serialises the export).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "graph/analysis.h"
#include "graph/onnx_import.h"

namespace gp::graph {
namespace {

namespace fs = std::filesystem;

fs::path const kDir = fs::path(GP_BINARY_DIR) / "torch_models";
fs::path const kScript = fs::path(GP_SOURCE_DIR) / "scripts" / "export_torch.py";

struct Exported {
  bool available = false;
  std::string why;                        // reason to skip
  std::map<std::string, int64_t> params;  // file name -> torch's parameter count
};

int run(std::string const& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (fgets(buf, sizeof buf, p))
    if (out) *out += buf;
  return pclose(p);
}

Exported const& exported() {
  static Exported const e = [] {
    Exported r;
    fs::path const listing = kDir / "exported.txt";
    auto fresh = [&] { return fs::exists(listing) && fs::last_write_time(listing) >= fs::last_write_time(kScript); };
    // Importing torch takes seconds: only ask when the files are not there yet.
    if (!fresh() && run("/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null", nullptr) != 0) {
      r.why =
          "/usr/bin/python3 cannot import torch and torchvision (apt-get install python3-torch "
          "python3-torchvision; scripts/setup.sh does)";
      return r;
    }
    fs::create_directories(kDir);
    int const lock = ::open((kDir / ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    if (!fresh()) {
      std::string out;
      int const rc = run("/usr/bin/python3 " + kScript.string() + " --out " + kDir.string() + " 2>&1", &out);
      if (rc != 0) {
        r.why = "export failed: " + out;
        if (lock >= 0) ::close(lock);
        return r;
      }
      std::ofstream(listing) << out;
    }
    std::ifstream in(listing);
    std::string line;
    while (std::getline(in, line)) {
      auto const p = line.find(" params=");
      if (p == std::string::npos) continue;
      std::string const file = fs::path(line.substr(0, p)).filename().string();
      r.params[file] = std::stoll(line.substr(p + 8));
    }
    if (lock >= 0) ::close(lock);
    r.available = r.params.size() == 8;
    if (!r.available) r.why = "the export listing is incomplete";
    return r;
  }();
  return e;
}

class TorchExport : public ::testing::TestWithParam<int> {
 protected:
  OpGraph load(std::string const& model) {
    Exported const& e = exported();
    if (!e.available) return {};
    std::string const file = model + "_op" + std::to_string(GetParam()) + ".onnx";
    auto g = load_onnx((kDir / file).string());
    EXPECT_TRUE(g.is_ok()) << g.status().to_string();
    torch_params_ = e.params.at(file);
    if (!g.is_ok()) return {};
    return std::move(g).value();
  }
  void SetUp() override {
    if (!exported().available) GTEST_SKIP() << exported().why;
  }
  // BatchNormalizations with a Relu fused at import (the Relu their only reader), and with a
  // residual block's Add and Relu fused (`residual`).
  static int64_t fused_relus(OpGraph const& g, bool residual = false) {
    int64_t n = 0;
    for (auto const& op : g.ops())
      if (auto const* a = std::get_if<BatchNormAttrs>(&op.typed)) n += residual ? a->residual : a->relu;
    return n;
  }
  static std::map<std::string, int64_t> count_types(OpGraph const& g) {
    std::map<std::string, int64_t> m;
    for (auto const& op : g.ops()) ++m[op.type];
    return m;
  }
  int64_t torch_params_ = -1;
};

TEST_P(TorchExport, ResNet18) {
  OpGraph g = load("resnet18");
  EXPECT_EQ(g.param_count(), torch_params_);
  EXPECT_EQ(g.param_count(), 11689512);
  auto const types = count_types(g);
  EXPECT_EQ(types, (std::map<std::string, int64_t>{{"BatchNormalization", 20},
                                                   {"Conv", 20},
                                                   {"Flatten", 1},
                                                   {"Gemm", 1},
                                                   {"GlobalAveragePool", 1},
                                                   {"MaxPool", 1}}));
  // 17 Relus and 8 Adds as exported: the stem's and each block's first BatchNorm's Relu (9) are
  // fused into it, and each block's tail, its last BatchNorm -> Add -> Relu (8), into that BatchNorm.
  EXPECT_EQ(fused_relus(g), 17);
  EXPECT_EQ(fused_relus(g, /*residual=*/true), 8);
  EXPECT_EQ(g.tensor(g.inputs()[0]).shape, (Shape{{kBatch, 3, 224, 224}}));
  EXPECT_EQ(g.tensor(g.outputs()[0]).shape, (Shape{{kBatch, 1000}}));
  // 1.814 GMACs of convolution and linear layers: about 3.64 GFLOPs forward.
  EXPECT_NEAR(g.fwd_flops_per_sample(), 3.65e9, 0.02e9);
  EXPECT_EQ(branch_count(g), 16);  // 8 residual blocks, each forking into 2
  EXPECT_EQ(fork_points(g).size(), 8u);
  EXPECT_EQ(join_points(g).size(), 8u);
  for (auto const& op : g.ops())
    if (op.type == "BatchNormalization") {
      EXPECT_TRUE(std::get<BatchNormAttrs>(op.typed).training) << op.name;
      EXPECT_EQ(g.tensor(op.inputs[3]).role, TensorRole::kConstant);
    }
}

TEST_P(TorchExport, GoogLeNet) {
  OpGraph g = load("googlenet");
  EXPECT_EQ(g.param_count(), torch_params_);
  EXPECT_EQ(g.param_count(), 6624904);
  auto const types = count_types(g);
  EXPECT_EQ(types.at("Conv"), 57);
  EXPECT_EQ(types.at("BatchNormalization"), 57);
  EXPECT_EQ(types.at("Concat"), 9);
  EXPECT_EQ(types.at("MaxPool"), 13);
  EXPECT_EQ(types.at("Dropout"), 1);
  EXPECT_EQ(types.count("Relu"), 0u);  // every Relu follows a BatchNorm and is fused into it
  EXPECT_EQ(fused_relus(g), 57);
  EXPECT_EQ(g.num_ops(), 140u);    // 197 with the 57 Relus apart
  EXPECT_EQ(branch_count(g), 36);  // 9 inception blocks, 4 branches each
  EXPECT_EQ(widest_antichain(g).size(), 4u);
}

TEST_P(TorchExport, InceptionV3) {
  OpGraph g = load("inception_v3");
  EXPECT_EQ(g.param_count(), torch_params_);
  EXPECT_EQ(g.param_count(), 23834568);
  auto const types = count_types(g);
  EXPECT_EQ(types, (std::map<std::string, int64_t>{{"AveragePool", 9},
                                                   {"BatchNormalization", 94},
                                                   {"Concat", 11},
                                                   {"Conv", 94},
                                                   {"Dropout", 1},
                                                   {"Flatten", 1},
                                                   {"Gemm", 1},
                                                   {"GlobalAveragePool", 1},
                                                   {"MaxPool", 4}}));
  EXPECT_EQ(fused_relus(g), 94);  // every BatchNorm's Relu
  for (auto const& op : g.ops())
    if (op.type == "AveragePool") {
      EXPECT_TRUE(std::get<PoolAttrs>(op.typed).count_include_pad) << op.name;
    }
  EXPECT_NEAR(g.fwd_flops_per_sample(), 11.53e9, 0.05e9);  // 5.7 GMACs
}

TEST_P(TorchExport, TransformerEncoderWithGelu) {
  OpGraph g = load("transformer");
  EXPECT_EQ(g.param_count(), torch_params_);
  EXPECT_EQ(g.param_count(), 17088);
  auto const types = count_types(g);
  EXPECT_EQ(types.at("Gelu"), 2);                // fused from the Erf pattern
  EXPECT_EQ(types.at("LayerNormalization"), 4);  // native at 17, fused from the decomposition at 13
  EXPECT_EQ(types.count("Erf"), 0u);
  EXPECT_EQ(types.count("ReduceMean"), 0u);
  EXPECT_EQ(types.count("Shape"), 0u);
  EXPECT_EQ(types.at("Softmax"), 2);
  EXPECT_EQ(types.at("Dropout"), 8);
  EXPECT_EQ(g.tensor(g.outputs()[0]).shape, (Shape{{kBatch, 10, 32}}));
  // Attention heads: the batch times 4 heads appears as one dimension.
  bool heads = false;
  for (auto const& t : g.tensors()) heads |= t.shape == Shape{{-4, 10, 10}};
  EXPECT_TRUE(heads);
  for (auto const& op : g.ops())
    if (op.type == "Dropout") {
      EXPECT_TRUE(std::get<DropoutAttrs>(op.typed).training);
    }
}

INSTANTIATE_TEST_SUITE_P(Opsets, TorchExport, ::testing::Values(13, 17),
                         [](auto const& info) { return "opset" + std::to_string(info.param); });

}  // namespace
}  // namespace gp::graph
