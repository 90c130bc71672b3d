#include "cli/commands.h"

namespace gp::cli {

void add_inspect_command(CLI::App& root, CommandList& commands) {
  auto* app = root.add_subcommand("inspect", "Summarise an ONNX model (not implemented yet: issue #2)");
  app->allow_extras();
  commands.push_back({app, [] { return unsupported("'graphpipe inspect' is not implemented yet (issue #2)"); }});
}

}  // namespace gp::cli
