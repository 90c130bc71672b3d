// Parity with PyTorch 1.13 (Debian's python3-torch on /usr/bin/python3): forward outputs of the
// zoo's tiny models and of torchvision's ResNet-18 (exported to ONNX), and the weights after 3 SGD
// steps, agree within 1e-4 relative (max-norm). scripts/torch_reference.py runs the torch side:
// the torchvision module itself, or an ONNX interpreter over torch.nn.functional with autograd.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <sstream>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/data.h"
#include "exec/trainer.h"
#include "graph/onnx_import.h"
#include "models/zoo.h"

namespace gp::exec {
namespace {

namespace fs = std::filesystem;

std::string const kPython = "/usr/bin/python3";
std::string const kScript = std::string(GP_SOURCE_DIR) + "/scripts/torch_reference.py";

bool torch_available(std::string& why) {
  if (!fs::exists(kPython)) {
    why = kPython + " not found";
    return false;
  }
  if (std::system((kPython + " -c 'import torch, torchvision, onnx' >/dev/null 2>&1").c_str()) != 0) {
    why = "torch/torchvision/onnx are not importable by " + kPython +
          " (apt-get install python3-torch python3-torchvision python3-onnx)";
    return false;
  }
  return true;
}

Status run(std::string const& cmd) {
  if (std::system((cmd + " > /dev/null").c_str()) != 0) return internal_error("command failed: " + cmd);
  return Status::ok();
}

// Runs `cmd`, keeping its standard output.
Status run_capture(std::string const& cmd, std::string& out) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return internal_error("cannot run: " + cmd);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) return internal_error("command failed: " + cmd + "\n" + out);
  return Status::ok();
}

std::string loss_list(std::vector<double> const& v) {
  std::string s;
  for (double x : v) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.4f", s.empty() ? "" : "/", x);
    s += b;
  }
  return s;
}

void write_tensor(std::string const& path, Tensor const& t) {
  NpyArray a{t.dtype(), t.shape(), std::vector<std::byte>(t.nbytes())};
  std::memcpy(a.bytes.data(), t.raw(), t.nbytes());
  ASSERT_TRUE(write_npy(path, a).is_ok());
}

std::vector<float> read_floats(std::string const& path) {
  auto a = read_npy(path);
  EXPECT_TRUE(a.is_ok()) << a.status().message();
  if (!a.is_ok()) return {};
  std::vector<float> v(a->bytes.size() / 4);
  std::memcpy(v.data(), a->bytes.data(), a->bytes.size());
  return v;
}

// max|a - b| / max(max|b|, 1e-3)
double max_rel(std::vector<float> const& a, std::vector<float> const& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  // Floor: tensors whose true gradient is zero (attention key biases) hold rounding noise only.
  return diff / std::max(scale, 1e-3);
}

// Compares DIR/<folder>/<i>.npy (names in DIR/<folder>/names.txt) with `ours` by name; returns
// the worst max-rel and counts the tensors compared. Every entry of `ours` must be compared.
double compare_folder(fs::path const& folder, std::map<std::string, Tensor> const& ours, double tol,
                      std::string const& what, int& compared) {
  std::ifstream names(folder / "names.txt");
  EXPECT_TRUE(names.good()) << "the torch reference wrote no " << folder;
  std::string name;
  int i = 0;
  double worst = 0;
  compared = 0;
  while (std::getline(names, name)) {
    auto ref = read_floats((folder / (std::to_string(i++) + ".npy")).string());
    auto it = ours.find(name);
    if (it == ours.end()) continue;
    double const r = max_rel(it->second.to_vector(), ref);
    EXPECT_LE(r, tol) << what << " '" << name << "'";
    worst = std::max(worst, r);
    ++compared;
  }
  EXPECT_EQ(static_cast<std::size_t>(compared), ours.size()) << "every " << what << " is compared";
  return worst;
}

