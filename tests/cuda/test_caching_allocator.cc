// The caching allocator's bookkeeping on a fake heap (tests/cuda/fake_device_memory.h): host memory
// stands in for the device, events complete when the test says so, and counters show every raw
// malloc/free.
#include "exec/cuda/caching_allocator.h"

#include <future>
#include <mutex>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exec/comm/in_process.h"
#include "tests/cuda/fake_device_memory.h"

namespace gp::exec::cuda {
namespace {

using testing::FakeDeviceMemory;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;
constexpr StreamId kCompute = 1;
constexpr StreamId kComm = 2;
constexpr StreamId kOther = 3;

void* must(Result<void*> r) {
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : nullptr;
}

TEST(CachingAllocator, RoundsRequestsTo512BytesAndChoosesPoolAndSegmentSize) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_TRUE(CachingAllocator::is_small(1 * MiB));
  EXPECT_FALSE(CachingAllocator::is_small(1 * MiB + 512));
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB + 512), 12 * MiB);

  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  must(a.malloc(1000, kCompute));  // one stream each, so that no request fits another's segment
  must(a.malloc(3 * MiB, kComm));
  must(a.malloc(11 * MiB, kOther));
  EXPECT_EQ(fake.malloc_sizes(), (std::vector<std::size_t>{2 * MiB, 20 * MiB, 12 * MiB}));
  EXPECT_EQ(a.stats().bytes_in_use, static_cast<int64_t>(1000 + 3 * MiB + 11 * MiB));
  // The 11 MiB block keeps its segment's last 1 MiB: too small a rest to split off in the large pool.
  EXPECT_EQ(a.stats().bytes_allocated, static_cast<int64_t>(1024 + 3 * MiB + 12 * MiB));
}

TEST(CachingAllocator, SmallRequestsAreCarvedFromOneSegmentBackToBack) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  auto* p0 = static_cast<char*>(must(a.malloc(100, kCompute)));
  auto* p1 = static_cast<char*>(must(a.malloc(600, kCompute)));
  auto* p2 = static_cast<char*>(must(a.malloc(1 * MiB, kCompute)));
  EXPECT_EQ(p1, p0 + 512);
  EXPECT_EQ(p2, p1 + 1024);
  EXPECT_EQ(fake.mallocs(), 1);
  EXPECT_EQ(a.stats().cache_hits, 2);
}

TEST(CachingAllocator, LargeBlocksAreSplitOnlyWhenTheRestExceedsOneMiB) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  must(a.malloc(10 * MiB + 512 * KiB, kCompute));  // 12 MiB segment, 1.5 MiB rest: split
  EXPECT_EQ(a.stats().bytes_allocated, static_cast<int64_t>(10 * MiB + 512 * KiB));
  must(a.malloc(11 * MiB + 512 * KiB, kCompute));  // 12 MiB segment, 0.5 MiB rest: kept whole
  EXPECT_EQ(a.stats().bytes_allocated, static_cast<int64_t>(10 * MiB + 512 * KiB + 12 * MiB));
  // The kept 1.5 MiB rest serves a fitting request without a new segment.
  must(a.malloc(1 * MiB + 512 * KiB, kCompute));
  EXPECT_EQ(fake.mallocs(), 2);
}

TEST(CachingAllocator, BestFitPicksTheSmallestFittingBlockThenTheLowestAddress) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* b4 = must(a.malloc(4 * KiB, kCompute));
  must(a.malloc(512, kCompute));
  void* b16 = must(a.malloc(16 * KiB, kCompute));
  must(a.malloc(512, kCompute));
  void* b8 = must(a.malloc(8 * KiB, kCompute));
  must(a.malloc(512, kCompute));
  void* b8b = must(a.malloc(8 * KiB, kCompute));
  must(a.malloc(512, kCompute));
  for (void* p : {b8b, b16, b4, b8}) ASSERT_TRUE(a.free(p).is_ok());

  EXPECT_EQ(must(a.malloc(6 * KiB, kCompute)), b8);  // 8 KiB beats 16 KiB and the segment's tail
  EXPECT_EQ(must(a.malloc(8 * KiB, kCompute)), b8b);
  EXPECT_EQ(must(a.malloc(3 * KiB, kCompute)), b4);
  EXPECT_EQ(must(a.malloc(12 * KiB, kCompute)), b16);
  EXPECT_EQ(fake.mallocs(), 1);
}

