// `graphpipe models`: the real command definitions, parsed and run in-process.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli/commands.h"
#include "graph/onnx_import.h"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  gp::Status status;
  std::string output;  // stdout of the command
};

// Parses and runs `graphpipe <args>` in-process with the real command definitions.
CliRun graphpipe(std::vector<std::string> args) {
  CLI::App root{"graphpipe"};
  gp::cli::CommandList commands;
  gp::cli::add_models_command(root, commands);
  std::vector<char const*> argv{"graphpipe"};
  for (auto const& a : args) argv.push_back(a.c_str());
  CliRun run;
  try {
    root.parse(static_cast<int>(argv.size()), argv.data());
  } catch (CLI::ParseError const& e) {
    run.status = gp::invalid_argument(e.what());
    return run;
  }
  for (auto const& cmd : commands) {
    if (!cmd.app->parsed()) continue;
    testing::internal::CaptureStdout();
    run.status = cmd.run();
    run.output = testing::internal::GetCapturedStdout();
    return run;
  }
  run.status = gp::invalid_argument("no command ran");
  return run;
}

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("gp_models_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ModelsCli, ListShowsEveryModelWithParameters) {
  CliRun r = graphpipe({"models", "list"});
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  for (char const* name : {"mmt", "dlrm", "candle_uno", "inception", "transformer", "mlp"}) {
    EXPECT_NE(r.output.find(std::string("\n") + name + " "), std::string::npos) << name << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("410.9M"), std::string::npos) << r.output;  // MMT paper
  CliRun j = graphpipe({"models", "list", "--json"});
  ASSERT_TRUE(j.status.is_ok()) << j.status.to_string();
  EXPECT_NE(j.output.find("\"paper\": 749945282"), std::string::npos) << j.output;  // DLRM paper
}

TEST(ModelsCli, ExportWritesAnImportableModel) {
  fs::path const dir = temp_dir();
  fs::path const out = dir / "mmt.onnx";
  CliRun r =
      graphpipe({"models", "export", "mmt", "--size", "tiny", "--opset", "13", "--seed", "4", "--out", out.string()});
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_NE(r.output.find("wrote"), std::string::npos);
  auto g = gp::graph::load_onnx(out.string());
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->param_count(), 74474);

  fs::path const paper = dir / "dlrm_paper.onnx";
  CliRun p = graphpipe({"models", "export", "dlrm", "--size", "paper", "--shape-only", "--out", paper.string()});
  ASSERT_TRUE(p.status.is_ok()) << p.status.to_string();
  EXPECT_NE(p.output.find("shape only"), std::string::npos);
  auto gp = gp::graph::load_onnx(paper.string(), {.load_weights = false});
  ASSERT_TRUE(gp.is_ok()) << gp.status().to_string();
  EXPECT_EQ(gp->param_count(), 749945282);
  fs::remove_all(dir);
}

TEST(ModelsCli, ExportResizesTheTransformer) {
  fs::path const dir = temp_dir();
  fs::path const out = dir / "t.onnx";
  CliRun r = graphpipe({"models", "export", "transformer", "--size", "paper", "--layers", "96", "--hidden", "4096",
                        "--shape-only", "--out", out.string()});
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_NE(r.output.find("transformer paper (layers 96 hidden 4096)"), std::string::npos) << r.output;
  auto g = gp::graph::load_onnx(out.string(), {.load_weights = false});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  // 96 layers of width 4096 (64 heads of 64, FFN 16384): input projection, layers, final LN, head.
  int64_t const d = 4096, f = 4 * d;
  int64_t const layer = 4 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d);
  EXPECT_EQ(g->param_count(), (1024 * d + d) + 96 * layer + 2 * d + (d * d + d) + (d * 1000 + 1000));

  CliRun bad = graphpipe(
      {"models", "export", "transformer", "--hidden", "100", "--heads", "3", "--out", (dir / "x.onnx").string()});
  EXPECT_EQ(bad.status.code(), gp::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status.message().find("hidden 100 is not divisible by 3 heads"), std::string::npos)
      << bad.status.message();
  CliRun fixed = graphpipe({"models", "export", "mlp", "--layers", "4", "--out", (dir / "y.onnx").string()});
  EXPECT_NE(fixed.status.message().find("model 'mlp' has a fixed shape"), std::string::npos) << fixed.status.message();
  EXPECT_FALSE(fs::exists(dir / "x.onnx") || fs::exists(dir / "y.onnx"));
  fs::remove_all(dir);
}

TEST(ModelsCli, BadNameSizeOrFolderFailsCleanly) {
  fs::path const dir = temp_dir();
  CliRun name = graphpipe({"models", "export", "resnet", "--out", (dir / "x.onnx").string()});
  EXPECT_EQ(name.status.code(), gp::StatusCode::kNotFound);
  EXPECT_NE(name.status.message().find("unknown model 'resnet': the zoo has mmt, dlrm"), std::string::npos)
      << name.status.message();
  CliRun size = graphpipe({"models", "export", "mlp", "--size", "huge", "--out", (dir / "x.onnx").string()});
  EXPECT_EQ(size.status.code(), gp::StatusCode::kInvalidArgument);
  EXPECT_NE(size.status.message().find("unknown model size 'huge': use tiny, small or paper"), std::string::npos)
      << size.status.message();
  CliRun folder = graphpipe({"models", "export", "mlp", "--out", (dir / "missing" / "x.onnx").string()});
  EXPECT_FALSE(folder.status.is_ok());
  EXPECT_NE(folder.status.message().find("does not exist"), std::string::npos) << folder.status.message();
  EXPECT_TRUE(fs::is_empty(dir)) << "nothing may be written on error";
  fs::remove_all(dir);
}

}  // namespace