// Writes tensors as folder/<i>.npy with folder/names.txt, the layout torch_reference.py writes.
void save_folder(fs::path const& folder, std::map<std::string, Tensor> const& tensors) {
  fs::create_directories(folder);
  std::ofstream names(folder / "names.txt");
  int i = 0;
  for (auto const& [name, t] : tensors) {
    write_tensor((folder / (std::to_string(i++) + ".npy")).string(), t);
    names << name << "\n";
  }
}

struct ParityCase {
  std::string name;
  std::string onnx_path;
  LossKind loss = LossKind::kCrossEntropy;
  int64_t batch = 4;
  float lr = 0.1f;
  std::string torch_flags;
  // false where the export renames weights (torch's LSTM export re-lays out W/R/B into new
  // initializers): then the losses and the forward carry the comparison.
  bool same_weight_names = true;
  bool chaotic = false;  // see check_parity: steps after the first compared with torch's float64 run
};

// The "losses" list of the JSON line torch_reference.py prints last.
std::vector<double> parse_losses(std::string const& out) {
  std::vector<double> v;
  auto p = out.rfind("\"losses\": [");
  if (p == std::string::npos) return v;
  std::istringstream in(out.substr(p + 11));
  double x;
  char sep;
  while (in >> x) {
    v.push_back(x);
    if (!(in >> sep) || sep != ',') break;
  }
  return v;
}

