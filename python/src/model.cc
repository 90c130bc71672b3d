// graphpipe.Model's C++ side: a model read and imported once, and what `graphpipe inspect` says of it.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "core/file_io.h"
#include "exec/train_config.h"
#include "graph/graph_summary.h"

namespace gp::python {
namespace {

graph::ImportOptions import_options(int64_t max_memory, bool fusion) {
  graph::ImportOptions options;
  // As the CLI: by default the machine's available memory bounds what an untrusted model may allocate.
  options.max_memory_bytes = max_memory > 0 ? max_memory : available_memory_bytes();
  options.fuse = fusion;  // the CLI's root --no-fusion turns it off
  return options;
}

Model load(session::ModelFile file, int64_t max_memory, bool fusion) {
  auto graph = value_or_raise(session::load_graph(file, import_options(max_memory, fusion)));
  return Model{std::move(file), std::make_shared<graph::OpGraph const>(std::move(graph)), fusion};
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<Model>(m, "Model")
      .def_static(
          "from_file",
          [](std::string const& path, int64_t max_memory, bool fusion) {
            return load(value_or_raise(session::read_model_file(path)), max_memory, fusion);
          },
          nb::arg("path"), nb::arg("max_memory") = 0, nb::arg("fusion") = true, "Reads and imports an ONNX file")
      .def_static(
          "from_bytes",
          [](nb::bytes bytes, std::string name, int64_t max_memory, bool fusion) {
            return load(session::model_from_bytes(std::string(bytes.c_str(), bytes.size()), std::move(name)),
                        max_memory, fusion);
          },
          nb::arg("data"), nb::arg("name"), nb::arg("max_memory") = 0, nb::arg("fusion") = true,
          "Imports a serialized ONNX model")
      .def_static(
          "from_zoo",
          [](std::string name, std::string size, uint64_t seed, int64_t max_memory, bool fusion) {
            exec::ModelConfig config;
            config.zoo = std::move(name);
            config.size = std::move(size);
            return load(value_or_raise(session::read_model(config, seed)), max_memory, fusion);
          },
          nb::arg("name"), nb::arg("size") = "tiny", nb::arg("seed") = 0, nb::arg("max_memory") = 0,
          nb::arg("fusion") = true, "Builds a model of graphpipe's zoo (graphpipe models list)")
      .def_prop_ro("name", [](Model const& m) { return m.file.name; })
      .def_prop_ro("path", [](Model const& m) { return m.file.path; })
      .def_prop_ro("fusion", [](Model const& m) { return m.fused; })
      .def_prop_ro("onnx_bytes", [](Model const& m) { return nb::bytes(m.file.bytes.data(), m.file.bytes.size()); })
      .def(
          "inspect_json",
          [](Model const& m) { return graph::inspect_json(graph::summarize(*m.graph), m.graph->weight_choices()); },
          "`graphpipe inspect --json`: the summary and every initializer (whether it trains, and why)");
  m.def("parse_size", &parse_size, nb::arg("text"), nb::arg("what") = "size");
}

}  // namespace gp::python
