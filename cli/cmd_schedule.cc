#include "cli/commands.h"

namespace gp::cli {

void add_schedule_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("schedule", "Build or check a micro-batch schedule (not implemented yet: issue #4)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe schedule' is not implemented yet (issue #4)"); }});
}

}  // namespace gp::cli
