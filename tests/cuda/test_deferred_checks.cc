// The deferred index checks (exec/cuda/deferred_checks.h) on a fake stream: a queued verdict's
// copy lands in its slot only when the stream is synchronised, so a check that read its slot before
// the one synchronisation, or a slot reused while its copy was still queued, reads the wrong value.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cuda/deferred_checks.h"

namespace gp::exec::cuda {
namespace {

using Verdict = DeferredChecks::Verdict;

struct FakeStream {
  struct Copy {
    Verdict* dst;
    Verdict const* src;
  };
  std::deque<Copy> queued;
  std::deque<std::vector<Verdict>> pinned;  // each host_alloc's slots (a deque: they stay put)
  int syncs = 0, allocs = 0, frees = 0;

  DeferredChecks::Calls calls() {
    DeferredChecks::Calls c;
    c.host_alloc = [this](std::size_t n) -> Result<Verdict*> {
      ++allocs;
      pinned.emplace_back(n, Verdict{0x5a5a5a5a5a5a5a5aull, -1});  // what a slot holds before its copy lands
      return pinned.back().data();
    };
    c.host_free = [this](Verdict*) { ++frees; };
    c.copy_async = [this](Verdict* slot, void const* verdict) -> Status {
      queued.push_back({slot, static_cast<Verdict const*>(verdict)});
      return Status::ok();
    };
    c.synchronize = [this]() -> Status {
      ++syncs;
      for (Copy const& c : queued) *c.dst = *c.src;  // the verdicts' values now, as the stream would
      queued.clear();
      return Status::ok();
    };
    return c;
  }
};

Verdict const kOk{};  // every index in range
// A kernel's verdict: position first_bad is out of range (its index 100 + first_bad, noted beside).
Verdict bad_at(uint64_t first_bad) { return {first_bad, 100 + static_cast<int64_t>(first_bad)}; }

DeferredChecks::ErrorFor named(std::string op, std::vector<std::string>* called = nullptr) {
  return [op, called](Verdict const& v) {
    if (called) called->push_back(op);
    return invalid_argument(op + ": position " + std::to_string(v.first_bad) + ", index " + std::to_string(v.index));
  };
}

TEST(DeferredChecks, OneSynchronisationReportsTheFirstFailedCheckInQueueOrder) {
  FakeStream fake;
  std::vector<std::string> called;
  {
    DeferredChecks checks(fake.calls());
    // The flags as the kernels leave them: every check queued before any is read.
    std::vector<Verdict> flags = {kOk, bad_at(7), kOk, bad_at(3)};
    for (std::size_t i = 0; i < flags.size(); ++i)
      ASSERT_TRUE(checks.queue(&flags[i], named("op" + std::to_string(i), &called)).is_ok());
    EXPECT_EQ(fake.syncs, 0) << "a queued check waited for the stream";
    EXPECT_EQ(checks.size(), 4u);
    Status const s = checks.resolve();
    EXPECT_EQ(fake.syncs, 1);
    EXPECT_EQ(s.message(), "op1: position 7, index 107");  // op3 failed too: op1 came first
    EXPECT_EQ(called, std::vector<std::string>{"op1"});
    EXPECT_EQ(checks.size(), 0u);
    EXPECT_TRUE(checks.resolve().is_ok()) << "a resolved check was reported again";
    EXPECT_EQ(fake.syncs, 1) << "an empty queue synchronised";
    // All in range: ok, and no error function is called.
    std::vector<Verdict> fine = {kOk, kOk};
    for (Verdict const& f : fine) ASSERT_TRUE(checks.queue(&f, named("fine", &called)).is_ok());
    EXPECT_TRUE(checks.resolve().is_ok());
    EXPECT_EQ(called.size(), 1u);
  }
  EXPECT_EQ(fake.allocs, 1) << "the pinned slots are made once";
  EXPECT_EQ(fake.frees, 1);
}

TEST(DeferredChecks, AFullQueueIsResolvedBeforeItsSlotsAreReused) {
  FakeStream fake;
  DeferredChecks checks(fake.calls(), 2);
  std::vector<Verdict> flags = {kOk, kOk, bad_at(9)};
  ASSERT_TRUE(checks.queue(&flags[0], named("a")).is_ok());
  ASSERT_TRUE(checks.queue(&flags[1], named("b")).is_ok());
  EXPECT_EQ(fake.syncs, 0);
  ASSERT_TRUE(checks.queue(&flags[2], named("c")).is_ok());  // a and b resolved (fine), c in slot 0
  EXPECT_EQ(fake.syncs, 1);
  EXPECT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks.resolve().message(), "c: position 9, index 109");

