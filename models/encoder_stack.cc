#include "models/encoder_stack.h"

namespace gp::models {

EncoderConfig encoder_config(Size size) {
  switch (size) {
    case Size::kTiny:
      return {4, 2, 32, 4, 64, 8, {16, 12, 8, 4}, 10};
    case Size::kSmall:
      return {4, 2, 128, 4, 512, 32, {128, 96, 64, 32}, 10};
    case Size::kPaper:
      return {4, 8, 1024, 16, 4096, 256, {1024, 768, 512, 256}, 1000};
  }
  return {};
}

std::string encoder_stack(Layers& layers, std::string const& x, int64_t in_dim, int64_t num_layers,
                          EncoderConfig const& config, std::string const& prefix) {
  std::string h = layers.linear3d(x, in_dim, config.hidden, prefix + ".proj", Act::kNone);
  for (int64_t l = 0; l < num_layers; ++l) {
    h = layers.encoder_layer(h, config.seq, config.hidden, config.heads, config.ffn,
                             prefix + ".layer" + std::to_string(l));
  }
  h = layers.layer_norm(h, config.hidden, prefix + ".ln_f");
  return layers.node("ReduceMean", {h}, prefix + ".pool",
                     {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
}

}  // namespace gp::models
