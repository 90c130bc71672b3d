#include "models/encoder_stack.h"
#include "models/generators.h"

namespace gp::models {

// One transformer-encoder branch per modality, each with its own input; the pooled branch
// outputs are concatenated and classified by a two-layer head. BuildOptions' layers sets the
// layers per branch; build() has validated the options.
ZooModel build_mmt(Size size, BuildOptions const& options) {
  EncoderConfig config = encoder_config(size, options).value();
  if (options.layers > 0) config.layers_per_branch = options.layers;
  ZooModel model = new_model("mmt", size, Task::kClassification, options);
  Layers layers(model.builder);
  std::vector<std::string> pooled;
  for (int64_t b = 0; b < config.branches; ++b) {
    int64_t const in_dim = config.modality_dims[static_cast<std::size_t>(b)];
    std::string const x = add_model_input(model, "modality" + std::to_string(b), {graph::kBatch, config.seq, in_dim});
    pooled.push_back(encoder_stack(layers, x, in_dim, config.layers_per_branch, config, "branch" + std::to_string(b)));
  }
  std::string const fused = layers.node("Concat", pooled, "fusion", {{"axis", int64_t{1}}});
  std::string const h = layers.linear(fused, config.branches * config.hidden, config.hidden, "head.fc1", Act::kRelu);
  layers.linear(h, config.hidden, config.classes, "head.fc2", Act::kNone, "logits");
  set_model_output(model, "logits", config.classes);
  return model;
}

}  // namespace gp::models
