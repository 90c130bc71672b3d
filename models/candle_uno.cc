#include "models/generators.h"
#include "models/layers.h"

namespace gp::models {
namespace {

struct CandleConfig {
  int64_t towers = 0;
  int64_t feature_dim = 0;  // input width of every tower
  int64_t tower_layers = 0;
  int64_t tower_width = 0;
  std::vector<int64_t> top;  // the deep MLP after the concat, before the 1-wide output
};

CandleConfig candle_config(Size size) {
  switch (size) {
    case Size::kTiny:
      return {7, 16, 4, 32, {64, 64, 64}};
    case Size::kSmall:
      return {7, 128, 4, 256, {512, 256, 128}};
    case Size::kPaper:
      return {7, 4096, 4, 4096, {4096, 4096, 4096, 4096}};
  }
  return {};
}

}  // namespace

// Feature-encoder towers (one per input feature set, as Uno encodes cell-line and drug features
// separately), concatenated, then a deep MLP regressing the drug response.
ZooModel build_candle_uno(Size size, BuildOptions const& options) {
  CandleConfig const config = candle_config(size);
  ZooModel model = new_model("candle_uno", size, Task::kRegression, options);
  Layers layers(model.builder);
  std::vector<std::string> encoded;
  for (int64_t t = 0; t < config.towers; ++t) {
    std::string const prefix = "tower" + std::to_string(t);
    std::string h = add_model_input(model, "feature" + std::to_string(t), {graph::kBatch, config.feature_dim});
    int64_t width = config.feature_dim;
    for (int64_t l = 0; l < config.tower_layers; ++l) {
      h = layers.linear(h, width, config.tower_width, prefix + ".fc" + std::to_string(l), Act::kRelu);
      width = config.tower_width;
    }
    encoded.push_back(h);
  }
  std::string h = layers.node("Concat", encoded, "concat", {{"axis", int64_t{1}}});
  int64_t width = config.towers * config.tower_width;
  for (std::size_t i = 0; i < config.top.size(); ++i) {
    h = layers.linear(h, width, config.top[i], "top.fc" + std::to_string(i), Act::kRelu);
    width = config.top[i];
  }
  layers.linear(h, width, 1, "top.out", Act::kNone, "prediction");
  set_model_output(model, "prediction", 1);
  return model;
}

}  // namespace gp::models
