// The per-axis maps of the separable ops Pad, Tile and Resize: along each axis an output position
// reads a few input positions with fixed weights (the ONNX reference's coordinates and
// coefficients for Resize). Both backends apply them, one pass per axis, and the adjoint passes in
// reverse order for the gradient (exec/cpu/index.cc, exec/cuda/index.cc), so every gradient is the
// exact transpose of its forward and the two backends read the same positions and weights.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/status.h"
#include "exec/op_kernels.h"

namespace gp::exec {

// Along one axis, output position o reads input positions index[o * taps + t] with weights
// weight[o * taps + t]; an index of -1 (one tap only) writes the fill value instead.
struct AxisMap {
  int64_t in = 0, out = 0, taps = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;

  static AxisMap copying(int64_t in, int64_t out) {
    AxisMap m{in, out, 1, std::vector<int64_t>(static_cast<std::size_t>(out)),
              std::vector<float>(static_cast<std::size_t>(out), 1.f)};
    return m;
  }
  static AxisMap identity_of(int64_t n) {
    AxisMap m = copying(n, n);
    std::iota(m.index.begin(), m.index.end(), int64_t{0});
    return m;
  }
  bool identity() const {
    if (in != out || taps != 1) return false;
    for (int64_t o = 0; o < out; ++o)
      if (index[o] != o || weight[o] != 1.f) return false;
    return true;
  }
};

// The maps of every axis for an op's input shape: Pad (constant, edge, wrap, reflect), Tile, Resize
// (nearest, linear, cubic; tf_crop_and_resize is refused).
Result<std::vector<AxisMap>> pad_maps(OpCall const& call, std::vector<int64_t> const& in_shape);
Result<std::vector<AxisMap>> tile_maps(OpCall const& call, std::vector<int64_t> const& in_shape);
Result<std::vector<AxisMap>> resize_maps(OpCall const& call, std::vector<int64_t> const& in_shape);
using MapsFn = Result<std::vector<AxisMap>> (*)(OpCall const& call, std::vector<int64_t> const& in_shape);

// What an index of -1 writes: Pad's constant value, else 0.
float separable_fill(OpCall const& call);
// That value as an element of a dtype Pad and Tile copy (int64, int32, bool as one byte 0 or 1):
// truncated toward zero, as the CPU's copy_axis writes it.
template <typename T>
T separable_fill_as(float value) {
  if constexpr (sizeof(T) == 1) return static_cast<T>(value != 0.f);
  return static_cast<T>(value);
}
// The gradient the backward passes start from: the output's (zeros where none flowed), checked to
// have the shape the maps give the input's shape.
Result<Tensor> separable_output_grad(OpCall const& call, std::vector<Tensor> const& gout,
                                     std::vector<AxisMap> const& maps, std::vector<int64_t> const& in_shape);

}  // namespace gp::exec