TEST(CachingAllocator, FreedNeighboursMergeBackIntoOneWholeSegment) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  std::vector<void*> small, large;
  for (std::size_t s : {700u, 3000u, 64000u, 512u, 300000u}) small.push_back(must(a.malloc(s, kCompute)));
  for (std::size_t s : {3 * MiB, 5 * MiB, 2 * MiB}) large.push_back(must(a.malloc(s, kCompute)));
  ASSERT_EQ(fake.mallocs(), 2);
  for (int i : {3, 0, 4, 1, 2}) ASSERT_TRUE(a.free(small[i]).is_ok());
  for (int i : {1, 2, 0}) ASSERT_TRUE(a.free(large[i]).is_ok());

  // Each segment is one free block again: a request of its whole size fits without a raw malloc.
  void* whole_small = must(a.malloc(1 * MiB, kCompute));
  void* second_half = must(a.malloc(1 * MiB, kCompute));
  EXPECT_EQ(whole_small, small[0]);
  EXPECT_EQ(static_cast<char*>(second_half), static_cast<char*>(small[0]) + 1 * MiB);
  EXPECT_EQ(must(a.malloc(10 * MiB - 512, kCompute)), large[0]);
  EXPECT_EQ(fake.mallocs(), 2);
  for (void* p : {whole_small, second_half, static_cast<void*>(large[0])}) ASSERT_TRUE(a.free(p).is_ok());

  ASSERT_TRUE(a.empty_cache().is_ok());
  EXPECT_EQ(fake.frees(), 2);  // one per segment: nothing was left split
  EXPECT_EQ(a.stats().bytes_reserved, 0);
  EXPECT_EQ(fake.live_segments(), 0u);
}

TEST(CachingAllocator, EmptyCacheKeepsSegmentsThatHoldALiveBlock) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* keep = must(a.malloc(4 * KiB, kCompute));
  void* drop = must(a.malloc(3 * MiB, kCompute));
  ASSERT_TRUE(a.free(drop).is_ok());
  ASSERT_TRUE(a.empty_cache().is_ok());
  EXPECT_EQ(fake.frees(), 1);
  EXPECT_EQ(a.stats().bytes_reserved, static_cast<int64_t>(2 * MiB));
  ASSERT_TRUE(a.free(keep).is_ok());
}

TEST(CachingAllocator, BlocksAreReusedOnlyByTheStreamTheyWereAllocatedOn) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* p = must(a.malloc(64 * KiB, kCompute));
  ASSERT_TRUE(a.free(p).is_ok());
  void* q = must(a.malloc(64 * KiB, kOther));
  EXPECT_NE(q, p);
  EXPECT_EQ(fake.mallocs(), 2);
  EXPECT_EQ(must(a.malloc(64 * KiB, kCompute)), p);
  EXPECT_EQ(fake.mallocs(), 2);
}

TEST(CachingAllocator, ABlockUsedOnAnotherStreamWaitsForItsEventBeforeReuse) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* p = must(a.malloc(64 * KiB, kCompute));
  ASSERT_TRUE(a.record_stream(p, kComm).is_ok());
  ASSERT_TRUE(a.record_stream(p, kOther).is_ok());
  ASSERT_TRUE(a.record_stream(p, kComm).is_ok());     // once per stream
  ASSERT_TRUE(a.record_stream(p, kCompute).is_ok());  // its own stream needs no event
  ASSERT_TRUE(a.free(p).is_ok());
  EXPECT_EQ(fake.live_events(), 2u);
  EXPECT_EQ(a.stats().pending_events, 2);
  EXPECT_EQ(a.stats().bytes_in_use, 0);

  void* q = must(a.malloc(64 * KiB, kCompute));
  EXPECT_NE(q, p);
  ASSERT_TRUE(a.free(q).is_ok());

  fake.complete_stream(kComm);
  ASSERT_TRUE(a.process_events().is_ok());
  EXPECT_EQ(a.stats().pending_events, 1);
  void* r = must(a.malloc(64 * KiB, kCompute));
  EXPECT_NE(r, p);  // the event on kOther still guards it
  ASSERT_TRUE(a.free(r).is_ok());

  fake.complete_stream(kOther);  // polled by the next allocation
  void* s = must(a.malloc(64 * KiB, kCompute));
  EXPECT_EQ(s, p);
  EXPECT_EQ(fake.live_events(), 0u);
  EXPECT_EQ(fake.mallocs(), 1);
}

TEST(CachingAllocator, AFailedEventRecordKeepsTheBlockOutOfThePool) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* p = must(a.malloc(64 * KiB, kCompute));
  ASSERT_TRUE(a.record_stream(p, kComm).is_ok());
  fake.set_fail_record(true);
  Status const s = a.free(p);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("recording an event on stream 0x2"), std::string::npos) << s.message();
  fake.set_fail_record(false);
  EXPECT_NE(must(a.malloc(64 * KiB, kCompute)), p);
}

TEST(CachingAllocator, OutOfMemoryFreesCachedSegmentsAndRetriesOnce) {
  FakeDeviceMemory fake(24 * MiB);
  CachingAllocator a(fake, 0);
  ASSERT_TRUE(a.free(must(a.malloc(3 * MiB, kCompute))).is_ok());
  void* p = must(a.malloc(3 * MiB, kOther));  // 20 + 20 > 24: the kCompute segment must go first
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(fake.failed_mallocs(), 1);
  EXPECT_EQ(fake.frees(), 1);
  EXPECT_EQ(a.stats().raw_mallocs, 2);
  EXPECT_EQ(a.stats().bytes_reserved, static_cast<int64_t>(20 * MiB));
}

