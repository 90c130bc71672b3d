#include "exec/separable_maps.h"

#include <algorithm>
#include <cmath>

#include "graph/ops/index.h"

namespace gp::exec {
namespace {

// ---- Pad ----
Result<AxisMap> pad_map(OpCall const& call, int64_t in, int64_t begin, int64_t end, graph::PadMode mode) {
  AxisMap m = AxisMap::copying(in, in + begin + end);
  for (int64_t o = 0; o < m.out; ++o) {
    int64_t i = o - begin;
    if (i < 0 || i >= in) {
      if (mode == graph::PadMode::kConstant) {
        i = -1;
      } else if (in == 0) {
        return op_error(call, "cannot pad an axis of size 0 in a mode other than constant");
      } else if (mode == graph::PadMode::kEdge) {
        i = std::clamp<int64_t>(i, 0, in - 1);
      } else if (mode == graph::PadMode::kWrap) {
        i = ((i % in) + in) % in;
      } else if (in == 1) {  // reflect of one element repeats it
        i = 0;
      } else {  // reflect: period 2 (in - 1), as numpy reflects pads longer than the axis
        int64_t const p = 2 * (in - 1);
        i = ((i % p) + p) % p;
        if (i >= in) i = p - i;
      }
    }
    m.index[o] = i;
  }
  return m;
}

// ---- Resize (the ONNX reference's coordinates and coefficients) ----
// The input coordinate of output position x; `length` is the output length as a real number
// (scale times the input length), as the reference uses it, `out` the whole output length.
double source_coord(graph::ResizeCoord coord, double x, double scale, int64_t in, double length, int64_t out) {
  switch (coord) {
    case graph::ResizeCoord::kHalfPixelSymmetric: {  // half_pixel, shifted to centre the rounded output
      double const offset = static_cast<double>(in) / 2 * (1.0 - static_cast<double>(out) / length);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case graph::ResizeCoord::kPytorchHalfPixel:
      return length == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5;
    case graph::ResizeCoord::kAlignCorners:
      return length == 1.0 ? 0.0 : x * static_cast<double>(in - 1) / (length - 1.0);
    case graph::ResizeCoord::kAsymmetric:
      return x / scale;
    default:
      return (x + 0.5) / scale - 0.5;
  }
}

// Opset 18's antialiased linear and cubic downsampling (the ONNX reference's coefficients): the
// filter stretched by 1/scale over 2 - 2 * start taps, normalised; the input's edges repeat.
AxisMap antialias_map(graph::ResizeAttrs const& a, int64_t in, int64_t out, double scale) {
  double const length = scale * static_cast<double>(in);
  bool const cubic = a.mode == graph::ResizeMode::kCubic;
  auto const start = static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / scale) + 1);
  int64_t const taps = 2 - 2 * start;
  AxisMap m{in, out, taps, std::vector<int64_t>(static_cast<std::size_t>(out * taps)),
            std::vector<float>(static_cast<std::size_t>(out * taps))};
  double const A = a.cubic_coeff_a;
  auto filter = [&](double x) {
    x = std::fabs(x);
    if (!cubic) return std::clamp(1.0 - x, 0.0, 1.0);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0;
  };
  for (int64_t o = 0; o < out; ++o) {
    double const x = source_coord(a.coord, static_cast<double>(o), scale, in, length, out);
    // The reference's ratio lies in (0, 1]: an integer coordinate counts from the index below it.
    double const base = std::ceil(x) - 1;
    double const ratio = x - base;
    std::vector<double> c(static_cast<std::size_t>(taps));
    double sum = 0;
    for (int64_t k = 0; k < taps; ++k) {
      auto const i = static_cast<int64_t>(base) + start + k;
      double v = filter(scale * (static_cast<double>(start + k) - ratio));
      if (a.exclude_outside && (i < 0 || i >= in)) v = 0;
      c[static_cast<std::size_t>(k)] = v;
      sum += v;
      m.index[o * taps + k] = std::clamp<int64_t>(i, 0, in - 1);
    }
    for (int64_t k = 0; k < taps; ++k)
      m.weight[o * taps + k] = static_cast<float>(sum != 0 ? c[static_cast<std::size_t>(k)] / sum : 0.0);
  }
  return m;
}

Result<AxisMap> resize_map(OpCall const& call, graph::ResizeAttrs const& a, int64_t in, int64_t out, double scale) {
  if (in == out && (scale == 1.0 || in == 1)) return AxisMap::identity_of(in);
  if (in == 0) return op_error(call, "cannot resize an axis of size 0 to " + std::to_string(out));
  if (a.antialias && a.mode != graph::ResizeMode::kNearest && scale < 1.0) return antialias_map(a, in, out, scale);
  int64_t const taps = a.mode == graph::ResizeMode::kNearest ? 1 : a.mode == graph::ResizeMode::kLinear ? 2 : 4;
  AxisMap m{in, out, taps, std::vector<int64_t>(static_cast<std::size_t>(out * taps)),
            std::vector<float>(static_cast<std::size_t>(out * taps))};
  double const length = scale * static_cast<double>(in);
  auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    double const x = source_coord(a.coord, static_cast<double>(o), scale, in, length, out);
    double const fl = std::floor(x);
    double const t = x - fl;
    auto const i0 = static_cast<int64_t>(fl);
    int64_t* idx = m.index.data() + o * taps;
    float* w = m.weight.data() + o * taps;
    if (a.mode == graph::ResizeMode::kNearest) {
      bool up = t > 0.5;
      if (t == 0.0)
        up = false;
      else if (a.nearest == graph::ResizeNearest::kRoundPreferCeil)
        up = t >= 0.5;
      else if (a.nearest == graph::ResizeNearest::kFloor)
        up = false;
      else if (a.nearest == graph::ResizeNearest::kCeil)
        up = true;
      idx[0] = clamp(i0 + (up ? 1 : 0));
      w[0] = 1.f;
    } else if (a.mode == graph::ResizeMode::kLinear) {
      idx[0] = clamp(i0);
      idx[1] = clamp(i0 + 1);
      w[0] = static_cast<float>(1.0 - t);
      w[1] = static_cast<float>(t);
    } else {
      double const A = a.cubic_coeff_a, u = 1.0 - t;
      double c[4] = {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A, ((A + 2) * t - (A + 3)) * t * t + 1,
                     ((A + 2) * u - (A + 3)) * u * u + 1, ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A};
      if (a.exclude_outside) {
        double sum = 0;
        for (int64_t k = 0; k < 4; ++k) {
          int64_t const i = i0 - 1 + k;
          if (i < 0 || i >= in) c[k] = 0;
          sum += c[k];
        }
        for (double& v : c) v /= sum;
      }
      for (int64_t k = 0; k < 4; ++k) {
        idx[k] = clamp(i0 - 1 + k);
        w[k] = static_cast<float>(c[k]);
      }
    }
  }
  return m;
}

}  // namespace

