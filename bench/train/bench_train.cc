// Single-device training throughput of graphpipe's CPU executor against PyTorch (CPU, same model,
// batch and SGD optimizer) in the same run; with --bf16 also bf16 mixed precision against torch's
// CPU autocast, and graphpipe bf16 against its own float32. Torch runs as a subprocess with OpenBLAS preloaded
// through LD_LIBRARY_PATH so that neither side is handicapped by the reference BLAS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include "exec/session/training.h"
#include "models/zoo.h"

namespace {

using namespace gp;

struct Row {
  std::string model;
  int64_t batch = 0;
  std::string loss;  // torch_reference.py spelling
  std::string torchvision;
  std::string onnx;
};

std::string run_capture(std::string const& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  pclose(pipe);
  return out;
}

double json_number(std::string const& json, std::string const& key) {
  auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return 0.0;
  return std::strtod(json.c_str() + at + key.size() + 3, nullptr);
}

std::string json_string(std::string const& json, std::string const& key) {
  auto at = json.find("\"" + key + "\": \"");
  if (at == std::string::npos) return "?";
  at += key.size() + 5;
  return json.substr(at, json.find('"', at) - at);
}

Result<double> graphpipe_samples_per_s(Row const& row, int warmup, int steps, graph::Precision precision) {
  exec::TrainConfig config;
  config.precision = precision;
  config.model.path = row.onnx;
  config.batch = row.batch;
  config.steps = warmup + steps;
  config.loss = row.loss == "mse" ? exec::LossKind::kMse : exec::LossKind::kCrossEntropy;
  config.optimizer.kind = exec::OptimizerKind::kSgd;
  config.optimizer.lr = 1e-3f;
  config.optimizer.momentum = 0.9f;
  config.data.samples = row.batch;  // one fixed batch, generated once, as the torch side does
  config.log_interval = 1 << 30;
  ASSIGN_OR_RETURN(auto session, session::TrainingSession::create(config, session::TrainOptions{}));
  RETURN_IF_ERROR(session->run(warmup));
  auto const t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(session->run(steps));
  double const dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(row.batch) * steps / dt;
}

// The median (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  std::size_t const n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the table only: no session log lines
  int warmup = 2, steps = 5;
  int repeat = 1;  // --repeat N: N interleaved rounds, medians printed (a noisy machine)
  int64_t batch = 32;
  bool with_resnet = true;
  std::string only;
  bool with_torch = true;  // --no-torch: graphpipe alone (for profiling it)
  bool bf16 = false;       // --bf16: bf16 rows too (graphpipe's precision bf16, torch's CPU autocast)
  // --torch-python PATH: the interpreter of the torch side (a venv's PyTorch 2.x); Debian's by
  // default. The ResNet-18 ONNX file is always exported by Debian's, so both see the same model.
  std::string torch_python = "/usr/bin/python3";
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg == "--quick") {
      warmup = 1;
      steps = 3;
    } else if (arg == "--no-resnet") {
      with_resnet = false;
    } else if (arg == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (arg == "--bf16") {
      bf16 = true;
    } else if (arg == "--no-torch") {
      with_torch = false;
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--torch-python" && i + 1 < argc) {
      torch_python = argv[++i];
      if (!std::filesystem::exists(torch_python)) {
        std::cerr << "bench_train: --torch-python " << torch_python
                  << " does not exist (give a Python with torch, e.g. a venv's bin/python)\n";
        return 2;
      }
    } else {
      std::cerr << "bench_train: unknown argument '" << arg
                << "'; use --quick, --no-resnet, --batch N, --steps N, --only MODEL, --no-torch, --bf16, --repeat N, "
                   "--torch-python PATH\n";
      return 2;
    }
  }
  std::string const source = GP_SOURCE_DIR;
  std::string const script = source + "/scripts/torch_reference.py";
  std::string const torch_env = "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread ";
  auto const dir = std::filesystem::temp_directory_path() / ("gp_bench_train_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);

  std::vector<Row> rows;
  for (auto const& info : models::model_list()) {
    if (!only.empty() && only != info.name) continue;
    Row row{info.name, batch, info.task == models::Task::kRegression ? "mse" : "cross_entropy", "",
            (dir / (info.name + ".onnx")).string()};
    if (auto st = models::export_model(info.name, models::Size::kSmall, row.onnx); !st.is_ok()) {
      std::cerr << "bench_train: exporting " << info.name << ": " << st.message() << "\n";
      return 1;
    }
    rows.push_back(row);
  }
  if (with_resnet && (only.empty() || only == "resnet18")) {
    Row row{"resnet18", std::min<int64_t>(batch, 16), "cross_entropy", "resnet18", (dir / "resnet18.onnx").string()};
    std::string const cmd = torch_env + "/usr/bin/python3 " + script + " export-resnet18 --out " + row.onnx + " 2>&1";
    run_capture(cmd);
    if (std::filesystem::exists(row.onnx))
      rows.push_back(row);
    else
      std::cerr << "bench_train: resnet18 export failed (" << cmd << "); skipped\n";
  }

  std::string const blas_maps =
      run_capture(torch_env + torch_python +
                  " -c \"import torch; torch.ones(2,2)@torch.ones(2,2); "
                  "print(torch.__version__, 'openblas' if 'libopenblas' in open('/proc/self/maps').read() else "
                  "'other')\" 2>/dev/null");
  std::printf("torch: %s, %s, 2 threads; torch version and BLAS mapped in its process: %s", torch_python.c_str(),
              torch_env.c_str(), blas_maps.empty() ? "?\n" : blas_maps.c_str());
  std::printf("warm-up %d steps, timed %d steps, SGD(lr=1e-3, momentum=0.9), size small; %d round%s (medians)\n\n",
              warmup, steps, repeat, repeat == 1 ? "" : "s, precisions interleaved");
  std::printf("%-12s %6s %-5s %16s %16s %8s %10s  %s\n", "model", "batch", "math", "graphpipe s/s", "torch s/s",
              "ratio", "vs fp32", "torch blas_build");
  std::vector<graph::Precision> precisions = {graph::Precision::kFloat32};
  if (bf16) precisions.push_back(graph::Precision::kBFloat16);
  for (auto const& row : rows) {
    // Per precision and round: graphpipe's and torch's rates, and (bf16) graphpipe's ratio to its
    // own float32 of the same round; the rounds interleave the precisions, so a slow spell of the
    // machine hits both sides of a ratio.
    struct Samples {
      std::vector<double> gp, torch, ratio, vs_fp32;
      std::string blas, error;
    };
    std::vector<Samples> samples(precisions.size());
    for (int round = 0; round < repeat; ++round) {
      double fp32_rate = 0;
      for (std::size_t k = 0; k < precisions.size(); ++k) {
        bool const low = precisions[k] == graph::Precision::kBFloat16;
        auto gp_rate = graphpipe_samples_per_s(row, warmup, steps, precisions[k]);
        std::string cmd = torch_env + torch_python + " " + script + " bench --onnx " + row.onnx + " --batch " +
                          std::to_string(row.batch) + " --steps " + std::to_string(steps) + " --warmup " +
                          std::to_string(warmup) + " --threads 2 --loss " + row.loss + (low ? " --bf16" : "");
        if (!row.torchvision.empty()) cmd += " --torchvision " + row.torchvision;
        std::string const out = with_torch ? run_capture(cmd + " 2>&1") : std::string();
        double const torch_rate = json_number(out, "samples_per_s");
        double const g = gp_rate.is_ok() ? *gp_rate : 0.0;
        if (!low) fp32_rate = g;
        Samples& s = samples[k];
        s.gp.push_back(g);
        s.blas = json_string(out, "blas_build");
        if (torch_rate > 0) {
          s.torch.push_back(torch_rate);
          s.ratio.push_back(g / torch_rate);
        } else if (with_torch) {
          s.error = "torch error: " + out.substr(out.size() > 300 ? out.size() - 300 : 0);
        }
        if (low && fp32_rate > 0) s.vs_fp32.push_back(g / fp32_rate);
        if (!gp_rate.is_ok()) s.error = "graphpipe error: " + gp_rate.status().message();
      }
    }
    for (std::size_t k = 0; k < precisions.size(); ++k) {
      Samples const& s = samples[k];
      std::string const vs = s.vs_fp32.empty() ? "" : std::to_string(median(s.vs_fp32)).substr(0, 4);
      std::printf("%-12s %6lld %-5s %16.1f %16.1f %8.2f %10s  %s\n", row.model.c_str(),
                  static_cast<long long>(row.batch), graph::precision_name(precisions[k]), median(s.gp),
                  median(s.torch), median(s.ratio), vs.c_str(), s.blas.c_str());
      if (repeat > 1) {
        std::printf("%-12s %6s %-5s rounds: graphpipe", "", "", "");
        for (double v : s.gp) std::printf(" %.1f", v);
        if (!s.torch.empty()) {
          std::printf(", torch");
          for (double v : s.torch) std::printf(" %.1f", v);
        }
        if (!s.vs_fp32.empty()) {
          std::printf(", vs fp32");
          for (double v : s.vs_fp32) std::printf(" %.2f", v);
        }
        std::printf("\n");
      }
      if (!s.error.empty()) std::printf("  %s\n", s.error.c_str());
    }
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