// Runs 3 SGD steps (momentum 0.9) on one fixed batch in graphpipe and in torch, and checks the
// forward output, the first step's gradients, the weights after 3 steps and the BatchNorm running
// statistics (updated by all 4 training forwards) within 1e-4 relative.
void check_parity(ParityCase const& pc, fs::path const& dir) {
  SCOPED_TRACE(pc.name);
  auto g = graph::load_onnx(pc.onnx_path);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  CpuBackend be;
  TrainConfig c;
  c.loss = pc.loss;
  c.batch = pc.batch;
  c.steps = 3;
  c.seed = 5;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.lr = pc.lr;
  c.optimizer.momentum = 0.9f;
  c.data.samples = pc.batch;  // every step sees the same batch, as the torch side does
  auto data = make_data_source(c.data, *g, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  auto b = (*data)->batch(0, pc.batch);
  ASSERT_TRUE(b.is_ok());
  for (std::size_t k = 0; k < b->inputs.size(); ++k)
    write_tensor((dir / ("input_" + std::to_string(k) + ".npy")).string(), b->inputs[k]);
  write_tensor((dir / "labels.npy").string(), b->labels);
  auto t = Trainer::create(c, *g, be, std::move(data).value());
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  {
    std::ofstream names(dir / "params.txt");
    for (auto const& [n, w] : (*t)->executor().parameters()) names << n << "\n";
  }
  TensorMap inputs, outputs;
  for (std::size_t k = 0; k < b->inputs.size(); ++k) inputs.emplace(g->inputs()[k], b->inputs[k]);
  ASSERT_TRUE((*t)->executor().forward(0, inputs, outputs, true, 0).is_ok());
  (*t)->executor().discard(0);
  ASSERT_TRUE((*t)->step().is_ok());
  std::map<std::string, Tensor> first_grads;
  for (auto const& [n, gr] : (*t)->executor().gradients()) first_grads.emplace(n, gr.clone());
  ASSERT_TRUE((*t)->run(nullptr).is_ok());

  char lr[32];
  std::snprintf(lr, sizeof lr, "%g", static_cast<double>(pc.lr));
  std::string const cmd = kPython + " " + kScript + " reference --onnx " + pc.onnx_path + " --data " + dir.string() +
                          " --steps 3 --lr " + lr + " --momentum 0.9 --loss " + loss_kind_name(pc.loss) + " " +
                          pc.torch_flags;
  // A model whose float32 training trajectory is chaotic (torch's own float32 run leaves its float64
  // run after a step or two) is held to the float64 answer instead, within twice the distance torch's
  // float32 run keeps from it (at least 1e-4); the first step's loss (the same weights) stays at 1e-4.
  std::vector<double> exact;
  if (pc.chaotic) {
    std::string out64;
    ASSERT_TRUE(run_capture(cmd + " --float64", out64).is_ok()) << cmd;
    exact = parse_losses(out64);
  }
  std::string torch_out;
  ASSERT_TRUE(run_capture(cmd, torch_out).is_ok()) << cmd;
  std::vector<double> const torch_losses = parse_losses(torch_out);
  ASSERT_EQ(torch_losses.size(), (*t)->losses().size()) << torch_out;
  // Every parameter torch trains is one graphpipe trains (for --model: torch's own named_parameters).
  auto const params_at = torch_out.rfind("\"params\": ");
  ASSERT_NE(params_at, std::string::npos) << torch_out;
  EXPECT_EQ(std::stoul(torch_out.substr(params_at + 10)), (*t)->executor().parameters().size())
      << "torch trains a different number of parameter tensors";
  for (std::size_t k = 0; k < torch_losses.size(); ++k) {
    double const ours = (*t)->losses()[k];
    auto rel = [](double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-3); };
    if (pc.chaotic && k > 0) {
      ASSERT_EQ(exact.size(), torch_losses.size());
      double const bound = std::max(1e-4, 2 * rel(torch_losses[k], exact[k]));
      EXPECT_LE(rel(ours, exact[k]), bound) << "loss of step " << k + 1 << ": graphpipe " << ours << ", torch float64 "
                                            << exact[k] << ", torch float32 " << torch_losses[k];
      std::printf("[parity] %-12s step %zu loss vs float64: graphpipe %.2e, torch float32 %.2e\n", pc.name.c_str(),
                  k + 1, rel(ours, exact[k]), rel(torch_losses[k], exact[k]));
    } else {
      EXPECT_LE(rel(ours, torch_losses[k]), 1e-4)
          << "loss of step " << k + 1 << ": graphpipe " << ours << ", torch " << torch_losses[k];
    }
  }
  double const fwd = max_rel(outputs.at(g->outputs()[0]).to_vector(), read_floats((dir / "out.npy").string()));
  EXPECT_LE(fwd, 1e-4) << "forward output differs from torch";
  int n_grads = 0, n_weights = 0, n_buffers = 0;
  double grads = 0, weights = 0, buffers = 0;
  if (pc.same_weight_names && !pc.chaotic) {
    grads = compare_folder(dir / "grads", first_grads, 1e-4, "gradient of the first step of", n_grads);
    weights =
        compare_folder(dir / "weights", (*t)->executor().parameters(), 1e-4, "weight after 3 SGD steps", n_weights);
    buffers = compare_folder(dir / "buffers", (*t)->executor().buffers(), 1e-4,
                             "BatchNorm running statistic after 4 training forwards", n_buffers);
  }
  // GP_PARITY_KEEP=DIR keeps both sides' tensors for diagnosis (DIR/<model>/graphpipe/... next to
  // torch's), e.g. to compare them with a --float64 torch run.
  if (char const* keep = std::getenv("GP_PARITY_KEEP")) {
    save_folder(dir / "graphpipe" / "grads", first_grads);
    save_folder(dir / "graphpipe" / "weights", (*t)->executor().parameters());
    save_folder(dir / "graphpipe" / "buffers", (*t)->executor().buffers());
    fs::path const dst = fs::path(keep) / pc.name;
    fs::create_directories(dst);
    fs::copy(dir, dst, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  std::printf(
      "[parity] %-12s losses %s, max-rel: forward %.2e, step-1 grads %.2e (%d), weights after 3 steps %.2e (%d), "
      "running stats %.2e (%d)\n",
      pc.name.c_str(), loss_list((*t)->losses()).c_str(), fwd, grads, n_grads, weights, n_weights, buffers, n_buffers);
}

class TorchParity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!torch_available(why)) GTEST_SKIP() << why;
    dir_ = fs::temp_directory_path() / ("gp_parity_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(TorchParity, ZooTinyModels) {
  for (auto const& info : models::model_list()) {
    fs::path const d = dir_ / info.name;
    fs::create_directories(d);
    std::string const path = (d / "model.onnx").string();
    ASSERT_TRUE(models::export_model(info.name, models::Size::kTiny, path).is_ok());
    LossKind const loss = info.task == models::Task::kRegression ? LossKind::kMse : LossKind::kCrossEntropy;
    check_parity({info.name, path, loss, 4, 0.1f, ""}, d);
  }
}

// Batch 16 and lr 0.01 keep the comparison well conditioned. With batch 4 (BatchNorm over 4
// values at layer4's 1x1 spatial size) and lr 0.1, float32 rounding alone decides some ReLU inputs
// within 1e-7 of zero and the 3-step trajectory diverges (loss 2.4 -> 8.6): there torch's own
// float32 run differs from its float64 run by ~1 relative (scripts/torch_reference.py --float64),
// as much as graphpipe differs from torch, while the first step's gradients agree to 1e-4.
TEST_F(TorchParity, TorchvisionResNet18) {
  std::string const path = (dir_ / "resnet18.onnx").string();
  ASSERT_TRUE(run(kPython + " " + kScript + " export-resnet18 --out " + path + " --image 32 --classes 10").is_ok());
  check_parity({"resnet18", path, LossKind::kCrossEntropy, 16, 0.01f, "--torchvision resnet18 --classes 10"}, dir_);
}

// The architectures of issue 14, exported by torch 1.13 the way users export them (opset 17,
// training mode, no constant folding): a MobileNetV2 (Clip as ReLU6, depthwise convolutions), a
// VisionTransformer (class token expanded to the batch, position embeddings), an LSTM tagger (ONNX
// LSTM, one class per token), an RNN tagger (two bidirectional ReLU nn.RNN layers: ONNX RNN), a
// spatial transformer (a learned affine grid through grid_sample: ONNX GridSample, whose gradient
// reaches the grid's weights and the sampled features) and a GPT-style causal decoder (pre-norm
// blocks, causal mask). Each trains 3 SGD steps on one batch; the losses and the forward output
// match torch within 1e-4.
TEST_F(TorchParity, ArchitecturesUsersBring) {
  struct Arch {
    char const* name;
    int64_t batch;
    bool same_names;
    bool chaotic;
    float lr;
  };
  // MobileNetV2 from scratch is chaotic in float32: on this batch, torch's float32 run differs from
  // its float64 run by 2.2e-3 relative in the second step's loss and 1.9e-2 in the third (64x64
  // inputs, batch 16, width 0.25; 2e-4 at step 3 even at 128x128), and its step-1 gradients by 7e-2
  // at features.13 (graphpipe's: 1e-3). Both frameworks' float32 runs are compared with the float64 one.
  // The tagger's weight names do not survive export, so its learning rate is large enough that a
  // wrong recurrent-weight gradient moves the later losses well beyond 1e-4.
  for (Arch const& a : {Arch{"mobilenet_v2", 16, true, true, 0.01f}, Arch{"vit", 4, true, false, 0.01f},
                        Arch{"lstm_tagger", 4, false, false, 1.0f}, Arch{"rnn_tagger", 4, false, false, 0.5f},
                        Arch{"stn", 4, true, false, 0.05f}, Arch{"gpt", 4, true, false, 0.01f}}) {
    fs::path const d = dir_ / a.name;
    fs::create_directories(d);
    std::string const path = (d / "model.onnx").string();
    ASSERT_TRUE(
        run(kPython + " " + kScript + " export-model --name " + a.name + " --out " + path + " 2>/dev/null").is_ok())
        << a.name;
    ParityCase pc{a.name, path, LossKind::kCrossEntropy, a.batch, a.lr, std::string("--model ") + a.name};
    pc.same_weight_names = a.same_names;
    pc.chaotic = a.chaotic;
    check_parity(pc, d);
  }
}

}  // namespace
}  // namespace gp::exec
