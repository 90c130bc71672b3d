// The NCCL communicator's start-up over MPI (label mpi): `timeout 60 mpirun -np 2` on loopback.
// Without a GPU every rank fails fast with the clear "no usable CUDA GPU" error (never a hang);
// with one GPU the second rank names its local rank and the device count; with two, a send/recv
// exchange in NVIDIA/nccl#479's order, an all-reduce, and a header mismatch caught on both ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "exec/cuda/cuda_check.h"
#include "tests/runtime/cli_harness.h"

namespace gp::exec {
namespace {

constexpr int kLimit = 60;

// GP_NCCL_BOOTSTRAP_MAIN names another build of the rank program (the bundle's bin/gpu-check).
std::string bootstrap_main() {
  char const* bundled = std::getenv("GP_NCCL_BOOTSTRAP_MAIN");
  if (bundled != nullptr && *bundled != '\0') return bundled;
  return std::string(GP_BINARY_DIR) + "/tests/cuda/nccl_bootstrap_main";
}

// `timeout -k 5 kLimit mpirun ...` through the runtime tests' command runner.
gp::testing::Run mpirun(std::string const& mode) {
  return gp::testing::run("mpirun --oversubscribe -np 2 " + bootstrap_main() + " " + mode, kLimit);
}

class NcclBootstrap : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    ::setenv("OMPI_MCA_btl", "self,tcp", 1);
    ::setenv("OMPI_MCA_btl_tcp_if_include", "lo", 1);
    ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  }
};

bool has(std::string const& text, std::string const& part) { return text.find(part) != std::string::npos; }

TEST_F(NcclBootstrap, WithoutAGpuEveryRankFailsFastWithTheNoGpuError) {
  if (cuda::device_available().is_ok()) GTEST_SKIP() << "this machine has a GPU";
  gp::testing::Run const r = mpirun("roundtrip");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "timed out after " << kLimit << " s: a hang\n" << r.output;
  EXPECT_LT(r.seconds, kLimit - 5) << r.output;
  EXPECT_TRUE(has(r.output, "rank 0: error: no usable CUDA GPU")) << r.output;
  EXPECT_TRUE(has(r.output, "rank 1: error: no usable CUDA GPU")) << r.output;
  EXPECT_FALSE(has(r.output, "send/recv ok")) << r.output;
}

TEST_F(NcclBootstrap, WithOneGpuTheSecondRankNamesItsLocalRankAndTheDeviceCount) {
  if (cuda::device_count() != 1) GTEST_SKIP() << "needs exactly one GPU (has " << cuda::device_count() << ")";
  gp::testing::Run const r = mpirun("roundtrip");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "a hang\n" << r.output;
  EXPECT_TRUE(has(r.output, "rank 1: error: local rank 1 needs GPU 1 but this node has 1")) << r.output;
  EXPECT_TRUE(has(r.output, "rank 0: error: rank 1 failed selecting its GPU")) << r.output;
}

TEST_F(NcclBootstrap, WithTwoGpusBothRanksExchangeAndAllReduce) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs (has " << cuda::device_count() << ")";
  gp::testing::Run const r = mpirun("roundtrip");
  EXPECT_EQ(r.code, 0) << r.output;
  for (std::string rank : {"rank 0", "rank 1"}) {
    EXPECT_TRUE(has(r.output, rank + ": send/recv ok")) << r.output;
    EXPECT_TRUE(has(r.output, rank + ": all-reduce ok")) << r.output;
  }
}

TEST_F(NcclBootstrap, WithTwoGpusAHeaderMismatchStopsBothRanks) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs (has " << cuda::device_count() << ")";
  gp::testing::Run const r = mpirun("mismatch");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.code, 124) << "a hang\n" << r.output;
  EXPECT_TRUE(has(r.output,
                  "rank 1: error: message step 0 e0 m0 d0->d1: tensor 0 is float32[5] from d0 but d1 "
                  "expects float32[4]"))
      << r.output;
  EXPECT_TRUE(has(r.output, "rank 0: error: rank 1 failed")) << r.output;
}

}  // namespace
}  // namespace gp::exec
