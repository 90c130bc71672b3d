#include "schedule/p2p_order.h"

#include <gtest/gtest.h>

#include "schedule/build.h"
#include "schedule/schedule_text.h"
#include "schedule/validate.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

Schedule parse(std::string const& text) {
  auto s = parse_schedule(text);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? *s : Schedule{};
}

void expect_rejected(Status const& s, std::vector<std::string> const& parts) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (auto const& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "missing '" << p << "' in\n" << s.message();
}

// Chains, branches and replica routing pass on every policy. Two test plans get the documented
// errors (schedule/p2p_order.h) from some policies: the looping chain (two edges share a device
// pair and the builders order their sends and receives differently; interleaved 1F1B needs
// independent send streams) and the replicated plan with a skip edge under graph-1f1b and zb.
TEST(OrderedTransport, EveryBuiltScheduleOfTheTestPlansPassesOrGetsTheDocumentedError) {
  struct Named {
    std::string name;
    partition::Plan plan;
    bool must_pass;
  };
  std::vector<Named> plans;
  for (int m : {1, 2, 3, 4, 8}) {
    for (int p : {1, 2, 3, 5}) plans.push_back({"chain p=" + std::to_string(p), testing::chain(p, m, {}, 0.1), true});
    plans.push_back({"two-branch", testing::two_branch(m), true});
    plans.push_back({"two-branch as chain", testing::two_branch_as_chain(m), true});
    plans.push_back({"replicated diamond", testing::replicated_diamond(m), true});
    plans.push_back({"looping chain", testing::looping_chain(2, m), false});
    plans.push_back({"replicated with skip", testing::replicated_with_skip(m), false});
  }
  int passed = 0, rejected = 0;
  for (auto const& [name, plan, must_pass] : plans)
    for (Policy policy : concrete_policies()) {
      int const m = static_cast<int>(plan.num_micro_batches);
      if (!policy_applies(plan, policy, m).is_ok()) continue;
      auto s = build_schedule(plan, policy);
      ASSERT_TRUE(s.is_ok()) << name << " " << policy_name(policy) << ": " << s.status().message();
      Status const st = check_ordered_transport(*s);
      std::string const what = name + " m=" + std::to_string(m) + " " + policy_name(policy);
      if (st.is_ok()) {
        ++passed;
        continue;
      }
      ++rejected;
      EXPECT_FALSE(must_pass) << what << ": " << st.message();
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what;
      bool const documented = st.message().find("order their messages differently") != std::string::npos ||
                              st.message().find("cyclic wait") != std::string::npos;
      EXPECT_TRUE(documented) << what << ": " << st.message();
      EXPECT_NE(st.message().find("fix: "), std::string::npos) << what;
    }
  EXPECT_GT(passed, 100);
  EXPECT_GT(rejected, 0) << "the looping chain's builders order a shared device pair differently";
}

// Auto for an ordered transport skips the policies whose channels it cannot run: on the looping
// chain (whose 1F1B orders a device pair's messages apart) it still finds a schedule, and that
// schedule passes the check.
TEST(OrderedTransport, AutoPicksOnlySchedulesTheOrderedTransportCanRun) {
  int rejected_by_plain_auto = 0;
  for (int m : {3, 4, 8}) {
    partition::Plan const plan = testing::looping_chain(2, m);
    BuildOptions options;
    options.memory_limit_bytes = 0;
    auto plain = build_schedule(plan, Policy::kAuto, options);
    ASSERT_TRUE(plain.is_ok()) << plain.status().message();
    rejected_by_plain_auto += !check_ordered_transport(*plain).is_ok();
    options.ordered_transport = true;
    auto ordered = build_schedule(plan, Policy::kAuto, options);
    ASSERT_TRUE(ordered.is_ok()) << "m=" << m << ": " << ordered.status().message();
    EXPECT_TRUE(check_ordered_transport(*ordered).is_ok()) << "m=" << m << " " << ordered->policy;
  }
  EXPECT_GT(rejected_by_plain_auto, 0) << "the case no longer shows the difference";
}

std::string const kHeader = "graphpipe-schedule 1\nstages 2\nmicro-batches 2\ndevices 2\n";

