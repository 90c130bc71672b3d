// The protobuf side of the importer: parse, check, infer shapes, read initializers (external data
// included) and copy everything into RawModel. Everything after that works on our own types.
#include "graph/onnx_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "graph/onnx_import_raw.h"

namespace gp::graph {
namespace {

namespace fs = std::filesystem;
using onnx_import::RawDim;
using onnx_import::RawInitializer;
using onnx_import::RawModel;
using onnx_import::RawNode;
using onnx_import::RawValueInfo;

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 17;
// Without weights, float initializers this small still keep their data: they are constants
// (scales, epsilons) that folding may need, not parameters.
constexpr int64_t kSmallTensor = 64;

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  std::string out;
  for (char c : s) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Result<DType> to_dtype(int32_t elem_type, std::string const& what) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return DType::kFloat32;
    case onnx::TensorProto::FLOAT16: return DType::kFloat16;
    case onnx::TensorProto::BFLOAT16: return DType::kBFloat16;
    case onnx::TensorProto::DOUBLE: return DType::kFloat64;
    case onnx::TensorProto::INT64: return DType::kInt64;
    case onnx::TensorProto::INT32: return DType::kInt32;
    case onnx::TensorProto::INT8: return DType::kInt8;
    case onnx::TensorProto::UINT8: return DType::kUInt8;
    case onnx::TensorProto::BOOL: return DType::kBool;
    default: break;
  }
  return unsupported(what + " has ONNX element type " + std::to_string(elem_type) +
                     ", which graphpipe does not support (use float, double, float16, bfloat16, int64, int32, "
                     "int8, uint8 or bool)");
}

template <typename Src, typename Dst>
void copy_field(google::protobuf::RepeatedField<Src> const& field, std::vector<std::byte>& bytes) {
  bytes.resize(static_cast<std::size_t>(field.size()) * sizeof(Dst));
  Dst* out = reinterpret_cast<Dst*>(bytes.data());
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<Dst>(field.Get(i));
}

// The data of `t`; `model_dir` resolves external files.
Result<TensorData> read_tensor(onnx::TensorProto const& t, std::string const& model_dir, std::string const& what) {
  TensorData out;
  ASSIGN_OR_RETURN(out.dtype, to_dtype(t.data_type(), what));
  out.dims.assign(t.dims().begin(), t.dims().end());
  std::size_t const expected = static_cast<std::size_t>(out.numel()) * dtype_size(out.dtype);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (auto const& e : t.external_data()) {
      if (e.key() == "location") location = e.value();
      else if (e.key() == "offset") offset = std::stoll(e.value());
      else if (e.key() == "length") length = std::stoll(e.value());
    }
    fs::path const file = fs::path(model_dir) / location;
    std::ifstream in(file, std::ios::binary);
    if (!in) return not_found(what + " stores its data in '" + file.string() + "', which cannot be opened: keep the "
                              "external data file next to the model");
    if (length < 0) length = static_cast<int64_t>(expected);
    out.bytes.resize(static_cast<std::size_t>(length));
    in.seekg(offset);
    in.read(reinterpret_cast<char*>(out.bytes.data()), length);
    if (in.gcount() != length)
      return io_error(what + ": external data file '" + file.string() + "' is shorter than offset+length (" +
                      std::to_string(offset + length) + " bytes)");
  } else if (t.has_raw_data()) {
    out.bytes.resize(t.raw_data().size());
    std::memcpy(out.bytes.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    switch (out.dtype) {
      case DType::kFloat32: copy_field<float, float>(t.float_data(), out.bytes); break;
      case DType::kFloat64: copy_field<double, double>(t.double_data(), out.bytes); break;
      case DType::kInt64: copy_field<int64_t, int64_t>(t.int64_data(), out.bytes); break;
      case DType::kInt32: copy_field<int32_t, int32_t>(t.int32_data(), out.bytes); break;
      case DType::kInt8: copy_field<int32_t, int8_t>(t.int32_data(), out.bytes); break;
      case DType::kUInt8:
      case DType::kBool: copy_field<int32_t, uint8_t>(t.int32_data(), out.bytes); break;
      case DType::kFloat16:
      case DType::kBFloat16: copy_field<int32_t, uint16_t>(t.int32_data(), out.bytes); break;
    }
  }
  if (out.bytes.size() != expected)
    return parse_error(what + " holds " + std::to_string(out.bytes.size()) + " bytes of data but its dims need " +
                       std::to_string(expected));
  return out;
}

