#include "bindings.h"
#include "partition/cluster.h"

namespace gp::python {

int64_t parse_size(std::string const& text, char const* what) {
  auto bytes = partition::parse_bytes(text);
  if (!bytes.is_ok() || *bytes <= 0)
    throw Error(std::string(what) + " '" + text + "' is not a size (write e.g. 8GiB, 512MiB or a number of bytes)");
  return *bytes;
}

void bind_errors(nb::module_& m) { nb::exception<Error>(m, "Error", PyExc_RuntimeError); }

}  // namespace gp::python
