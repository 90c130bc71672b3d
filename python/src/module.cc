// graphpipe._graphpipe: the extension module. Each part registers its classes and functions.
#include <nanobind/nanobind.h>

#include "bindings.h"

NB_MODULE(_graphpipe, m) {
  m.doc() = "graphpipe's C++ library: load, plan, schedule, simulate, profile and train";
  m.attr("__version__") = GP_VERSION;
  gp::python::bind_errors(m);
  gp::python::bind_model(m);
  gp::python::bind_planning(m);
  gp::python::bind_training(m);
}
