#include "exec/data.h"
#include "core/hash.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>

#include "core/file_io.h"

namespace gp::exec {

namespace {

uint64_t mix(uint64_t a, uint64_t b) {  // splitmix64 of a combination: independent streams per sample
  return mix64(a * kGoldenGamma + b + 0x632BE59BD9B4E019ull);
}

std::string dims_string(std::vector<int64_t> const& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

int64_t product(std::vector<int64_t> const& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

// Per-sample dims of a graph input or output (the batch dimension removed).
Result<std::vector<int64_t>> sample_dims(graph::TensorInfo const& t) {
  if (t.shape.batch_axis() != 0)
    return invalid_argument("tensor '" + t.name + "' has shape " + t.shape.to_string() +
                            ": training needs the batch as its first dimension");
  std::vector<int64_t> dims(t.shape.dims.begin() + 1, t.shape.dims.end());
  for (int64_t d : dims)
    if (d < 0) return unsupported("tensor '" + t.name + "' has a dynamic dimension: " + t.shape.to_string());
  return dims;
}

struct InputSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;  // per sample
  int64_t vocab = 0;          // integer inputs: values in [0, vocab)
};

Result<std::vector<InputSpec>> input_specs(graph::OpGraph const& graph) {
  std::vector<InputSpec> specs;
  for (graph::TensorId id : graph.inputs()) {
    auto const& t = graph.tensor(id);
    InputSpec s;
    s.name = t.name;
    s.dtype = t.dtype;
    ASSIGN_OR_RETURN(s.dims, sample_dims(t));
    if (s.dtype == DType::kInt64 || s.dtype == DType::kInt32) {
      s.dtype = DType::kInt64;
      s.vocab = 16;
      for (graph::OpId c : t.consumers) {
        auto const& op = graph.op(c);
        if (op.type == "Gather" && op.inputs.size() == 2 && op.inputs[1] == id) {
          auto const& table = graph.tensor(op.inputs[0]);
          if (!table.shape.dims.empty() && table.shape.dims[0] > 0) s.vocab = table.shape.dims[0];
        }
      }
    } else if (s.dtype != DType::kFloat32) {
      return unsupported(std::string("model input '") + t.name + "' has dtype " + graph::dtype_name(t.dtype) +
                         ": training data supports float32 and int64 inputs");
    }
    specs.push_back(std::move(s));
  }
  if (specs.empty()) return invalid_argument("the model has no data inputs to feed");
  return specs;
}

// ---- synthetic ----------------------------------------------------------------------------

class SyntheticData final : public DataSource {
 public:
  SyntheticData(std::vector<InputSpec> inputs, LabelSpec labels, uint64_t seed, int64_t samples)
      : inputs_(std::move(inputs)), labels_(std::move(labels)), seed_(seed), samples_(samples) {
    for (auto const& s : inputs_) {
      if (s.dtype == DType::kFloat32)
        float_elems_ += product(s.dims);
      else
        tokens_ += product(s.dims);
    }
    label_elems_ = product(labels_.label_dims);
    std::mt19937_64 rng(mix(seed_, 0x7EAC4E5ull));
    std::normal_distribution<float> normal(0.f, 1.f);
    features_ = std::min<int64_t>(float_elems_, 256);
    feature_index_.resize(features_);
    for (auto& i : feature_index_) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(float_elems_));
    int64_t const out_elems = labels_.loss == LossKind::kCrossEntropy ? label_elems_ * labels_.classes : label_elems_;
    if (features_ > 0) {
      teacher_.resize(static_cast<std::size_t>(out_elems * features_));
      for (auto& w : teacher_) w = normal(rng);
    }
    table_.resize(4096);
    for (auto& w : table_) w = normal(rng);
    perm_.resize(4096);
    std::iota(perm_.begin(), perm_.end(), 0);
    std::shuffle(perm_.begin(), perm_.end(), rng);
    if (samples_ > 0) cache_.resize(static_cast<std::size_t>(samples_));
  }

  std::string describe() const override {
    return "synthetic (seed " + std::to_string(seed_) + ", " +
           (samples_ > 0 ? std::to_string(samples_) + " samples" : std::string("unbounded")) + ")";
  }

  Result<Batch> batch(int64_t first, int64_t count) override {
    Batch b;
    for (auto const& s : inputs_) {
      std::vector<int64_t> shape = {count};
      shape.insert(shape.end(), s.dims.begin(), s.dims.end());
      b.inputs.emplace_back(shape, s.dtype);
    }
    std::vector<int64_t> lshape = {count};
    lshape.insert(lshape.end(), labels_.label_dims.begin(), labels_.label_dims.end());
    bool const ce = labels_.loss == LossKind::kCrossEntropy;
    b.labels = Tensor(lshape, ce ? DType::kInt64 : DType::kFloat32);
    for (int64_t j = 0; j < count; ++j) {
      Sample const& smp = sample(first + j);
      for (std::size_t k = 0; k < inputs_.size(); ++k) {
        std::size_t const bytes = b.inputs[k].nbytes() / static_cast<std::size_t>(count);
        std::memcpy(static_cast<std::byte*>(b.inputs[k].raw()) + j * bytes, smp.inputs[k].data(), bytes);
      }
      std::size_t const lbytes = b.labels.nbytes() / static_cast<std::size_t>(count);
      std::memcpy(static_cast<std::byte*>(b.labels.raw()) + j * lbytes, smp.labels.data(), lbytes);
    }
    return b;
  }

 private:
  struct Sample {
    std::vector<std::vector<std::byte>> inputs;
    std::vector<std::byte> labels;
  };

  Sample const& sample(int64_t index) {
    if (samples_ > 0) {
      index %= samples_;
      auto& slot = cache_[static_cast<std::size_t>(index)];
      if (!slot) slot = make(index);
      return *slot;
    }
    scratch_ = make(index);
    return scratch_;
  }

  Sample make(int64_t index) const {
    std::mt19937_64 rng(mix(seed_, static_cast<uint64_t>(index) + 1));
    std::normal_distribution<float> normal(0.f, 1.f);
    Sample smp;
    std::vector<float> x;
    std::vector<int64_t> tokens;
    for (auto const& s : inputs_) {
      int64_t const n = product(s.dims);
      std::vector<std::byte> bytes(static_cast<std::size_t>(n) * 8);
      if (s.dtype == DType::kFloat32) {
        bytes.resize(static_cast<std::size_t>(n) * 4);
        auto* p = reinterpret_cast<float*>(bytes.data());
        for (int64_t i = 0; i < n; ++i) x.push_back(p[i] = normal(rng));
      } else {
        auto* p = reinterpret_cast<int64_t*>(bytes.data());
        for (int64_t i = 0; i < n; ++i) tokens.push_back(p[i] = static_cast<int64_t>(rng() % s.vocab));
      }
      smp.inputs.push_back(std::move(bytes));
    }
    // Teacher: a fixed random linear map of (a fixed subset of) the float inputs, or a fixed
    // random table lookup of the tokens.
    bool const ce = labels_.loss == LossKind::kCrossEntropy;
    int64_t const out_elems = ce ? label_elems_ * labels_.classes : label_elems_;
    std::vector<float> z(static_cast<std::size_t>(out_elems), 0.f);
    if (features_ > 0) {
      float const norm = 1.f / std::sqrt(static_cast<float>(features_));
      for (int64_t o = 0; o < out_elems; ++o) {
        float acc = 0;
        float const* w = teacher_.data() + o * features_;
        for (int64_t k = 0; k < features_; ++k) acc += w[k] * x[feature_index_[k]];
        z[o] = acc * norm;
      }
    }
    if (ce) {
      smp.labels.resize(static_cast<std::size_t>(label_elems_) * 8);
      auto* lab = reinterpret_cast<int64_t*>(smp.labels.data());
      for (int64_t r = 0; r < label_elems_; ++r) {
        if (features_ > 0) {
          float const* row = z.data() + r * labels_.classes;
          lab[r] = std::max_element(row, row + labels_.classes) - row;
        } else {
          int64_t const tok = tokens[static_cast<std::size_t>(r) % tokens.size()];
          lab[r] = perm_[static_cast<std::size_t>(tok) % perm_.size()] % labels_.classes;
        }
      }
    } else {
      smp.labels.resize(static_cast<std::size_t>(label_elems_) * 4);
      auto* t = reinterpret_cast<float*>(smp.labels.data());
      for (int64_t r = 0; r < label_elems_; ++r) {
        if (features_ > 0) {
          t[r] = z[r];
        } else {
          int64_t const tok = tokens[static_cast<std::size_t>(r) % tokens.size()];
          t[r] = table_[static_cast<std::size_t>(tok * 31 + r) % table_.size()];
        }
      }
    }
    return smp;
  }

  std::vector<InputSpec> inputs_;
  LabelSpec labels_;
  uint64_t seed_;
  int64_t samples_;
  int64_t float_elems_ = 0, tokens_ = 0, label_elems_ = 0, features_ = 0;
  std::vector<int64_t> feature_index_;
  std::vector<float> teacher_, table_;
  std::vector<int64_t> perm_;
  std::vector<std::optional<Sample>> cache_;
  Sample scratch_;
};

// ---- npy ------------------------------------------------------------------------------------

class NpyData final : public DataSource {
 public:
  NpyData(std::vector<NpyArray> inputs, NpyArray labels, std::string describe)
      : inputs_(std::move(inputs)), labels_(std::move(labels)), describe_(std::move(describe)) {}

