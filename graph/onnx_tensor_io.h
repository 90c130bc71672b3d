// Reading a serialized ONNX TensorProto (.pb file, as in ONNX's backend test data) into our own
// TensorData, so that code outside the importer never sees protobuf.
#pragma once

#include <string>

#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::graph {

struct NamedTensor {
  std::string name;  // TensorProto.name (may be empty)
  TensorData data;
};

Result<NamedTensor> load_tensor_pb(std::string const& path);

}  // namespace gp::graph