TEST(CachingAllocator, OutOfMemoryWaitsForPendingEventsBeforeReservingMore) {
  FakeDeviceMemory fake(20 * MiB);
  CachingAllocator a(fake, 0);
  void* p = must(a.malloc(12 * MiB, kCompute));  // a 12 MiB segment, all of it in use
  ASSERT_TRUE(a.record_stream(p, kComm).is_ok());
  ASSERT_TRUE(a.free(p).is_ok());
  EXPECT_EQ(must(a.malloc(12 * MiB, kCompute)), p);
  EXPECT_EQ(fake.syncs(), 1);
  EXPECT_EQ(fake.mallocs(), 1);
  EXPECT_EQ(fake.live_events(), 0u);
}

TEST(CachingAllocator, ARequestTooLargeFailsWithAMessageNamingTheSizes) {
  FakeDeviceMemory fake(24 * MiB);
  CachingAllocator a(fake, 3);
  void* held = must(a.malloc(3 * MiB, kCompute));
  Result<void*> r = a.malloc(30 * MiB, kCompute);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
  std::string const m = r.status().message();
  for (char const* part : {"cuda:3", "30.00 MiB (31457280 B)", "3.00 MiB in use", "20.00 MiB reserved",
                           "device limit none", "fake cudaMalloc: out of memory"}) {
    EXPECT_NE(m.find(part), std::string::npos) << "missing '" << part << "' in: " << m;
  }
  EXPECT_EQ(m.find("4.00 MiB in use"), std::string::npos);  // the figures are the real ones
  EXPECT_EQ(a.stats().out_of_memory, 1);
  EXPECT_EQ(fake.failed_mallocs(), 2);  // the first try and the one retry
  ASSERT_TRUE(a.free(held).is_ok());
}

TEST(CachingAllocator, AMemoryLimitTurnsReservationsBeyondItIntoOutOfMemory) {
  FakeDeviceMemory fake;  // unlimited: only the allocator's limit applies
  CachingAllocator a(fake, 0);
  a.set_memory_limit(40 * MiB);
  EXPECT_EQ(a.memory_limit(), 40 * MiB);
  must(a.malloc(3 * MiB, kCompute));
  must(a.malloc(3 * MiB, kOther));
  Result<void*> r = a.malloc(3 * MiB, kComm);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(r.status().message().find("device limit 40.00 MiB"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("would exceed the device's memory limit"), std::string::npos);
  EXPECT_EQ(fake.mallocs(), 2);  // the runtime was never asked
  EXPECT_EQ(fake.failed_mallocs(), 0);
  a.set_memory_limit(0);
  EXPECT_TRUE(a.malloc(3 * MiB, kComm).is_ok());
}

TEST(CachingAllocator, PeaksAreHighWaterMarksUntilReset) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* x = must(a.malloc(1000, kCompute));
  void* y = must(a.malloc(3 * MiB, kCompute));
  ASSERT_TRUE(a.free(y).is_ok());
  ASSERT_TRUE(a.empty_cache().is_ok());
  CachingAllocatorStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 1000);
  EXPECT_EQ(s.peak_bytes_in_use, static_cast<int64_t>(1000 + 3 * MiB));
  EXPECT_EQ(s.bytes_reserved, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(s.peak_bytes_reserved, static_cast<int64_t>(22 * MiB));
  EXPECT_EQ(a.peak_bytes(), s.peak_bytes_in_use);
  a.reset_peak();
  s = a.stats();
  EXPECT_EQ(s.peak_bytes_in_use, 1000);
  EXPECT_EQ(s.peak_bytes_reserved, static_cast<int64_t>(2 * MiB));
  ASSERT_TRUE(a.free(x).is_ok());
  EXPECT_EQ(a.stats().peak_bytes_in_use, 1000);
}

// One step of a pipeline worker: forward activations kept for backward, temporaries, a send
// buffer used by the comm stream, a receive buffer on it, gradients all-reduced there; the step
// ends with the device synchronised, as STEP does.
void training_step(CachingAllocator& a, FakeDeviceMemory& fake, std::size_t scale = 1) {
  std::vector<std::size_t> const sizes = {256,         4 * KiB + 100, 600 * KiB,    1 * MiB,
                                          1 * MiB + 1, 3 * MiB,       12 * MiB + 7, 700,
                                          64 * KiB,    9 * MiB,       300 * KiB,    40 * MiB * scale};
  std::vector<void*> acts;
  for (std::size_t s : sizes) {
    acts.push_back(must(a.malloc(s, kCompute)));
    void* tmp = must(a.malloc(s / 2 + 1, kCompute));
    ASSERT_TRUE(a.free(tmp).is_ok());
  }
  void* send = must(a.malloc(2 * MiB, kCompute));
  ASSERT_TRUE(a.record_stream(send, kComm).is_ok());
  ASSERT_TRUE(a.free(send).is_ok());
  void* recv = must(a.malloc(2 * MiB, kComm));
  std::vector<void*> grads;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    grads.push_back(must(a.malloc(sizes[i], kCompute)));
    ASSERT_TRUE(a.free(acts[i]).is_ok());
  }
  for (void* g : grads) ASSERT_TRUE(a.record_stream(g, kComm).is_ok());  // all-reduce on the comm stream
  fake.complete_stream(kComm);
  for (void* g : grads) ASSERT_TRUE(a.free(g).is_ok());
  ASSERT_TRUE(a.free(recv).is_ok());
  fake.complete_all();
  ASSERT_TRUE(a.process_events().is_ok());
}