  std::string describe() const override { return describe_; }

  Result<Batch> batch(int64_t first, int64_t count) override {
    Batch b;
    int64_t const n = labels_.shape[0];
    auto gather = [&](NpyArray const& a) {
      std::vector<int64_t> shape = a.shape;
      shape[0] = count;
      Tensor t(shape, a.dtype);
      std::size_t const per = a.bytes.size() / static_cast<std::size_t>(n);
      for (int64_t j = 0; j < count; ++j)
        std::memcpy(static_cast<std::byte*>(t.raw()) + j * per, a.bytes.data() + ((first + j) % n) * per, per);
      return t;
    };
    for (auto const& a : inputs_) b.inputs.push_back(gather(a));
    b.labels = gather(labels_);
    return b;
  }

 private:
  std::vector<NpyArray> inputs_;
  NpyArray labels_;
  std::string describe_;
};

Result<std::unique_ptr<DataSource>> make_npy(DataConfig const& config, std::vector<InputSpec> const& specs,
                                             LabelSpec const& labels) {
  if (config.inputs.size() != specs.size())
    return invalid_argument("data.inputs names " + std::to_string(config.inputs.size()) +
                            " .npy files but the model has " + std::to_string(specs.size()) + " inputs");
  std::vector<NpyArray> arrays;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    ASSIGN_OR_RETURN(NpyArray a, read_npy(config.inputs[k]));
    if (a.shape.empty() || a.shape[0] < 1)
      return invalid_argument(config.inputs[k] + ": needs a leading sample dimension with at least one sample");
    std::vector<int64_t> per(a.shape.begin() + 1, a.shape.end());
    if (per != specs[k].dims)
      return invalid_argument(config.inputs[k] + ": per-sample shape " + dims_string(per) +
                              " does not match model input '" + specs[k].name + "' " + dims_string(specs[k].dims) +
                              " (the file's shape is " + dims_string(a.shape) + ")");
    if (a.dtype != specs[k].dtype)
      return invalid_argument(config.inputs[k] + ": dtype " + graph::dtype_name(a.dtype) + " but model input '" +
                              specs[k].name + "' is " + graph::dtype_name(specs[k].dtype));
    arrays.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(NpyArray lab, read_npy(config.labels));
  int64_t const n = arrays[0].shape[0];
  for (std::size_t k = 0; k < arrays.size(); ++k)
    if (arrays[k].shape[0] != n)
      return invalid_argument(config.inputs[k] + ": has " + std::to_string(arrays[k].shape[0]) + " samples but " +
                              config.inputs[0] + " has " + std::to_string(n));
  if (lab.shape.empty() || lab.shape[0] != n)
    return invalid_argument(config.labels + ": has shape " + dims_string(lab.shape) + " but the inputs have " +
                            std::to_string(n) + " samples");
  std::vector<int64_t> per(lab.shape.begin() + 1, lab.shape.end());
  bool const ce = labels.loss == LossKind::kCrossEntropy;
  if (per != labels.label_dims)
    return invalid_argument(config.labels + ": per-sample label shape " + dims_string(per) + " does not match " +
                            dims_string(labels.label_dims) + " expected by the model output and loss '" +
                            loss_kind_name(labels.loss) + "'");
  if (ce && lab.dtype != DType::kInt64)
    return invalid_argument(config.labels + ": cross-entropy needs integer class labels, the file holds " +
                            graph::dtype_name(lab.dtype));
  if (!ce && lab.dtype != DType::kFloat32)
    return invalid_argument(config.labels + ": mse needs float targets, the file holds " +
                            graph::dtype_name(lab.dtype));
  if (ce) {
    auto const* v = reinterpret_cast<int64_t const*>(lab.bytes.data());
    for (int64_t i = 0; i < static_cast<int64_t>(lab.bytes.size() / 8); ++i)
      if (v[i] < 0 || v[i] >= labels.classes)
        return invalid_argument(config.labels + ": label " + std::to_string(v[i]) + " at index " + std::to_string(i) +
                                " is outside [0, " + std::to_string(labels.classes) + ")");
  }
  std::string desc = "npy (" + std::to_string(n) + " samples from " + config.inputs[0] + ")";
  return std::unique_ptr<DataSource>(std::make_unique<NpyData>(std::move(arrays), std::move(lab), desc));
}

}  // namespace

Result<LabelSpec> label_spec(graph::OpGraph const& graph, LossKind loss) {
  if (graph.outputs().empty()) return invalid_argument("the model has no output to attach the loss to");
  auto const& out = graph.tensor(graph.outputs()[0]);
  if (out.dtype != DType::kFloat32)
    return unsupported("model output '" + out.name + "' is " + graph::dtype_name(out.dtype) +
                       ", the loss needs float32");
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, sample_dims(out));
  LabelSpec s;
  s.loss = loss;
  if (loss == LossKind::kCrossEntropy) {
    if (dims.empty())
      return invalid_argument("model output '" + out.name + "' " + out.shape.to_string() +
                              " has no class dimension for cross-entropy (use loss: mse)");
    s.classes = dims.back();
    dims.pop_back();
  }
  s.label_dims = dims;
  return s;
}

