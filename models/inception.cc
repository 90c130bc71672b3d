#include "models/generators.h"
#include "models/layers.h"

namespace gp::models {
namespace {

// GoogLeNet's block parameters: 1x1; 3x3 reduce, 3x3; 5x5 reduce, 5x5; pool projection.
struct BlockConfig {
  int64_t c1, c3r, c3, c5r, c5, pool;
  int64_t out() const { return c1 + c3 + c5 + pool; }
};

struct StemLayer {
  int64_t out_ch, kernel, stride;
};

struct InceptionConfig {
  int64_t image = 0;  // square input, 3 channels
  std::vector<StemLayer> stem;
  std::vector<int64_t> stem_pools;  // after stem layer i: a 3x3/2 max pool
  // Stages of blocks; a 3x3/2 max pool between consecutive stages.
  std::vector<std::vector<BlockConfig>> stages;
  int64_t classes = 0;
};

InceptionConfig inception_config(Size size) {
  switch (size) {
    case Size::kTiny:
      return {16, {{16, 3, 1}}, {}, {{{8, 8, 16, 4, 8, 8}}, {{16, 12, 24, 4, 8, 8}}}, 10};
    case Size::kSmall:  // GoogLeNet's blocks with half the channels, on 32x32 images
      return {32,
              {{32, 3, 1}},
              {0},
              {{{32, 48, 64, 8, 16, 16}, {64, 64, 96, 16, 48, 32}},
               {{96, 48, 104, 8, 24, 32},
                {80, 56, 112, 12, 32, 32},
                {64, 64, 128, 12, 32, 32},
                {56, 72, 144, 16, 32, 32},
                {128, 80, 160, 16, 64, 64}},
               {{128, 80, 160, 16, 64, 64}, {192, 96, 192, 24, 64, 64}}},
              10};
    case Size::kPaper:  // GoogLeNet (Szegedy et al. 2015) with batch norm, no auxiliary heads
      return {224,
              {{64, 7, 2}, {64, 1, 1}, {192, 3, 1}},
              {0, 2},
              {{{64, 96, 128, 16, 32, 32}, {128, 128, 192, 32, 96, 64}},
               {{192, 96, 208, 16, 48, 64},
                {160, 112, 224, 24, 64, 64},
                {128, 128, 256, 24, 64, 64},
                {112, 144, 288, 32, 64, 64},
                {256, 160, 320, 32, 128, 128}},
               {{256, 160, 320, 32, 128, 128}, {384, 192, 384, 48, 128, 128}}},
              1000};
  }
  return {};
}

std::string inception_block(Layers& layers, std::string const& x, int64_t in_ch, BlockConfig const& c,
                            std::string const& prefix) {
  std::string const b1 = layers.conv_bn_relu(x, in_ch, c.c1, 1, 1, prefix + ".b1");
  std::string const b2 = layers.conv_bn_relu(layers.conv_bn_relu(x, in_ch, c.c3r, 1, 1, prefix + ".b2a"), c.c3r, c.c3,
                                             3, 1, prefix + ".b2b");
  std::string const b3 = layers.conv_bn_relu(layers.conv_bn_relu(x, in_ch, c.c5r, 1, 1, prefix + ".b3a"), c.c5r, c.c5,
                                             5, 1, prefix + ".b3b");
  std::string const pooled = layers.max_pool(x, 3, 1, 1, prefix + ".b4pool");
  std::string const b4 = layers.conv_bn_relu(pooled, in_ch, c.pool, 1, 1, prefix + ".b4");
  return layers.node("Concat", {b1, b2, b3, b4}, prefix + ".concat", {{"axis", int64_t{1}}});
}

}  // namespace

ZooModel build_inception(Size size, BuildOptions const& options) {
  InceptionConfig const config = inception_config(size);
  ZooModel model = new_model("inception", size, Task::kClassification, options);
  Layers layers(model.builder);
  std::string h = add_model_input(model, "image", {graph::kBatch, 3, config.image, config.image});
  int64_t channels = 3;
  for (std::size_t i = 0; i < config.stem.size(); ++i) {
    StemLayer const& s = config.stem[i];
    h = layers.conv_bn_relu(h, channels, s.out_ch, s.kernel, s.stride, "stem" + std::to_string(i));
    channels = s.out_ch;
    for (int64_t p : config.stem_pools) {
      if (p == static_cast<int64_t>(i)) h = layers.max_pool(h, 3, 2, 1, "stem" + std::to_string(i) + ".pool");
    }
  }
  for (std::size_t s = 0; s < config.stages.size(); ++s) {
    if (s > 0) h = layers.max_pool(h, 3, 2, 1, "stage" + std::to_string(s) + ".pool");
    for (std::size_t k = 0; k < config.stages[s].size(); ++k) {
      BlockConfig const& block = config.stages[s][k];
      h = inception_block(layers, h, channels, block, "stage" + std::to_string(s) + ".block" + std::to_string(k));
      channels = block.out();
    }
  }
  std::string const gap = layers.node("GlobalAveragePool", {h}, "gap");
  std::string const flat = layers.node("Flatten", {gap}, "flatten", {{"axis", int64_t{1}}});
  layers.linear(flat, channels, config.classes, "classifier", Act::kNone, "logits");
  set_model_output(model, "logits", config.classes);
  return model;
}

}  // namespace gp::models
