#include "models/generators.h"
#include "models/layers.h"

namespace gp::models {
namespace {

struct MlpConfig {
  int64_t in = 0;
  std::vector<int64_t> hidden;
  int64_t classes = 0;
};

MlpConfig mlp_config(Size size) {
  switch (size) {
    case Size::kTiny:
      return {32, {64, 64}, 10};
    case Size::kSmall:
      return {784, {1024, 1024}, 10};
    case Size::kPaper:
      return {4096, std::vector<int64_t>(8, 4096), 1000};
  }
  return {};
}

}  // namespace

ZooModel build_mlp(Size size, BuildOptions const& options) {
  MlpConfig const config = mlp_config(size);
  ZooModel model = new_model("mlp", size, Task::kClassification, options);
  Layers layers(model.builder);
  std::string h = add_model_input(model, "x", {graph::kBatch, config.in});
  int64_t width = config.in;
  for (std::size_t i = 0; i < config.hidden.size(); ++i) {
    h = layers.linear(h, width, config.hidden[i], "fc" + std::to_string(i), Act::kRelu);
    width = config.hidden[i];
  }
  layers.linear(h, width, config.classes, "classifier", Act::kNone, "logits");
  set_model_output(model, "logits", config.classes);
  return model;
}

}  // namespace gp::models
