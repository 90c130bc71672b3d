// Runs the graphpipe binary (or mpirun over it) as a user would, for the runtime's end-to-end
// tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "graph/onnx_import.h"
#include "schedule/schedule_text.h"

namespace gp::testing {

struct Run {
  int code = -1;
  std::string output;
  double seconds = 0;
};

// GP_GRAPHPIPE names another binary: the relocatable bundle's bin/gpu-check runs the tests there.
inline std::string graphpipe() {
  char const* bundled = std::getenv("GP_GRAPHPIPE");
  return bundled != nullptr && *bundled != '\0' ? std::string(bundled) : std::string(GP_BINARY_DIR) + "/cli/graphpipe";
}

// `limit_s`: the command is killed past it (coreutils timeout), so a hang fails instead of
// blocking.
inline Run run(std::string const& cmd, int limit_s = 120) {
  Run r;
  auto const t0 = std::chrono::steady_clock::now();
  std::string const full = "timeout -k 5 " + std::to_string(limit_s) + " " + cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int const st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

class TempDir {
 public:
  explicit TempDir(std::string const& tag)
      : path_(std::filesystem::temp_directory_path() / ("gp_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(std::string const& name) const { return (path_ / name).string(); }
  std::string write(std::string const& name, std::string const& text) const {
    std::ofstream(file(name)) << text;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

// Float initializers of two ONNX files agree within atol + rtol |b|; returns the number compared.
inline int compare_weights(std::string const& a, std::string const& b, double rtol, double atol) {
  auto ga = graph::load_onnx(a), gb = graph::load_onnx(b);
  EXPECT_TRUE(ga.is_ok()) << a;
  EXPECT_TRUE(gb.is_ok()) << b;
  if (!ga.is_ok() || !gb.is_ok()) return 0;
  std::map<std::string, graph::TensorData const*> wb;
  for (auto const& t : gb->tensors())
    if (t.data && t.dtype == graph::DType::kFloat32) wb.emplace(t.name, &*t.data);
  int n = 0;
  for (auto const& t : ga->tensors()) {
    if (!t.data || t.dtype != graph::DType::kFloat32) continue;
    auto it = wb.find(t.name);
    if (it == wb.end()) {
      ADD_FAILURE() << t.name << " missing in " << b;
      continue;
    }
    float const* x = t.data->as<float>();
    float const* y = it->second->as<float>();
    for (int64_t i = 0; i < t.data->numel(); ++i)
      if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) {
        ADD_FAILURE() << t.name << "[" << i << "] " << x[i] << " vs " << y[i];
        return n;
      }
    ++n;
  }
  return n;
}

// The schedule line of the `nth` instruction `op` on `device` in a schedule file.
inline int schedule_line(std::string const& path, int device, schedule::Op op, int nth = 0) {
  auto s = schedule::read_schedule_file(path);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  if (!s.is_ok()) return -1;
  for (auto const& in : s->devices[device])
    if (in.op == op && nth-- == 0) return in.line;
  return -1;
}

}  // namespace gp::testing
