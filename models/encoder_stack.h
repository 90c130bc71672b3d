// The transformer layer configuration shared by MMT (branches of encoder stacks) and its
// sequential control (one stack), so that the two differ only in graph shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/layers.h"
#include "models/zoo.h"

namespace gp::models {

struct EncoderConfig {
  int64_t branches = 0;  // MMT modalities; the sequential control stacks branches × layers
  int64_t layers_per_branch = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
  int64_t seq = 0;
  std::vector<int64_t> modality_dims;  // input feature width of each branch
  int64_t classes = 0;
};
EncoderConfig encoder_config(Size size);
// The size's config with BuildOptions' hidden/heads/ffn applied (layers is checked here, applied by
// the generator: the transformer's chain length or MMT's layers per branch). Errors name the
// option to change.
Result<EncoderConfig> encoder_config(Size size, BuildOptions const& options);

// Input projection, `layers` encoder layers, final LayerNorm and mean over the sequence:
// x [N, seq, in_dim] -> [N, hidden].
std::string encoder_stack(Layers& layers, std::string const& x, int64_t in_dim, int64_t num_layers,
                          EncoderConfig const& config, std::string const& prefix);

}  // namespace gp::models
