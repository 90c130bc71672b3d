// The protobuf side of the importer: parse, check, infer shapes, read initializers (external data
// included) and copy everything into RawModel. Everything after that works on our own types.
#include "graph/onnx_import.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include "graph/onnx_namespace.h"

#include "core/units.h"
#include "graph/onnx_import_raw.h"
#include "graph/ops/infer.h"

namespace gp::graph {
namespace {

namespace fs = std::filesystem;
using onnx_import::RawBody;
using onnx_import::RawDim;
using onnx_import::RawInitializer;
using onnx_import::RawModel;
using onnx_import::RawNode;
using onnx_import::RawValueInfo;
using onnx_import::read_tensor;

constexpr int64_t kMinOpset = 7;
// ONNX 1.23's newest. graphpipe builds against ONNX 1.18 (opset 23, IR version onnx::IR_VERSION,
// 11): what opsets 24-28 changed is adapted or refused first (adapt_newer_opset).
constexpr int64_t kMaxOpset = 28;
// Without weights, float initializers this small still keep their data: they are constants
// (scales, epsilons) that folding may need, not parameters.
constexpr int64_t kSmallTensor = 64;
// Without weights, the most a table the trainable choice looks at may hold and still be read (a
// rotary table of 131,072 positions by 128 channels holds 64 MiB), and the most each of a tied
// pair (a token embedding and its folded transpose) may.
constexpr int64_t kMaxTableProbeBytes = int64_t{64} << 20;
constexpr int64_t kMaxTieProbeBytes = int64_t{1} << 30;

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
  if (auto d = ops::dtype_of_onnx(elem_type); d.is_ok()) return d;
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

// Elements of `dims`, or nullopt when a dimension is negative or the count overflows.
std::optional<int64_t> checked_numel(google::protobuf::RepeatedField<int64_t> const& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) return std::nullopt;
    n *= d;
  }
  return n;
}

struct ExternalData {
  fs::path file;
  int64_t offset = 0, length = -1, file_size = 0;
};

// Where `t`'s external data lies, refused unless it is a file inside `model_dir`.
Result<ExternalData> external_data(onnx::TensorProto const& t, std::string const& model_dir, std::string const& what) {
  if (model_dir.empty())
    return unsupported(what +
                       " stores its data in an external file, which a model read from memory cannot use: "
                       "load the model from its file");
  ExternalData ext;
  std::string location;
  for (auto const& e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset" || e.key() == "length") {
      int64_t v = -1;
      auto const& text = e.value();
      auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc{} || end != text.data() + text.size() || v < 0)
        return parse_error(what + " has external data " + e.key() + " '" + text + "', not a byte count");
      (e.key() == "offset" ? ext.offset : ext.length) = v;
    }
  }
  fs::path const loc(location);
  bool escapes = location.empty() || loc.is_absolute() || location.find('\0') != std::string::npos;
  for (auto const& part : loc)
    if (part == "..") escapes = true;
  if (escapes)
    return invalid_argument(what + " stores its data at '" + location +
                            "', outside the model's folder: external "
                            "data must be a relative path inside the folder (refused for safety)");
  std::error_code ec;
  fs::path const dir = fs::canonical(model_dir, ec);
  fs::path const file = ec ? fs::path() : fs::canonical(fs::path(model_dir) / loc, ec);
  if (ec)
    return not_found(what + " stores its data in '" + (fs::path(model_dir) / loc).string() +
                     "', which cannot be opened: keep the external data file next to the model");
  auto [d, f] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  if (d != dir.end())
    return invalid_argument(what + " stores its data at '" + location +
                            "', a link that leads outside the model's "
                            "folder to '" +
                            file.string() + "' (refused for safety)");
  if (!fs::is_regular_file(file, ec))
    return invalid_argument(what + " stores its data at '" + location + "', which is not a regular file");
  ext.file = file;
  ext.file_size = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) return io_error(what + ": cannot read the size of '" + file.string() + "': " + ec.message());
  return ext;
}

}  // namespace

