#include <cstring>

#include "core/units.h"
#include "exec/data_sources.h"
#include "exec/npy.h"

namespace gp::exec {

namespace {

class NpyData final : public DataSource {
 public:
  NpyData(std::vector<std::shared_ptr<ArrayRef const>> inputs, std::shared_ptr<ArrayRef const> labels,
          std::string describe)
      : inputs_(std::move(inputs)), labels_(std::move(labels)), describe_(std::move(describe)) {}

  std::string describe() const override { return describe_; }

  Result<Batch> batch(int64_t first, int64_t count) override {
    Batch b;
    int64_t const n = labels_->shape[0];
    auto gather = [&](ArrayRef const& a) {
      std::vector<int64_t> shape = a.shape;
      shape[0] = count;
      Tensor t(shape, a.dtype);
      std::size_t const per = a.size / static_cast<std::size_t>(n);
      for (int64_t j = 0; j < count; ++j)
        std::memcpy(static_cast<std::byte*>(t.raw()) + j * per, a.data + ((first + j) % n) * per, per);
      return t;
    };
    for (auto const& a : inputs_) b.inputs.push_back(gather(*a));
    b.labels = gather(*labels_);
    return b;
  }

 private:
  std::vector<std::shared_ptr<ArrayRef const>> inputs_;
  std::shared_ptr<ArrayRef const> labels_;
  std::string describe_;
};

// The arrays (named `input_names` and `label_name` in errors) checked against the model's inputs
// and the loss's labels.
Result<std::unique_ptr<DataSource>> make_array_source(std::vector<std::shared_ptr<ArrayRef const>> arrays,
                                                      std::shared_ptr<ArrayRef const> lab,
                                                      std::vector<std::string> const& input_names,
                                                      std::string const& label_name,
                                                      std::vector<InputSpec> const& specs, LabelSpec const& labels,
                                                      std::string const& origin) {
  for (std::size_t k = 0; k < specs.size(); ++k) {
    ArrayRef const& a = *arrays[k];
    if (a.shape.empty() || a.shape[0] < 1)
      return invalid_argument(input_names[k] + ": needs a leading sample dimension with at least one sample");
    std::vector<int64_t> per(a.shape.begin() + 1, a.shape.end());
    if (per != specs[k].dims)
      return invalid_argument(input_names[k] + ": per-sample shape " + dims_string(per) +
                              " does not match model input '" + specs[k].name + "' " + dims_string(specs[k].dims) +
                              " (the " + origin + "'s shape is " + dims_string(a.shape) + ")");
    if (a.dtype != specs[k].dtype)
      return invalid_argument(input_names[k] + ": dtype " + graph::dtype_name(a.dtype) + " but model input '" +
                              specs[k].name + "' is " + graph::dtype_name(specs[k].dtype));
  }
  int64_t const n = arrays[0]->shape[0];
  for (std::size_t k = 0; k < arrays.size(); ++k)
    if (arrays[k]->shape[0] != n)
      return invalid_argument(input_names[k] + ": has " + std::to_string(arrays[k]->shape[0]) + " samples but " +
                              input_names[0] + " has " + std::to_string(n));
  if (lab->shape.empty() || lab->shape[0] != n)
    return invalid_argument(label_name + ": has shape " + dims_string(lab->shape) + " but the inputs have " +
                            std::to_string(n) + " samples");
  std::vector<int64_t> per(lab->shape.begin() + 1, lab->shape.end());
  bool const ce = labels.loss == LossKind::kCrossEntropy;
  if (per != labels.label_dims)
    return invalid_argument(label_name + ": per-sample label shape " + dims_string(per) + " does not match " +
                            dims_string(labels.label_dims) + " expected by the model output and loss '" +
                            loss_kind_name(labels.loss) + "'");
  if (ce && lab->dtype != DType::kInt64)
    return invalid_argument(label_name + ": cross-entropy needs integer class labels, the " + origin + " holds " +
                            graph::dtype_name(lab->dtype));
  if (!ce && lab->dtype != DType::kFloat32)
    return invalid_argument(label_name + ": mse needs float targets, the " + origin + " holds " +
                            graph::dtype_name(lab->dtype));
  if (ce) {
    auto const* v = reinterpret_cast<int64_t const*>(lab->data);
    for (int64_t i = 0; i < static_cast<int64_t>(lab->size / 8); ++i)
      if (v[i] < 0 || v[i] >= labels.classes)
        return invalid_argument(label_name + ": label " + std::to_string(v[i]) + " at index " + std::to_string(i) +
                                " is outside [0, " + std::to_string(labels.classes) + ")");
  }
  std::string desc = origin + " (" + std::to_string(n) + " samples from " + input_names[0] + ")";
  return std::unique_ptr<DataSource>(std::make_unique<NpyData>(std::move(arrays), std::move(lab), desc));
}

}  // namespace

Result<std::unique_ptr<DataSource>> make_npy_source(DataConfig const& config, std::vector<InputSpec> const& specs,
                                                    LabelSpec const& labels) {
  if (config.inputs.size() != specs.size())
    return invalid_argument("data.inputs names " + std::to_string(config.inputs.size()) +
                            " .npy files but the model has " + std::to_string(specs.size()) + " inputs");
  std::vector<std::shared_ptr<ArrayRef const>> arrays;
  for (std::string const& path : config.inputs) {
    ASSIGN_OR_RETURN(NpyArray a, read_npy(path));
    arrays.push_back(own_array(std::move(a)));
  }
  ASSIGN_OR_RETURN(NpyArray lab, read_npy(config.labels));
  return make_array_source(std::move(arrays), own_array(std::move(lab)), config.inputs, config.labels, specs, labels,
                           "npy");
}

Result<std::unique_ptr<DataSource>> make_memory_source(DataConfig const& config, std::vector<InputSpec> const& specs,
                                                       LabelSpec const& labels) {
  if (config.input_arrays.size() != specs.size())
    return invalid_argument("data gives " + std::to_string(config.input_arrays.size()) +
                            " input arrays but the model has " + std::to_string(specs.size()) + " inputs");
  if (!config.label_array) return invalid_argument("data gives input arrays but no label array");
  for (auto const& a : config.input_arrays)
    if (!a) return invalid_argument("data: an input array is missing");
  std::vector<std::string> names = config.inputs;
  for (std::size_t k = names.size(); k < specs.size(); ++k) names.push_back("data input " + std::to_string(k));
  std::string const label_name = config.labels.empty() ? "data labels" : config.labels;
  return make_array_source(config.input_arrays, config.label_array, names, label_name, specs, labels, "array");
}

}  // namespace gp::exec
