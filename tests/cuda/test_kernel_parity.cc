// Kernel-table parity (no GPU needed): every operator the CPU backend runs has a CUDA entry with
// forward, B and W, or an explicit unsupported mark with its reason, and supports() refuses the
// marked ones by name before any device is touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "exec/cpu/cpu_backend.h"
#include "exec/cuda/cuda_backend.h"
#include "graph/onnx_import.h"
#include "tests/exec/onnx_node_tests.h"
#include "tests/test_data.h"

namespace gp::exec {
namespace {

TEST(CudaKernelParity, EveryCpuOpHasACudaEntryOrAnExplicitUnsupportedMark) {
  auto const coverage = CudaBackend::coverage();
  auto const marked = CudaBackend::unsupported_ops();
  std::vector<std::string> missing;
  for (std::string const& op : CpuBackend::op_types()) {
    auto it = coverage.find(op);
    bool const complete =
        it != coverage.end() && it->second.forward && it->second.backward_input && it->second.backward_weight;
    if (!complete && !marked.count(op)) missing.push_back(op);
  }
  EXPECT_TRUE(missing.empty()) << "CPU ops with neither a complete CUDA entry (forward, B, W) nor an unsupported mark: "
                               << ::testing::PrintToString(missing);
  std::cout << CpuBackend::op_types().size() << " CPU op types: " << coverage.size() << " with CUDA entries, "
            << marked.size() << " marked unsupported:";
  for (auto const& [op, reason] : marked) std::cout << ' ' << op;
  std::cout << std::endl;
}

TEST(CudaKernelParity, UnsupportedMarksGiveAReasonAndAreNotStale) {
  auto const coverage = CudaBackend::coverage();
  for (auto const& [op, reason] : CudaBackend::unsupported_ops()) {
    EXPECT_FALSE(reason.empty()) << op;
    EXPECT_EQ(coverage.count(op), 0u) << op << " is marked unsupported but has a CUDA entry";
  }
}

TEST(CudaKernelParity, TheCudaTableRunsNoOpTheCpuReferenceLacks) {
  // The CPU backend is the reference every CUDA op is tested against.
  auto const cpu = CpuBackend::op_types();
  for (std::string const& op : CudaBackend::op_types())
    EXPECT_TRUE(std::find(cpu.begin(), cpu.end(), op) != cpu.end()) << op << " has no CPU reference";
}

graph::OpGraph one_op(std::string const& type, graph::Op& op) {
  graph::OpGraph g;
  graph::TensorInfo in;
  in.name = "x";
  in.shape.dims = {2, 3};
  graph::TensorId const x = g.add_tensor(in);
  g.mark_input(x);
  graph::TensorInfo out;
  out.name = "y";
  graph::TensorId const y = g.add_tensor(out);
  g.mark_output(y);
  op.name = "n0";
  op.type = type;
  op.inputs = {x};
  op.outputs = {y};
  g.add_op(op);
  return g;
}

TEST(CudaKernelParity, SupportsNamesTheOpAndTheReasonWithoutADevice) {
  graph::Op op;
  graph::OpGraph const g = one_op("NoSuchOp", op);
  Status const s = CudaBackend::supports_op(op, g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("'NoSuchOp'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("CUDA backend"), std::string::npos) << s.message();

  graph::Op relu;
  graph::OpGraph const g2 = one_op("Relu", relu);
  EXPECT_TRUE(CudaBackend::supports_op(relu, g2).is_ok()) << CudaBackend::supports_op(relu, g2).to_string();
  for (auto const& [type, reason] : CudaBackend::unsupported_ops()) {
    graph::Op m;
    graph::OpGraph const gm = one_op(type, m);
    Status const sm = CudaBackend::supports_op(m, gm);
    EXPECT_FALSE(sm.is_ok()) << type;
    EXPECT_NE(sm.message().find(reason), std::string::npos) << sm.message();
  }
}

// Every model a current PyTorch exported for the fixture tests (tests/data/torch2: HF BERT, GPT-2,
// RoBERTa, Llama, Qwen2, ViT, Swin, ConvNeXt, ... through both exporters) has a CUDA kernel for
// every op, dtype included: RoBERTa's position ids (int32 and int64 Mul and Add), the dynamo
// exporter's index arithmetic in Swin and ConvNeXt (int64) and HF GPT-2's int64 Concat were
// CPU-only before (6 of the 32 fixtures refused on --backend cuda).
TEST(CudaKernelParity, EveryTorchFixtureHasACudaKernelForEveryOp) {
  namespace fs = std::filesystem;
  int models = 0;
  fs::path const fixtures = gp::testing::test_data_dir() / "torch2";
  ASSERT_TRUE(fs::is_directory(fixtures)) << fixtures << " is missing (GP_TEST_DATA names the test data folder)";
  for (auto const& entry : fs::directory_iterator(fixtures)) {
    fs::path const model = entry.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    SCOPED_TRACE(entry.path().filename().string());
    auto const g = graph::load_onnx(model.string());
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    ++models;
    for (graph::Op const& op : g->ops()) {
      Status const s = CudaBackend::supports_op(op, *g);
      EXPECT_TRUE(s.is_ok()) << s.message();
    }
  }
  EXPECT_GE(models, 30);
}

// ONNX's own backend node tests (Debian's libonnx-testdata) hold every operator with the dtypes
// the standard gives it: float, integer and boolean inputs. Every test whose ops the CPU backend
// runs (the conformance test, tests/exec/test_onnx_node_conformance.cc) has a CUDA kernel for each
// of its ops, by dtype.
TEST(CudaKernelParity, EveryOnnxNodeTestTheCpuRunsHasACudaKernelForEveryOp) {
  std::vector<std::filesystem::path> const dirs = onnx_node_tests::test_dirs();
  if (dirs.empty()) GTEST_SKIP() << "libonnx-testdata is not installed (" << onnx_node_tests::node_tests_dir() << ")";
  CpuBackend cpu;
  int tests = 0;
  std::vector<std::string> missing;
  for (auto const& dir : dirs) {
    auto const m = onnx_node_tests::load_test_model(dir);
    if (!m.is_ok() || m->graph.ops().empty()) continue;
    graph::OpGraph const* g = &m->graph;
    bool const cpu_runs = std::all_of(g->ops().begin(), g->ops().end(),
                                      [&](graph::Op const& op) { return cpu.supports(op, *g).is_ok(); });
    if (!cpu_runs) continue;
    ++tests;
    for (graph::Op const& op : g->ops())
      if (Status const s = CudaBackend::supports_op(op, *g); !s.is_ok())
        missing.push_back(dir.filename().string() + ": " + s.message());
  }
  std::sort(missing.begin(), missing.end());
  EXPECT_TRUE(missing.empty()) << missing.size() << " ops without a CUDA kernel:\n"
                               << ::testing::PrintToString(missing);
  EXPECT_GE(tests, 500);
}

}  // namespace
}  // namespace gp::exec
