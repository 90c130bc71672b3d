#include "models/zoo.h"

#include <functional>

#include "models/encoder_stack.h"
#include "models/generators.h"

namespace gp::models {
namespace {

using Generator = ZooModel (*)(Size, BuildOptions const&);

struct Entry {
  ModelInfo info;
  Generator generate;
};

std::vector<Entry> const& registry() {
  static std::vector<Entry> const entries = {
      {{"mmt", "multi-modal transformer: 4 encoder branches (one input each), concat, MLP head", Task::kClassification,
        true},
       build_mmt},
      {{"dlrm", "DLRM: 7 bottom MLPs + 7 embedding bags, pairwise-dot interaction, top MLP", Task::kClassification},
       build_dlrm},
      {{"candle_uno", "CANDLE-Uno: 7 feature-encoder MLP towers, concat, deep MLP regressor", Task::kRegression},
       build_candle_uno},
      {{"inception", "Inception CNN (GoogLeNet blocks: 1x1, 3x3, 5x5, pool branches + concat)", Task::kClassification},
       build_inception},
      {{"transformer", "sequential transformer stack with MMT's layer config (the control)", Task::kClassification,
        true},
       build_transformer},
      {{"mlp", "small multi-layer perceptron", Task::kClassification}, build_mlp},
  };
  return entries;
}

std::string valid_names(bool resizable_only = false) {
  std::string names;
  for (auto const& e : registry()) {
    if (!resizable_only || e.info.resizable) names += (names.empty() ? "" : ", ") + e.info.name;
  }
  return names;
}

}  // namespace

char const* size_name(Size size) {
  switch (size) {
    case Size::kTiny:
      return "tiny";
    case Size::kSmall:
      return "small";
    case Size::kPaper:
      return "paper";
  }
  return "?";
}

Result<Size> parse_size(std::string_view text) {
  for (Size s : kAllSizes) {
    if (text == size_name(s)) return s;
  }
  return invalid_argument("unknown model size '" + std::string(text) + "': use tiny, small or paper");
}

std::vector<ModelInfo> const& model_list() {
  static std::vector<ModelInfo> const infos = [] {
    std::vector<ModelInfo> out;
    for (auto const& e : registry()) out.push_back(e.info);
    return out;
  }();
  return infos;
}

Result<ModelInfo> find_model(std::string_view name) {
  for (auto const& e : registry()) {
    if (e.info.name == name) return e.info;
  }
  return not_found("unknown model '" + std::string(name) + "': the zoo has " + valid_names());
}

ZooModel new_model(std::string const& name, Size size, Task task, BuildOptions const& options) {
  ZooModel model{graph::OnnxModelBuilder(name, options.opset, options.seed), {}, {}, task};
  model.builder.set_doc_string("graphpipe model zoo: " + name + ", size " + size_name(size) + ", seed " +
                               std::to_string(options.seed));
  model.builder.add_metadata("graphpipe.model", name);
  model.builder.add_metadata("graphpipe.size", size_name(size));
  model.builder.add_metadata("graphpipe.seed", std::to_string(options.seed));
  model.builder.add_metadata("graphpipe.task", task == Task::kClassification ? "classification" : "regression");
  if (options.resizes()) {
    std::string const dims = "layers " + std::to_string(options.layers) + ", hidden " + std::to_string(options.hidden) +
                             ", heads " + std::to_string(options.heads) + ", ffn " + std::to_string(options.ffn) +
                             " (0: the size's)";
    model.builder.add_metadata("graphpipe.resize", dims);
  }
  return model;
}

std::string add_model_input(ZooModel& model, std::string const& name, std::vector<int64_t> dims, graph::DType dtype,
                            int64_t index_limit) {
  model.builder.add_input(name, dims, dtype);
  if (index_limit > 0) model.builder.add_metadata("graphpipe.index_limit." + name, std::to_string(index_limit));
  model.inputs.push_back({name, std::move(dims), dtype, index_limit});
  return name;
}

void set_model_output(ZooModel& model, std::string const& name, int64_t width) {
  model.builder.add_output(name, {graph::kBatch, width});
  model.output = {name, {graph::kBatch, width}, graph::DType::kFloat32, 0};
}

Result<ZooModel> build(std::string_view name, Size size, BuildOptions const& options) {
  if (options.opset < 13 || options.opset > 17) {
    return invalid_argument("opset " + std::to_string(options.opset) + " is not supported by the zoo: use 13..17");
  }
  for (auto const& e : registry()) {
    if (e.info.name != name) continue;
    if (options.resizes()) {
      if (!e.info.resizable) {
        return invalid_argument("model '" + e.info.name + "' has a fixed shape: layers/hidden/heads/ffn apply to " +
                                valid_names(true) + " only");
      }
      RETURN_IF_ERROR(encoder_config(size, options).status());
    }
    ZooModel model = e.generate(size, options);
    RETURN_IF_ERROR(model.builder.status());
    return model;
  }
  return find_model(name).status();
}

Status export_model(std::string_view name, Size size, std::string const& path, ExportOptions const& options) {
  ASSIGN_OR_RETURN(ZooModel model, build(name, size, options.build));
  return model.builder.save(path, graph::SaveOptions{.shape_only = options.shape_only});
}

Result<graph::OpGraph> build_graph(std::string_view name, Size size, uint64_t seed, bool load_weights) {
  return build_graph(name, size, BuildOptions{.seed = seed}, load_weights);
}

Result<graph::OpGraph> build_graph(std::string_view name, Size size, BuildOptions const& options, bool load_weights) {
  ASSIGN_OR_RETURN(ZooModel model, build(name, size, options));
  return model.builder.to_graph(graph::ImportOptions{.load_weights = load_weights});
}

}  // namespace gp::models
