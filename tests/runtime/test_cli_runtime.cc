// graphpipe train --devices N end to end, as a user runs it: the trained model equals one device's,
// and faults end the command with a non-zero exit, the first cause, and no hang.
#include "tests/runtime/cli_harness.h"

namespace gp::testing {
namespace {

struct Files {
  TempDir dir{"rtcli"};
  std::string model, plan, schedule;
  Files() {
    model = dir.file("mmt.onnx");
    plan = dir.file("plan.json");
    schedule = dir.file("sched.txt");
    EXPECT_EQ(run(graphpipe() + " models export mmt --size tiny --out " + model).code, 0);
    auto p = run(graphpipe() + " partition " + model +
                 " --devices 2 --batch 16 --micro-batch 4 --memory 1GiB --planner balanced -o " + plan);
    EXPECT_EQ(p.code, 0) << p.output;
    auto s = run(graphpipe() + " schedule " + plan + " --policy 1f1b -o " + schedule);
    EXPECT_EQ(s.code, 0) << s.output;
  }
  std::string config(std::string const& extra = "", std::string const& out = "") const {
    return dir.write("c" + std::to_string(counter_++) + ".yaml",
                     "model: " + model + "\nbatch: 16\nmicro_batches: 4\nsteps: 3\nlr: 0.05\nseed: 2\n" +
                         (out.empty() ? "" : "export: " + out + "\n") + extra);
  }
  mutable int counter_ = 0;
};

TEST(TrainCli, TwoWorkersTrainTheSameModelAsOneDevice) {
  Files f;
  auto one = run(graphpipe() + " train --config " + f.config("", f.dir.file("one.onnx")));
  ASSERT_EQ(one.code, 0) << one.output;
  auto two = run(graphpipe() + " train --devices 2 --trace " + f.dir.file("t.json") + " --config " +
                 f.config("pipeline: {memory: 1GiB}\n", f.dir.file("two.onnx")));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("measured"), std::string::npos);
  EXPECT_NE(two.output.find("device 1: busy"), std::string::npos) << two.output;
  EXPECT_TRUE(std::filesystem::exists(f.dir.file("t.json")));
  EXPECT_GT(compare_weights(f.dir.file("two.onnx"), f.dir.file("one.onnx"), 1e-4, 1e-6), 10);
  // A given plan and schedule.
  auto given = run(graphpipe() + " train --devices 2 --config " +
                   f.config("pipeline: {plan: " + f.plan + ", schedule: " + f.schedule + "}\n", f.dir.file("g.onnx")));
  ASSERT_EQ(given.code, 0) << given.output;
  EXPECT_GT(compare_weights(f.dir.file("g.onnx"), f.dir.file("one.onnx"), 1e-4, 1e-6), 10);
}

TEST(TrainCli, AStalledWorkerEndsTheRunWithinTheTimeout) {
  Files f;
  int const line = schedule_line(f.schedule, 0, schedule::Op::kForward, 1);
  auto r = run(graphpipe() + " train --devices 2 --timeout 1 --inject-fault 0:" + std::to_string(line) +
                   ":stall --config " + f.config("pipeline: {plan: " + f.plan + ", schedule: " + f.schedule + "}\n"),
               60);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.output.find("arrived before the deadline"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("where each device was: d0 at line " + std::to_string(line)), std::string::npos) << r.output;
}

TEST(TrainCli, AThrowingWorkerIsReportedOnce) {
  Files f;
  int const line = schedule_line(f.schedule, 1, schedule::Op::kBackward, 0);
  auto r = run(graphpipe() + " train --devices 2 --inject-fault 1:" + std::to_string(line) + ":throw --config " +
               f.config("pipeline: {plan: " + f.plan + ", schedule: " + f.schedule + "}\n", f.dir.file("x.onnx")));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("device 1, line " + std::to_string(line)), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("another device failed"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(f.dir.file("x.onnx"))) << "a failed run wrote its model";
}

TEST(TrainCli, CtrlCStopsEveryWorkerCleanly) {
  Files f;
  std::string const out = f.dir.file("int.onnx");
  // timeout sends SIGINT (Ctrl-C) after 2 s to a run that would take minutes.
  auto r = run("timeout -s INT 2 " + graphpipe() + " train --devices 2 --steps 1000000 --config " +
                   f.config("pipeline: {plan: " + f.plan + ", schedule: " + f.schedule + "}\n", out),
               60);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.output.find("interrupted (Ctrl-C)"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out)) << "an interrupted run wrote its model";
}

TEST(TrainCli, APlanForOtherDevicesIsRefused) {
  Files f;
  auto r = run(graphpipe() + " train --devices 3 --config " +
               f.config("pipeline: {plan: " + f.plan + ", schedule: " + f.schedule + "}\n"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("the plan is for 2 devices, not 3"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gp::testing
