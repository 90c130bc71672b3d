#include "exec/session/model_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/hash.h"
#include "graph/onnx_export.h"
#include "graph/precision.h"
#include "kernels/bf16.h"
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

std::set<std::string> low_precision_weights(graph::OpGraph const& graph,
                                            std::map<std::string, exec::Tensor> const& tensors) {
  std::set<std::string> out;
  for (auto const& [name, t] : tensors) {
    auto const id = graph.find_tensor(name);
    if (!id || t.dtype() != graph::DType::kFloat32) continue;
    auto const& consumers = graph.tensor(*id).consumers;
    bool const low = !consumers.empty() && std::all_of(consumers.begin(), consumers.end(), [&](graph::OpId op) {
      return graph::amp_rule(graph.op(op).kind()).policy == graph::AmpPolicy::kLow;
    });
    if (low) out.insert(name);
  }
  return out;
}

Status export_trained(ModelFile const& model, std::map<std::string, exec::Tensor> const& tensors,
                      std::string const& out_path, std::set<std::string> const& narrow, graph::DType narrow_to) {
  if (!narrow.empty() && narrow_to != graph::DType::kBFloat16 && narrow_to != graph::DType::kFloat16)
    return internal_error("export: weights can be stored in bfloat16 or float16, not " +
                          std::string(graph::dtype_name(narrow_to)));
  std::map<std::string, graph::TensorData> values;
  for (auto const& [name, t] : tensors) {
    exec::Tensor const host = t.device().kind == exec::DeviceKind::kCpu ? t : t.clone_to(exec::process_cpu_allocator());
    graph::TensorData d;
    d.dims = host.shape();
    if (narrow.count(name)) {
      if (host.dtype() != graph::DType::kFloat32)
        return internal_error("export: weight '" + name + "' to store in 16 bits is not float32");
      // Rounded to nearest even, as the 16-bit kernels round a master weight per call.
      d.dtype = narrow_to;
      d.bytes.resize(static_cast<std::size_t>(host.numel()) * sizeof(uint16_t));
      auto* bits = reinterpret_cast<uint16_t*>(d.bytes.data());
      if (narrow_to == graph::DType::kBFloat16)
        kernels::float_to_bf16(host.data<float>(), host.numel(), bits);
      else
        kernels::float_to_half(host.data<float>(), host.numel(), bits);
    } else {
      d.dtype = host.dtype();
      d.bytes.resize(host.nbytes());
      std::memcpy(d.bytes.data(), host.raw(), host.nbytes());
    }
    values.emplace(name, std::move(d));
  }
  return graph::export_trained_onnx_bytes(model.bytes, model.name, model.path, values, out_path);
}

}  // namespace gp::session
