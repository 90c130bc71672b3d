// Runs the real graphpipe binary on bad input: every case must exit non-zero with exactly one
// line on stderr that names the problem, and leave no output file behind.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string slurp(fs::path const& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gp_cli_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun run(std::string const& args) {
    fs::path const out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    std::string const cmd = std::string(GP_GRAPHPIPE_BIN) + " " + args + " >" + out.string() + " 2>" + err.string();
    int const status = std::system(cmd.c_str());
    CliRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    fs::remove(out);
    fs::remove(err);
    return r;
  }

  fs::path write(std::string const& name, std::string const& text) {
    fs::path const p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  // The failure contract: non-zero exit, one line on stderr containing `needle`.
  static void expect_one_line_error(CliRun const& r, std::string const& needle) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr was: " << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "expected exactly one line, got: " << r.err;
  }

  fs::path dir_;
};

TEST_F(CliTest, VersionAndHelp) {
  CliRun v = run("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("graphpipe"), std::string::npos);
  CliRun h = run("--help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("Examples:"), std::string::npos);
}

TEST_F(CliTest, MissingOnnxFile) {
  expect_one_line_error(run("inspect " + (dir_ / "nope.onnx").string()), "nope.onnx");
}

TEST_F(CliTest, CorruptOnnxFile) {
  fs::path const p = write("garbage.onnx", "this is not a protobuf \x01\x02\x03");
  CliRun r = run("inspect " + p.string());
  expect_one_line_error(r, "garbage.onnx");
}

TEST_F(CliTest, ModelOverMaxMemoryIsRefusedWithTheFigure) {
  fs::path const model = dir_ / "mlp.onnx";
  ASSERT_EQ(run("models export mlp --size small --out " + model.string()).exit_code, 0);
  expect_one_line_error(run("inspect " + model.string() + " --max-memory 1MiB"),
                        "more than the memory limit of 1.0 MiB (--max-memory");
  EXPECT_EQ(run("inspect " + model.string() + " --max-memory 1GiB").exit_code, 0);
  expect_one_line_error(run("inspect " + model.string() + " --max-memory lots"), "--max-memory 'lots' is not a size");
  fs::path const config = write("train.yaml", "model: " + model.string() + "\nbatch: 64\nsteps: 1\n");
  expect_one_line_error(run("train --config " + config.string() + " --max-memory 8MiB"),
                        "needs about");  // weights load, but training them needs more
}

TEST_F(CliTest, DotOutputIsAtomic) {
  fs::path const model = dir_ / "mlp.onnx";
  ASSERT_EQ(run("models export mlp --size tiny --out " + model.string()).exit_code, 0);
  expect_one_line_error(run("inspect " + model.string() + " --dot " + (dir_ / "no" / "g.dot").string()),
                        "the folder '" + (dir_ / "no").string() + "' does not exist");
  fs::path const dot = dir_ / "g.dot";
  EXPECT_EQ(run("inspect " + model.string() + " --dot " + dot.string()).exit_code, 0);
  EXPECT_NE(slurp(dot).find("digraph"), std::string::npos);
}

TEST_F(CliTest, PartitionImpossibleMemoryWritesNothing) {
  fs::path const model = dir_ / "mlp.onnx";
  ASSERT_EQ(run("models export mlp --size small --out " + model.string()).exit_code, 0);
  fs::path const plan = dir_ / "plan.json";
  CliRun r = run("partition " + model.string() + " --devices 2 --memory 1MiB -o " + plan.string());
  expect_one_line_error(r, "memory");
  EXPECT_FALSE(fs::exists(plan));
}

TEST_F(CliTest, PartitionChainObjective) {
  fs::path const model = dir_ / "mlp.onnx";
  ASSERT_EQ(run("models export mlp --size tiny --out " + model.string()).exit_code, 0);
  std::string const base = "partition " + model.string() + " --devices 2 --memory 16GiB --batch 8 --planner piper";
  CliRun own = run(base + " --chain-objective bottleneck");
  EXPECT_EQ(own.exit_code, 0) << own.err;
  expect_one_line_error(run(base + " --chain-objective fastest"), "chain-objective");
}

TEST_F(CliTest, PartitionThenSimulate) {
  fs::path const model = dir_ / "mmt.onnx";
  ASSERT_EQ(run("models export mmt --size tiny --out " + model.string()).exit_code, 0);
  fs::path const plan = dir_ / "plan.json";
  CliRun p = run("partition " + model.string() + " --devices 4 --memory 16GiB --batch 32 -o " + plan.string());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("samples/s"), std::string::npos);
  ASSERT_TRUE(fs::exists(plan));
  CliRun s = run("simulate " + plan.string());
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("samples/s"), std::string::npos);
}