// NVIDIA/nccl#479: both devices send, then both receive, on one device pair (1F1B's steady
// state: lines 7-10 on device 0, lines 19-20 on device 1). Safe by design: each device's queued
// send joins the NCCL group of its next receive, so the two exchanges progress together.
TEST(OrderedTransport, BothSendThenBothReceiveIsSafeBecauseSendsJoinTheReceivesGroup) {
  std::string const text = kHeader + R"(device 0:
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
  EXPECT_TRUE(check_ordered_transport(parse(text)).is_ok());
  std::string const minimal = kHeader + R"(device 0:
  SEND e0 m0 ->d1
  RECV g0 m0 <-d1
  STEP
device 1:
  SEND g0 m0 ->d0
  RECV e0 m0 <-d0
  STEP
)";
  EXPECT_TRUE(check_ordered_transport(parse(minimal)).is_ok());
}

// NVIDIA/nccl#783: a device waits in a receive while its earlier send is only received after a
// third device progresses. Eager sends (the schedule's semantics) get through; NCCL would need the
// send and the receive on two independently progressing streams, which CUDA does not promise, so
// the check rejects it and names the cycle d0 -> d1 -> d2 -> d0 with its lines.
TEST(OrderedTransport, AWaitThatNeedsTwoIndependentStreamsIsRejectedAsACycle) {
  std::string const text = R"(graphpipe-schedule 1
stages 3
micro-batches 1
devices 3
device 0:
  SEND e0 m0 ->d1
  RECV g0 m0 <-d1
  SEND e1 m0 ->d2
  STEP
device 1:
  SEND g0 m0 ->d0
  RECV e2 m0 <-d2
  RECV e0 m0 <-d0
  STEP
device 2:
  RECV e1 m0 <-d0
  SEND e2 m0 ->d1
  STEP
)";
  expect_rejected(check_ordered_transport(parse(text)),
                  {"cyclic wait", "device 0 line 7 (RECV g0 m0 <-d1)", "device 1 line 12 (RECV e2 m0 <-d2)",
                   "device 2 line 16 (RECV e1 m0 <-d0)", "device 1 line 13 (RECV e0 m0 <-d0) is reached", "fix: "});
  // The same exchange with device 1 receiving from device 0 first passes: the check can tell.
  std::string const from = "  RECV e2 m0 <-d2\n  RECV e0 m0 <-d0", to = "  RECV e0 m0 <-d0\n  RECV e2 m0 <-d2";
  std::string fixed = text;
  fixed.replace(fixed.find(from), from.size(), to);
  EXPECT_TRUE(check_ordered_transport(parse(fixed)).is_ok()) << check_ordered_transport(parse(fixed)).message();
}

TEST(OrderedTransport, ReceivesInAnotherOrderThanTheSendsAreRejectedWithBothLines) {
  std::string const text = kHeader + R"(device 0:
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
  RECV e0 m1 <-d0
  RECV e0 m0 <-d0
  F s1 m0
  B s1 m0
  SEND g0 m0 ->d0
  F s1 m1
  B s1 m1
  SEND g0 m1 ->d0
  STEP
)";
  expect_rejected(check_ordered_transport(parse(text)),
                  {"devices 0 and 1 order their messages differently", "device 0 line 7 (SEND e0 m0 ->d1)",
                   "device 1 line 16 (RECV e0 m1 <-d0)", "--policy gpipe", "--launcher"});
}

TEST(OrderedTransport, ASendWithoutItsReceiveIsRejected) {
  std::string const text = kHeader + R"(device 0:
  SEND e0 m0 ->d1
  SEND e0 m1 ->d1
  STEP
device 1:
  RECV e0 m0 <-d0
  STEP
)";
  expect_rejected(check_ordered_transport(parse(text)),
                  {"device 0 sends 2 messages to device 1, which receives 1", "device 0 line 7 (SEND e0 m1 ->d1)"});
}

TEST(OrderedTransport, AllReducesInOppositeOrdersAreACycle) {
  std::string const text = kHeader + R"(device 0:
  ALLREDUCE s0
  ALLREDUCE s1
  STEP
device 1:
  ALLREDUCE s1
  ALLREDUCE s0
  STEP
)";
  expect_rejected(check_ordered_transport(parse(text)),
                  {"cyclic wait", "device 0 line 6 (ALLREDUCE s0)", "device 1 line 10 (ALLREDUCE s1)"});
}

TEST(OrderedTransport, APeerOutsideTheScheduleIsRejected) {
  std::string const text = kHeader + "device 0:\n  SEND e0 m0 ->d0\n  STEP\ndevice 1:\n  STEP\n";
  auto s = parse_schedule(text);
  if (!s.is_ok()) GTEST_SKIP() << "the parser already refuses it: " << s.status().message();
  expect_rejected(check_ordered_transport(*s), {"not another device"});
}

}  // namespace
}  // namespace gp::schedule
