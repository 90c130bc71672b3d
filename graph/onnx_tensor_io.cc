#include "graph/onnx_tensor_io.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>
#include "graph/onnx_namespace.h"

#include "graph/onnx_import_raw.h"

namespace gp::graph {

Result<NamedTensor> load_tensor_pb(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open tensor file '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  onnx::TensorProto t;
  if (!t.ParseFromString(buf.str())) return parse_error("'" + path + "' is not a serialized ONNX TensorProto");
  NamedTensor out;
  out.name = t.name();
  ASSIGN_OR_RETURN(out.data,
                   onnx_import::read_tensor(t, std::filesystem::path(path).parent_path().string(), "'" + path + "'"));
  return out;
}

}  // namespace gp::graph
