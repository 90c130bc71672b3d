// A CUDA run's memory against its GPUs' (issue 23 item 6), checked before anything is allocated:
// the logic runs here on GPU sizes given as numbers, as the session passes what the GPUs report.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/session/registry.h"
#include "partition/plan.h"

namespace gp::session {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

partition::Plan two_stages(int64_t first_peak, int64_t second_peak) {
  partition::Plan plan;
  plan.num_devices = 3;
  partition::PlanStage a;
  a.id = 0;
  a.devices = {0, 1};
  a.replicas = 2;
  a.peak_memory_bytes = first_peak;
  partition::PlanStage b;
  b.id = 1;
  b.devices = {2};
  b.peak_memory_bytes = second_peak;
  plan.stages = {a, b};
  return plan;
}

TEST(DeviceMemory, CpuRunsAreNotChecked) {
  EXPECT_TRUE(check_device_memory("cpu", {}, 1000 * kGiB, nullptr, 0).is_ok());
}

TEST(DeviceMemory, OneDeviceNeedAgainstGpuZero) {
  EXPECT_TRUE(check_device_memory("cuda", {80 * kGiB}, 79 * kGiB, nullptr, 0).is_ok());
  Status s = check_device_memory("cuda", {80 * kGiB, 160 * kGiB}, 81 * kGiB, nullptr, 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInfeasible);
  EXPECT_NE(s.message().find("needs about 81.00 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("it has 80.00 GiB"), std::string::npos) << s.message();
}

TEST(DeviceMemory, PipelineLimitAboveTheSmallestGpuIsRefused) {
  auto plan = two_stages(1 * kGiB, 1 * kGiB);
  EXPECT_TRUE(check_device_memory("cuda", {40 * kGiB, 80 * kGiB}, 0, &plan, 40 * kGiB).is_ok());
  Status s = check_device_memory("cuda", {40 * kGiB, 80 * kGiB}, 0, &plan, 64 * kGiB);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("pipeline.memory 64.00 GiB is more than a GPU here has (40.00 GiB)"), std::string::npos)
      << s.message();
}

TEST(DeviceMemory, EachStageAgainstTheGpuItsDevicesRunOn) {
  // Device 2 runs on GPU 2 mod 2 = 0 (the 16 GiB one): stage 1's 20 GiB does not fit there.
  auto plan = two_stages(10 * kGiB, 20 * kGiB);
  Status s = check_device_memory("cuda", {16 * kGiB, 32 * kGiB}, 0, &plan, 16 * kGiB);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("stage 1 needs about 20.00 GiB on device 2 but GPU 0 has 16.00 GiB"), std::string::npos)
      << s.message();
  EXPECT_TRUE(check_device_memory("cuda", {32 * kGiB, 32 * kGiB}, 0, &plan, 32 * kGiB).is_ok());
}

TEST(DeviceMemory, NoGpuIsNamed) {
  Status s = check_device_memory("cuda", {}, 1, nullptr, 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace gp::session
