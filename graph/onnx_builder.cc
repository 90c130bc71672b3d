#include "graph/onnx_builder.h"
#include "core/hash.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <utility>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include "graph/onnx_namespace.h"

#include "core/file_io.h"
#include "graph/ops/infer.h"

namespace gp::graph {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kIrVersion = 8;  // ONNX 1.12/1.13: opsets 17 and 18 need IR 8
constexpr int64_t kMinBuilderOpset = 13;
constexpr int64_t kMaxBuilderOpset = 18;                                      // 18: the bitwise ops
constexpr int64_t kProtobufLimit = (int64_t{1} << 31) - (int64_t{64} << 20);  // leave room for the graph
constexpr int64_t kInlineBelowBytes = 1024;  // small tensors stay inline even with external data
constexpr int64_t kChunkElements = int64_t{1} << 20;

// ONNX's element type numbers are stable protocol values; graph/ops keeps the one mapping.
int32_t onnx_dtype(DType dtype) { return static_cast<int32_t>(ops::onnx_of_dtype(dtype)); }

int64_t numel(std::vector<int64_t> const& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// splitmix64: tiny, fast, and identical on every platform (std:: distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t state) : state_(state) {}
  uint64_t next() {
    state_ += kGoldenGamma;
    return mix64(state_);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

struct InitDecl {
  std::string name;
  std::vector<int64_t> dims;
  DType dtype = DType::kFloat32;
  bool trainable = true;
  InitRule rule;
  std::shared_ptr<TensorData const> data;  // explicit values; null for rule-drawn ones
};

// Streams the values of a rule-drawn initializer in chunks, so that a 256 MB embedding table never
// needs a second copy.
class ValueStream {
 public:
  ValueStream(InitDecl const& init, uint64_t seed)
      : rule_(init.rule), rng_(seed * 0x9e3779b97f4a7c15ull ^ fnv1a(init.name)), left_(numel(init.dims)) {}
  bool done() const { return left_ == 0; }
  // Appends the next chunk of values as little-endian float32 bytes.
  void next_chunk(std::string& out) {
    int64_t const n = std::min(left_, kChunkElements);
    std::size_t const at = out.size();
    out.resize(at + static_cast<std::size_t>(n) * sizeof(float));
    auto* dst = reinterpret_cast<float*>(out.data() + at);
    for (int64_t i = 0; i < n; ++i) dst[i] = draw();
    left_ -= n;
  }

 private:
  float draw() {
    switch (rule_.kind) {
      case InitRule::Kind::kZeros:
        return 0.f;
      case InitRule::Kind::kOnes:
        return 1.f;
      case InitRule::Kind::kUniform:
        return static_cast<float>((2 * rng_.unit() - 1) * rule_.scale);
      case InitRule::Kind::kNormal: {
        if (has_spare_) {
          has_spare_ = false;
          return static_cast<float>(spare_ * rule_.scale);
        }
        double const u1 = 1.0 - rng_.unit();  // (0, 1]
        double const u2 = rng_.unit();
        double const r = std::sqrt(-2.0 * std::log(u1));
        spare_ = r * std::sin(2 * std::numbers::pi * u2);
        has_spare_ = true;
        return static_cast<float>(r * std::cos(2 * std::numbers::pi * u2) * rule_.scale);
      }
    }
    return 0.f;
  }

  InitRule rule_;
  Rng rng_;
  int64_t left_;
  double spare_ = 0;
  bool has_spare_ = false;
};

void fill_tensor_proto(TensorData const& data, onnx::TensorProto& proto) {
  proto.set_data_type(onnx_dtype(data.dtype));
  for (int64_t d : data.dims) proto.add_dims(d);
  proto.set_raw_data(reinterpret_cast<char const*>(data.bytes.data()), data.bytes.size());
}

void fill_value_info(std::string const& name, std::vector<int64_t> const& dims, DType dtype,
                     onnx::ValueInfoProto& info) {
  info.set_name(name);
  auto* tensor_type = info.mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(onnx_dtype(dtype));
  auto* shape = tensor_type->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d == kBatch) {
      dim->set_dim_param("N");
    } else {
      dim->set_dim_value(d);
    }
  }
}

void fill_attribute(std::string const& name, AttrValue const& value, onnx::AttributeProto& attr) {
  attr.set_name(name);
  std::visit(
      [&](auto const& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          attr.set_type(onnx::AttributeProto::INT);
          attr.set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          attr.set_type(onnx::AttributeProto::FLOAT);
          attr.set_f(static_cast<float>(v));
        } else if constexpr (std::is_same_v<T, std::string>) {
          attr.set_type(onnx::AttributeProto::STRING);
          attr.set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          attr.set_type(onnx::AttributeProto::INTS);
          for (int64_t x : v) attr.add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          attr.set_type(onnx::AttributeProto::FLOATS);
          for (double x : v) attr.add_floats(static_cast<float>(x));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          attr.set_type(onnx::AttributeProto::STRINGS);
          for (auto const& x : v) attr.add_strings(x);
        } else {
          attr.set_type(onnx::AttributeProto::TENSOR);
          fill_tensor_proto(v, *attr.mutable_t());
        }
      },
      value);
}