Result<std::unique_ptr<DataSource>> make_data_source(DataConfig const& config, graph::OpGraph const& graph,
                                                     LossKind loss, uint64_t seed) {
  ASSIGN_OR_RETURN(auto specs, input_specs(graph));
  ASSIGN_OR_RETURN(auto labels, label_spec(graph, loss));
  if (config.kind == DataConfig::Kind::kNpy) return make_npy(config, specs, labels);
  return std::unique_ptr<DataSource>(std::make_unique<SyntheticData>(std::move(specs), labels, seed, config.samples));
}

// ---- .npy files -------------------------------------------------------------------------------

Result<NpyArray> read_npy(std::string const& path) {
  ASSIGN_OR_RETURN(std::string bytes, read_whole_file(path, ".npy file", int64_t{1} << 40));
  return parse_npy(bytes, path);
}

Result<NpyArray> parse_npy(std::string_view bytes, std::string const& source) {
  auto bad = [&](std::string const& why) { return parse_error(source + ": " + why); };
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    return bad("not a .npy file (bad magic)");
  auto const* u = reinterpret_cast<unsigned char const*>(bytes.data());
  int const major = u[6];
  if (major < 1 || major > 3)
    return unsupported(source + ": .npy format version " + std::to_string(major) + " (1-3 are read)");
  std::size_t header_len = 0, pos = 0;
  if (major == 1) {
    header_len = u[8] | (u[9] << 8);
    pos = 10;
  } else {
    if (bytes.size() < 12) return bad("truncated header");
    header_len = u[8] | (u[9] << 8) | (u[10] << 16) | (static_cast<std::size_t>(u[11]) << 24);
    pos = 12;
  }
  if (header_len > bytes.size() - pos) return bad("truncated header");
  std::string const header(bytes.substr(pos, header_len));
  pos += header_len;
  auto field = [&](std::string const& key) -> std::string {
    auto p = header.find("'" + key + "'");
    if (p == std::string::npos) return {};
    p = header.find(':', p);
    return p == std::string::npos ? std::string{} : header.substr(p + 1);
  };
  std::string descr = field("descr");
  auto q1 = descr.find('\''), q2 = q1 == std::string::npos ? q1 : descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) return bad("no 'descr' in the header");
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  std::string fortran = field("fortran_order");
  if (fortran.find("True") < fortran.find(','))
    return unsupported(source + ": Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  std::string shape_text = field("shape");
  auto o = shape_text.find('('), c = shape_text.find(')');
  if (o == std::string::npos || c == std::string::npos || c < o) return bad("no 'shape' in the header");
  std::size_t elem = 0;
  if (descr == "<f4" || descr == "<i4")
    elem = 4;
  else if (descr == "<f8" || descr == "<i8")
    elem = 8;
  else
    return unsupported(source + ": dtype '" + descr + "' is not supported (use float32 '<f4' or int64 '<i8')");
  NpyArray a;
  std::size_t const data_bytes = bytes.size() - pos;
  uint64_t const cap = data_bytes / elem + 1;  // element counts above this cannot match the data
  uint64_t n = 1;
  int64_t nonzero = 1;  // the product of the non-zero dimensions must fit, even when a zero makes n 0
  std::stringstream ss(shape_text.substr(o + 1, c - o - 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto const first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    int64_t d = -1;
    auto const [end, ec] = std::from_chars(item.data() + first, item.data() + item.size(), d);
    if (ec != std::errc{} ||
        std::string_view(end, item.data() + item.size()).find_first_not_of(' ') != std::string_view::npos || d < 0)
      return bad("bad dimension '" + item + "' in the shape");
    a.shape.push_back(d);
    if (d > 0 && __builtin_mul_overflow(nonzero, d, &nonzero))
      return bad("shape " + dims_string(a.shape) + "... has more elements than fit in 64 bits");
    uint64_t const ud = static_cast<uint64_t>(d);
    n = ud != 0 && n > cap / ud ? cap : n * ud;  // saturates at cap: more than the data holds
    if (a.shape.size() > 32) return bad("more than 32 dimensions");
  }
  if (n * elem != data_bytes)
    return bad("the data holds " + std::to_string(data_bytes) + " bytes but shape " + dims_string(a.shape) + " needs " +
               (n * elem > data_bytes ? "more" : std::to_string(n * elem)) + " (truncated or not this shape)");
  char const* raw = bytes.data() + pos;
  a.dtype = descr[1] == 'f' ? DType::kFloat32 : DType::kInt64;
  a.bytes.resize(static_cast<std::size_t>(n) * dtype_size(a.dtype));
  if (n == 0) return a;  // an empty array: nothing to copy (and no pointer to copy from)
  if (descr == "<f4" || descr == "<i8") {
    std::memcpy(a.bytes.data(), raw, a.bytes.size());
  } else if (descr == "<f8") {
    for (uint64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, raw + i * 8, 8);
      float const f = static_cast<float>(v);
      std::memcpy(a.bytes.data() + i * 4, &f, 4);
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, raw + i * 4, 4);
      int64_t const w = v;
      std::memcpy(a.bytes.data() + i * 8, &w, 8);
    }
  }
  return a;
}

Status write_npy(std::string const& path, NpyArray const& array) {
  std::string descr;
  if (array.dtype == DType::kFloat32)
    descr = "<f4";
  else if (array.dtype == DType::kInt64)
    descr = "<i8";
  else
    return unsupported(std::string("write_npy: dtype ") + graph::dtype_name(array.dtype));
  std::string shape = "(";
  for (int64_t d : array.shape) shape += std::to_string(d) + ",";
  if (array.shape.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  std::size_t const total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::open(path, ".npy file"));
  unsigned char const len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                static_cast<unsigned char>(header.size() >> 8)};
  RETURN_IF_ERROR(out.write("\x93NUMPY\x01\x00", 8));
  RETURN_IF_ERROR(out.write(len, 2));
  RETURN_IF_ERROR(out.write(header));
  RETURN_IF_ERROR(out.write(array.bytes.data(), array.bytes.size()));
  return out.commit();
}

}  // namespace gp::exec
