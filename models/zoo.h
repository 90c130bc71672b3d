// The model zoo: generators of the benchmark models at three sizes. Every model has one output
// (logits [N, classes] or a regression prediction [N, k]); weights are drawn deterministically
// from the seed; paper sizes are meant for planning and simulation in shape-only form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graph/onnx_builder.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::models {

enum class Size : uint8_t { kTiny, kSmall, kPaper };
inline constexpr Size kAllSizes[] = {Size::kTiny, Size::kSmall, Size::kPaper};
char const* size_name(Size size);
Result<Size> parse_size(std::string_view text);  // "tiny" | "small" | "paper"

enum class Task : uint8_t { kClassification, kRegression };

struct ModelInfo {
  std::string name;         // "mmt", "dlrm", ...
  std::string description;  // one line
  Task task = Task::kClassification;
  bool resizable = false;  // accepts BuildOptions' layers / hidden / heads / ffn
};
std::vector<ModelInfo> const& model_list();
Result<ModelInfo> find_model(std::string_view name);  // error lists the valid names

struct InputSpec {
  std::string name;
  std::vector<int64_t> dims;  // graph::kBatch first
  graph::DType dtype = graph::DType::kFloat32;
  int64_t index_limit = 0;  // int64 index inputs: values must lie in [0, index_limit)
};

struct ZooModel {
  graph::OnnxModelBuilder builder;
  std::vector<InputSpec> inputs;
  InputSpec output;  // its dims: [kBatch, classes] or [kBatch, k]
  Task task = Task::kClassification;
};

struct BuildOptions {
  uint64_t seed = 0;
  int64_t opset = 17;  // 13..17 (LayerNormalization is decomposed below 17)
  // Depth and width of the transformer models ("transformer", "mmt"); 0 keeps the size's value.
  // layers: encoder layers of the transformer's chain, or of each MMT branch (1..kMaxLayers).
  // hidden: model width (1..kMaxHidden). heads: attention heads, dividing hidden; 0 keeps the
  // size's head width (hidden / heads) when hidden is set. ffn: feed-forward width; 0 keeps the
  // size's ratio ffn / hidden.
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
  bool resizes() const { return layers != 0 || hidden != 0 || heads != 0 || ffn != 0; }
};
inline constexpr int64_t kMaxLayers = 2048;
inline constexpr int64_t kMaxHidden = 65536;

// Declares the model; nothing is materialised until it is serialized or saved.
Result<ZooModel> build(std::string_view name, Size size, BuildOptions const& options = {});

struct ExportOptions {
  BuildOptions build;
  bool shape_only = false;  // see graph::SaveOptions::shape_only
};
// Writes an .onnx file atomically (with "<path>.data" when the weights exceed 1 GiB).
Status export_model(std::string_view name, Size size, std::string const& path, ExportOptions const& options = {});

// The model as an OpGraph through the ONNX importer; load_weights=false never materialises weights.
Result<graph::OpGraph> build_graph(std::string_view name, Size size, uint64_t seed = 0, bool load_weights = true);
Result<graph::OpGraph> build_graph(std::string_view name, Size size, BuildOptions const& options,
                                   bool load_weights = true);

}  // namespace gp::models
