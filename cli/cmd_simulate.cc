#include "cli/commands.h"

namespace gp::cli {

void add_simulate_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("simulate", "Simulate a plan's schedule (not implemented yet: issue #4)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe simulate' is not implemented yet (issue #4)"); }});
}

}  // namespace gp::cli
