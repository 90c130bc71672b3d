#include <spdlog/spdlog.h>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "partition/cluster.h"

namespace gp::python {

int64_t parse_size(std::string const& text, char const* what) {
  auto bytes = partition::parse_bytes(text);
  if (!bytes.is_ok() || *bytes <= 0)
    throw Error(std::string(what) + " '" + text + "' is not a size (write e.g. 8GiB, 512MiB or a number of bytes)");
  return *bytes;
}

void bind_errors(nb::module_& m) {
  nb::exception<Error>(m, "Error", PyExc_RuntimeError);
  // What the library logs on stderr (the CLI's info lines: plans, training setup, warnings).
  m.def(
      "set_log_level",
      [](std::string const& level) {
        spdlog::level::level_enum const l = spdlog::level::from_str(level);
        if (l == spdlog::level::off && level != "off")
          throw Error("log level '" + level + "' is not one of debug, info, warning, error, off");
        spdlog::set_level(l);
      },
      nb::arg("level"));
}

}  // namespace gp::python
