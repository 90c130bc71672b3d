// The deferred index checks (exec/cuda/deferred_checks.h) on a fake stream: a queued flag's copy
// lands in its slot only when the stream is synchronised, so a check that read its slot before the
// one synchronisation, or a slot reused while its copy was still queued, reads the wrong value.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cuda/deferred_checks.h"

namespace gp::exec::cuda {
namespace {

struct FakeStream {
  struct Copy {
    uint64_t* dst;
    uint64_t const* src;
  };
  std::deque<Copy> queued;
  std::vector<uint64_t> pinned;
  int syncs = 0, allocs = 0, frees = 0;

  DeferredChecks::Calls calls() {
    DeferredChecks::Calls c;
    c.host_alloc = [this](std::size_t n) -> Result<uint64_t*> {
      ++allocs;
      pinned.assign(n, 0x5a5a5a5a5a5a5a5aull);  // what a slot holds before its copy lands
      return pinned.data();
    };
    c.host_free = [this](uint64_t*) { ++frees; };
    c.copy_async = [this](uint64_t* slot, void const* flag) -> Status {
      queued.push_back({slot, static_cast<uint64_t const*>(flag)});
      return Status::ok();
    };
    c.synchronize = [this]() -> Status {
      ++syncs;
      for (Copy const& c : queued) *c.dst = *c.src;  // the flags' values now, as the stream would
      queued.clear();
      return Status::ok();
    };
    return c;
  }
};

constexpr uint64_t kOk = DeferredChecks::kNoBadIndex;

DeferredChecks::ErrorFor named(std::string op, std::vector<std::string>* called = nullptr) {
  return [op, called](uint64_t first_bad) {
    if (called) called->push_back(op);
    return invalid_argument(op + ": position " + std::to_string(first_bad));
  };
}

TEST(DeferredChecks, OneSynchronisationReportsTheFirstFailedCheckInQueueOrder) {
  FakeStream fake;
  std::vector<std::string> called;
  {
    DeferredChecks checks(fake.calls());
    // The flags as the kernels leave them: every check queued before any is read.
    std::vector<uint64_t> flags = {kOk, 7, kOk, 3};
    for (std::size_t i = 0; i < flags.size(); ++i)
      ASSERT_TRUE(checks.queue(&flags[i], named("op" + std::to_string(i), &called)).is_ok());
    EXPECT_EQ(fake.syncs, 0) << "a queued check waited for the stream";
    EXPECT_EQ(checks.size(), 4u);
    Status const s = checks.resolve();
    EXPECT_EQ(fake.syncs, 1);
    EXPECT_EQ(s.message(), "op1: position 7");  // op3 failed too: op1 came first
    EXPECT_EQ(called, std::vector<std::string>{"op1"});
    EXPECT_EQ(checks.size(), 0u);
    EXPECT_TRUE(checks.resolve().is_ok()) << "a resolved check was reported again";
    EXPECT_EQ(fake.syncs, 1) << "an empty queue synchronised";
    // All in range: ok, and no error function is called.
    std::vector<uint64_t> fine = {kOk, kOk};
    for (uint64_t const& f : fine) ASSERT_TRUE(checks.queue(&f, named("fine", &called)).is_ok());
    EXPECT_TRUE(checks.resolve().is_ok());
    EXPECT_EQ(called.size(), 1u);
  }
  EXPECT_EQ(fake.allocs, 1) << "the pinned slots are made once";
  EXPECT_EQ(fake.frees, 1);
}

TEST(DeferredChecks, AFullQueueIsResolvedBeforeItsSlotsAreReused) {
  FakeStream fake;
  DeferredChecks checks(fake.calls(), 2);
  std::vector<uint64_t> flags = {kOk, kOk, 9};
  ASSERT_TRUE(checks.queue(&flags[0], named("a")).is_ok());
  ASSERT_TRUE(checks.queue(&flags[1], named("b")).is_ok());
  EXPECT_EQ(fake.syncs, 0);
  ASSERT_TRUE(checks.queue(&flags[2], named("c")).is_ok());  // a and b resolved (fine), c in slot 0
  EXPECT_EQ(fake.syncs, 1);
  EXPECT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks.resolve().message(), "c: position 9");

  // A failure found while resolving a full queue comes back from queue().
  std::vector<uint64_t> bad = {4, kOk, kOk};
  ASSERT_TRUE(checks.queue(&bad[0], named("d")).is_ok());
  ASSERT_TRUE(checks.queue(&bad[1], named("e")).is_ok());
  EXPECT_EQ(checks.queue(&bad[2], named("f")).message(), "d: position 4");
}

TEST(DeferredChecks, ClearedChecksAreNeverReadAndNoStreamIsAnError) {
  FakeStream fake;
  DeferredChecks checks(fake.calls());
  uint64_t const bad = 1;
  ASSERT_TRUE(checks.queue(&bad, named("x")).is_ok());
  checks.clear();  // a failed step's checks
  EXPECT_TRUE(checks.resolve().is_ok());
  EXPECT_EQ(fake.syncs, 0);

  DeferredChecks none;
  Status const s = none.queue(&bad, named("y"));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("without a device stream"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gp::exec::cuda
