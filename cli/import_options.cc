// --max-memory: the one memory limit every command that loads a model applies to it.
#include <string>

#include "cli/commands.h"
#include "core/file_io.h"
#include "partition/cluster.h"

namespace gp::cli {
namespace {

std::string& max_memory_text() {
  static std::string text;
  return text;
}

}  // namespace

void set_max_memory_flag(std::string text) { max_memory_text() = std::move(text); }

Result<graph::ImportOptions> import_options() {
  graph::ImportOptions options;
  if (max_memory_text().empty()) {
    options.max_memory_bytes = available_memory_bytes();  // 0 (no limit) where /proc/meminfo is missing
  } else {
    auto bytes = partition::parse_bytes(max_memory_text());
    if (!bytes.is_ok() || *bytes <= 0)
      return invalid_argument("--max-memory '" + max_memory_text() + "' is not a size (write e.g. 8GiB or 512MiB)");
    options.max_memory_bytes = *bytes;
  }
  return options;
}

}  // namespace gp::cli