Result<AttrValue> to_attr(onnx::AttributeProto const& a, std::string const& model_dir, std::string const& what) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return AttrValue{a.i()};
    case onnx::AttributeProto::FLOAT: return AttrValue{static_cast<double>(a.f())};
    case onnx::AttributeProto::STRING: return AttrValue{a.s()};
    case onnx::AttributeProto::INTS: return AttrValue{std::vector<int64_t>(a.ints().begin(), a.ints().end())};
    case onnx::AttributeProto::FLOATS: return AttrValue{std::vector<double>(a.floats().begin(), a.floats().end())};
    case onnx::AttributeProto::STRINGS:
      return AttrValue{std::vector<std::string>(a.strings().begin(), a.strings().end())};
    case onnx::AttributeProto::TENSOR: {
      ASSIGN_OR_RETURN(TensorData t, read_tensor(a.t(), model_dir, what + " attribute '" + a.name() + "'"));
      return AttrValue{std::move(t)};
    }
    default: break;
  }
  return unsupported(what + " has attribute '" + a.name() + "' of a kind graphpipe does not read (graphs, sparse "
                     "tensors and type protos are not supported)");
}

Result<RawValueInfo> to_value_info(onnx::ValueInfoProto const& v) {
  RawValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type())
    return unsupported("value '" + v.name() + "' is not a tensor (sequences, maps and optionals are not supported)");
  auto const& tt = v.type().tensor_type();
  ASSIGN_OR_RETURN(out.dtype, to_dtype(tt.elem_type(), "value '" + v.name() + "'"));
  out.has_shape = tt.has_shape();
  for (auto const& d : tt.shape().dim()) {
    RawDim rd;
    if (d.has_dim_value()) rd.value = d.dim_value();
    else if (d.has_dim_param()) rd.param = d.dim_param();
    out.dims.push_back(rd);
  }
  return out;
}