Result<TensorData> onnx_import::read_tensor(onnx::TensorProto const& t, std::string const& model_dir,
                                            std::string const& what) {
  TensorData out;
  ASSIGN_OR_RETURN(out.dtype, to_dtype(t.data_type(), what));
  out.dims.assign(t.dims().begin(), t.dims().end());
  auto const numel = checked_numel(t.dims());
  if (!numel || *numel > std::numeric_limits<int64_t>::max() / 8)
    return parse_error(what + " has impossible dims (negative or too large)");
  std::size_t const expected = static_cast<std::size_t>(*numel) * dtype_size(out.dtype);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    ASSIGN_OR_RETURN(ExternalData ext, external_data(t, model_dir, what));
    if (ext.length < 0) ext.length = static_cast<int64_t>(expected);
    if (static_cast<std::size_t>(ext.length) != expected)
      return parse_error(what + " declares " + std::to_string(ext.length) +
                         " bytes of external data but its dims need " + std::to_string(expected));
    if (ext.offset > ext.file_size || ext.length > ext.file_size - ext.offset)
      return io_error(what + ": external data file '" + ext.file.string() + "' holds " + std::to_string(ext.file_size) +
                      " bytes, fewer than offset+length (" + std::to_string(ext.offset) + "+" +
                      std::to_string(ext.length) + "): is it the right file?");
    std::ifstream in(ext.file, std::ios::binary);
    if (!in) return not_found(what + " stores its data in '" + ext.file.string() + "', which cannot be opened");
    out.bytes.resize(static_cast<std::size_t>(ext.length));
    in.seekg(ext.offset);
    in.read(reinterpret_cast<char*>(out.bytes.data()), ext.length);
    if (in.gcount() != ext.length)
      return io_error(what + ": reading external data file '" + ext.file.string() + "' failed");
  } else if (t.has_raw_data()) {
    out.bytes.resize(t.raw_data().size());
    if (!out.bytes.empty()) std::memcpy(out.bytes.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    switch (out.dtype) {
      case DType::kFloat32:
        copy_field<float, float>(t.float_data(), out.bytes);
        break;
      case DType::kFloat64:
        copy_field<double, double>(t.double_data(), out.bytes);
        break;
      case DType::kInt64:
        copy_field<int64_t, int64_t>(t.int64_data(), out.bytes);
        break;
      case DType::kInt32:
        copy_field<int32_t, int32_t>(t.int32_data(), out.bytes);
        break;
      case DType::kInt8:
        copy_field<int32_t, int8_t>(t.int32_data(), out.bytes);
        break;
      case DType::kUInt8:
      case DType::kBool:
        copy_field<int32_t, uint8_t>(t.int32_data(), out.bytes);
        break;
      case DType::kFloat16:
      case DType::kBFloat16:
        copy_field<int32_t, uint16_t>(t.int32_data(), out.bytes);
        break;
    }
  }
  if (out.bytes.size() != expected)
    return parse_error(what + " holds " + std::to_string(out.bytes.size()) + " bytes of data but its dims need " +
                       std::to_string(expected));
  return out;
}

std::vector<RawNode const*> onnx_import::all_nodes(RawModel const& model) {
  std::vector<RawNode const*> out;
  for (auto const& n : model.nodes) out.push_back(&n);
  for (std::size_t i = 0; i < out.size(); ++i)  // grows as bodies are found: nested ones come later
    for (auto const& b : out[i]->bodies)
      for (auto const& sub : b.nodes) out.push_back(&sub);
  return out;
}

namespace {

Result<AttrValue> to_attr(onnx::AttributeProto const& a, std::string const& model_dir, std::string const& what) {
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      return AttrValue{a.i()};
    case onnx::AttributeProto::FLOAT:
      return AttrValue{static_cast<double>(a.f())};
    case onnx::AttributeProto::STRING:
      return AttrValue{a.s()};
    case onnx::AttributeProto::INTS:
      return AttrValue{std::vector<int64_t>(a.ints().begin(), a.ints().end())};
    case onnx::AttributeProto::FLOATS:
      return AttrValue{std::vector<double>(a.floats().begin(), a.floats().end())};
    case onnx::AttributeProto::STRINGS:
      return AttrValue{std::vector<std::string>(a.strings().begin(), a.strings().end())};
    case onnx::AttributeProto::TENSOR: {
      ASSIGN_OR_RETURN(TensorData t, read_tensor(a.t(), model_dir, what + " attribute '" + a.name() + "'"));
      return AttrValue{std::move(t)};
    }
    default:
      break;
  }
  return unsupported(what + " has attribute '" + a.name() +
                     "' of a kind graphpipe does not read (graphs, sparse "
                     "tensors and type protos are not supported)");
}

