// graphpipe train --launcher mpi under mpirun (label mpi; --oversubscribe on a 2-core machine):
// the trained model equals one device's with 2 and 4 ranks; a killed rank, a wrong header and
// ranks that disagree on the run end with a non-zero exit and a clear message, never a hang.
#include <cstdlib>

#include "tests/runtime/cli_harness.h"

namespace gp::testing {
namespace {

std::string mpirun(int np) { return "mpirun --oversubscribe -np " + std::to_string(np) + " "; }

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  }
  TempDir dir{"rtmpi"};
  std::string config(std::string const& model, std::string const& extra, std::string const& out = "") {
    return dir.write("c" + std::to_string(n_++) + ".yaml",
                     "model: {zoo: " + model +
                         ", size: tiny}\nbatch: 16\nmicro_batches: 4\nsteps: 3\nlr: 0.05\n"
                         "seed: 2\n" +
                         (model == "candle_uno" ? "loss: mse\n" : "") + "pipeline: {memory: 1GiB, timeout: 20" + extra +
                         "}\n" + (out.empty() ? "" : "export: " + out + "\n"));
  }
  void write_plan() {
    ASSERT_EQ(run(graphpipe() + " models export mmt --size tiny --out " + model).code, 0);
    ASSERT_EQ(run(graphpipe() + " partition " + model + " --devices 2 --batch 16 --micro-batch 4 --memory 1GiB " +
                  "--planner balanced -o " + plan)
                  .code,
              0);
    ASSERT_EQ(run(graphpipe() + " schedule " + plan + " --policy gpipe -o " + sched).code, 0);
  }
  // A torch fixture (tests/data/torch2/<fixture>: token ids from .npy), planned without
  // replication (GPP by default), trained on `ranks` ranks (one pipeline stage each) and on one
  // device: the same weights.
  void expect_fixture_on_ranks_as_one_device(std::string const& fixture, int ranks = 2,
                                             std::string const& planner = "gpp", std::string const& log = "",
                                             std::string const& extra = "") {
    std::string const fx = std::string(GP_SOURCE_DIR) + "/tests/data/torch2/" + fixture + "/";
    auto cfg = [&](std::string const& out) {
      return dir.write(fixture + "_" + std::to_string(n_++) + ".yaml",
                       "model: {path: " + fx + "model.onnx}\ndata: {inputs: " + fx + "input_0.npy, labels: " + fx +
                           "labels.npy}\nbatch: 4\nmicro_batches: 2\nsteps: 3\nlr: 0.1\nmomentum: 0.9\nseed: 2\n"
                           "pipeline: {planner: " +
                           planner + ", replication: false, memory: 1GiB, timeout: 20}\nexport: " + out + "\n" + extra);
    };
    std::string const one_out = dir.file(fixture + "_1.onnx");
    std::string const many_out = dir.file(fixture + "_" + std::to_string(ranks) + ".onnx");
    auto one = run(graphpipe() + " train --config " + cfg(one_out));
    ASSERT_EQ(one.code, 0) << one.output;
    auto r = run(mpirun(ranks) + graphpipe() + " train --launcher mpi --config " + cfg(many_out), 180);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("training on " + std::to_string(ranks) + " MPI ranks"), std::string::npos) << r.output;
    EXPECT_GT(compare_weights(many_out, one_out, 1e-4, 1e-6), 20);
    if (!log.empty()) {
      EXPECT_NE(r.output.find(log), std::string::npos) << r.output;
    }
  }
  int n_ = 0;
  std::string const plan = dir.file("p.json"), sched = dir.file("s.txt"), model = dir.file("m.onnx");
};

// Every zoo model on 2 ranks; the multi-branch MMT and the sequential transformer also on 4.
TEST_F(Mpi, TwoAndFourRanksTrainTheSameModelAsOneDevice) {
  for (std::string model : {"mmt", "transformer", "dlrm", "candle_uno", "inception", "mlp"}) {
    // Replicas run BatchNorm on their slice (as data parallelism does): stages only for Inception.
    std::string const extra = model == "inception" ? ", replication: false" : "";
    auto one = run(graphpipe() + " train --config " + config(model, extra, dir.file(model + "1.onnx")));
    ASSERT_EQ(one.code, 0) << one.output;
    for (int np : {2, 4}) {
      if (np == 4 && model != "mmt" && model != "transformer") continue;
      std::string const out = dir.file(model + std::to_string(np) + ".onnx");
      auto r = run(mpirun(np) + graphpipe() + " train --launcher mpi --config " + config(model, extra, out), 180);
      ASSERT_EQ(r.code, 0) << r.output;
      EXPECT_NE(r.output.find("training on " + std::to_string(np) + " MPI ranks"), std::string::npos) << r.output;
      EXPECT_GT(compare_weights(out, dir.file(model + "1.onnx"), 1e-4, 1e-6), 5) << model << " np " << np;
    }
  }
}

// A Hugging Face decoder as users export it (GPT-2 from torch 2.15's dynamo exporter).
TEST_F(Mpi, HuggingFaceGpt2OnTwoRanksPartitionedByGpp) { expect_fixture_on_ranks_as_one_device("gpt2_dynamo"); }