Result<RawModel> to_raw(onnx::ModelProto const& model, std::string const& source, std::string const& model_dir,
                        ImportOptions const& options) {
  RawModel raw;
  raw.source = source;
  auto const& g = model.graph();
  raw.name = g.name().empty() ? fs::path(source).stem().string() : g.name();
  for (auto const& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") raw.opset = op.version();
  if (raw.opset < kMinOpset || raw.opset > kMaxOpset)
    return unsupported("the model uses ONNX opset " + std::to_string(raw.opset) + "; graphpipe imports opsets " +
                       std::to_string(kMinOpset) + "-" + std::to_string(kMaxOpset) +
                       " (re-export with opset_version in that range)");

  std::set<std::string> init_names;
  for (auto const& t : g.initializer()) {
    RawInitializer init;
    init.name = t.name();
    std::string const what = "initializer '" + t.name() + "'";
    ASSIGN_OR_RETURN(init.dtype, to_dtype(t.data_type(), what));
    init.dims.assign(t.dims().begin(), t.dims().end());
    int64_t numel = 1;
    for (int64_t d : init.dims) numel *= d;
    bool const is_float = init.dtype == DType::kFloat32 || init.dtype == DType::kFloat64 ||
                          init.dtype == DType::kFloat16 || init.dtype == DType::kBFloat16;
    bool const external = t.data_location() == onnx::TensorProto::EXTERNAL;
    if (options.load_weights || (!external && (!is_float || numel <= kSmallTensor))) {
      ASSIGN_OR_RETURN(TensorData data, read_tensor(t, model_dir, what));
      init.data = std::make_shared<TensorData const>(std::move(data));
    }
    init_names.insert(init.name);
    raw.initializers.push_back(std::move(init));
  }
  for (auto const& v : g.input()) {
    if (init_names.count(v.name())) continue;
    ASSIGN_OR_RETURN(RawValueInfo info, to_value_info(v));
    raw.inputs.push_back(std::move(info));
  }
  for (auto const& v : g.output()) {
    ASSIGN_OR_RETURN(RawValueInfo info, to_value_info(v));
    raw.outputs.push_back(std::move(info));
  }
  for (auto const& v : g.value_info()) {
    auto info = to_value_info(v);
    if (info.is_ok()) raw.value_info.emplace(v.name(), std::move(*info));
  }
  for (auto const& n : g.node()) {
    RawNode node;
    node.name = n.name();
    node.type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    std::string const what = "node '" + n.name() + "' (" + n.op_type() + ")";
    for (auto const& a : n.attribute()) {
      ASSIGN_OR_RETURN(AttrValue v, to_attr(a, model_dir, what));
      node.attrs.emplace(a.name(), std::move(v));
    }
    raw.nodes.push_back(std::move(node));
  }
  return raw;
}

// Unsupported node types (after fusion), every type once with all its node names.
Status check_supported(RawModel const& raw) {
  auto const& supported = onnx_import::supported_op_types();
  std::map<std::string, std::vector<std::string>> missing;
  for (std::size_t i = 0; i < raw.nodes.size(); ++i) {
    auto const& n = raw.nodes[i];
    bool const ok = n.domain.empty() && std::binary_search(supported.begin(), supported.end(), n.type);
    if (!ok)
      missing[n.domain.empty() ? n.type : n.domain + "::" + n.type].push_back(
          n.name.empty() ? "#" + std::to_string(i) : n.name);
  }
  if (missing.empty()) return Status::ok();
  std::string msg = "unsupported operator";
  msg += missing.size() > 1 ? "s: " : ": ";
  bool first = true;
  for (auto const& [type, names] : missing) {
    if (!first) msg += "; ";
    first = false;
    msg += type + " (" + std::to_string(names.size()) + (names.size() == 1 ? " node: " : " nodes: ");
    for (std::size_t i = 0; i < names.size() && i < 8; ++i) msg += (i ? ", " : "") + names[i];
    if (names.size() > 8) msg += ", ...";
    msg += ")";
  }
  msg += ". Supported:";
  for (auto const& s : supported) msg += " " + s;
  return unsupported(msg);
}

Result<OpGraph> import_model(onnx::ModelProto& model, std::string const& source, std::string const& model_path,
                             ImportOptions const& options) {
  std::string const model_dir = model_path.empty() ? std::string{} : fs::path(model_path).parent_path().string();
  if (!model.has_graph() || model.ir_version() <= 0)
    return parse_error(source + ": not an ONNX model (the protobuf has no ir_version or graph)");
  if (options.run_checker) {
    try {
      if (!model_path.empty()) onnx::checker::check_model(model_path);
      else onnx::checker::check_model(model);
    } catch (std::exception const& e) {
      return invalid_argument(source + ": the ONNX checker rejects the model: " + one_line(e.what()));
    }
  }
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (std::exception const& e) {
    return invalid_argument(source + ": ONNX shape inference fails: " + one_line(e.what()));
  }
  auto raw = to_raw(model, source, model_dir, options);
  if (!raw.is_ok()) return raw.status().with_context(source);
  onnx_import::fuse_patterns(*raw);
  RETURN_IF_ERROR(check_supported(*raw).with_context(source));
  auto graph = onnx_import::lower(std::move(*raw), options.first_dim_is_batch);
  if (!graph.is_ok()) return graph.status().with_context(source);
  return graph;
}

}  // namespace

Result<OpGraph> load_onnx(std::string const& path, ImportOptions const& options) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return not_found(path + ": no such model file (check the path; `graphpipe models export` writes examples)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path + ": cannot open the file for reading");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    return parse_error(path + ": not an ONNX model (the file does not parse as an ONNX ModelProto protobuf)");
  return import_model(model, path, path, options);
}

Result<OpGraph> load_onnx_bytes(std::string const& bytes, std::string const& source_name,
                                ImportOptions const& options) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return parse_error(source_name + ": not an ONNX model (the bytes do not parse as an ONNX ModelProto protobuf)");
  return import_model(model, source_name, "", options);
}

Result<OpGraph> load_onnx_text(std::string const& text, ImportOptions const& options) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) return parse_error("<onnx text>: " + one_line(status.ErrorMessage()));
  return import_model(model, "<onnx text>", "", options);
}

}  // namespace gp::graph