Result<RawValueInfo> to_value_info(onnx::ValueInfoProto const& v) {
  RawValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type())
    return unsupported("value '" + v.name() +
                       "' is not a tensor: graph inputs and outputs must be tensors (sequences are imported only "
                       "inside the graph, where their sizes are known at import; maps and optionals are not)");
  auto const& tt = v.type().tensor_type();
  ASSIGN_OR_RETURN(out.dtype, to_dtype(tt.elem_type(), "value '" + v.name() + "'"));
  out.has_shape = tt.has_shape();
  for (auto const& d : tt.shape().dim()) {
    RawDim rd;
    if (d.has_dim_value())
      rd.value = d.dim_value();
    else if (d.has_dim_param())
      rd.param = d.dim_param();
    out.dims.push_back(rd);
  }
  return out;
}

// An ONNX node in the importer's form. An If's branches and a Loop's or Scan's body become its
// bodies (their initializers Constant nodes, their value_info added to `value_info`); a graph
// attribute of any other node is refused by to_attr. The lowering takes an If's branch and unrolls
// a Loop or Scan when what decides them is known at import.
Result<RawNode> to_raw_node(onnx::NodeProto const& n, std::string const& model_dir,
                            std::map<std::string, RawValueInfo>& value_info) {
  RawNode node;
  node.name = n.name();
  node.type = n.op_type();
  node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  std::string const what = "node '" + n.name() + "' (" + n.op_type() + ")";
  bool const is_if = node.domain.empty() && node.type == "If";
  bool const is_loop = node.domain.empty() && (node.type == "Loop" || node.type == "Scan");
  // The graph attributes this node type has, in the order of `bodies`.
  std::vector<std::string> const body_names = is_if     ? std::vector<std::string>{"then_branch", "else_branch"}
                                              : is_loop ? std::vector<std::string>{"body"}
                                                        : std::vector<std::string>{};
  std::vector<onnx::GraphProto const*> graphs(body_names.size(), nullptr);
  for (auto const& a : n.attribute()) {
    auto const slot = std::find(body_names.begin(), body_names.end(), a.name());
    if (slot != body_names.end() && a.type() == onnx::AttributeProto::GRAPH) {
      graphs[static_cast<std::size_t>(slot - body_names.begin())] = &a.g();
      continue;
    }
    ASSIGN_OR_RETURN(AttrValue v, to_attr(a, model_dir, what));
    node.attrs.emplace(a.name(), std::move(v));
  }
  for (std::size_t k = 0; k < graphs.size(); ++k) {
    onnx::GraphProto const* g = graphs[k];
    if (g == nullptr) return invalid_argument(what + " needs its graph attribute '" + body_names[k] + "'");
    RawBody body;
    for (auto const& v : g->input()) body.inputs.push_back(v.name());
    for (auto const& t : g->initializer()) {
      ASSIGN_OR_RETURN(TensorData data, read_tensor(t, model_dir, what + " body initializer '" + t.name() + "'"));
      RawNode c;
      c.name = t.name() + "_initializer";
      c.type = "Constant";
      c.outputs = {t.name()};
      c.attrs.emplace("value", AttrValue{std::move(data)});
      body.nodes.push_back(std::move(c));
    }
    for (auto const* list : {&g->input(), &g->value_info()})
      for (auto const& v : *list) {
        auto info = to_value_info(v);
        if (info.is_ok()) value_info.emplace(v.name(), std::move(*info));
      }
    for (auto const& sub : g->node()) {
      ASSIGN_OR_RETURN(RawNode r, to_raw_node(sub, model_dir, value_info));
      body.nodes.push_back(std::move(r));
    }
    for (auto const& o : g->output()) body.outputs.push_back(o.name());
    if (is_if && body.outputs.size() != node.outputs.size())
      return invalid_argument(what + ": a branch has " + std::to_string(body.outputs.size()) + " outputs, the If " +
                              std::to_string(node.outputs.size()));
    node.bodies.push_back(std::move(body));
  }
  return node;
}