// A plan names the ops of the model as it was loaded: partitioned with the BatchNorm fusions (the
// default), it cannot place the Relus --no-fusion keeps apart, and the error names that setting.
TEST_F(CliTest, APlanMadeWithTheFusionsIsRefusedByATrainRunWithout) {
  fs::path const model = dir_ / "inception.onnx";
  ASSERT_EQ(run("models export inception --size tiny --out " + model.string()).exit_code, 0);
  fs::path const plan = dir_ / "plan.json";
  CliRun p =
      run("partition " + model.string() + " --devices 2 --memory 4GiB --batch 8 --micro-batch 4 -o " + plan.string());
  ASSERT_EQ(p.exit_code, 0) << p.err;
  fs::path const cfg = write("train.yaml", "model: " + model.string() +
                                               "\nbatch: 8\nmicro_batches: 2\nsteps: 1\n"
                                               "data: {kind: synthetic, samples: 8}\npipeline: {plan: " +
                                               plan.string() + "}\n");
  expect_one_line_error(run("--no-fusion train --devices 2 --config " + cfg.string()), "--no-fusion setting");
  CliRun t = run("train --devices 2 --config " + cfg.string());
  EXPECT_EQ(t.exit_code, 0) << t.err;
}

// cuda_graphs where it cannot work: a one-line error naming the fix, before any training.
TEST_F(CliTest, CudaGraphsOnTheCpuOrInAPipelineAreRefusedWithTheFix) {
  fs::path const cfg = write("graphs.yaml", "model: {zoo: mlp, size: tiny}\nbatch: 8\nsteps: 2\ncuda_graphs: true\n");
  expect_one_line_error(run("train --config " + cfg.string()), "--backend cuda");
  expect_one_line_error(run("train --devices 2 --config " + cfg.string()), "train with --devices 1");
}

TEST_F(CliTest, MalformedPlanJson) {
  fs::path const plan = write("plan.json", "{\"version\": 1, \"stages\": [");
  expect_one_line_error(run("simulate " + plan.string()), "plan.json");
}

TEST_F(CliTest, MalformedSchedule) {
  fs::path const model = dir_ / "mlp.onnx";
  ASSERT_EQ(run("models export mlp --size tiny --out " + model.string()).exit_code, 0);
  fs::path const plan = dir_ / "plan.json";
  ASSERT_EQ(run("partition " + model.string() + " --devices 2 --memory 16GiB --batch 8 -o " + plan.string()).exit_code,
            0);
  fs::path const sched = write("bad.txt", "this is not a schedule\n");
  expect_one_line_error(run("schedule --check " + sched.string() + " --plan " + plan.string()), "bad.txt");
}

TEST_F(CliTest, ConfigWithUnknownKey) {
  fs::path const cfg = write("train.yaml", "model: {zoo: mlp, size: tiny}\nlearning_rat: 0.1\nsteps: 1\n");
  expect_one_line_error(run("train --config " + cfg.string()), "learning_rat");
}

TEST_F(CliTest, UnknownModelName) {
  fs::path const out = dir_ / "x.onnx";
  CliRun r = run("models export resnet9000 --size tiny --out " + out.string());
  expect_one_line_error(r, "resnet9000");
  EXPECT_FALSE(fs::exists(out));
}

// The README's operator table is `graphpipe ops --markdown` (regenerate it with that command).
TEST_F(CliTest, ReadmeListsTheOpTable) {
  CliRun r = run("ops --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string const readme = slurp(fs::path(GP_SOURCE_DIR) / "README.md");
  std::string const begin = "<!-- ops:begin (graphpipe ops --markdown) -->\n", end = "<!-- ops:end -->";
  auto const b = readme.find(begin), e = readme.find(end);
  ASSERT_NE(b, std::string::npos) << "README.md lacks the marker " << begin;
  ASSERT_NE(e, std::string::npos) << "README.md lacks the marker " << end;
  EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), r.out)
      << "README.md's operator table is stale: paste the output of 'graphpipe ops --markdown' between the markers";
}

}  // namespace

// `graphpipe ops` says per operator which backends run it; the CUDA column comes from the CUDA
// kernel table (static), so it is right without a GPU, and a build without CUDA says so.
TEST_F(CliTest, OpsListsWhichBackendsRunEachOperator) {
  CliRun r = run("ops");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  bool const cuda = r.out.find("run on CUDA too") != std::string::npos;
  EXPECT_TRUE(cuda || r.out.find("this build has no CUDA backend") != std::string::npos) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  int both = 0, cpu_only = 0;
  while (std::getline(lines, line)) {
    if (line.find(" CPU, CUDA") != std::string::npos) ++both;
    if (line.find(" CPU (not on CUDA yet)") != std::string::npos) ++cpu_only;
    if (line.rfind("Conv ", 0) == 0) {
      EXPECT_EQ(line.find("CUDA") != std::string::npos, cuda) << line;
    }
  }
  if (cuda) {
    EXPECT_GT(both, 0);
    EXPECT_NE(r.out.find("; " + std::to_string(both) + " run on CUDA too"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(both + cpu_only, 0);
  }
}
