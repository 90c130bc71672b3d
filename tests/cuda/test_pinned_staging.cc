// The pinned staging ring (exec/cuda/pinned_staging.h) on fake CUDA calls: a "DMA" is queued and
// completes only when the fake stream is drained or an event on it is waited for, so a slot that
// were written again before its copy finished would corrupt the bytes that copy delivers.
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cuda/pinned_staging.h"

namespace gp::exec::cuda {
namespace {

struct FakeGpu {
  struct Copy {
    std::byte* dst;
    std::byte const* src;
    std::size_t bytes;
  };
  std::deque<Copy> queued;                 // enqueued, not yet executed (in stream order)
  std::map<void*, std::size_t> event_at;   // event -> position in the stream's history
  std::size_t executed = 0, enqueued = 0;  // copies executed / enqueued so far
  std::map<void*, std::size_t> pinned;     // live pinned buffers and their sizes
  int allocs = 0, event_waits = 0;
  std::vector<std::unique_ptr<int>> events;

  void run_until(std::size_t position) {
    while (executed < position && !queued.empty()) {
      Copy c = queued.front();
      queued.pop_front();
      EXPECT_EQ(pinned.count(const_cast<std::byte*>(c.src)), 1u) << "a DMA read a freed buffer";
      std::memcpy(c.dst, c.src, c.bytes);
      ++executed;
    }
  }
  StagingOps ops() {
    StagingOps o;
    o.host_alloc = [this](std::size_t n) -> Result<void*> {
      ++allocs;
      void* p = ::operator new(n);
      pinned[p] = n;
      return p;
    };
    o.host_free = [this](void* p) {
      EXPECT_EQ(pinned.count(p), 1u);
      for (auto const& c : queued)
        EXPECT_NE(static_cast<void const*>(c.src), p) << "a pinned buffer was freed under a queued copy";
      pinned.erase(p);
      ::operator delete(p);
    };
    o.copy_async = [this](void* dst, void const* src, std::size_t n) {
      EXPECT_EQ(pinned.count(const_cast<void*>(src)), 1u) << "the DMA source must be pinned";
      queued.push_back({static_cast<std::byte*>(dst), static_cast<std::byte const*>(src), n});
      ++enqueued;
      return Status::ok();
    };
    o.event_create = [this]() -> Result<void*> {
      events.push_back(std::make_unique<int>(0));
      return static_cast<void*>(events.back().get());
    };
    o.event_record = [this](void* e) {
      event_at[e] = enqueued;
      return Status::ok();
    };
    o.event_wait = [this](void* e) {
      ++event_waits;
      run_until(event_at.at(e));
      return Status::ok();
    };
    o.event_done = [this](void* e) -> Result<bool> { return executed >= event_at.at(e); };
    o.event_destroy = [](void*) {};
    return o;
  }
};

TEST(PinnedStaging, EveryCopyDeliversItsOwnBytesAlthoughTheHostBufferIsReusedAtOnce) {
  FakeGpu gpu;
  std::vector<std::vector<float>> device(10, std::vector<float>(1000, -1.f));
  {
    PinnedStaging ring(gpu.ops(), 3);
    std::vector<float> host(1000);
    for (int k = 0; k < 10; ++k) {
      for (int i = 0; i < 1000; ++i) host[i] = static_cast<float>(k * 1000 + i);
      ASSERT_TRUE(*ring.copy_to_device(device[k].data(), host.data(), host.size() * sizeof(float)));
      std::fill(host.begin(), host.end(), 0.f);  // the caller reuses its buffer at once
    }
    EXPECT_EQ(ring.copies(), 10);
    EXPECT_EQ(gpu.allocs, 3);  // one buffer per slot, reused
    EXPECT_EQ(ring.pinned_bytes(), 3 * 1000 * sizeof(float));
    EXPECT_GE(gpu.executed, 7u);  // a slot's earlier copy ran before the slot was written again
    // Leaving the scope: the destructor waits for the copies still queued.
  }
  EXPECT_EQ(gpu.executed, 10u);
  EXPECT_TRUE(gpu.pinned.empty());
  for (int k = 0; k < 10; ++k)
    for (int i = 0; i < 1000; i += 111) EXPECT_EQ(device[k][i], static_cast<float>(k * 1000 + i)) << k << "," << i;
}

TEST(PinnedStaging, ASlotGrowsOnlyAfterItsCopyIsDoneAndTheBudgetSendsLargeCopiesBack) {
  FakeGpu gpu;
  std::vector<std::byte> small(100, std::byte{1}), big(300, std::byte{2}), huge(2000, std::byte{3});
  std::vector<std::byte> d1(100), d2(300), d3(2000);
  PinnedStaging ring(gpu.ops(), 1, 1000);
  ASSERT_TRUE(*ring.copy_to_device(d1.data(), small.data(), small.size()));
  ASSERT_TRUE(*ring.copy_to_device(d2.data(), big.data(), big.size()));  // waits, frees, reallocates
  EXPECT_EQ(gpu.allocs, 2);
  EXPECT_EQ(ring.pinned_bytes(), 300u);
  EXPECT_FALSE(*ring.copy_to_device(d3.data(), huge.data(), huge.size()));  // over the budget: not staged
  EXPECT_EQ(ring.copies(), 2);
  EXPECT_TRUE(*ring.copy_to_device(d1.data(), small.data(), 0));  // nothing to copy
  gpu.run_until(gpu.enqueued);
  EXPECT_EQ(d1[99], std::byte{1});
  EXPECT_EQ(d2[299], std::byte{2});
  EXPECT_EQ(d3[0], std::byte{0});
}

TEST(PinnedStaging, AFailedCopyIsReportedAndTheRingStaysUsable) {
  FakeGpu gpu;
  StagingOps ops = gpu.ops();
  bool fail = true;
  auto real = ops.copy_async;
  ops.copy_async = [&](void* d, void const* s, std::size_t n) {
    if (fail) return internal_error("cudaMemcpyAsync: invalid argument");
    return real(d, s, n);
  };
  PinnedStaging ring(ops, 2);
  std::vector<int> host(10, 7), dev(10, 0);
  auto r = ring.copy_to_device(dev.data(), host.data(), sizeof(int) * 10);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("invalid argument"), std::string::npos);
  fail = false;
  ASSERT_TRUE(*ring.copy_to_device(dev.data(), host.data(), sizeof(int) * 10));
  gpu.run_until(gpu.enqueued);
  EXPECT_EQ(dev[9], 7);
}

// The pinned host pool (the data path's batches): the device copies straight from a block, and a
// block freed while its copy is still queued is not handed out again until the stream passed it.
TEST(PinnedHostPool, AFreedBlockIsReusedOnlyAfterTheCopiesEnqueuedFromItRan) {
  FakeGpu gpu;
  StagingOps ops = gpu.ops();
  std::vector<float> device(256, -1.f);
  {
    PinnedHostPool pool(ops);
    std::size_t const bytes = device.size() * sizeof(float);
    auto* a = static_cast<float*>(pool.allocate(bytes));
    EXPECT_TRUE(pool.pinned(a, bytes));
    EXPECT_TRUE(pool.pinned(a + 10, 16));
    EXPECT_FALSE(pool.pinned(a + 10, bytes)) << "a range running past the block";
    for (std::size_t i = 0; i < device.size(); ++i) a[i] = static_cast<float>(i);
    ASSERT_TRUE(ops.copy_async(device.data(), a, bytes).is_ok());
    pool.deallocate(a, bytes);  // the batch is dropped; its DMA has not run
    EXPECT_FALSE(pool.pinned(a, bytes)) << "a freed block counts as pinned";
    void* b = pool.allocate(bytes);
    EXPECT_NE(b, a) << "the block was handed out again under its queued copy";
    EXPECT_EQ(gpu.allocs, 2);
    gpu.run_until(gpu.enqueued);  // the stream passes the copy (and the free)
    void* c = pool.allocate(bytes);
    EXPECT_EQ(c, a) << "a block whose copies ran is reused";
    EXPECT_EQ(gpu.allocs, 2);
    EXPECT_EQ(pool.bytes_in_use(), static_cast<int64_t>(2 * bytes));
    ASSERT_TRUE(ops.copy_async(device.data(), c, 4).is_ok());
    pool.deallocate(b, bytes);
    pool.deallocate(c, bytes);
    EXPECT_EQ(pool.bytes_in_use(), 0);
    // Leaving the scope: the destructor waits for the copy still queued (the fake checks no
    // buffer is freed under one).
  }
  EXPECT_TRUE(gpu.pinned.empty());
  EXPECT_EQ(device[255], 255.f);
}

TEST(PinnedHostPool, PastItsBudgetOrWhenPinningFailsBlocksArePageable) {
  FakeGpu gpu;
  StagingOps ops = gpu.ops();
  bool fail = false;
  auto real = ops.host_alloc;
  ops.host_alloc = [&](std::size_t n) -> Result<void*> {
    if (fail) return internal_error("cudaHostAlloc: out of memory");
    return real(n);
  };
  PinnedHostPool pool(ops, 1000);
  void* a = pool.allocate(600);
  void* b = pool.allocate(600);  // over the budget
  EXPECT_TRUE(pool.pinned(a, 600));
  EXPECT_FALSE(pool.pinned(b, 600));
  fail = true;
  void* c = pool.allocate(100);  // within the budget, but pinning fails
  EXPECT_FALSE(pool.pinned(c, 100));
  EXPECT_EQ(pool.fallbacks(), 2);
  EXPECT_EQ(pool.pinned_bytes(), 600u);
  std::memset(b, 1, 600);  // pageable blocks are ordinary host memory
  pool.deallocate(b, 600);
  pool.deallocate(c, 100);
  pool.deallocate(a, 600);
  EXPECT_EQ(pool.bytes_in_use(), 0);
  EXPECT_EQ(pool.peak_bytes(), 1300);
}

}  // namespace
}  // namespace gp::exec::cuda