// Without the weights, the initializers whose values the trainable choice looks at, read all the
// same so that a plan sees the weights training will (a weight's data is dropped after the choice,
// a constant's kept): float tensors of two or three dimensions longer than one that no weight slot
// or Gather reads, directly or through views (a sinusoidal position table, a mask of -inf or
// float32's lowest value, graph/onnx_import_trainable.cc) and integer or bool constants stored
// outside the file (masks lowering folds), each up to kMaxTableProbeBytes; and an
// embedding Gather reads with a float32 matrix of its transposed shape, both up to
// kMaxTieProbeBytes (a folded copy of a tied output projection, retied).
std::set<std::string> value_probes(onnx::GraphProto const& g) {
  std::map<std::string, std::vector<onnx::NodeProto const*>> consumers;
  for (auto const& n : g.node())
    for (auto const& x : n.input()) consumers[x].push_back(&n);
  static std::set<std::string> const views = {"Transpose", "Reshape", "Cast",   "Identity",
                                              "Unsqueeze", "Squeeze", "Flatten"};
  static std::set<std::string> const weight_slots = {"MatMul",
                                                     "Gemm",
                                                     "Conv",
                                                     "ConvTranspose",
                                                     "LSTM",
                                                     "GRU",
                                                     "RNN",
                                                     "LayerNormalization",
                                                     "BatchNormalization",
                                                     "InstanceNormalization",
                                                     "Gather"};
  auto read_by = [&](std::string const& name, std::set<std::string> const& types) {
    std::vector<std::string> values{name};
    std::set<std::string> seen{name};
    while (!values.empty()) {
      std::string const v = values.back();
      values.pop_back();
      for (onnx::NodeProto const* n : consumers[v]) {
        if (types.count(n->op_type())) return true;
        if (views.count(n->op_type()))
          for (auto const& o : n->output())
            if (seen.insert(o).second) values.push_back(o);
      }
    }
    return false;
  };
  auto bytes = [](onnx::TensorProto const& t) {
    auto const dtype = to_dtype(t.data_type(), "");
    int64_t n = dtype.is_ok() ? static_cast<int64_t>(dtype_size(*dtype)) : 8;
    for (int64_t d : t.dims()) n = d > 0 && n <= std::numeric_limits<int64_t>::max() / d ? n * d : 0;
    return n;
  };
  std::set<std::pair<int64_t, int64_t>> matrices, embeddings;  // float32 2-D shapes; of those Gather reads
  for (auto const& t : g.initializer())
    if (t.data_type() == onnx::TensorProto::FLOAT && t.dims_size() == 2 && bytes(t) <= kMaxTieProbeBytes) {
      matrices.insert({t.dims(0), t.dims(1)});
      if (read_by(t.name(), {"Gather"})) embeddings.insert({t.dims(0), t.dims(1)});
    }
  std::set<std::string> out;
  for (auto const& t : g.initializer()) {
    bool const f32 = t.data_type() == onnx::TensorProto::FLOAT;
    bool const is_float = f32 || t.data_type() == onnx::TensorProto::DOUBLE ||
                          t.data_type() == onnx::TensorProto::FLOAT16 || t.data_type() == onnx::TensorProto::BFLOAT16;
    // Integer and bool constants (ids, masks) are read without the weights anyway; stored outside
    // the file, up to the table limit too (a fixed-batch export's bool masks [B, 1, T, T]).
    if (!is_float && t.data_location() == onnx::TensorProto::EXTERNAL && bytes(t) <= kMaxTableProbeBytes) {
      out.insert(t.name());
      continue;
    }
    if (!f32 && t.data_type() != onnx::TensorProto::DOUBLE) continue;
    if (f32 && t.dims_size() == 2 && t.dims(0) != t.dims(1) && bytes(t) <= kMaxTieProbeBytes) {
      std::pair<int64_t, int64_t> const transposed{t.dims(1), t.dims(0)};
      if (embeddings.count(transposed) || (embeddings.count({t.dims(0), t.dims(1)}) && matrices.count(transposed))) {
        out.insert(t.name());
        continue;
      }
    }
    int non_unit = 0;
    int64_t positions = 0;
    for (int64_t d : t.dims())
      if (d != 1 && non_unit++ == 0) positions = d;
    if ((non_unit == 2 || non_unit == 3) && positions >= 2 && bytes(t) <= kMaxTableProbeBytes &&
        !read_by(t.name(), weight_slots))
      out.insert(t.name());
  }
  return out;
}

