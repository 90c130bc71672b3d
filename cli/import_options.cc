// --max-memory, --precision and --no-fusion: the memory limit, the mixed precision and the
// import's fusions (BatchNorm with its Relu and residual Add, a MatMul's transposed operand and
// scale) every command that loads a model applies to it.
#include <optional>
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

std::string& precision_text() {
  static std::string text;
  return text;
}

bool& fusion_on() {
  static bool on = true;
  return on;
}

}  // namespace

void set_fusion_flag(bool fuse) { fusion_on() = fuse; }
void set_max_memory_flag(std::string text) { max_memory_text() = std::move(text); }
void set_precision_flag(std::string text) { precision_text() = std::move(text); }

Result<std::optional<graph::Precision>> precision_flag() {
  if (precision_text().empty()) return std::optional<graph::Precision>{};
  auto p = graph::parse_precision(precision_text());
  if (!p.is_ok()) return invalid_argument("--precision: " + p.status().message());
  return std::optional<graph::Precision>{*p};
}

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
  ASSIGN_OR_RETURN(std::optional<graph::Precision> const precision, precision_flag());
  if (precision) options.precision = *precision;
  options.fuse = fusion_on();
  return options;
}

}  // namespace gp::cli
