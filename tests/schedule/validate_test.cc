#include <gtest/gtest.h>

#include "schedule/build.h"
#include "schedule/schedule_text.h"
#include "schedule/validate.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

// 1F1B by hand on a two-stage chain with two micro-batches (lines 6-14 and 16-24).
std::string const kGood = R"(graphpipe-schedule 1
stages 2
micro-batches 2
devices 2
device 0:
  F s0 m0
  SEND e0 m0 ->d1
  F s0 m1
  SEND e0 m1 ->d1
  RECV g0 m0 <-d1
  B s0 m0
  RECV g0 m1 <-d1
  B s0 m1
  STEP
device 1:
  RECV e0 m0 <-d0
  F s1 m0
  B s1 m0
  SEND g0 m0 ->d0
  RECV e0 m1 <-d0
  F s1 m1
  B s1 m1
  SEND g0 m1 ->d0
  STEP
)";

std::string replace(std::string text, std::string const& from, std::string const& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

std::vector<Violation> check(std::string const& text, CheckOptions options = {0}) {
  auto s = parse_schedule(text);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  if (!s.is_ok()) return {};
  return validate_schedule(testing::chain(2, 2), *s, options);
}

// The violations include one of `rule` on `device` at `line` whose text contains `text`.
void expect_violation(std::vector<Violation> const& v, std::string const& rule, int device, int line,
                      std::string const& text) {
  std::string all;
  for (auto const& x : v) {
    all += "\n  " + x.to_string();
    if (x.rule == rule && x.device == device && (line == 0 || x.line == line) &&
        x.to_string().find(text) != std::string::npos)
      return;
  }
  ADD_FAILURE() << "expected [" << rule << "] on device " << device << " line " << line << " containing '" << text
                << "'; got:" << all;
}

TEST(Validate, TheHandWrittenScheduleIsValid) {
  auto v = check(kGood);
  EXPECT_TRUE(v.empty()) << v.front().to_string();
}

TEST(Validate, ForwardBeforeBackward) {
  auto v = check(replace(kGood, "  F s1 m0\n  B s1 m0\n", "  B s1 m0\n  F s1 m0\n"));
  expect_violation(v, "order", 1, 17, "'B s1 m0' comes before its forward (line 18); fix: move it after line 18");
}

TEST(Validate, WeightGradientAfterBackward) {
  std::string text = replace(kGood, "  B s1 m0\n", "  W s1 m0\n  B s1 m0\n");
  text = replace(text, "  B s1 m1\n", "  B s1 m1\n  W s1 m1\n");
  expect_violation(check(text), "order", 1, 18, "'W s1 m0' comes before its B (line 19)");
}

TEST(Validate, EveryMicroBatchExactlyOnce) {
  expect_violation(check(replace(kGood, "  F s0 m1\n", "")), "once", 0, 0, "never runs 'F s0 m1'");
  expect_violation(check(replace(kGood, "  B s0 m1\n", "  B s0 m1\n  B s0 m1\n")), "once", 0, 14,
                   "'B s0 m1' runs twice on device 0 (lines 13 and 14)");
}

TEST(Validate, EverySendHasItsReceive) {
  expect_violation(
      check(replace(kGood, "  RECV g0 m1 <-d1\n", "")), "match", 1, 22,
      "'SEND g0 m1 ->d0' has no matching receive on device 0; fix: add 'RECV g0 m1 <-d1' to device 0 before 'B s0 m1'");
  expect_violation(check(replace(kGood, "  SEND e0 m1 ->d1\n", "")), "match", 1, 0,
                   "'RECV e0 m1 <-d0' has no matching send on device 0");
  std::string text = replace(kGood, "  SEND e0 m1 ->d1\n", "");
  text = replace(text, "  RECV e0 m1 <-d0\n", "");
  expect_violation(check(text), "match", 1, 0,
                   "'F s1 m1' on device 1 needs activation 'e0 m1' from device 0, but no SEND/RECV moves it");
}

TEST(Validate, SendAfterTheDataExists) {
  expect_violation(check(replace(kGood, "  F s0 m0\n  SEND e0 m0 ->d1\n", "  SEND e0 m0 ->d1\n  F s0 m0\n")),
                   "send-after-produce", 0, 6, "'SEND e0 m0 ->d1' comes before 'F s0 m0' (line 7), which produces it");
}

TEST(Validate, ReceiveBeforeUse) {
  expect_violation(check(replace(kGood, "  RECV e0 m0 <-d0\n  F s1 m0\n", "  F s1 m0\n  RECV e0 m0 <-d0\n")),
                   "recv-before-use", 1, 17, "comes after 'F s1 m0' (line 16)");
}

TEST(Validate, NoDeadlock) {
  std::string const text = R"(graphpipe-schedule 1
stages 2
micro-batches 2
devices 2
device 0:
  F s0 m0
  SEND e0 m0 ->d1
  RECV g0 m0 <-d1
  B s0 m0
  F s0 m1
  SEND e0 m1 ->d1
  RECV g0 m1 <-d1
  B s0 m1
  STEP
device 1:
  RECV e0 m1 <-d0
  F s1 m1
  B s1 m1
  SEND g0 m1 ->d0
  RECV e0 m0 <-d0
  F s1 m0
  B s1 m0
  SEND g0 m0 ->d0
  STEP
)";
  auto v = check(text);
  ASSERT_FALSE(v.empty());
  for (auto const& x : v) EXPECT_EQ(x.rule, "deadlock") << x.to_string();
  expect_violation(v, "deadlock", 0, 8, "'RECV g0 m0 <-d1' never runs");
  expect_violation(v, "deadlock", 1, 16, "'RECV e0 m1 <-d0' never runs");
  expect_violation(v, "deadlock", 0, 9, "waits for RECV g0 m0 <-d1 on device 0");
}