Result<RawModel> to_raw(onnx::ModelProto const& model, std::string const& source, std::string const& model_dir,
                        ImportOptions const& options) {
  RawModel raw;
  raw.source = source;
  auto const& g = model.graph();
  raw.name = g.name().empty() ? fs::path(source).stem().string() : g.name();
  raw.opset = onnx_import::standard_opset(model);  // in range: import_model checked it first

  std::set<std::string> const probes = options.load_weights ? std::set<std::string>{} : value_probes(g);
  // Which initializers get their data read, and what that costs, decided before anything is read.
  std::vector<bool> read(static_cast<std::size_t>(g.initializer_size()));
  int64_t read_bytes = 0;
  for (int i = 0; i < g.initializer_size(); ++i) {
    auto const& t = g.initializer(i);
    std::string const what = "initializer '" + t.name() + "'";
    ASSIGN_OR_RETURN(DType dtype, to_dtype(t.data_type(), what));
    auto const numel = checked_numel(t.dims());
    if (!numel || *numel > std::numeric_limits<int64_t>::max() / 16)
      return parse_error(what + " has impossible dims (negative or too large)");
    bool const is_float =
        dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
    bool const external = t.data_location() == onnx::TensorProto::EXTERNAL;
    read[i] = options.load_weights || (!external && (!is_float || *numel <= kSmallTensor));
    if (!read[i] && probes.count(t.name()) &&
        (options.max_memory_bytes <= 0 ||
         read_bytes + *numel * static_cast<int64_t>(dtype_size(dtype)) <= options.max_memory_bytes)) {
      read[i] = true;
      raw.probed.insert(t.name());
    }
    if (read[i])
      read_bytes = std::min(read_bytes + *numel * static_cast<int64_t>(dtype_size(dtype)),
                            std::numeric_limits<int64_t>::max() / 2);
  }
  if (options.max_memory_bytes > 0 && read_bytes > options.max_memory_bytes)
    return infeasible("the model's weights need " + format_bytes(read_bytes) + ", more than the memory limit of " +
                      format_bytes(options.max_memory_bytes) +
                      " (--max-memory, by default the machine's available memory): use a machine with more "
                      "memory, or raise --max-memory if the memory is there");

  std::set<std::string> init_names;
  for (int i = 0; i < g.initializer_size(); ++i) {
    auto const& t = g.initializer(i);
    RawInitializer init;
    init.name = t.name();
    std::string const what = "initializer '" + t.name() + "'";
    ASSIGN_OR_RETURN(init.dtype, to_dtype(t.data_type(), what));
    init.dims.assign(t.dims().begin(), t.dims().end());
    if (read[i] && raw.probed.count(init.name)) {
      // Best effort: a probe that cannot be read (external data of a model read from memory, a
      // shape-only model's placeholders) leaves the choice to the rules that need no values.
      auto data = read_tensor(t, model_dir, what);
      if (data.is_ok())
        init.data = std::make_shared<TensorData const>(std::move(data).value());
      else
        raw.probed.erase(init.name);
    } else if (read[i]) {
      ASSIGN_OR_RETURN(TensorData data, read_tensor(t, model_dir, what));
      init.data = std::make_shared<TensorData const>(std::move(data));
    }
    init_names.insert(init.name);
    raw.initializers.push_back(std::move(init));
  }
  // torch.export's graph signature (dynamo exports): one line per input, "<name>: PARAMETER
  // target='<module path>'" for each parameter, "BUFFER target=..." and "CONSTANT_TENSOR target=..."
  // for the tensors torch does not train.
  for (auto const& prop : g.metadata_props()) {
    if (prop.key() != "pkg.torch.export.ExportedProgram.graph_signature") continue;
    std::string_view const text = prop.value();
    auto targets = [&](std::string_view kind) {
      std::set<std::string> out;
      std::string const tag = ": " + std::string(kind) + " target='";
      for (std::size_t at = text.find(tag); at != std::string_view::npos; at = text.find(tag, at)) {
        at += tag.size();
        std::size_t const end = text.find('\'', at);
        if (end == std::string_view::npos) break;
        out.emplace(text.substr(at, end - at));
        at = end;
      }
      return out;
    };
    raw.exported_parameters = targets("PARAMETER");
    raw.exported_buffers = targets("BUFFER");
    raw.exported_buffers.merge(targets("CONSTANT_TENSOR"));
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
    ASSIGN_OR_RETURN(RawNode node, to_raw_node(n, model_dir, raw.value_info));
    raw.nodes.push_back(std::move(node));
  }
  return raw;
}

