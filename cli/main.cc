#include <cstdio>
#include <exception>

#include <spdlog/spdlog.h>

#include "cli/commands.h"

#ifndef GP_VERSION
#define GP_VERSION "0.0.0"
#endif

namespace {

char const* kFooter = R"(Examples:
  graphpipe models export mmt --size tiny --out mmt.onnx
  graphpipe inspect mmt.onnx
  graphpipe partition mmt.onnx --devices 8 --memory 16GiB -o plan.json
  graphpipe simulate plan.json
  graphpipe train --config train.yaml

Run 'graphpipe <command> --help' for the options of a command.)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"graphpipe: graph pipeline parallel training (partition, schedule, simulate, train)", "graphpipe"};
  app.set_version_flag("--version", std::string("graphpipe ") + GP_VERSION);
  app.footer(kFooter);
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  std::string max_memory;
  app.add_option("--max-memory", max_memory,
                 "Refuse models whose weights (and one sample's activations) need more memory than this, "
                 "e.g. 8GiB (default: the machine's available memory)");
  std::string precision;
  app.add_option("--precision", precision,
                 "Mixed precision of every model a command loads: fp32 (default), bf16 or fp16 (float32 master "
                 "weights, matmuls and convolutions in 16 bits; fp16 trains on --backend cuda only, with dynamic "
                 "loss scaling); train also reads it from the config's 'precision'");
  bool no_fusion = false;
  app.add_flag("--no-fusion", no_fusion,
               "Keep every model a command loads as exported: by default a Relu after a BatchNorm, and a residual "
               "block's BatchNorm -> Add -> Relu, are fused into the BatchNorm, and a Transpose that moves a MatMul "
               "operand's last axis next to last (attention's K^T) and a constant scale of an operand or of the "
               "product into the MatMul. To compare, or to cut a pipeline between them");
  app.fallthrough();  // root options may follow the subcommand

  gp::cli::CommandList commands;
  gp::cli::add_inspect_command(app, commands);
  gp::cli::add_models_command(app, commands);
  gp::cli::add_partition_command(app, commands);
  gp::cli::add_compare_command(app, commands);
  gp::cli::add_schedule_command(app, commands);
  gp::cli::add_simulate_command(app, commands);
  gp::cli::add_train_command(app, commands);
  gp::cli::add_profile_command(app, commands);
  gp::cli::add_ops_command(app, commands);

  try {
    app.parse(argc, argv);
  } catch (CLI::ParseError const& e) {
    if (e.get_exit_code() == 0) return app.exit(e);                         // --help, --version
    std::fprintf(stderr, "graphpipe: error: %s (see --help)\n", e.what());  // one line, like every other error
    return 2;
  }
  gp::cli::set_max_memory_flag(max_memory);
  gp::cli::set_precision_flag(precision);
  gp::cli::set_fusion_flag(!no_fusion);
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_pattern("%v");

  for (auto const& cmd : commands) {
    if (!cmd.app->parsed()) continue;
    gp::Status status;
    try {
      status = cmd.run();
    } catch (std::exception const& e) {
      status = gp::internal_error(std::string("unexpected exception: ") + e.what());
    }
    if (!status.is_ok()) {
      std::string name = cmd.app->get_name();  // "models export" for nested subcommands
      for (CLI::App const* p = cmd.app->get_parent(); p != nullptr && p->get_parent() != nullptr; p = p->get_parent())
        name = p->get_name() + " " + name;
      std::fprintf(stderr, "graphpipe %s: error: %s\n", name.c_str(), status.message().c_str());
      return status.code() == gp::StatusCode::kInvalidArgument ? 2 : 1;
    }
    return 0;
  }
  std::fprintf(stderr, "graphpipe: error: no command given (try --help)\n");
  return 2;
}
