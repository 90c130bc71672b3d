// The prefetching data source (exec/prefetch.h): the inner source's batches byte for byte, in any
// order of requests; consecutive requests are made ahead on its worker with the given allocator;
// errors reach the request they belong to; destruction waits for a batch being made.
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exec/prefetch.h"

namespace gp::exec {
namespace {

// Sample i is the float i (and label i); records each request and the thread and allocator it
// ran with; fails for first == fail_at; sleeps `delay` per batch.
class FakeSource final : public DataSource {
 public:
  struct Call {
    int64_t first, count;
    std::thread::id thread;
    Allocator* alloc;
  };
  Result<Batch> batch(int64_t first, int64_t count) override {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back({first, count, std::this_thread::get_id(), &cpu_allocator()});
    }
    if (first == fail_at) return invalid_argument("sample " + std::to_string(first) + " is unreadable");
    Batch b;
    b.inputs.emplace_back(std::vector<int64_t>{count});
    b.labels = Tensor({count}, DType::kInt64);
    for (int64_t j = 0; j < count; ++j) {
      b.inputs[0].data<float>()[j] = static_cast<float>(first + j);
      b.labels.data<int64_t>()[j] = first + j;
    }
    return b;
  }
  std::string describe() const override { return "fake"; }
  std::vector<Call> snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }

  std::mutex mu;
  std::vector<Call> calls;
  int64_t fail_at = -1;
  std::chrono::milliseconds delay{0};
};

void expect_range(Result<Batch> const& b, int64_t first, int64_t count) {
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  ASSERT_EQ(b->inputs.at(0).numel(), count);
  for (int64_t j = 0; j < count; ++j) {
    EXPECT_EQ(b->inputs[0].data<float>()[j], static_cast<float>(first + j));
    EXPECT_EQ(b->labels.data<int64_t>()[j], first + j);
  }
}

TEST(Prefetch, ConsecutiveRequestsAreMadeAheadOnTheWorkerWithItsAllocator) {
  auto inner = std::make_unique<FakeSource>();
  FakeSource* fake = inner.get();
  CountingAllocator pinned;
  PrefetchingSource src(std::move(inner), &pinned);
  for (int64_t k = 0; k < 5; ++k) {
    auto b = src.batch(4 * k, 4);
    expect_range(b, 4 * k, 4);
    EXPECT_EQ(&b->inputs[0].allocator(), &pinned) << "batch " << k << " was not made with the given allocator";
  }
  EXPECT_EQ(src.hits(), 4);  // all but the first were ready
  auto calls = fake->snapshot();
  ASSERT_GE(calls.size(), 5u);
  for (std::size_t k = 0; k < calls.size(); ++k) {
    EXPECT_EQ(calls[k].first, static_cast<int64_t>(4 * k));
    EXPECT_NE(calls[k].thread, std::this_thread::get_id()) << "call " << k << " ran on the caller's thread";
    EXPECT_EQ(calls[k].alloc, &pinned);
  }
  EXPECT_EQ(src.describe(), "fake");
}

TEST(Prefetch, AJumpOrARepeatGetsTheRangeAskedFor) {
  PrefetchingSource src(std::make_unique<FakeSource>(), nullptr);
  expect_range(src.batch(0, 3), 0, 3);
  expect_range(src.batch(10, 2), 10, 2);  // not the prefetched 3..5
  expect_range(src.batch(10, 2), 10, 2);  // a repeat (a resumed step)
  expect_range(src.batch(12, 5), 12, 5);  // the count changed
  expect_range(src.batch(17, 5), 17, 5);
  EXPECT_EQ(src.hits(), 1);
}

TEST(Prefetch, AnErrorReachesItsOwnRequestAndLaterBatchesStillCome) {
  auto inner = std::make_unique<FakeSource>();
  inner->fail_at = 4;
  PrefetchingSource src(std::move(inner), nullptr);
  expect_range(src.batch(0, 4), 0, 4);
  auto bad = src.batch(4, 4);  // made ahead, failed there
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("sample 4 is unreadable"), std::string::npos) << bad.status().message();
  expect_range(src.batch(8, 4), 8, 4);
}

TEST(Prefetch, DestroyingWaitsForTheBatchBeingMade) {
  auto inner = std::make_unique<FakeSource>();
  inner->delay = std::chrono::milliseconds(50);
  CountingAllocator pinned;
  {
    PrefetchingSource src(std::move(inner), &pinned);
    expect_range(src.batch(0, 2), 0, 2);
    // The prefetch of 2..3 is under way or queued: destroying now must neither hang nor leak it.
  }
  EXPECT_EQ(pinned.bytes_in_use(), 0) << "a prefetched batch outlived its source";
}

}  // namespace
}  // namespace gp::exec
