// Subcommands of the graphpipe binary. Each add_*_command registers its CLI11 subcommand and the
// function that runs it; main() runs the chosen one and is the only place that turns a Status into
// a message and an exit code.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "graph/onnx_import.h"

namespace gp::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<Status()> run;
};
using CommandList = std::vector<Command>;

// The root's --max-memory ("16GiB"; empty: the machine's available memory), set by main().
void set_max_memory_flag(std::string text);
// The root's --precision ("bf16"; empty: not given), set by main().
void set_precision_flag(std::string text);
Result<std::optional<graph::Precision>> precision_flag();
// The root's --no-fusion (false: BatchNorm, Add and Relu stay apart), set by main().
void set_fusion_flag(bool fuse);
// ImportOptions for a model a command loads: its memory limit from --max-memory, its precision
// from --precision (fp32 when not given), its BatchNorm fusions unless --no-fusion.
Result<graph::ImportOptions> import_options();

void add_inspect_command(CLI::App& root, CommandList& commands);
void add_models_command(CLI::App& root, CommandList& commands);
void add_partition_command(CLI::App& root, CommandList& commands);
void add_compare_command(CLI::App& root, CommandList& commands);
void add_schedule_command(CLI::App& root, CommandList& commands);
void add_simulate_command(CLI::App& root, CommandList& commands);
void add_train_command(CLI::App& root, CommandList& commands);
void add_profile_command(CLI::App& root, CommandList& commands);
void add_ops_command(CLI::App& root, CommandList& commands);

}  // namespace gp::cli
