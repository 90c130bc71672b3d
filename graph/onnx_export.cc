#include "graph/onnx_export.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "core/file_io.h"
#include "graph/onnx_external_data.h"

namespace gp::graph {

namespace {

std::optional<DType> dtype_of(int32_t onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT:
      return DType::kFloat32;
    case onnx::TensorProto::DOUBLE:
      return DType::kFloat64;
    case onnx::TensorProto::INT64:
      return DType::kInt64;
    case onnx::TensorProto::INT32:
      return DType::kInt32;
    default:
      return std::nullopt;
  }
}

std::string dims_string(std::vector<int64_t> const& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Reads an external-data initializer's bytes into raw_data (the importer's checks and reader).
Status inline_external(onnx::TensorProto& t, std::string const& model_dir) {
  std::string const what = "initializer '" + t.name() + "'";
  ASSIGN_OR_RETURN(ExternalData ext, resolve_external_data(t, model_dir, what));
  if (ext.length < 0) ext.length = std::max<int64_t>(0, ext.file_size - ext.offset);
  std::string bytes(static_cast<std::size_t>(ext.length), '\0');
  RETURN_IF_ERROR(read_external_data(ext, bytes.data(), what));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  t.set_raw_data(std::move(bytes));
  return Status::ok();
}

}  // namespace

Status export_trained_onnx(std::string const& src_path, std::map<std::string, TensorData> const& values,
                           std::string const& out_path) {
  std::ifstream in(src_path, std::ios::binary);
  if (!in) return not_found("cannot open model '" + src_path + "'");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) return parse_error("'" + src_path + "' is not a valid ONNX model");
  std::filesystem::path const src(src_path);
  std::string const base = src.has_parent_path() ? src.parent_path().string() : ".";
  std::map<std::string, bool> used;
  for (auto const& [name, v] : values) used[name] = false;
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(init.name());
    if (it == values.end()) {
      if (init.data_location() == onnx::TensorProto::EXTERNAL) RETURN_IF_ERROR(inline_external(init, base));
      continue;
    }
    TensorData const& v = it->second;
    used[init.name()] = true;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    auto dt = dtype_of(init.data_type());
    if (dims != v.dims || !dt || *dt != v.dtype)
      return invalid_argument("export: initializer '" + init.name() + "' is " + dims_string(dims) +
                              " in the model but the trained value is " + dims_string(v.dims) + " " +
                              dtype_name(v.dtype));
    if (v.bytes.size() != static_cast<std::size_t>(v.numel()) * dtype_size(v.dtype))
      return internal_error("export: trained value of '" + init.name() + "' has the wrong byte count");
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int64_data();
    init.clear_int32_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(reinterpret_cast<char const*>(v.bytes.data()), v.bytes.size());
  }
  for (auto const& [name, was_used] : used)
    if (!was_used) return invalid_argument("export: the model '" + src_path + "' has no initializer '" + name + "'");
  if (model.ByteSizeLong() > (std::size_t{2} << 30) - 1)
    return unsupported("export: the trained model exceeds protobuf's 2 GiB limit");
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return internal_error("export: the trained model does not serialize");
  return write_file_atomic(out_path, bytes, "trained ONNX model");
}

}  // namespace gp::graph