// Where each rule-drawn initializer's values go.
enum class WeightMode { kInline, kExternal, kShapeOnly, kAsInputs };

std::string temp_suffix() {
  static std::atomic<int> counter{0};
  return ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

}  // namespace

struct OnnxModelBuilder::Impl {
  struct ValueDecl {
    std::string name;
    std::vector<int64_t> dims;
    DType dtype;
  };
  struct NodeDecl {
    std::string op_type;
    std::vector<std::string> inputs, outputs;
    Attributes attrs;
    std::string name;
  };

  std::string name;
  int64_t opset;
  uint64_t seed;
  std::string doc;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<ValueDecl> inputs, outputs;
  std::vector<InitDecl> inits;
  std::vector<NodeDecl> nodes;
  std::set<std::string> defined;  // every tensor name produced so far
  std::set<std::string> node_names;
  std::map<std::string, int> name_counters;
  Status first_error;

  void fail(Status s) {
    if (first_error.is_ok()) first_error = std::move(s);
  }

  void define(std::string const& tensor) {
    if (tensor.empty()) {
      fail(invalid_argument("model '" + name + "': empty tensor name"));
    } else if (!defined.insert(tensor).second) {
      fail(invalid_argument("model '" + name + "': tensor '" + tensor + "' is defined twice"));
    }
  }

  Status validate() const {
    RETURN_IF_ERROR(first_error);
    if (opset < kMinBuilderOpset || opset > kMaxBuilderOpset) {
      return invalid_argument("model '" + name + "': opset " + std::to_string(opset) + " is not supported; use 13..18");
    }
    if (outputs.empty()) return invalid_argument("model '" + name + "' has no output");
    for (auto const& out : outputs) {
      if (!defined.contains(out.name)) {
        return invalid_argument("model '" + name + "': output '" + out.name + "' is produced by no node");
      }
    }
    return Status::ok();
  }

  // Fills everything but rule-drawn initializers' values; `external` gets (init index, proto)
  // pairs for the caller to place the data of.
  onnx::ModelProto build(WeightMode mode, std::string const& data_location,
                         std::vector<std::pair<std::size_t, onnx::TensorProto*>>* deferred) const {
    onnx::ModelProto model;
    model.set_ir_version(kIrVersion);
    model.set_producer_name("graphpipe");
    model.set_model_version(1);
    if (!doc.empty()) model.set_doc_string(doc);
    auto* opset_id = model.add_opset_import();
    opset_id->set_domain("");
    opset_id->set_version(opset);
    for (auto const& [k, v] : metadata) {
      auto* prop = model.add_metadata_props();
      prop->set_key(k);
      prop->set_value(v);
    }
    if (mode == WeightMode::kShapeOnly) {
      auto* prop = model.add_metadata_props();
      prop->set_key("graphpipe.shape_only");
      prop->set_value("true");
    }

    auto* graph = model.mutable_graph();
    graph->set_name(name);
    for (auto const& in : inputs) fill_value_info(in.name, in.dims, in.dtype, *graph->add_input());
    for (std::size_t i = 0; i < inits.size(); ++i) {
      InitDecl const& init = inits[i];
      if (init.data) {
        auto* proto = graph->add_initializer();
        proto->set_name(init.name);
        fill_tensor_proto(*init.data, *proto);
        continue;
      }
      if (mode == WeightMode::kAsInputs) {
        fill_value_info(init.name, init.dims, init.dtype, *graph->add_input());
        continue;
      }
      auto* proto = graph->add_initializer();
      proto->set_name(init.name);
      proto->set_data_type(onnx_dtype(init.dtype));
      for (int64_t d : init.dims) proto->add_dims(d);
      int64_t const bytes = numel(init.dims) * static_cast<int64_t>(dtype_size(init.dtype));
      bool const external =
          mode == WeightMode::kShapeOnly || (mode == WeightMode::kExternal && bytes >= kInlineBelowBytes);
      if (external) {
        proto->set_data_location(onnx::TensorProto::EXTERNAL);
        auto* location = proto->add_external_data();
        location->set_key("location");
        location->set_value(data_location);
      }
      if (deferred) deferred->emplace_back(i, proto);
    }
    for (auto const& node : nodes) {
      auto* proto = graph->add_node();
      proto->set_op_type(node.op_type);
      proto->set_name(node.name);
      for (auto const& in : node.inputs) proto->add_input(in);
      for (auto const& out : node.outputs) proto->add_output(out);
      for (auto const& [key, value] : node.attrs) fill_attribute(key, value, *proto->add_attribute());
    }
    for (auto const& out : outputs) fill_value_info(out.name, out.dims, out.dtype, *graph->add_output());
    return model;
  }

