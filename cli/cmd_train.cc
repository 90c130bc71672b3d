#include "cli/commands.h"

namespace gp::cli {

void add_train_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("train", "Train a model (not implemented yet: issue #5)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe train' is not implemented yet (issue #5)"); }});
}

}  // namespace gp::cli
