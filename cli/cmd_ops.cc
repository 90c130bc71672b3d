// graphpipe ops: the operators graphpipe imports and trains, from the op table (graph/ops/registry)
// and the CPU backend's kernel table. `--markdown` prints the README's table.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "exec/session/registry.h"
#include "graph/ops/registry.h"

namespace gp::cli {
namespace {

struct OpsOptions {
  bool markdown = false;
};

Status run_ops(OpsOptions const& options) {
  std::vector<std::string> const cpu = session::cpu_op_types();
  auto on_cpu = [&](std::string const& t) { return std::find(cpu.begin(), cpu.end(), t) != cpu.end(); };
  std::map<std::string, std::vector<std::string>> by_family;  // family -> op types, sorted
  std::vector<std::string> missing;
  for (auto const& [type, def] : graph::ops::op_table()) {
    by_family[def.family].push_back(type);
    if (def.infer != nullptr && !on_cpu(type)) missing.push_back(type);
  }
  if (!missing.empty()) {
    std::string list;
    for (auto const& m : missing) list += " " + m;
    return internal_error("ops imported without CPU kernels:" + list);
  }
  std::size_t const total = graph::ops::op_table().size();
  if (options.markdown) {
    std::printf("| family | operators |\n| --- | --- |\n");
    for (auto const& [family, types] : by_family) {
      std::string row;
      for (auto const& t : types) row += (row.empty() ? "" : ", ") + t;
      std::printf("| %s | %s |\n", family == "folded" ? "folded at import (static inputs only)" : family.c_str(),
                  row.c_str());
    }
    std::printf("\n%zu operator types.\n", total);
    return Status::ok();
  }
  std::printf("%-28s %-11s %s\n", "operator", "family", "runs");
  for (auto const& [type, def] : graph::ops::op_table())
    std::printf("%-28s %-11s %s\n", type.c_str(), def.family.c_str(),
                def.infer == nullptr ? "folded at import time (static inputs only)" : "CPU forward and backward");
  std::printf("%zu operator types\n", total);
  return Status::ok();
}

}  // namespace

void add_ops_command(CLI::App& root, CommandList& commands) {
  auto options = std::make_shared<OpsOptions>();
  auto* app = root.add_subcommand("ops", "List the ONNX operators graphpipe imports and trains");
  app->add_flag("--markdown", options->markdown, "Print the README's table (by family)");
  commands.push_back({app, [options] { return run_ops(*options); }});
}

}  // namespace gp::cli