// Convolution and pooling nodes whose input rank is known before inference (graph inputs,
// initializers, value_info) must have a spatial input and one kernel/stride/dilation value per
// spatial dimension (two pads): ONNX 1.12's convPoolShapeInference dereferences null on a 2-D input.
Status check_conv_pool_ranks(onnx::GraphProto const& g) {
  std::map<std::string, int> rank;
  for (auto const& t : g.initializer()) rank[t.name()] = t.dims_size();
  for (auto const* list : {&g.input(), &g.value_info()})
    for (auto const& v : *list)
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
        rank[v.name()] = v.type().tensor_type().shape().dim_size();
  static std::set<std::string> const kSliding = {"Conv",        "ConvTranspose", "MaxPool",           "AveragePool",
                                                 "LpPool",      "GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool",
                                                 "ConvInteger", "QLinearConv",   "MaxUnpool",         "MaxRoiPool"};
  for (auto const& n : g.node()) {
    if (!kSliding.count(n.op_type()) || n.input_size() == 0) continue;
    auto const it = rank.find(n.input(0));
    if (it == rank.end()) continue;
    int const spatial = it->second - 2;
    std::string const what = "node '" + n.name() + "' (" + n.op_type() + ")";
    if (spatial < 1)
      return invalid_argument(what + ": input '" + n.input(0) + "' has rank " + std::to_string(it->second) +
                              ", but it needs a batch, a channel and at least one spatial dimension");
    if (n.input_size() > 1 && n.op_type().find("Conv") != std::string::npos) {
      auto const w = rank.find(n.input(1));
      if (w != rank.end() && w->second != it->second)
        return invalid_argument(what + ": weight rank " + std::to_string(w->second) + " differs from input rank " +
                                std::to_string(it->second));
    }
    for (auto const& a : n.attribute()) {
      int const want = a.name() == "pads" ? 2 * spatial : spatial;
      bool const per_dim = a.name() == "pads" || a.name() == "strides" || a.name() == "dilations" ||
                           a.name() == "kernel_shape" || a.name() == "output_padding" || a.name() == "output_shape";
      if (per_dim && a.ints_size() != want)
        return invalid_argument(what + ": '" + a.name() + "' has " + std::to_string(a.ints_size()) + " values for " +
                                std::to_string(spatial) + " spatial dimensions");
    }
  }
  return Status::ok();
}

