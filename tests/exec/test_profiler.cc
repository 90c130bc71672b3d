// The profiler's calibration against the whole executor: how many executors it runs at once and on
// which backends (workers sharing one GPU each have a backend, and a stream, of their own).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>
#include <cmath>
#include <random>
#include <memory>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/profiler.h"
#include "tests/exec/device_like_backend.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec {
namespace {

using testing::DeviceLikeBackend;

ProfileOptions small_options(int concurrency) {
  ProfileOptions o;
  o.samples = {1, 2};
  o.repeats = 1;
  o.calibrate_concurrency = concurrency;
  o.calibrate_repeats = 1;
  return o;
}

// The profiler's draws come in the dtype the op's tensor has: float16 too (a float16 op's output
// gradient was float32, and the CUDA backend refused the GPT's first Transpose on the H200), each
// the float32 draw of the same seed rounded to the format.
TEST(Profiler, RandomInputsAndGradientsHaveTheTensorsDtypeFloat16Included) {
  std::mt19937 rng32(7);
  std::vector<float> const want = random_normal({3, 5}, rng32, DType::kFloat32).to_vector();
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(graph::dtype_name(d));
    std::mt19937 rng(7);
    Tensor const t = random_normal({3, 5}, rng, d);
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(t.shape(), (std::vector<int64_t>{3, 5}));
    std::vector<float> const got = t.to_vector();
    double const tol = d == DType::kBFloat16 ? 1.0 / 128 : d == DType::kFloat16 ? 1.0 / 1024 : 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * std::abs(want[i]) + 1e-7) << i;
  }
}

TEST(Profiler, CalibrationExecutorsBeyondTheFirstRunOnBackendsOfTheirOwn) {
  auto g = testing::tiny_mlp(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  CpuBackend cpu;
  ProfileOptions o = small_options(3);
  std::atomic<int> made{0}, forwards{0};
  o.calibration_backend = [&]() -> Result<std::unique_ptr<Backend>> {
    ++made;
    auto b = std::make_unique<DeviceLikeBackend>();
    b->forwards = &forwards;
    return std::unique_ptr<Backend>(std::move(b));
  };
  auto profile = profile_graph(*g, cpu, o);
  ASSERT_TRUE(profile.is_ok()) << profile.status().message();
  EXPECT_EQ(profile->calibration.concurrency, 3);
  ASSERT_EQ(profile->calibration.samples, (std::vector<int64_t>{1, 2}));
  // Per micro-batch size, executors 1 and 2 each got a backend and ran the whole forward on it,
  // once to warm up and once timed.
  EXPECT_EQ(made.load(), 2 * 2);
  int64_t const ops = static_cast<int64_t>(g->ops().size());
  EXPECT_EQ(forwards.load(), 2 * 2 * 2 * ops);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_GT(profile->calibration.fwd_scale[k], 0);
    EXPECT_GT(profile->calibration.bwd_scale[k], 0);
  }
}

// The executors of a calibration are timed while the others run: each pass starts together. Here
// executor 1's first op forward (its warm-up) takes 300 ms; before the passes started together,
// executor 0 ran all its timed passes alone meanwhile (an H200 predicted two workers sharing it
// 1.2-1.4x faster than they trained). Now executor 0 runs forwards after executor 1's wait too.
TEST(Profiler, CalibrationExecutorsStartEachPassTogether) {
  auto g = testing::tiny_mlp(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<Clock::time_point> zero_forwards;
  std::optional<Clock::time_point> one_waited;  // when executor 1's slow first forward ended
  DeviceLikeBackend profiled;
  profiled.on_forward = [&] {
    std::lock_guard lock(mu);
    zero_forwards.push_back(Clock::now());
  };
  ProfileOptions o = small_options(2);
  o.samples = {2};
  o.calibration_backend = [&]() -> Result<std::unique_ptr<Backend>> {
    auto b = std::make_unique<DeviceLikeBackend>();
    b->on_forward = [&] {
      {
        std::lock_guard lock(mu);
        if (one_waited) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::lock_guard lock(mu);
      one_waited = Clock::now();
    };
    return std::unique_ptr<Backend>(std::move(b));
  };
  auto profile = profile_graph(*g, profiled, o);
  ASSERT_TRUE(profile.is_ok()) << profile.status().message();
  ASSERT_TRUE(one_waited.has_value());
  int const after = static_cast<int>(
      std::count_if(zero_forwards.begin(), zero_forwards.end(), [&](Clock::time_point t) { return t > *one_waited; }));
  // Executor 0's timed pass waits for executor 1's warm-up to end (before, it had ended by then).
  EXPECT_GE(after, 1);
}

TEST(Profiler, WithoutABackendFactoryTheExecutorsShareTheProfiledOneAndAFailedFactoryIsNamed) {
  auto g = testing::tiny_mlp(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  std::atomic<int> forwards{0};
  DeviceLikeBackend shared;
  shared.forwards = &forwards;
  auto profile = profile_graph(*g, shared, small_options(2));
  ASSERT_TRUE(profile.is_ok()) << profile.status().message();
  EXPECT_EQ(profile->calibration.concurrency, 2);
  EXPECT_GT(forwards.load(), 2 * 2 * 2 * static_cast<int64_t>(g->ops().size()));  // the per-op timings besides

  ProfileOptions o = small_options(2);
  o.calibration_backend = []() -> Result<std::unique_ptr<Backend>> {
    return unsupported("no GPU 0 (a test's factory)");
  };
  CpuBackend cpu;
  auto failed = profile_graph(*g, cpu, o);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_NE(failed.status().message().find("no GPU 0 (a test's factory)"), std::string::npos)
      << failed.status().message();
  EXPECT_NE(failed.status().message().find("calibrating"), std::string::npos) << failed.status().message();
}

// BatchNorm's weight gradients come with its input gradient (one call computes all three; the
// executor makes that one call, split schedule or not): the profile times that call as its B and
// gives it no W. Timing backward_input and backward_weight apart counted its backward twice. A
// Conv's W is still timed on its own.
TEST(Profiler, AnOpWhoseWeightGradientsComeWithBIsTimedAsTheOneCallTrainingMakes) {
  auto g = testing::tiny_conv_stack().to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  DeviceLikeBackend be;
  auto profile = profile_graph(*g, be, small_options(0));
  ASSERT_TRUE(profile.is_ok()) << profile.status().message();
  int batchnorms = 0, convs_with_w = 0;
  for (graph::OpProfile const& op : profile->ops) {
    SCOPED_TRACE(op.name);
    if (op.type == "BatchNormalization") {
      ++batchnorms;
      for (std::size_t k = 0; k < op.samples.size(); ++k) {
        EXPECT_GT(op.bwd_input_s[k], 0);
        EXPECT_EQ(op.bwd_weight_s[k], 0);
      }
    }
    if (op.type == "Conv" && op.bwd_weight_s.at(0) > 0) ++convs_with_w;
  }
  EXPECT_EQ(batchnorms, 1);
  EXPECT_GE(convs_with_w, 1);
  // The calls made (2 sizes, a warm-up and 1 timed call each): BatchNorm's one combined backward,
  // no B or W of its own; both convolutions' W.
  EXPECT_EQ(be.backward_calls["BatchNormalization"]["B+W"], 2 * 2);
  EXPECT_EQ(be.backward_calls["BatchNormalization"].count("W"), 0u);
  EXPECT_EQ(be.backward_calls["BatchNormalization"].count("B"), 0u);
  EXPECT_EQ(be.backward_calls["Conv"]["W"], 2 * 2 * 2);
}

}  // namespace
}  // namespace gp::exec