TEST(CachingAllocator, ASecondTrainingStepMakesNoRawMallocOrFree) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  training_step(a, fake);
  int64_t const mallocs = fake.mallocs();
  int64_t const frees = fake.frees();
  CachingAllocatorStats const first = a.stats();
  EXPECT_GT(mallocs, 0);
  EXPECT_EQ(first.bytes_in_use, 0);
  EXPECT_EQ(first.pending_events, 0);

  training_step(a, fake);
  EXPECT_EQ(fake.mallocs(), mallocs);
  EXPECT_EQ(fake.frees(), frees);
  CachingAllocatorStats const second = a.stats();
  EXPECT_EQ(second.cache_hits - first.cache_hits, second.allocations - first.allocations);
  EXPECT_EQ(second.bytes_reserved, first.bytes_reserved);
  EXPECT_EQ(second.peak_bytes_in_use, first.peak_bytes_in_use);

  training_step(a, fake, 2);  // a bigger step does reach the runtime: the counter can move
  EXPECT_GT(fake.mallocs(), mallocs);
}

// Captured work (CUDA graphs) allocates from a private pool: what a capture frees is reused by
// later captures only, never by work outside them, and its segments stay through empty_cache.
TEST(CachingAllocator, CapturedWorkAllocatesFromAPrivatePoolThatOnlyLaterCapturesReuse) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  void* eager = must(a.malloc(4 * KiB, kCompute));  // outside: a segment of the normal pool
  ASSERT_TRUE(a.free(eager).is_ok());               // ...whose free block a capture must not take
  ASSERT_TRUE(a.begin_capture(kCompute).is_ok());
  EXPECT_TRUE(a.capturing());
  void* c1 = must(a.malloc(4 * KiB, kCompute));
  EXPECT_NE(c1, eager);
  EXPECT_EQ(fake.mallocs(), 2);                  // its own segment
  void* other = must(a.malloc(4 * KiB, kComm));  // another stream is not captured: its normal pool
  void* c2 = must(a.malloc(8 * KiB, kCompute));
  ASSERT_TRUE(a.free(c1).is_ok());
  void* c3 = must(a.malloc(4 * KiB, kCompute));  // within a capture, stream order makes reuse safe
  EXPECT_EQ(c3, c1);
  ASSERT_TRUE(a.free(c2).is_ok());
  ASSERT_TRUE(a.free(c3).is_ok());
  EXPECT_TRUE(a.end_capture().is_ok());
  EXPECT_FALSE(a.capturing());

  // After the capture, work outside it never gets the private pool's memory.
  void* after = must(a.malloc(4 * KiB, kCompute));
  EXPECT_EQ(after, eager);
  void* more = must(a.malloc(4 * KiB, kCompute));
  EXPECT_NE(more, c1);
  ASSERT_TRUE(a.free(after).is_ok());
  ASSERT_TRUE(a.free(more).is_ok());
  ASSERT_TRUE(a.free(other).is_ok());
  // empty_cache returns the normal pools' free segments but keeps the captured work's.
  int64_t const frees = fake.frees();
  ASSERT_TRUE(a.empty_cache().is_ok());
  EXPECT_EQ(fake.live_segments(), 1u);
  EXPECT_GT(fake.frees(), frees);

  // A later capture reuses the private pool (captures replay one after another on one stream).
  int64_t const mallocs = fake.mallocs();
  ASSERT_TRUE(a.begin_capture(kCompute).is_ok());
  void* again = must(a.malloc(4 * KiB, kCompute));
  EXPECT_EQ(again, c1);
  EXPECT_EQ(fake.mallocs(), mallocs);
  ASSERT_TRUE(a.free(again).is_ok());
  EXPECT_TRUE(a.end_capture().is_ok());
}

TEST(CachingAllocator, ACaptureThatLeavesATensorAliveOrFreesAnOlderOneIsRefusedByName) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  ASSERT_TRUE(a.begin_capture(kCompute).is_ok());
  void* kept = must(a.malloc(1 * KiB, kCompute));
  Status const alive = a.end_capture();
  EXPECT_EQ(alive.code(), StatusCode::kUnsupported);
  EXPECT_NE(alive.message().find("1 tensor(s) it made outlive it"), std::string::npos) << alive.message();
  // Another capture cannot start while that tensor lives (it would reuse its memory).
  Status const early = a.begin_capture(kCompute);
  EXPECT_FALSE(early.is_ok());
  EXPECT_NE(early.message().find("still alive"), std::string::npos) << early.message();
  ASSERT_TRUE(a.free(kept).is_ok());

  void* older = must(a.malloc(2 * MiB + 512, kCompute));  // made outside any capture
  ASSERT_TRUE(a.begin_capture(kCompute).is_ok());
  ASSERT_TRUE(a.free(older).is_ok());    // the free itself works...
  Status const freed = a.end_capture();  // ...but the capture is unsound
  EXPECT_EQ(freed.code(), StatusCode::kUnsupported);
  EXPECT_NE(freed.message().find("made before it"), std::string::npos) << freed.message();

  EXPECT_FALSE(a.end_capture().is_ok());  // none open
  ASSERT_TRUE(a.begin_capture(kCompute).is_ok());
  EXPECT_FALSE(a.begin_capture(kCompute).is_ok());  // one at a time
  EXPECT_TRUE(a.end_capture().is_ok());
}

