#include "cli/commands.h"

namespace gp::cli {

void add_profile_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("profile", "Measure per-op costs on a backend (not implemented yet: issue #5)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe profile' is not implemented yet (issue #5)"); }});
}

}  // namespace gp::cli
