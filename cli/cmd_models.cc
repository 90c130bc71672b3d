#include "cli/commands.h"

namespace gp::cli {

void add_models_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("models", "List or export the bundled model generators (not implemented yet: issue #2)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe models' is not implemented yet (issue #2)"); }});
}

}  // namespace gp::cli
