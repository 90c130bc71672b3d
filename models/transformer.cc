#include "models/encoder_stack.h"
#include "models/generators.h"

namespace gp::models {

// The sequential control for MMT: the same layers (branches × layers per branch of them, MMT's
// hidden/heads/FFN/sequence) stacked in one chain over one input. BuildOptions resize it (deep
// transformers for planner scale tests); build() has validated them.
ZooModel build_transformer(Size size, BuildOptions const& options) {
  EncoderConfig const config = encoder_config(size, options).value();
  int64_t const num_layers = options.layers > 0 ? options.layers : config.branches * config.layers_per_branch;
  ZooModel model = new_model("transformer", size, Task::kClassification, options);
  Layers layers(model.builder);
  int64_t const in_dim = config.modality_dims.front();
  std::string const x = add_model_input(model, "x", {graph::kBatch, config.seq, in_dim});
  std::string const pooled = encoder_stack(layers, x, in_dim, num_layers, config, "encoder");
  std::string const h = layers.linear(pooled, config.hidden, config.hidden, "head.fc1", Act::kRelu);
  layers.linear(h, config.hidden, config.classes, "head.fc2", Act::kNone, "logits");
  set_model_output(model, "logits", config.classes);
  return model;
}

}  // namespace gp::models
