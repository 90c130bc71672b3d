#include "exec/session/model_file.h"

#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/hash.h"
#include "graph/onnx_export.h"
#include "models/zoo.h"

namespace gp::session {

Result<ModelFile> read_model_file(std::string const& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return not_found(path + ": no such model file (check the path; `graphpipe models export` writes examples)");
  ModelFile m;
  m.name = m.path = path;
  ASSIGN_OR_RETURN(m.bytes, read_whole_file(path, "model"));
  m.hash = fnv1a(m.bytes);
  return m;
}

ModelFile model_from_bytes(std::string bytes, std::string name) {
  ModelFile m;
  m.name = std::move(name);
  m.bytes = std::move(bytes);
  m.hash = fnv1a(m.bytes);
  return m;
}

Result<ModelFile> read_model(exec::ModelConfig const& config, uint64_t seed) {
  if (!config.path.empty()) return read_model_file(config.path);
  ASSIGN_OR_RETURN(models::Size size, models::parse_size(config.size));
  ASSIGN_OR_RETURN(models::ZooModel zoo, models::build(config.zoo, size, models::BuildOptions{.seed = seed}));
  ModelFile m;
  m.name = "zoo " + config.zoo + " (" + config.size + ")";
  ASSIGN_OR_RETURN(m.bytes, zoo.builder.serialize());
  m.hash = fnv1a(m.bytes);
  return m;
}

Result<graph::OpGraph> load_graph(ModelFile const& model, graph::ImportOptions const& options) {
  return graph::load_onnx_bytes(model.bytes, model.name, options, model.path);
}

Status check_weights_loaded(graph::OpGraph const& graph, std::string const& name) {
  for (auto const& t : graph.tensors())
    if (t.role == graph::TensorRole::kWeight && !t.data)
      return invalid_argument("training needs a model with weights: '" + name +
                              "' was exported shape-only (export it without --shape-only)");
  return Status::ok();
}

Status export_trained(ModelFile const& model, std::map<std::string, exec::Tensor> const& tensors,
                      std::string const& out_path) {
  std::map<std::string, graph::TensorData> values;
  for (auto const& [name, t] : tensors) {
    exec::Tensor const host = t.device().kind == exec::DeviceKind::kCpu ? t : t.clone_to(exec::process_cpu_allocator());
    graph::TensorData d;
    d.dtype = host.dtype();
    d.dims = host.shape();
    d.bytes.resize(host.nbytes());
    std::memcpy(d.bytes.data(), host.raw(), host.nbytes());
    values.emplace(name, std::move(d));
  }
  return graph::export_trained_onnx_bytes(model.bytes, model.name, model.path, values, out_path);
}

}  // namespace gp::session
