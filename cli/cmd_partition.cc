#include "cli/commands.h"

namespace gp::cli {

void add_partition_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("partition", "Partition a model into a graph of pipeline stages (not implemented yet: issue #3)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe partition' is not implemented yet (issue #3)"); }});
}

}  // namespace gp::cli
