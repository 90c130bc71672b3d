// ONNX's own backend node tests (Debian's libonnx-testdata) on the GPU: every test the CPU backend
// runs and passes also passes on the CUDA backend, against the test's expected outputs (not against
// the CPU), with its integer, boolean and float64 dtypes. The host half (that the CUDA table accepts
// every op of those tests) is test_kernel_parity's.
#include <iostream>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/cuda_check.h"
#include "tests/exec/onnx_node_tests.h"

namespace gp::exec {
namespace {

namespace ont = onnx_node_tests;

TEST(CudaConformance, OnnxNodeTestsTheCpuPassesPassOnTheGpu) {
  ::setenv("NVIDIA_TF32_OVERRIDE", "0", 1);  // fp32 means fp32 against the expected outputs
  if (ont::test_dirs().empty()) GTEST_SKIP() << "libonnx-testdata is not installed (" << ont::node_tests_dir() << ")";
  if (Status s = cuda::device_available(); !s) GTEST_SKIP() << s.message();
  auto gpu = CudaBackend::create(0);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  CpuBackend cpu;
  int compared = 0;
  std::vector<std::string> failures;
  for (auto const& dir : ont::test_dirs()) {
    std::string const name = dir.filename().string();
    if (ont::allow_list().count(name)) continue;  // known deviations of the CPU's too (random draws)
    if (!ont::run_one(cpu, dir).passed) continue;
    ++compared;
    ont::Outcome const o = ont::run_one(**gpu, dir);
    if (!o.passed) {
      std::string why = o.detail;
      for (std::string const& op : o.unsupported_ops) why += (why.empty() ? "" : ", ") + op + " refused";
      failures.push_back(name + ": " + why);
    }
  }
  std::cout << "ONNX node tests the CPU passes: " << compared << "; on the GPU " << compared - failures.size()
            << " pass, " << failures.size() << " fail\n";
  for (std::string const& f : failures) ADD_FAILURE() << f;
  EXPECT_GE(compared, 500);
}

}  // namespace
}  // namespace gp::exec