Result<std::vector<AxisMap>> pad_maps(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& a = *attrs_of<graph::PadAttrs>(call.op);
  auto shape = graph::ops::pad_output_shape(a, in_shape);
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  std::size_t const r = in_shape.size();
  std::vector<AxisMap> maps;
  for (std::size_t d = 0; d < r; ++d) {
    ASSIGN_OR_RETURN(AxisMap m, pad_map(call, in_shape[d], a.pads[d], a.pads[d + r], a.mode));
    maps.push_back(std::move(m));
  }
  return maps;
}

Result<std::vector<AxisMap>> tile_maps(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& a = *attrs_of<graph::TileAttrs>(call.op);
  auto shape = graph::ops::tile_output_shape(a, in_shape, call.batch);
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  std::vector<AxisMap> maps;
  for (std::size_t d = 0; d < in_shape.size(); ++d) {
    AxisMap m = AxisMap::copying(in_shape[d], (*shape)[d]);
    for (int64_t o = 0; o < m.out; ++o) m.index[o] = o % m.in;
    maps.push_back(std::move(m));
  }
  return maps;
}

Result<std::vector<AxisMap>> resize_maps(OpCall const& call, std::vector<int64_t> const& in_shape) {
  auto const& a = *attrs_of<graph::ResizeAttrs>(call.op);
  if (a.coord == graph::ResizeCoord::kTfCropAndResize)
    return op_error(call, "coordinate_transformation_mode tf_crop_and_resize is not supported");
  auto shape = graph::ops::resize_output_shape(a, in_shape);
  if (!shape.is_ok()) return op_error(call, shape.status().message());
  std::vector<AxisMap> maps;
  for (std::size_t d = 0; d < in_shape.size(); ++d) {
    int64_t const in = in_shape[d], out = (*shape)[d];
    double scale = static_cast<double>(a.scales.at(d));
    if (!a.sizes.empty()) scale = in > 0 ? static_cast<double>(out) / static_cast<double>(in) : 1.0;
    ASSIGN_OR_RETURN(AxisMap m, resize_map(call, a, in, out, scale));
    maps.push_back(std::move(m));
  }
  return maps;
}

float separable_fill(OpCall const& call) {
  return call.op.kind() == OpKind::kPad ? attrs_of<graph::PadAttrs>(call.op)->value : 0.f;
}

Result<Tensor> separable_output_grad(OpCall const& call, std::vector<Tensor> const& gout,
                                     std::vector<AxisMap> const& maps, std::vector<int64_t> const& in_shape) {
  std::vector<int64_t> out_shape = in_shape;
  for (std::size_t a = 0; a < maps.size(); ++a) out_shape[a] = maps[a].out;
  Tensor g = grad_or_zeros(call, gout, 0, out_shape);
  if (g.shape() != out_shape)
    return op_error(
        call, "output gradient has shape " + g.shape_string() + ", expected " + graph::ops::dims_string(out_shape));
  return g;
}

}  // namespace gp::exec
