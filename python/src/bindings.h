// The parts of graphpipe._graphpipe (one file each) and what they share: C++ errors become
// graphpipe.Error carrying the one-line message the CLI prints.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "core/status.h"
#include "exec/session/model_file.h"
#include "graph/op_graph.h"

namespace gp::python {

namespace nb = nanobind;

// Raised as graphpipe.Error (a RuntimeError); the message is the Status's one line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check(Status const& s) {
  if (!s.is_ok()) throw Error(s.message());
}
template <typename T>
T value_or_raise(Result<T> r) {
  if (!r.is_ok()) throw Error(r.status().message());
  return std::move(r).value();
}

// A model loaded once (bytes and graph): every function that takes a model plans or trains this
// graph, never a re-import.
struct Model {
  session::ModelFile file;
  std::shared_ptr<graph::OpGraph const> graph;
  bool fused = true;  // imported with the fusions (graph::ImportOptions::fuse)
};

// A size in bytes from "8GiB" / "512MiB" or a number; `what` names the argument in errors.
int64_t parse_size(std::string const& text, char const* what);

void bind_errors(nb::module_& m);
void bind_model(nb::module_& m);
void bind_planning(nb::module_& m);
void bind_training(nb::module_& m);

}  // namespace gp::python