TEST(CachingAllocator, DuringACaptureNothingWaitsForEventsAndAMissOnlyReserves) {
  FakeDeviceMemory fake(24 * MiB);
  CachingAllocator a(fake, 0);
  void* shared = must(a.malloc(4 * KiB, kCompute));
  ASSERT_TRUE(a.record_stream(shared, kComm).is_ok());
  ASSERT_TRUE(a.free(shared).is_ok());  // waits for an event on kComm
  fake.complete_all();
  ASSERT_TRUE(a.begin_capture(kCompute).is_ok());
  void* c = must(a.malloc(4 * KiB, kCompute));
  EXPECT_EQ(a.stats().pending_events, 1);  // not polled while capturing
  EXPECT_EQ(fake.syncs(), 0);
  // Out of memory inside a capture fails at once: no device synchronisation, no freeing of segments.
  Result<void*> big = a.malloc(23 * MiB, kCompute);
  EXPECT_FALSE(big.is_ok());
  EXPECT_EQ(fake.syncs(), 0);
  ASSERT_TRUE(a.free(c).is_ok());
  ASSERT_TRUE(a.end_capture().is_ok());
  ASSERT_TRUE(a.process_events().is_ok());
  EXPECT_EQ(a.stats().pending_events, 0);
}

TEST(CachingAllocator, ConcurrentAllocationsAndCrossThreadFreesKeepTheBooksBalanced) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  std::mutex handoff_mu;
  std::vector<void*> handoff;
  auto worker = [&](StreamId stream, unsigned seed, bool hand_over) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> size(1, 3 * MiB);
    std::vector<void*> mine;
    for (int i = 0; i < 2000; ++i) {
      void* p = must(a.malloc(size(rng), stream));
      if (hand_over && i % 3 == 0) {
        std::lock_guard<std::mutex> lock(handoff_mu);
        handoff.push_back(p);
      } else {
        mine.push_back(p);
      }
      if (mine.size() > 8) {
        ASSERT_TRUE(a.free(mine.front()).is_ok());
        mine.erase(mine.begin());
      }
    }
    for (void* p : mine) ASSERT_TRUE(a.free(p).is_ok());
  };
  std::atomic<bool> done{false};
  std::thread freer([&] {
    while (true) {
      bool const last = done.load();
      std::vector<void*> batch;
      {
        std::lock_guard<std::mutex> lock(handoff_mu);
        batch.swap(handoff);
      }
      for (void* p : batch) ASSERT_TRUE(a.free(p).is_ok());
      if (last) break;
      std::this_thread::yield();
    }
  });
  std::thread t1(worker, kCompute, 1u, true);
  std::thread t2(worker, kOther, 2u, false);
  t1.join();
  t2.join();
  done.store(true);
  freer.join();
  EXPECT_EQ(a.stats().bytes_in_use, 0);
  EXPECT_EQ(a.stats().allocations, 4000);
  ASSERT_TRUE(a.empty_cache().is_ok());
  EXPECT_EQ(a.stats().bytes_reserved, 0);
  EXPECT_EQ(fake.live_segments(), 0u);
}

TEST(CachingAllocator, FreeingAForeignOrFreedPointerIsAnError) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  int local = 0;
  EXPECT_EQ(a.free(&local).code(), StatusCode::kInvalidArgument);
  void* p = must(a.malloc(100, kCompute));
  ASSERT_TRUE(a.free(p).is_ok());
  Status const twice = a.free(p);
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("already freed"), std::string::npos) << twice.message();
  EXPECT_EQ(a.record_stream(p, kComm).code(), StatusCode::kInvalidArgument);
  a.deallocate(p, 100);  // the adapter cannot throw from a destructor: it records the error
  EXPECT_NE(a.last_error().find("already freed"), std::string::npos) << a.last_error();
}

TEST(CachingAllocator, DestructionReturnsEverySegmentAndEvent) {
  FakeDeviceMemory fake;
  {
    CachingAllocator a(fake, 0);
    must(a.malloc(100, kCompute));  // still live
    void* p = must(a.malloc(5 * MiB, kCompute));
    ASSERT_TRUE(a.record_stream(p, kComm).is_ok());
    ASSERT_TRUE(a.free(p).is_ok());                                 // pending
    ASSERT_TRUE(a.free(must(a.malloc(12 * MiB, kOther))).is_ok());  // cached
    EXPECT_EQ(fake.live_segments(), 3u);
    EXPECT_EQ(fake.live_events(), 1u);
  }
  EXPECT_EQ(fake.live_segments(), 0u);
  EXPECT_EQ(fake.live_events(), 0u);
  EXPECT_EQ(fake.used(), 0u);
}

