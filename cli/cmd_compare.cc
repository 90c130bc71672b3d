#include "cli/commands.h"

namespace gp::cli {

void add_compare_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("compare", "Compare GPP with sequential planners (not implemented yet: issue #3)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe compare' is not implemented yet (issue #3)"); }});
}

}  // namespace gp::cli
