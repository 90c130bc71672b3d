#include <gtest/gtest.h>

#include "schedule/build.h"
#include "schedule/schedule_text.h"
#include "tests/schedule/test_plans.h"

namespace gp::schedule {
namespace {

TEST(ScheduleText, RoundTripsEveryBuiltSchedule) {
  for (auto const& plan : {testing::chain(3, 4), testing::replicated_with_skip(3), testing::looping_chain(2, 4)}) {
    for (Policy p : {Policy::kGpipe, Policy::kGraph1F1B, Policy::kZeroBubble}) {
      auto built = build_schedule(plan, p);
      ASSERT_TRUE(built.is_ok()) << built.status().message();
      std::string const text = print_schedule(*built);
      auto parsed = parse_schedule(text);
      ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
      EXPECT_EQ(parsed->policy, built->policy);
      EXPECT_EQ(parsed->num_stages, built->num_stages);
      EXPECT_EQ(parsed->num_micro_batches, built->num_micro_batches);
      ASSERT_EQ(parsed->devices, built->devices);
      for (int d = 0; d < parsed->num_devices(); ++d)
        for (size_t i = 0; i < parsed->devices[d].size(); ++i)
          EXPECT_EQ(parsed->devices[d][i].line, built->devices[d][i].line) << "number_lines disagrees with the printer";
      EXPECT_EQ(print_schedule(*parsed), text);
    }
  }
}

TEST(ScheduleText, ParsesCommentsAndEveryInstruction) {
  auto s = parse_schedule(R"(# a hand-written schedule
graphpipe-schedule 1   # version
policy hand-written
stages 2
micro-batches 1
devices 2
device 0:
  F s0 m0
  SEND e0 m0 ->d1
  RECV g0 m0 <-d1
  B s0 m0
  W s0 m0
  ALLREDUCE s0
  STEP
device 1:
  STEP
)");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  ASSERT_EQ(s->num_devices(), 2);
  auto const& d0 = s->devices[0];
  ASSERT_EQ(d0.size(), 7u);
  EXPECT_EQ(d0[1].op, Op::kSend);
  EXPECT_EQ(d0[1].edge, 0);
  EXPECT_FALSE(d0[1].gradient);
  EXPECT_EQ(d0[1].peer, 1);
  EXPECT_TRUE(d0[2].gradient);
  EXPECT_EQ(d0[2].line, 10);
  EXPECT_EQ(d0[4].op, Op::kWeight);
  EXPECT_EQ(d0[5].op, Op::kAllReduce);
  EXPECT_EQ(d0[5].stage, 0);
}

std::string error_of(std::string const& text) {
  auto r = parse_schedule(text);
  return r.is_ok() ? "" : r.status().message();
}

TEST(ScheduleText, ErrorsNameTheLine) {
  std::string const head = "graphpipe-schedule 1\nstages 1\nmicro-batches 1\ndevices 1\ndevice 0:\n";
  EXPECT_NE(error_of(head + "  FW s0 m0\n").find("line 6: unknown instruction 'FW'"), std::string::npos);
  EXPECT_NE(error_of(head + "  F s0\n").find("line 6: malformed 'F s0'"), std::string::npos);
  EXPECT_NE(error_of(head + "  SEND e0 m0 <-d1\n").find("line 6: malformed"), std::string::npos);
  EXPECT_NE(error_of(head + "  F s0 m0\ndevice 2:\n").find("line 7: device 2 out of order"), std::string::npos);
  EXPECT_NE(error_of("graphpipe-schedule 2\n").find("line 1: schedule format version 2 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("# nothing\nstages 1\n").find("line 2: expected the header 'graphpipe-schedule 1'"),
            std::string::npos);
  EXPECT_NE(error_of("graphpipe-schedule 1\nstages 1\nmicro-batches 1\ndevices 2\ndevice 0:\n")
                .find("says 'devices 2' but 1 device blocks follow"),
            std::string::npos)
      << "the device count must match";
  EXPECT_NE(error_of("graphpipe-schedule 1\ncolour red\n").find("line 2: unknown header key 'colour'"),
            std::string::npos);
}

}  // namespace
}  // namespace gp::schedule