TEST(CachingAllocatorAdapter, TensorsAreCudaTensorsCountedByRequestedBytes) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 1);
  EXPECT_EQ(a.device(), (DeviceRef{DeviceKind::kCuda, 1}));
  {
    Tensor t({3, 5}, DType::kFloat32, a);
    EXPECT_EQ(t.device(), (DeviceRef{DeviceKind::kCuda, 1}));
    EXPECT_EQ(&t.allocator(), &a);
    EXPECT_EQ(a.bytes_in_use(), 60);
    Tensor empty({0, 4}, DType::kFloat32, a);
    EXPECT_NE(empty.raw(), nullptr);
    EXPECT_NE(empty.raw(), t.raw());
    EXPECT_EQ(a.bytes_in_use(), 60);
  }
  EXPECT_EQ(a.bytes_in_use(), 0);
  EXPECT_EQ(a.peak_bytes(), 60);
}

TEST(CachingAllocatorAdapter, AllocationsUseTheDefaultStream) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  a.set_default_stream(kComm);
  EXPECT_EQ(a.default_stream(), kComm);
  void* p = a.allocate(4096);
  a.deallocate(p, 4096);
  EXPECT_NE(must(a.malloc(4096, kCompute)), p);
  EXPECT_EQ(must(a.malloc(4096, kComm)), p);
}

TEST(CachingAllocatorAdapter, ByteMovesRoundTripThroughDeviceMemory) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  std::vector<float> const values = {1.5f, -2.f, 3.25f, 4.f, 0.5f, -6.f};
  Tensor host = Tensor::from_floats({2, 3}, values);
  void* reused = nullptr;
  {
    Tensor dev = host.clone_to(a);
    EXPECT_EQ(dev.device().kind, DeviceKind::kCuda);
    EXPECT_EQ(dev.to_vector(), values);
    Tensor dev2 = dev.clone();  // device to device: copy_within
    EXPECT_NE(dev2.raw(), dev.raw());
    EXPECT_EQ(dev2.to_vector(), values);
    std::vector<float> changed = values;
    changed[4] = 9.f;
    a.copy_from_host(dev2.raw(), changed.data(), dev2.nbytes());
    EXPECT_NE(dev2.to_vector(), values);  // the comparison sees a change
    EXPECT_EQ(dev.to_vector(), values);
    reused = dev.raw();
  }
  Tensor z = Tensor::zeros({2, 3}, DType::kFloat32, a);  // reuses a block that held data
  EXPECT_EQ(z.raw(), reused);
  EXPECT_EQ(z.to_vector(), std::vector<float>(6, 0.f));
}

// A tensor of one GPU copied to another GPU of the process (a pipeline edge between two GPU
// workers, the in-process transport's receive) is a peer copy on the receiving device, never two
// copies through host memory; the same GPU copies within it.
TEST(CachingAllocatorAdapter, ATensorOfAnotherGpuIsPeerCopiedNotStagedThroughTheHost) {
  FakeDeviceMemory fake0, fake1;
  CachingAllocator gpu0(fake0, 0), gpu1(fake1, 1);
  std::vector<float> const values = {1.5f, -2.f, 3.25f, 4.f, 0.5f, -6.f};
  Tensor const on0 = Tensor::from_floats({2, 3}, values).clone_to(gpu0);
  int64_t const uploads = fake0.host_copies();
  Tensor const on1 = on0.clone_to(gpu1);
  EXPECT_EQ(on1.device(), (DeviceRef{DeviceKind::kCuda, 1}));
  EXPECT_EQ(fake0.stream_syncs(), 1);  // after the source's queued work, as a copy to the host was
  EXPECT_EQ(fake1.peer_copies(), 1);
  EXPECT_EQ(fake1.peer_sources(), std::vector<int>{0});
  EXPECT_EQ(fake0.host_copies(), uploads);  // nothing read back to the host
  EXPECT_EQ(fake1.host_copies(), 0);
  Tensor const again = on0.clone_to(gpu0);  // the same GPU: within it
  EXPECT_EQ(fake0.peer_copies(), 0);
  EXPECT_EQ(fake0.host_copies(), uploads);
  EXPECT_EQ(on1.to_vector(), values);
  EXPECT_EQ(again.to_vector(), values);

  // Through the in-process transport, as two GPU workers of one process exchange an activation.
  int64_t const reads = fake1.host_copies();  // to_vector's above
  InProcessHub hub(2);
  hub.set_device_allocator(0, &gpu0);
  hub.set_device_allocator(1, &gpu1);
  auto sender = hub.endpoint(0), receiver = hub.endpoint(1);
  MessageKey const key{.step = 1, .edge = 0, .gradient = false, .micro_batch = 0, .src = 0, .dst = 1};
  ASSERT_TRUE(sender->send(key, {on0}).is_ok());
  auto got = receiver->recv(key, {TensorMeta{DType::kFloat32, {2, 3}}}, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].device(), (DeviceRef{DeviceKind::kCuda, 1}));
  EXPECT_EQ(fake1.peer_copies(), 2);
  EXPECT_EQ(fake1.host_copies(), reads);
  EXPECT_EQ((*got)[0].to_vector(), values);
}