  static void add_external_entry(onnx::TensorProto& proto, char const* key, int64_t value) {
    auto* entry = proto.add_external_data();
    entry->set_key(key);
    entry->set_value(std::to_string(value));
  }

  int64_t bytes_of(InitDecl const& init) const {
    return numel(init.dims) * static_cast<int64_t>(dtype_size(init.dtype));
  }

  int64_t rule_bytes() const {
    int64_t total = 0;
    for (auto const& init : inits) {
      if (!init.data) total += bytes_of(init);
    }
    return total;
  }
};

OnnxModelBuilder::OnnxModelBuilder(std::string graph_name, int64_t opset, uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(graph_name);
  impl_->opset = opset;
  impl_->seed = seed;
}
OnnxModelBuilder::~OnnxModelBuilder() = default;
OnnxModelBuilder::OnnxModelBuilder(OnnxModelBuilder&&) noexcept = default;
OnnxModelBuilder& OnnxModelBuilder::operator=(OnnxModelBuilder&&) noexcept = default;

std::string const& OnnxModelBuilder::name() const { return impl_->name; }
int64_t OnnxModelBuilder::opset() const { return impl_->opset; }
void OnnxModelBuilder::set_opset(int64_t opset) { impl_->opset = opset; }
uint64_t OnnxModelBuilder::seed() const { return impl_->seed; }
void OnnxModelBuilder::set_seed(uint64_t seed) { impl_->seed = seed; }
void OnnxModelBuilder::set_doc_string(std::string doc) { impl_->doc = std::move(doc); }
void OnnxModelBuilder::add_metadata(std::string key, std::string value) {
  impl_->metadata.emplace_back(std::move(key), std::move(value));
}

std::string OnnxModelBuilder::add_input(std::string name, std::vector<int64_t> dims, DType dtype) {
  impl_->define(name);
  impl_->inputs.push_back({name, std::move(dims), dtype});
  return name;
}

std::string OnnxModelBuilder::add_output(std::string name, std::vector<int64_t> dims, DType dtype) {
  for (auto const& out : impl_->outputs) {
    if (out.name == name)
      impl_->fail(invalid_argument("model '" + impl_->name + "': output '" + name + "' declared twice"));
  }
  impl_->outputs.push_back({name, std::move(dims), dtype});
  return name;
}

std::string OnnxModelBuilder::add_initializer(std::string name, std::vector<int64_t> dims, InitRule rule,
                                              bool trainable) {
  for (int64_t d : dims) {
    if (d < 0) {
      impl_->fail(invalid_argument("model '" + impl_->name + "': initializer '" + name +
                                   "' has a negative or batch dimension"));
    }
  }
  impl_->define(name);
  InitDecl init;
  init.name = name;
  init.dims = std::move(dims);
  init.trainable = trainable;
  init.rule = rule;
  impl_->inits.push_back(std::move(init));
  return name;
}

std::string OnnxModelBuilder::add_initializer(std::string name, TensorData data, bool trainable) {
  impl_->define(name);
  InitDecl init;
  init.name = name;
  init.dims = data.dims;
  init.dtype = data.dtype;
  init.trainable = trainable;
  init.data = std::make_shared<TensorData const>(std::move(data));
  impl_->inits.push_back(std::move(init));
  return name;
}