// Tied weights across stages on 2 ranks: Llama from the dynamo exporter reads its rotary cos/sin
// tables (initializers here, constants by default, trained when named under trainable:) in every
// layer, so both pipeline stages hold a copy; their gradients are summed over the ranks at STEP.
// On 4 balanced stages only ranks 0 and 2 hold copies: they sum among themselves, 1 and 3 take no
// part. GPT-2 with its tied head (the embedding read by the first and the last stage) on 2 ranks.
TEST_F(Mpi, TiedWeightsAcrossStagesOnTwoAndFourRanksTrainAsOneDevice) {
  std::string const tables = "trainable: [unsqueeze_14, unsqueeze_15]\n";
  expect_fixture_on_ranks_as_one_device("llama_dynamo", 2, "gpp", "summed at STEP", tables);
  expect_fixture_on_ranks_as_one_device("llama_dynamo", 4, "balanced", "summed at STEP over devices {0,2}", tables);
  expect_fixture_on_ranks_as_one_device("gpt2tied_dynamo", 2, "gpp", "summed at STEP");
}

// A checkpoint written by 2 ranks (weights and momentum) resumes on one device to the weights of
// an uninterrupted run. (SGD: Adam would blow the rounding noise of zero gradients, such as
// attention key biases, up to full-size updates.)
TEST_F(Mpi, CheckpointsGatherToRankZeroAndResumeOnOneDevice) {
  std::string const ck = dir.file("ck.gpck");
  auto cfg = [&](int steps, std::string const& out, bool with_ck) {
    return dir.write("ck" + std::to_string(n_++) + ".yaml",
                     "model: {zoo: mmt, size: tiny}\nbatch: 16\nmicro_batches: 4\nsteps: " + std::to_string(steps) +
                         "\nlr: 0.05\nmomentum: 0.9\nseed: 2\npipeline: {memory: 1GiB, timeout: 20}\n" +
                         (with_ck ? "checkpoint: {path: " + ck + ", resume: true}\n" : "") +
                         (out.empty() ? "" : "export: " + out + "\n"));
  };
  auto whole = run(graphpipe() + " train --config " + cfg(4, dir.file("whole.onnx"), false));
  ASSERT_EQ(whole.code, 0) << whole.output;
  auto first = run(mpirun(2) + graphpipe() + " train --launcher mpi --config " + cfg(2, "", true), 120);
  ASSERT_EQ(first.code, 0) << first.output;
  ASSERT_TRUE(std::filesystem::exists(ck));
  auto rest = run(graphpipe() + " train --config " + cfg(4, dir.file("resumed.onnx"), true));
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;
  EXPECT_GT(compare_weights(dir.file("resumed.onnx"), dir.file("whole.onnx"), 1e-4, 1e-6), 10);
}

TEST_F(Mpi, AKilledRankEndsTheJob) {
  write_plan();
  int const line = schedule_line(sched, 1, schedule::Op::kBackward, 1);
  auto r = run(mpirun(2) + graphpipe() + " train --launcher mpi --inject-fault 1:" + std::to_string(line) +
                   ":exit --config " + config("mmt", ", timeout: 10, plan: " + plan + ", schedule: " + sched),
               90);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_LT(r.seconds, 60.0);
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;  // mpirun names the killed rank
  EXPECT_NE(r.output.find("signal 9"), std::string::npos) << r.output;
}

// Loss scaling under MPI: an overflow injected on rank 1 skips the step on both ranks (the flag is
// reduced over every rank before STEP), the scale halves, and training goes on.
TEST_F(Mpi, AnInjectedOverflowSkipsTheStepOnEveryRank) {
  write_plan();
  int const line = schedule_line(sched, 1, schedule::Op::kBackward, 0);
  std::string const cfg = dir.write("scaled.yaml",
                                    "model: {zoo: mmt, size: tiny}\nbatch: 16\nmicro_batches: 4\nsteps: 3\nlr: 0.05\n"
                                    "seed: 2\nlog_interval: 1\nloss_scale: {init: 1024}\npipeline: {memory: 1GiB, "
                                    "timeout: 20, plan: " +
                                        plan + ", schedule: " + sched + "}\n");
  auto r = run(mpirun(2) + graphpipe() + " train --launcher mpi --inject-fault 1:" + std::to_string(line) +
                   ":overflow --config " + cfg,
               90);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 1/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scale 512 (1 step skipped)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
}

TEST_F(Mpi, AWrongHeaderNamesBothSides) {
  write_plan();
  int const line = schedule_line(sched, 0, schedule::Op::kSend, 0);
  auto r = run(mpirun(2) + graphpipe() + " train --launcher mpi --inject-fault 0:" + std::to_string(line) +
                   ":header --config " + config("mmt", ", plan: " + plan + ", schedule: " + sched),
               90);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("from d0 but d1 expects"), std::string::npos) << r.output;
}

TEST_F(Mpi, RanksThatDisagreeOnTheRunAreRefused) {
  std::string const a = config("mmt", ""), b = config("mmt", ", policy: gpipe");
  auto r = run("mpirun --oversubscribe -np 1 " + graphpipe() + " train --launcher mpi --devices 2 --config " + a +
                   " : -np 1 " + graphpipe() + " train --launcher mpi --devices 2 --config " + b,
               90);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ranks 1 run a different plan, schedule or config than rank 0"), std::string::npos)
      << r.output;
}

TEST_F(Mpi, MoreRanksThanThePlanHasDevices) {
  write_plan();
  auto r = run(mpirun(3) + graphpipe() + " train --launcher mpi --config " + config("mmt", ", plan: " + plan), 90);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("the plan is for 2 devices, not 3 ranks"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gp::testing
