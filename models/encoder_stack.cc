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

Result<EncoderConfig> encoder_config(Size size, BuildOptions const& options) {
  EncoderConfig config = encoder_config(size);
  auto const range = [](char const* what, int64_t value, int64_t max) -> Status {
    if (value >= 0 && value <= max) return Status::ok();
    return invalid_argument(std::string(what) + " " + std::to_string(value) + " is out of range: use 1.." +
                            std::to_string(max) + " (0 keeps the size's value)");
  };
  RETURN_IF_ERROR(range("layers", options.layers, kMaxLayers));
  RETURN_IF_ERROR(range("hidden", options.hidden, kMaxHidden));
  RETURN_IF_ERROR(range("heads", options.heads, kMaxHidden));
  RETURN_IF_ERROR(range("ffn", options.ffn, 4 * kMaxHidden));
  int64_t const head_dim = config.hidden / config.heads;
  int64_t const ffn_ratio = config.ffn / config.hidden;
  if (options.hidden > 0) config.hidden = options.hidden;
  if (options.heads > 0) {
    config.heads = options.heads;
  } else if (options.hidden > 0) {
    if (options.hidden % head_dim != 0) {
      return invalid_argument("hidden " + std::to_string(options.hidden) + " is not a multiple of the " +
                              size_name(size) + " head width " + std::to_string(head_dim) +
                              ": pick a multiple of it or give heads explicitly");
    }
    config.heads = options.hidden / head_dim;
  }
  if (config.hidden % config.heads != 0) {
    return invalid_argument("hidden " + std::to_string(config.hidden) + " is not divisible by " +
                            std::to_string(config.heads) + " heads: pick heads dividing hidden");
  }
  config.ffn = options.ffn > 0 ? options.ffn : config.hidden * ffn_ratio;
  if (config.ffn > 4 * kMaxHidden) {
    return invalid_argument("ffn " + std::to_string(config.ffn) + " (hidden x " + std::to_string(ffn_ratio) +
                            ") exceeds " + std::to_string(4 * kMaxHidden) + ": give a smaller hidden or ffn");
  }
  return config;
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