std::string OnnxModelBuilder::add_constant(std::string name, TensorData data) {
  add_node("Constant", {}, {name}, {{"value", std::move(data)}});
  return name;
}

void OnnxModelBuilder::add_node(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                                Attributes attrs, std::string name) {
  for (auto const& in : inputs) {
    if (!in.empty() && !impl_->defined.contains(in)) {
      impl_->fail(invalid_argument("model '" + impl_->name + "': " + op_type + " node '" + name + "' reads '" + in +
                                   "', which is not defined yet (add it before its consumers)"));
    }
  }
  for (auto const& out : outputs) impl_->define(out);
  if (name.empty()) {
    int& k = impl_->name_counters["node:" + op_type];
    do {
      name = op_type + "_" + std::to_string(k++);
    } while (impl_->node_names.contains(name));
  }
  if (!impl_->node_names.insert(name).second) {
    impl_->fail(invalid_argument("model '" + impl_->name + "': node name '" + name + "' is used twice"));
  }
  impl_->nodes.push_back(
      {std::move(op_type), std::move(inputs), std::move(outputs), std::move(attrs), std::move(name)});
}

std::string OnnxModelBuilder::fresh_name(std::string_view prefix) {
  std::string base(prefix);
  if (!impl_->defined.contains(base)) return base;
  int& k = impl_->name_counters["tensor:" + base];
  std::string name;
  do {
    name = base + "_" + std::to_string(++k);
  } while (impl_->defined.contains(name));
  return name;
}

Status OnnxModelBuilder::status() const { return impl_->first_error; }

int64_t OnnxModelBuilder::param_count() const {
  int64_t total = 0;
  for (auto const& init : impl_->inits) {
    if (init.trainable) total += numel(init.dims);
  }
  return total;
}

int64_t OnnxModelBuilder::initializer_bytes() const {
  int64_t total = 0;
  for (auto const& init : impl_->inits) total += impl_->bytes_of(init);
  return total;
}

Result<std::string> OnnxModelBuilder::serialize(SaveOptions const& options) const {
  RETURN_IF_ERROR(impl_->validate());
  if (!options.shape_only && impl_->rule_bytes() > kProtobufLimit) {
    return invalid_argument("model '" + impl_->name + "' has " + std::to_string(initializer_bytes() >> 20) +
                            " MiB of weights, over protobuf's 2 GiB limit: save() it with external data, or "
                            "serialize it shape-only");
  }
  std::vector<std::pair<std::size_t, onnx::TensorProto*>> deferred;
  auto model =
      impl_->build(options.shape_only ? WeightMode::kShapeOnly : WeightMode::kInline, impl_->name + ".data", &deferred);
  int64_t offset = 0;
  for (auto [index, proto] : deferred) {
    InitDecl const& init = impl_->inits[index];
    if (options.shape_only) {
      int64_t const bytes = impl_->bytes_of(init);
      Impl::add_external_entry(*proto, "offset", offset);
      Impl::add_external_entry(*proto, "length", bytes);
      offset += bytes;
      continue;
    }
    std::string raw;
    raw.reserve(static_cast<std::size_t>(impl_->bytes_of(init)));
    ValueStream values(init, impl_->seed);
    while (!values.done()) values.next_chunk(raw);
    proto->set_raw_data(std::move(raw));
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return internal_error("model '" + impl_->name + "' could not be serialized");
  }
  return bytes;
}