// Three GPU replicas of a stage all-reduce their gradients through the in-process transport: with an
// adder set for each device, the sum is made on the first replica's GPU (the others' gradients
// peer-copied there and added in replica order by its backend, the adds awaited) and peer-copied
// back, never through host memory; without one, in host memory. Either way every replica ends
// with the same sum, the host's float order. A failed add is every replica's error, not a hang.
TEST(CachingAllocatorAdapter, GpuReplicasAllReduceOnTheFirstReplicasGpu) {
  constexpr int kReplicas = 3;
  std::vector<std::vector<std::vector<float>>> const grads = {
      {{1.5f, -2.f, 0.25f}, {3.f, 1e-3f}}, {{0.5f, 4.f, -0.125f}, {-1.f, 2e-3f}}, {{1e7f, 1.f, 0.5f}, {0.f, 3e-3f}}};
  std::vector<std::vector<float>> want = grads[0];
  for (int r = 1; r < kReplicas; ++r)
    for (std::size_t i = 0; i < want.size(); ++i)
      for (std::size_t k = 0; k < want[i].size(); ++k) want[i][k] += grads[r][i][k];
  for (int mode = 0; mode < 3; ++mode) {  // 0: adders, 1: none (host), 2: adders, one failing
    SCOPED_TRACE(mode);
    std::vector<std::unique_ptr<FakeDeviceMemory>> fakes;
    std::vector<std::unique_ptr<CachingAllocator>> gpus;
    InProcessHub hub(kReplicas);
    std::vector<int> adds(kReplicas, 0), waits(kReplicas, 0);
    for (int d = 0; d < kReplicas; ++d) {
      fakes.push_back(std::make_unique<FakeDeviceMemory>());
      gpus.push_back(std::make_unique<CachingAllocator>(*fakes.back(), d));
      hub.set_device_allocator(d, gpus.back().get());
      if (mode == 1) continue;
      hub.set_device_adder(d, {[&, d, mode](Tensor& dst, Tensor const& src) -> Status {
                                 ++adds[static_cast<std::size_t>(d)];
                                 if (mode == 2) return internal_error("fake add failed");
                                 for (int64_t k = 0; k < dst.numel(); ++k)  // the fake's device memory is the host's
                                   dst.data<float>()[k] += src.data<float>()[k];
                                 return Status::ok();
                               },
                               [&, d] {
                                 ++waits[static_cast<std::size_t>(d)];
                                 return Status::ok();
                               }});
    }
    std::vector<std::vector<Tensor>> tensors(kReplicas);
    for (int d = 0; d < kReplicas; ++d)
      for (auto const& g : grads[static_cast<std::size_t>(d)])
        tensors[static_cast<std::size_t>(d)].push_back(
            Tensor::from_floats({static_cast<int64_t>(g.size())}, g).clone_to(*gpus[static_cast<std::size_t>(d)]));
    std::vector<int64_t> uploads;
    for (auto const& f : fakes) uploads.push_back(f->host_copies());
    std::vector<Status> results(kReplicas);
    std::vector<std::thread> threads;
    std::vector<std::unique_ptr<Communicator>> ends;
    for (int d = 0; d < kReplicas; ++d) ends.push_back(hub.endpoint(d));
    for (int d = 0; d < kReplicas; ++d)
      threads.emplace_back([&, d] {
        results[static_cast<std::size_t>(d)] = ends[static_cast<std::size_t>(d)]->all_reduce_sum(
            CollectiveKey{1, 0}, {0, 1, 2}, tensors[static_cast<std::size_t>(d)],
            Clock::now() + std::chrono::seconds(10));
      });
    for (auto& t : threads) t.join();
    for (int d = 0; d < kReplicas; ++d) {
      auto const u = static_cast<std::size_t>(d);
      if (mode == 2) {
        EXPECT_NE(results[u].message().find("fake add failed"), std::string::npos) << results[u].message();
        continue;
      }
      ASSERT_TRUE(results[u].is_ok()) << results[u].message();
      if (mode == 0) {
        EXPECT_EQ(fakes[u]->host_copies(), uploads[u]) << d;  // nothing through the host
      }
      for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(tensors[u][i].to_vector(), want[i]) << d << " " << i;
    }
    if (mode == 0) {
      EXPECT_EQ(adds, (std::vector<int>{4, 0, 0}));  // 2 gradients from each of 2 replicas, on GPU 0
      EXPECT_EQ(fakes[0]->peer_copies(), 4);         // the others' gradients to GPU 0
      EXPECT_EQ(fakes[1]->peer_copies(), 2);         // the sums back
      EXPECT_EQ(fakes[2]->peer_copies(), 2);
      for (int w : waits) EXPECT_GE(w, 1);  // every replica's gradients done before they are read
    } else if (mode == 1) {
      EXPECT_GT(fakes[1]->host_copies(), uploads[1]);
    }
  }
}