  // A failure found while resolving a full queue comes back from queue().
  std::vector<Verdict> bad = {bad_at(4), kOk, kOk};
  ASSERT_TRUE(checks.queue(&bad[0], named("d")).is_ok());
  ASSERT_TRUE(checks.queue(&bad[1], named("e")).is_ok());
  EXPECT_EQ(checks.queue(&bad[2], named("f")).message(), "d: position 4, index 104");
}

TEST(DeferredChecks, ClearedChecksAreNeverReadAndNoStreamIsAnError) {
  FakeStream fake;
  DeferredChecks checks(fake.calls());
  Verdict const bad = bad_at(1);
  ASSERT_TRUE(checks.queue(&bad, named("x")).is_ok());
  checks.clear();  // a failed step's checks
  EXPECT_TRUE(checks.resolve().is_ok());
  EXPECT_EQ(fake.syncs, 0);

  DeferredChecks none;
  Status const s = none.queue(&bad, named("y"));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("without a device stream"), std::string::npos) << s.message();
}

// Captured work: a capture's checks go to slots of its own; each replay writes them again (the
// fake replays by queueing the captured copies again) and adopt() queues them for resolve().
TEST(DeferredChecks, ACapturesChecksAreReadAfterEachReplayInQueueOrder) {
  FakeStream fake;
  std::vector<std::string> called;
  DeferredChecks checks(fake.calls());
  std::vector<Verdict> flags = {kOk, kOk};
  ASSERT_TRUE(checks.begin_capture(4).is_ok());
  EXPECT_TRUE(checks.capturing());
  std::size_t const before = fake.queued.size();
  for (std::size_t i = 0; i < flags.size(); ++i)
    ASSERT_TRUE(checks.queue(&flags[i], named("captured" + std::to_string(i), &called)).is_ok());
  std::vector<FakeStream::Copy> const recorded(fake.queued.begin() + static_cast<std::ptrdiff_t>(before),
                                               fake.queued.end());
  fake.queued.clear();  // a capture records its copies; they run only when the work is replayed
  Result<DeferredChecks::Captured> captured = checks.end_capture();
  ASSERT_TRUE(captured.is_ok());
  EXPECT_FALSE(checks.capturing());
  EXPECT_EQ(captured->errors.size(), 2u);
  EXPECT_EQ(checks.size(), 0u) << "a capture's checks are queued by replays, not by the capture";
  auto replay = [&] {
    for (FakeStream::Copy const& c : recorded) fake.queued.push_back(c);
    checks.adopt(*captured);
  };
  replay();  // every index in range
  EXPECT_EQ(checks.size(), 2u);
  EXPECT_TRUE(checks.resolve().is_ok());
  flags[1] = bad_at(9);  // the next replay's kernel flags position 9
  Verdict eager = bad_at(4);
  ASSERT_TRUE(checks.queue(&eager, named("eager", &called)).is_ok());
  replay();
  Status const s = checks.resolve();
  EXPECT_EQ(s.message(), "eager: position 4, index 104");  // queued first, so reported first
  flags[1] = bad_at(11);
  replay();
  EXPECT_EQ(checks.resolve().message(), "captured1: position 11, index 111");  // the replay's, not the first one's
  EXPECT_EQ(called, (std::vector<std::string>{"eager", "captured1"}));
  EXPECT_EQ(fake.allocs, 2) << "the eager slots and the capture's";
}

TEST(DeferredChecks, ACaptureRefusesMoreChecksThanItHasSlotsAndCanBeAbandoned) {
  FakeStream fake;
  DeferredChecks checks(fake.calls());
  Verdict flag = kOk;
  ASSERT_TRUE(checks.begin_capture(2).is_ok());
  EXPECT_FALSE(checks.begin_capture(2).is_ok()) << "one capture at a time";
  ASSERT_TRUE(checks.queue(&flag, named("a")).is_ok());
  ASSERT_TRUE(checks.queue(&flag, named("b")).is_ok());
  Status const full = checks.queue(&flag, named("c"));
  EXPECT_EQ(full.code(), StatusCode::kUnsupported);
  EXPECT_NE(full.message().find("more than 2 index checks"), std::string::npos) << full.message();
  EXPECT_EQ(fake.syncs, 0) << "a capture's full queue is not resolved (nothing has run)";
  checks.abort_capture();
  EXPECT_FALSE(checks.capturing());
  EXPECT_FALSE(checks.end_capture().is_ok());
  ASSERT_TRUE(checks.queue(&flag, named("after")).is_ok());  // back to the eager slots
  EXPECT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks.resolve().is_ok());
}

}  // namespace
}  // namespace gp::exec::cuda