Status OnnxModelBuilder::save(std::string const& path, SaveOptions const& options) const {
  RETURN_IF_ERROR(impl_->validate());
  bool const external =
      options.shape_only || options.external_data == SaveOptions::ExternalData::kAlways ||
      (options.external_data == SaveOptions::ExternalData::kAuto && initializer_bytes() > options.auto_threshold_bytes);
  if (!external) {
    if (impl_->rule_bytes() > kProtobufLimit) {
      return invalid_argument("model '" + impl_->name + "' has " + std::to_string(initializer_bytes() >> 20) +
                              " MiB of weights, over protobuf's 2 GiB limit: save it with external data");
    }
  }

  fs::path const target(path);
  std::error_code ec;
  if (target.has_parent_path() && !fs::is_directory(target.parent_path(), ec)) {
    return not_found("cannot write '" + path + "': folder '" + target.parent_path().string() + "' does not exist");
  }
  std::string const data_name = target.filename().string() + ".data";
  fs::path const data_path = target.parent_path() / data_name;

  std::vector<std::pair<std::size_t, onnx::TensorProto*>> deferred;
  WeightMode const mode =
      options.shape_only ? WeightMode::kShapeOnly : (external ? WeightMode::kExternal : WeightMode::kInline);
  auto model = impl_->build(mode, data_name, &deferred);

  std::optional<AtomicFile> data_out;
  if (external) {
    ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::open(data_path.string(), "external data file"));
    data_out.emplace(std::move(f));
  }
  int64_t offset = 0;
  std::string chunk;
  for (auto [index, proto] : deferred) {
    InitDecl const& init = impl_->inits[index];
    int64_t const bytes = impl_->bytes_of(init);
    if (proto->data_location() != onnx::TensorProto::EXTERNAL) {
      std::string raw;
      raw.reserve(static_cast<std::size_t>(bytes));
      ValueStream values(init, impl_->seed);
      while (!values.done()) values.next_chunk(raw);
      proto->set_raw_data(std::move(raw));
      continue;
    }
    Impl::add_external_entry(*proto, "offset", offset);
    Impl::add_external_entry(*proto, "length", bytes);
    offset += bytes;
    if (options.shape_only) continue;
    ValueStream values(init, impl_->seed);
    while (!values.done()) {
      chunk.clear();
      values.next_chunk(chunk);
      RETURN_IF_ERROR(data_out->write(chunk));
    }
  }
  if (external && options.shape_only) RETURN_IF_ERROR(data_out->resize(offset));  // sparse: sizes without weights
  bool const has_data_file = external && offset > 0;  // every tensor may have been small enough to inline
  std::string model_bytes;
  if (!model.SerializeToString(&model_bytes))
    return internal_error("model '" + impl_->name + "' could not be serialized");
  ASSIGN_OR_RETURN(AtomicFile model_out, AtomicFile::open(path, "ONNX model"));
  RETURN_IF_ERROR(model_out.write(model_bytes));
  // The data file lands first: a model never points at data that is not there.
  if (has_data_file) RETURN_IF_ERROR(data_out->commit());
  data_out.reset();
  if (!has_data_file) fs::remove(data_path, ec);  // a stale data file of an earlier external save would mislead
  return model_out.commit();
}

Status OnnxModelBuilder::check() const {
  RETURN_IF_ERROR(impl_->validate());
  auto model = impl_->build(WeightMode::kAsInputs, "", nullptr);
  try {
    onnx::checker::check_model(model);
    onnx::ShapeInferenceOptions const strict(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/false);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (std::exception const& e) {
    // Shape inference reports every node downstream of the first failure: keep the first lines.
    std::string message = e.what();
    std::size_t cut = 0;
    for (int line = 0; line < 3 && cut != std::string::npos; ++line) cut = message.find('\n', cut + 1);
    if (cut != std::string::npos) message = message.substr(0, cut) + " ...";
    return invalid_argument("model '" + impl_->name + "' fails the ONNX checker: " + message);
  }
  return Status::ok();
}

Result<OpGraph> OnnxModelBuilder::to_graph(ImportOptions const& options) const {
  if (!options.load_weights) {
    if (options.run_checker) RETURN_IF_ERROR(check());
    ASSIGN_OR_RETURN(std::string bytes, serialize(SaveOptions{.shape_only = true}));
    ImportOptions unchecked = options;
    unchecked.run_checker = false;
    return load_onnx_bytes(bytes, impl_->name + " (shape only)", unchecked);
  }
  if (impl_->rule_bytes() <= kProtobufLimit) {
    ASSIGN_OR_RETURN(std::string bytes, serialize());
    return load_onnx_bytes(bytes, impl_->name, options);
  }
  // Over protobuf's limit: only a file with external data can hold it.
  std::error_code ec;
  fs::path const dir = fs::temp_directory_path(ec) / ("graphpipe_" + impl_->name + temp_suffix());
  if (ec || !fs::create_directories(dir, ec))
    return io_error("cannot create a temporary folder for '" + impl_->name + "'");
  fs::path const file = dir / (impl_->name + ".onnx");
  Status saved = save(file.string(), SaveOptions{.external_data = SaveOptions::ExternalData::kAlways});
  Result<OpGraph> graph = saved.is_ok() ? load_onnx(file.string(), options) : Result<OpGraph>(saved);
  fs::remove_all(dir, ec);
  return graph;
}

}  // namespace gp::graph
