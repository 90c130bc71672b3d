// The model a session works on, read once: an ONNX file's bytes, or a zoo model serialized in
// memory. Its graph, the profile cache's key and the trained model's export all come from these
// bytes, so the file is read once per process.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "core/status.h"
#include "exec/tensor.h"
#include "exec/train_config.h"
#include "graph/onnx_import.h"
#include "graph/op_graph.h"

namespace gp::session {

struct ModelFile {
  std::string name;   // the path, or "zoo mlp (tiny)"
  std::string path;   // the file the bytes came from ("" for a zoo model): external data is beside it
  std::string bytes;  // the serialized ModelProto
  uint64_t hash = 0;  // of the bytes (the profile cache's key)
};

Result<ModelFile> read_model_file(std::string const& path);
// A model given as serialized bytes (the Python package's `load(bytes)`), named `name` in messages.
ModelFile model_from_bytes(std::string bytes, std::string name);
// The configured model: model.path, or the zoo model built with `seed` in memory.
Result<ModelFile> read_model(exec::ModelConfig const& config, uint64_t seed);
Result<graph::OpGraph> load_graph(ModelFile const& model, graph::ImportOptions const& options);
// Ok when every weight of `graph` holds its values; a model exported shape-only cannot train.
Status check_weights_loaded(graph::OpGraph const& graph, std::string const& name);
// The weights among `tensors` that an export of 16-bit weights stores in 16 bits: the float32 ones
// every consumer of which in `graph` is an op the precision policy runs low (Conv, Gemm, MatMul: the
// weights their 16-bit kernels round per call). A weight that a float32 op also reads (a tied
// embedding's Gather, a BatchNorm scale) stays float32.
std::set<std::string> low_precision_weights(graph::OpGraph const& graph,
                                            std::map<std::string, exec::Tensor> const& tensors);
// The model with the named initializers replaced by `tensors` (host or device), written atomically;
// the float32 tensors named in `narrow` are stored rounded to `narrow_to` (bfloat16 or float16) behind
// a Cast to float32 (graph/onnx_export.h).
Status export_trained(ModelFile const& model, std::map<std::string, exec::Tensor> const& tensors,
                      std::string const& out_path, std::set<std::string> const& narrow = {},
                      graph::DType narrow_to = graph::DType::kBFloat16);

}  // namespace gp::session