TEST(Validate, MemoryWithinTheLimit) {
  // Weights and optimizer take 4000 bytes; stage 0 holds two micro-batches of 100 bytes.
  EXPECT_TRUE(check(kGood, CheckOptions{4200}).empty());
  expect_violation(check(kGood, CheckOptions{4150}), "memory", 0, 8, "device 0 goes over its memory limit");
}

TEST(Validate, OneStepLast) {
  expect_violation(check(replace(kGood, "  SEND g0 m1 ->d0\n  STEP\n", "  SEND g0 m1 ->d0\n")), "step", 1, 0,
                   "device 1 has no STEP");
  expect_violation(check(replace(kGood, "  F s0 m0\n", "  STEP\n  F s0 m0\n")), "step", 0, 6, "STEP appears twice");
}

TEST(Validate, ReferencesPlacementAndRoutes) {
  expect_violation(check(replace(kGood, "  F s0 m1\n", "  F s0 m5\n")), "reference", 0, 8,
                   "names micro-batch 5 but the schedule has 2");
  expect_violation(check(replace(kGood, "  B s1 m1\n", "  B s1 m1\n  W s0 m1\n")), "placement", 1, 23,
                   "stage 0 does not run on device 1 in the plan (its devices: 0)");
  expect_violation(check(replace(kGood, "  SEND e0 m0 ->d1\n", "  SEND e0 m0 ->d0\n")), "route", 0, 7,
                   "moves no data between device 0 and device 0");
  expect_violation(check(replace(kGood, "stages 2\n", "stages 3\n")), "header", -1, 0,
                   "built for 3 stages but the plan has 2");
}

TEST(Validate, ReplicatedStagesAllReduce) {
  auto const plan = testing::replicated_with_skip(2);
  auto s = build_schedule(plan, Policy::kGraph1F1B);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  auto& d2 = s->devices[2];
  d2.erase(std::remove_if(d2.begin(), d2.end(), [](Instruction const& in) { return in.op == Op::kAllReduce; }),
           d2.end());
  auto v = validate_schedule(plan, *s, CheckOptions{0});
  expect_violation(v, "allreduce", 2, 0,
                   "stage 1 has 2 replicas but device 2 never all-reduces its gradients; fix: add 'ALLREDUCE s1'");
  auto st = check_schedule(plan, *s);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("1 problem in the schedule"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace gp::schedule
