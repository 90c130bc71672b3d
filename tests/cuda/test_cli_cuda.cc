// graphpipe train/profile --backend cuda end to end through the binary. With a GPU: one device,
// worker threads on the GPUs, and NCCL ranks under mpirun train and the loss falls. Without one
// (CPU CI): each command ends at once with the "no usable CUDA GPU" error and exit 1, never a hang,
// under mpirun on every rank.
#include <cstdlib>

#include "exec/cuda/cuda_check.h"
#include "tests/runtime/cli_harness.h"

namespace gp::testing {
namespace {

class CudaCli : public ::testing::Test {
 protected:
  void SetUp() override { gpu_ = exec::cuda::device_available().is_ok(); }
  TempDir dir{"cudacli"};
  std::string config(int steps = 3) {
    return dir.write("c.yaml",
                     "model: {zoo: mlp, size: tiny}\nbatch: 16\nmicro_batches: 4\nsteps: " + std::to_string(steps) +
                         "\nlr: 0.05\nseed: 2\npipeline: {memory: 1GiB, timeout: 30}\n");
  }
  bool gpu_ = false;
};

TEST_F(CudaCli, WithoutAGpuTrainAndProfileFailFastWithTheNoGpuError) {
  if (gpu_) GTEST_SKIP() << "a GPU is present: the GPU paths are tested below";
  std::string const c = config();
  for (std::string const extra : {"", " --devices 2"}) {
    gp::testing::Run const r = run(graphpipe() + " train --config " + c + " --backend cuda" + extra, 60);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("no usable CUDA GPU"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--backend cpu"), std::string::npos) << r.output;
    EXPECT_LT(r.seconds, 30) << "it must fail before profiling or planning";
  }
  ASSERT_EQ(run(graphpipe() + " models export mlp --size tiny --out " + dir.file("m.onnx")).code, 0);
  gp::testing::Run const p = run(graphpipe() + " profile " + dir.file("m.onnx") + " --backend cuda", 60);
  EXPECT_EQ(p.code, 1) << p.output;
  EXPECT_NE(p.output.find("no usable CUDA GPU"), std::string::npos) << p.output;
}

TEST_F(CudaCli, AnUnknownBackendIsABadArgument) {
  gp::testing::Run const r = run(graphpipe() + " train --config " + config() + " --backend tpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--backend tpu: must be cpu or cuda"), std::string::npos) << r.output;
}

TEST_F(CudaCli, UnderMpirunEveryRankFailsFastWithoutAGpu) {
  if (gpu_) GTEST_SKIP() << "a GPU is present";
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  gp::testing::Run const r = run(
      "mpirun --oversubscribe -np 2 " + graphpipe() + " train --config " + config() + " --launcher mpi --backend cuda",
      90);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out: " << r.output;
  EXPECT_NE(r.output.find("no usable CUDA GPU"), std::string::npos) << r.output;
}

TEST_F(CudaCli, OnAGpuOneDeviceAndTwoWorkersTrain) {
  if (!gpu_) GTEST_SKIP() << exec::cuda::device_available().message();
  std::string const c = config(5);
  for (std::string const extra : {"", " --devices 2"}) {
    gp::testing::Run const r = run(graphpipe() + " train --config " + c + " --backend cuda" + extra, 300);
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("final loss"), std::string::npos) << r.output;
  }
  if (exec::cuda::device_count() < 2) return;  // NCCL needs a GPU per rank
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  gp::testing::Run const m = run("mpirun --oversubscribe -np 2 " + graphpipe() + " train --config " + c +
                                     " --launcher mpi --backend cuda --devices 2 --timeout 60",
                                 300);
  EXPECT_EQ(m.code, 0) << m.output;
  EXPECT_NE(m.output.find("final loss"), std::string::npos) << m.output;
}

}  // namespace
}  // namespace gp::testing
