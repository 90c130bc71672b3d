#include "graph/onnx_export.h"
#include "core/units.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>
#include "graph/onnx_namespace.h"

#include "core/file_io.h"

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
    case onnx::TensorProto::BFLOAT16:
      return DType::kBFloat16;
    case onnx::TensorProto::FLOAT16:
      return DType::kFloat16;
    default:
      return std::nullopt;
  }
}

// Reads an external-data initializer's bytes into raw_data.
Status inline_external(onnx::TensorProto& t, std::filesystem::path const& base) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (auto const& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v = -1;
      auto const [end, ec] = std::from_chars(kv.value().data(), kv.value().data() + kv.value().size(), v);
      if (ec != std::errc{} || end != kv.value().data() + kv.value().size() || v < 0)
        return parse_error("initializer '" + t.name() + "' has external data " + kv.key() + " '" + kv.value() +
                           "', not a byte count");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) return parse_error("initializer '" + t.name() + "' has external data without a location");
  bool escapes = std::filesystem::path(location).is_absolute();
  for (auto const& part : std::filesystem::path(location)) escapes = escapes || part == "..";
  if (escapes)
    return invalid_argument("initializer '" + t.name() + "' stores its data at '" + location +
                            "', outside the model's folder (refused for safety)");
  auto const file = base / location;
  std::ifstream in(file, std::ios::binary);
  if (!in) return not_found("external data '" + file.string() + "' of initializer '" + t.name() + "' is missing");
  std::error_code ec;
  auto const size = static_cast<int64_t>(std::filesystem::file_size(file, ec));
  if (ec || offset > size) return parse_error("external data '" + file.string() + "' is shorter than its offset");
  if (length < 0) length = size - offset;
  if (length > size - offset) return parse_error("external data '" + file.string() + "' is truncated");
  std::string bytes(static_cast<std::size_t>(length), '\0');
  in.seekg(offset);
  if (!in.read(bytes.data(), length)) return parse_error("external data '" + file.string() + "' is truncated");
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  t.set_raw_data(std::move(bytes));
  return Status::ok();
}

int32_t onnx_type(DType d) { return d == DType::kBFloat16 ? onnx::TensorProto::BFLOAT16 : onnx::TensorProto::FLOAT16; }

// Each float32 initializer given a 16-bit value (already written into it) becomes
// "<name>.bf16" / ".fp16" of that type, and a Cast to float32 at the front of the graph writes
// "<name>" again, so every consumer (nodes, subgraphs, graph outputs) reads what it read before,
// as float32. A graph input of the same name (IR 3 lists initializers as inputs) is renamed with it.
Status store_narrowed(onnx::GraphProto& graph, std::vector<std::pair<std::string, DType>> const& narrow) {
  if (narrow.empty()) return Status::ok();
  std::set<std::string> taken;
  for (auto const& t : graph.initializer()) taken.insert(t.name());
  for (auto const& v : graph.input()) taken.insert(v.name());
  for (auto const& n : graph.node()) {
    taken.insert(n.name());
    for (auto const& o : n.output()) taken.insert(o);
    for (auto const& i : n.input()) taken.insert(i);
  }
  auto fresh = [&](std::string const& base) {
    std::string name = base;
    for (int k = 1; taken.count(name); ++k) name = base + "_" + std::to_string(k);
    taken.insert(name);
    return name;
  };
  std::map<std::string, std::pair<std::string, DType>> renamed;  // old name -> (stored name, dtype)
  for (auto const& [name, dtype] : narrow)
    renamed.emplace(name, std::pair{fresh(name + (dtype == DType::kBFloat16 ? ".bf16" : ".fp16")), dtype});
  for (auto& t : *graph.mutable_initializer()) {
    auto it = renamed.find(t.name());
    if (it == renamed.end()) continue;
    t.set_name(it->second.first);
    t.set_data_type(onnx_type(it->second.second));
  }
  for (auto& v : *graph.mutable_input()) {
    auto it = renamed.find(v.name());
    if (it == renamed.end()) continue;
    v.set_name(it->second.first);
    if (v.type().has_tensor_type())
      v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx_type(it->second.second));
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (auto const& [name, stored] : renamed) {
    onnx::NodeProto& cast = *nodes.Add();
    cast.set_op_type("Cast");
    cast.set_name(fresh(name + ".to_fp32"));
    cast.add_input(stored.first);
    cast.add_output(name);
    onnx::AttributeProto& to = *cast.add_attribute();
    to.set_name("to");
    to.set_type(onnx::AttributeProto::INT);
    to.set_i(onnx::TensorProto::FLOAT);
  }
  for (auto& n : *graph.mutable_node()) *nodes.Add() = std::move(n);
  graph.mutable_node()->Swap(&nodes);
  return Status::ok();
}

}  // namespace

Status export_trained_onnx(std::string const& src_path, std::map<std::string, TensorData> const& values,
                           std::string const& out_path) {
  ASSIGN_OR_RETURN(std::string bytes, read_whole_file(src_path, "model"));
  return export_trained_onnx_bytes(bytes, src_path, src_path, values, out_path);
}

Status export_trained_onnx_bytes(std::string const& src_bytes, std::string const& src_name, std::string const& src_path,
                                 std::map<std::string, TensorData> const& values, std::string const& out_path) {
  onnx::ModelProto model;
  if (!model.ParseFromString(src_bytes)) return parse_error("'" + src_name + "' is not a valid ONNX model");
  auto base = std::filesystem::path(src_path).parent_path();
  if (base.empty()) base = ".";  // "m.onnx": the current folder
  std::map<std::string, bool> used;
  for (auto const& [name, v] : values) used[name] = false;
  int64_t opset = 0;
  for (auto const& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  std::vector<std::pair<std::string, DType>> narrow;  // float32 initializers given 16-bit values
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
    bool const narrowed = dt == DType::kFloat32 && (v.dtype == DType::kBFloat16 || v.dtype == DType::kFloat16);
    if (narrowed) {
      if (v.dtype == DType::kBFloat16 && opset < 13)
        return unsupported("export: bfloat16 weights need ONNX opset 13 or later (Cast from bfloat16) and '" +
                           src_name + "' has opset " + std::to_string(opset) +
                           ": export float32 weights, or re-export the model at opset 13 or later");
      narrow.emplace_back(init.name(), v.dtype);
      dt = v.dtype;
    }
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
    if (!was_used) return invalid_argument("export: the model '" + src_name + "' has no initializer '" + name + "'");
  RETURN_IF_ERROR(store_narrowed(*model.mutable_graph(), narrow));
  if (model.ByteSizeLong() > (std::size_t{2} << 30) - 1)
    return unsupported("export: the trained model exceeds protobuf's 2 GiB limit");
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return internal_error("export: the trained model does not serialize");
  return write_file_atomic(out_path, bytes, "trained ONNX model");
}

}  // namespace gp::graph
