#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>

#include "core/hash.h"
#include "exec/data_sources.h"

namespace gp::exec {

namespace {

uint64_t mix(uint64_t a, uint64_t b) {  // splitmix64 of a combination: independent streams per sample
  return mix64(a * kGoldenGamma + b + 0x632BE59BD9B4E019ull);
}

int64_t product(std::vector<int64_t> const& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

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

}  // namespace

std::unique_ptr<DataSource> make_synthetic_source(std::vector<InputSpec> inputs, LabelSpec labels, uint64_t seed,
                                                  int64_t samples) {
  return std::make_unique<SyntheticData>(std::move(inputs), std::move(labels), seed, samples);
}

}  // namespace gp::exec
