// Output shapes of the index family (Pad, Tile, Resize, GatherND, OneHot): one rule for the importer (symbolic dims,
// the batch as a negative dim) and every backend (the actual dims of a run).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/op_attrs.h"

namespace gp::graph::ops {

// in[d] + begin pad + end pad; an error when a dim would become negative. A batch dim (negative)
// must have zero pads (the importer refuses others).
Result<std::vector<int64_t>> pad_output_shape(PadAttrs const& a, std::vector<int64_t> const& in);
// in[d] * repeats[d]; a batch dim must have repeat 1. A repeat -k is k times the batch size (a
// static dim tiled to the batch): symbolic at import (batch 0), `batch` samples at run time.
Result<std::vector<int64_t>> tile_output_shape(TileAttrs const& a, std::vector<int64_t> const& in, int64_t batch);
// sizes[d] where given (a negative entry keeps the input's dim), else floor(in[d] * scales[d]) as
// ONNX computes it; a batch dim keeps its size.
Result<std::vector<int64_t>> resize_output_shape(ResizeAttrs const& a, std::vector<int64_t> const& in);
// GatherND with batch_dims 0: indices [..., K] address data's first K axes, so the output is
// indices' dims but the last, then data's from K on (symbolic or actual dims alike).
Result<std::vector<int64_t>> gather_nd_output_shape(std::vector<int64_t> const& data,
                                                    std::vector<int64_t> const& indices);
// OneHot: the indices' dims with the depth axis inserted at `axis`, and `inner`, the elements of
// the indices from `axis` on (the output seen as [outer, depth, inner]); an error when `axis` is
// past the indices' rank.
struct OneHotShape {
  std::vector<int64_t> out;
  int64_t inner = 1;
};
Result<OneHotShape> one_hot_output_shape(OneHotAttrs const& a, std::vector<int64_t> const& indices);

// The scatter reduction ONNX names `name` (ScatterElements and ScatterND: none, add, mul, max,
// min), or nullopt for another name.
std::optional<ScatterReduction> scatter_reduction_named(std::string const& name);

// GridSample of x [N, C, H, W] at grid [N, Ho, Wo, 2]: [N, C, Ho, Wo], or of x [N, C, D, H, W] at
// grid [N, Do, Ho, Wo, 3]: [N, C, Do, Ho, Wo] (the batch, symbolic or a number, must be the same dim
// of both); an error naming the shapes otherwise.
Result<std::vector<int64_t>> grid_sample_output_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& grid);

// Col2Im of x [N, C·K, L] (K = prod(block), L the number of sliding blocks over the padded image):
// [N, C, image...]; blocks[i] the blocks along spatial dim i. Checks that x's dims agree with the
// geometry and that there are 1 to 3 spatial dims.
struct Col2ImShape {
  std::vector<int64_t> out, blocks;
};
Result<Col2ImShape> col2im_shape(Col2ImAttrs const& a, std::vector<int64_t> const& x);

}  // namespace gp::graph::ops
