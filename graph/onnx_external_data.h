// External data of ONNX initializers (the importer's and the trained-model export's one reader):
// a file must lie inside the model's folder, and every declared size is checked against the file
// before anything is read. Internal to graph/ (it names protobuf types).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <onnx/onnx_pb.h>

#include "core/status.h"

namespace gp::graph {

struct ExternalData {
  std::filesystem::path file;  // canonical
  int64_t offset = 0;
  int64_t length = -1;  // -1: not declared
  int64_t file_size = 0;
};

// Where `t`'s data lies: refused (naming `what`) unless location is a relative path that resolves,
// symlinks followed, to a regular file inside `model_dir`; offset and length must be byte counts.
// An empty `model_dir` means the model came from memory, where external data cannot be used.
Result<ExternalData> resolve_external_data(onnx::TensorProto const& t, std::string const& model_dir,
                                           std::string const& what);
// Reads `ext.length` bytes at `ext.offset` into `dst`, after checking they lie inside the file.
Status read_external_data(ExternalData const& ext, void* dst, std::string const& what);

}  // namespace gp::graph