// Nodes in the graph, the model-local functions and every If/Loop/Scan body, walked without
// recursion: a model nested past `max_depth` or larger than `max_nodes`, or with attributes ONNX's
// shape inference would divide by zero with, is refused before ONNX's checker and shape inference
// see it (and again once the functions are inlined).
Status check_graph_size(onnx::ModelProto const& model, ImportOptions const& options) {
  using Nodes = google::protobuf::RepeatedPtrField<onnx::NodeProto>;
  std::vector<std::pair<Nodes const*, int>> todo{{&model.graph().node(), 0}};
  for (auto const& f : model.functions()) todo.emplace_back(&f.node(), 0);
  int64_t nodes = 0;
  while (!todo.empty()) {
    auto [list, depth] = todo.back();
    todo.pop_back();
    if (depth > options.max_subgraph_depth)
      return unsupported("the model nests subgraphs (If/Loop/Scan bodies) more than " +
                         std::to_string(options.max_subgraph_depth) + " deep; graphpipe refuses it");
    nodes += list->size();
    if (nodes > options.max_nodes)
      return unsupported("the model has more than " + std::to_string(options.max_nodes) +
                         " nodes (subgraphs and functions included), graphpipe's limit: is it the right file?");
    for (auto const& n : *list)
      for (auto const& a : n.attribute()) {
        if (a.has_g()) todo.emplace_back(&a.g().node(), depth + 1);
        for (auto const& sub : a.graphs()) todo.emplace_back(&sub.node(), depth + 1);
        // ONNX's own shape inference divides by these (a zero stride is a SIGFPE inside libonnx).
        if (a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape")
          for (int64_t v : a.ints())
            if (v <= 0)
              return invalid_argument("node '" + n.name() + "' (" + n.op_type() + "): every entry of '" + a.name() +
                                      "' must be positive, got " + std::to_string(v));
      }
  }
  return Status::ok();
}

// Unsupported node types (after fusion), every type once with all its node names.
Status check_supported(RawModel const& raw) {
  auto const& supported = onnx_import::supported_op_types();
  std::map<std::string, std::vector<std::string>> missing;
  for (std::size_t i = 0; i < raw.nodes.size(); ++i) {
    auto const& n = raw.nodes[i];
    // An If's branch, a Loop's or Scan's body, is checked when the lowering imports it.
    bool const ok = n.domain.empty() && (std::binary_search(supported.begin(), supported.end(), n.type) ||
                                         !n.bodies.empty() || onnx_import::expanded_by_lowering(n.type));
    if (!ok)
      missing[n.domain.empty() ? n.type : n.domain + "::" + n.type].push_back(n.name.empty() ? "#" + std::to_string(i)
                                                                                             : n.name);
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
  msg += "; as their ONNX function bodies:";
  for (auto const& s : function_op_types()) msg += " " + s;
  msg +=
      "; If, when its condition is known at import (the branch it takes); sequences (SplitToSequence, "
      "SequenceAt, ...) whose sizes and positions are known at import; DFT and STFT, as a MatMul and a Conv with their "
      "matrices; AffineGrid, as a MatMul with its grid's coordinates";
  return unsupported(msg);
}

// ImportOptions::fixed_inputs: each named graph input becomes an initializer of the given value.
Status fix_inputs(onnx::ModelProto& model, std::map<std::string, std::string> const& fixed) {
  auto* inputs = model.mutable_graph()->mutable_input();
  for (auto const& entry : fixed) {
    std::string const& name = entry.first;  // (a structured binding: clang cannot capture it)
    std::string const& bytes = entry.second;
    auto it = std::find_if(inputs->begin(), inputs->end(), [&](auto const& in) { return in.name() == name; });
    if (it == inputs->end()) return invalid_argument("a fixed input '" + name + "' is no graph input of the model");
    onnx::TensorProto value;
    if (!value.ParseFromString(bytes))
      return invalid_argument("the value of fixed input '" + name + "' is not a serialized ONNX TensorProto");
    value.set_name(name);
    *model.mutable_graph()->add_initializer() = std::move(value);
    inputs->erase(it);
  }
  return Status::ok();
}

// ONNX's checker over a model held in memory, rewritten from its file (adapt_newer_opset): in a
// copy, the initializers stored as external data become graph inputs of their type and shape, as
// the checker cannot open their files for a model it did not read itself (graphpipe's own
// external-data rules ran before). Throws what the checker throws.
void check_in_memory(onnx::ModelProto const& model) {
  onnx::ModelProto copy = model;
  onnx::GraphProto& g = *copy.mutable_graph();
  std::set<std::string> inputs;
  for (auto const& in : g.input()) inputs.insert(in.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (auto& t : *g.mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) {
      *kept.Add() = std::move(t);
      continue;
    }
    if (inputs.count(t.name())) continue;
    onnx::ValueInfoProto& in = *g.add_input();
    in.set_name(t.name());
    auto& type = *in.mutable_type()->mutable_tensor_type();
    type.set_elem_type(t.data_type());
    auto& shape = *type.mutable_shape();
    for (int64_t d : t.dims()) shape.add_dim()->set_dim_value(d);
  }
  g.mutable_initializer()->Swap(&kept);
  onnx::checker::check_model(copy);
}

Result<OpGraph> import_model(onnx::ModelProto& model, std::string const& source, std::string const& model_path,
                             ImportOptions const& options) {
  // "m.onnx" (no parent path) lives in the current folder; only a model read from memory has none.
  std::string model_dir;
  if (!model_path.empty()) {
    model_dir = fs::path(model_path).parent_path().string();
    if (model_dir.empty()) model_dir = ".";
  }
  if (!model.has_graph() || model.ir_version() <= 0)
    return parse_error(source + ": not an ONNX model (the protobuf has no ir_version or graph)");
  if (model.ir_version() > onnx::IR_VERSION)
    return unsupported(source + ": the model has ONNX IR version " + std::to_string(model.ir_version()) +
                       "; graphpipe's ONNX " + onnx::LAST_RELEASE_VERSION + " reads IR versions up to " +
                       std::to_string(onnx::IR_VERSION) + " (re-export with an older exporter or opset)");
  RETURN_IF_ERROR(check_graph_size(model, options).with_context(source));
  RETURN_IF_ERROR(fix_inputs(model, options.fixed_inputs).with_context(source));
  bool adapted_in_memory = false;  // the model in memory is no longer the file's
  {
    int64_t const opset = onnx_import::standard_opset(model);
    if (opset < kMinOpset || opset > kMaxOpset)
      return unsupported(source + ": the model uses ONNX opset " + std::to_string(opset) +
                         "; graphpipe imports opsets " + std::to_string(kMinOpset) + "-" + std::to_string(kMaxOpset) +
                         " (re-export with opset_version in that range)");
    auto adapted = onnx_import::adapt_newer_opset(model, opset);
    if (!adapted.is_ok()) return adapted.status().with_context(source);
    adapted_in_memory = *adapted;
  }
  // Our external-data rules (graph/onnx_import.h) before ONNX's checker, which words its own.
  if (options.load_weights)
    for (auto const& t : model.graph().initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL)
        RETURN_IF_ERROR(external_data(t, model_dir, "initializer '" + t.name() + "'").status().with_context(source));
  if (options.run_checker) {
    try {
      if (adapted_in_memory)
        check_in_memory(model);
      else if (!model_path.empty())
        onnx::checker::check_model(model_path);
      else
        onnx::checker::check_model(model);
    } catch (std::exception const& e) {
      return invalid_argument(source + ": the ONNX checker rejects the model: " + one_line(e.what()));
    }
  }
  RETURN_IF_ERROR(onnx_import::inline_local_functions(model, options.max_nodes).with_context(source));
  RETURN_IF_ERROR(onnx_import::expand_function_ops(model, options.max_nodes).with_context(source));
  RETURN_IF_ERROR(check_graph_size(model, options).with_context(source));
  // Before shape inference, over the inlined function bodies too.
  RETURN_IF_ERROR(check_conv_pool_ranks(model.graph()).with_context(source));
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (std::exception const& e) {
    return invalid_argument(source + ": ONNX shape inference fails: " + one_line(e.what()));
  }
  auto raw = to_raw(model, source, model_dir, options);
  if (!raw.is_ok()) return raw.status().with_context(source);
  onnx_import::retie_transposed_copies(*raw, options);
  onnx_import::fuse_patterns(*raw, {.batchnorm_relu = options.fuse});
  onnx_import::rewrite_cast_like(*raw);
  onnx_import::rewrite_is_nan(*raw);
  onnx_import::rewrite_is_inf(*raw);
  RETURN_IF_ERROR(onnx_import::rewrite_depth_space(*raw).with_context(source));
  RETURN_IF_ERROR(onnx_import::rewrite_pooling_and_upsample(*raw).with_context(source));
  RETURN_IF_ERROR(check_supported(*raw).with_context(source));
  auto choices = onnx_import::choose_trainable(*raw, options);
  if (!choices.is_ok()) return choices.status().with_context(source);
  // A probed weight's data goes; a constant's stays (lowering folds and narrows constants). The
  // choices are one per initializer, in order.
  for (std::size_t i = 0; i < raw->initializers.size(); ++i)
    if ((*choices)[i].trainable && raw->probed.count(raw->initializers[i].name)) raw->initializers[i].data.reset();
  auto graph = onnx_import::lower(std::move(*raw), options.first_dim_is_batch, std::move(*choices), options.max_nodes);
  if (!graph.is_ok()) return graph.status().with_context(source);
  if (options.fuse) {
    graph = onnx_import::fuse_residual_tails(*graph);
    if (!graph.is_ok()) return graph.status().with_context(source);
    graph = onnx_import::fuse_matmul_operands(*graph);
    if (!graph.is_ok()) return graph.status().with_context(source);
  }
  if (options.max_memory_bytes > 0 && options.load_weights) {
    // The least any training step needs: the weights and one sample's activations.
    int64_t const need = graph->param_bytes() + graph->activation_bytes_per_sample();
    if (need > options.max_memory_bytes)
      return infeasible(source + ": the weights and one sample's activations need " + format_bytes(need) +
                        ", more than the memory limit of " + format_bytes(options.max_memory_bytes) +
                        " (--max-memory, by default the machine's available memory)");
  }
  if (options.precision == Precision::kFloat32) return graph;
  auto rewritten = apply_precision(*graph, options.precision);
  if (!rewritten.is_ok()) return rewritten.status().with_context(source);
  return rewritten;
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

Result<OpGraph> load_onnx_bytes(std::string const& bytes, std::string const& source_name, ImportOptions const& options,
                                std::string const& file_path) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return parse_error(source_name + ": not an ONNX model (the bytes do not parse as an ONNX ModelProto protobuf)");
  return import_model(model, source_name, file_path, options);
}

Result<OpGraph> load_onnx_text(std::string const& text, ImportOptions const& options) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) return parse_error("<onnx text>: " + one_line(status.ErrorMessage()));
  return import_model(model, "<onnx text>", "", options);
}

}  // namespace gp::graph