// An all-reduce's sum runs outside the hub's lock: while the last replica to arrive sums (here on
// fake GPUs, with an add that waits for a message between two other workers), those workers' send
// and receive go through; and a replica whose deadline passes while the sum runs still waits for
// it (the sum writes into its tensors) and returns it. Fails with the sum under the hub's lock (the
// message cannot pass: the add gives up after 5 s) and when a waiting replica leaves at its deadline.
TEST(InProcessCommunicator, AnAllReducesSumHoldsUpNoOtherWorkersMessages) {
  InProcessHub hub(4);
  FakeDeviceMemory fake0, fake1;
  CachingAllocator gpu0(fake0, 0), gpu1(fake1, 1);
  hub.set_device_allocator(0, &gpu0);
  hub.set_device_allocator(1, &gpu1);
  auto const late = Clock::now() + std::chrono::seconds(1);  // replica 1's deadline
  std::promise<void> started, delivered;
  std::shared_future<void> const passed = delivered.get_future().share();
  std::once_flag once;
  auto const add = [&](Tensor& dst, Tensor const& src) -> Status {
    std::call_once(once, [&] { started.set_value(); });
    if (passed.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
      return internal_error("the message from device 2 to 3 did not pass while the sum ran");
    std::this_thread::sleep_until(late + std::chrono::milliseconds(100));  // past replica 1's deadline
    for (int64_t k = 0; k < dst.numel(); ++k) dst.data<float>()[k] += src.data<float>()[k];
    return Status::ok();
  };
  for (int d : {0, 1}) hub.set_device_adder(d, {add, [] { return Status::ok(); }});
  std::vector<std::unique_ptr<Communicator>> ends;
  for (int d = 0; d < 4; ++d) ends.push_back(hub.endpoint(d));
  std::vector<Tensor> t0{Tensor::from_floats({2}, {1, 2}).clone_to(gpu0)};
  std::vector<Tensor> t1{Tensor::from_floats({2}, {10, 20}).clone_to(gpu1)};
  Status r0, r1, message = internal_error("not run");
  std::thread first([&] { r1 = ends[1]->all_reduce_sum(CollectiveKey{1, 0}, {0, 1}, t1, late); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // replica 1 waits in the collective
  std::thread last([&] { r0 = ends[0]->all_reduce_sum(CollectiveKey{1, 0}, {0, 1}, t0, deadline_after(10)); });
  std::thread others([&] {
    if (started.get_future().wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      message = internal_error("the sum did not start on GPU 0's adder");
      delivered.set_value();
      return;
    }
    MessageKey const k{0, 0, false, 0, 2, 3};
    message = ends[2]->send(k, {Tensor::from_floats({1}, {7})});
    if (message.is_ok()) {
      auto got = ends[3]->recv(k, {{DType::kFloat32, {1}}}, deadline_after(3));
      message = got.status();
    }
    delivered.set_value();
  });
  for (std::thread* t : {&first, &last, &others}) t->join();
  EXPECT_TRUE(message.is_ok()) << message.message();
  ASSERT_TRUE(r0.is_ok()) << r0.message();
  ASSERT_TRUE(r1.is_ok()) << r1.message();
  EXPECT_EQ(t0[0].to_vector(), (std::vector<float>{11, 22}));
  EXPECT_EQ(t1[0].to_vector(), (std::vector<float>{11, 22}));
}

TEST(CachingAllocatorAdapter, OutOfMemoryThrowsBadAllocAndKeepsTheMessage) {
  FakeDeviceMemory fake(4 * MiB);
  CachingAllocator a(fake, 2);
  EXPECT_THROW(Tensor({1024, 1024, 4}, DType::kFloat32, a), std::bad_alloc);
  EXPECT_NE(a.last_error().find("infeasible"), std::string::npos) << a.last_error();
  EXPECT_NE(a.last_error().find("16.00 MiB (16777216 B)"), std::string::npos) << a.last_error();
  EXPECT_NE(a.last_error().find("cuda:2"), std::string::npos) << a.last_error();
  EXPECT_EQ(a.bytes_in_use(), 0);
}

TEST(CachingAllocatorAdapter, AFailedByteMoveThrowsRuntimeErrorWithTheRuntimeMessage) {
  FakeDeviceMemory fake;
  CachingAllocator a(fake, 0);
  float host[4] = {};
  try {
    a.copy_to_host(host, host, sizeof host);  // not device memory: the fake refuses
    FAIL() << "expected std::runtime_error";
  } catch (std::runtime_error const& e) {
    EXPECT_NE(std::string(e.what()).find("copy_to_host"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fake byte move outside device memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gp::exec::cuda
