// A convolution's geometry as cuDNN runs it, from ONNX's Conv and ConvTranspose attributes, and
// the key its cuDNN plans are cached by. Host-only (no CUDA header): exec/cuda/cudnn_graphs.h
// builds and runs the plans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/cuda/plan_key.h"
#include "graph/op_attrs.h"

namespace gp::exec::cuda {

// A convolution's geometry: x [N,C,spatial...], w [K,C/group,kernel...], y [N,K,out...];
// 1 to 3 spatial dims.
struct ConvShape {
  std::vector<int64_t> x, w, y;
  std::vector<int64_t> stride, dilation, pad_begin, pad_end;
  int64_t group = 1;
  // ConvTranspose only, when x (what cuDNN computes) is a block of the transpose's output: that
  // output [N, M, out...] and where x sits in it (per dim; the rest gets only the bias). Empty
  // otherwise. graph::ops::conv_transpose_window, which the CPU backend and the importer run too.
  std::vector<int64_t> embedding, offset;
  std::string describe() const;
};

// The geometry graph::ops::conv_window gives (ONNX's output-size rule and checks), as cuDNN runs it.
Result<ConvShape> conv_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& w, graph::ConvAttrs const& a);

// ConvTranspose as the convolution it is the adjoint of: x is the transpose's output
// [N, M, out...], w its weight [C, M/g, k...] (a conv weight from M/g to C channels per group), y
// its input [N, C, in...]. The transpose's forward is that conv's dgrad, its input gradient the
// conv's fprop, its weight gradient the conv's wgrad (conv x = the transpose's output gradient,
// conv dy = its input). Negative pads (an output_shape past the full output) and output_padding >=
// stride (reachable with a larger dilation), where no conv maps the whole output back onto the
// input, give the conv of the part that receives contributions, and `embedding`
// (graph::ops::conv_transpose_window).
Result<ConvShape> conv_transpose_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& w,
                                       graph::ConvTransposeAttrs const& a);

// The conv `s` with symmetric padding, for cuDNN's weight gradient: on an H200 (cuDNN 9.19, the
// first run on hardware, 2026-12-04) its wgrad engines gave a wrong dW for a padding larger at the
// end than at the beginning (ConvTranspose with an output_shape past the full output; fprop and
// dgrad of the same geometry were right). Each axis whose pad_begin and pad_end differ gets x grown
// by the difference, on the side with more padding (those positions are zeros, as the padding
// was), and both pads the smaller: the same windows over the same values. `x_at`: where the old x
// sits in the grown one, per dim. nullopt when every axis is symmetric already.
struct SymmetricConv {
  ConvShape shape;
  std::vector<int64_t> x_at;
};
std::optional<SymmetricConv> symmetric_padding(ConvShape const& s);

// The cache key of a conv plan of `kind` (fprop, dgrad or wgrad) over s in cuDNN data type
// `dtype` on `device`, with deterministic engines or not: every field of s, each list with its length.
PlanKey conv_plan_key(PlanKind kind, ConvShape const& s, int64_t dtype, int device, bool deterministic = false);

}  // namespace gp::exec::cuda
