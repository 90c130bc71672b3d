// GridSample (4-D and 5-D) on the CPU backend: forward against a plain reference written here from torch's
// grid_sample documentation (every mode, padding mode and align_corners, grid points inside and
// outside [-1, 1]), finite-difference gradients of the input and the grid, the input gradient's
// independence of the thread count, and import: shapes, attributes (opset 16 and 20 names) and
// refusals.
#include <cmath>

#include "graph/onnx_import.h"
#include "kernels/index.h"
#include "tests/exec/op_harness.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec::testing {
namespace {

using graph::GridSampleMode;
using graph::GridSamplePadding;

graph::GridSampleAttrs attrs(GridSampleMode mode, GridSamplePadding padding, bool align) {
  graph::GridSampleAttrs a;
  a.mode = mode;
  a.padding = padding;
  a.align_corners = align;
  return a;
}

OneOp grid_sample_op(graph::GridSampleAttrs const& a, std::vector<int64_t> const& x, std::vector<int64_t> const& grid,
                     uint32_t seed, graph::TensorRole grid_role = kIn, float reach = 1.3f) {
  return make_op("GridSample", a,
                 {{"x", random_tensor(x, seed, -1.f, 1.f), kIn},
                  {"grid", random_tensor(grid, seed + 1, -reach, reach), grid_role}});
}

// ---- reference, in doubles: torch.nn.functional.grid_sample's documented semantics ----
double unnormalize(double c, int64_t size, bool align) {
  return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
}
// Mirror x at lo and hi until it lies between them.
double reflect(double x, double lo, double hi) {
  if (hi <= lo) return 0;
  double const span = hi - lo;
  double d = std::fabs(x - lo);
  double const flips = std::floor(d / span);
  d -= flips * span;
  return static_cast<int64_t>(flips) % 2 == 0 ? lo + d : hi - d;
}
double source(double c, int64_t size, graph::GridSampleAttrs const& a) {
  double x = unnormalize(c, size, a.align_corners);
  double const hi = static_cast<double>(size - 1);
  if (a.padding == GridSamplePadding::kBorder) x = std::clamp(x, 0.0, hi);
  if (a.padding == GridSamplePadding::kReflection) {
    x = a.align_corners ? reflect(x, 0, hi) : reflect(x, -0.5, static_cast<double>(size) - 0.5);
    x = std::clamp(x, 0.0, hi);
  }
  return x;
}

// Bicubic, as torch's grid_sample: the cubic convolution kernel (A = -0.75) at distance s, and a
// read at integer position i padded (the point itself is not: each of its 4x4 reads is).
double cubic_kernel(double s) {
  double const A = -0.75;
  s = std::fabs(s);
  if (s <= 1) return ((A + 2) * s - (A + 3)) * s * s + 1;
  if (s < 2) return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
  return 0;
}
int64_t cubic_tap(int64_t i, int64_t size, graph::GridSampleAttrs const& a) {
  double x = static_cast<double>(i);
  double const hi = static_cast<double>(size - 1);
  if (a.padding == GridSamplePadding::kBorder) x = std::clamp(x, 0.0, hi);
  if (a.padding == GridSamplePadding::kReflection) {
    x = a.align_corners ? reflect(x, 0, hi) : reflect(x, -0.5, static_cast<double>(size) - 0.5);
    x = std::clamp(x, 0.0, hi);
  }
  return static_cast<int64_t>(x);
}

// x [N, C, H, W] at grid [N, Ho, Wo, 2], or x [N, C, D, H, W] at grid [N, Do, Ho, Wo, 3].
std::vector<double> reference(Tensor const& x, Tensor const& grid, graph::GridSampleAttrs const& a) {
  bool const vol = x.rank() == 5;
  int64_t const N = x.dim(0), C = x.dim(1), D = vol ? x.dim(2) : 1, H = x.dim(vol ? 3 : 2), W = x.dim(vol ? 4 : 3);
  int64_t const Do = vol ? grid.dim(1) : 1, Ho = grid.dim(vol ? 2 : 1), Wo = grid.dim(vol ? 3 : 2);
  int64_t const coords = vol ? 3 : 2;
  std::vector<double> y;
  auto at = [&](int64_t n, int64_t c, int64_t zz, int64_t yy, int64_t xx) {
    if (zz < 0 || zz >= D || yy < 0 || yy >= H || xx < 0 || xx >= W) return 0.0;
    return static_cast<double>(x.data<float>()[(((n * C + c) * D + zz) * H + yy) * W + xx]);
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < Do; ++k)
        for (int64_t i = 0; i < Ho; ++i)
          for (int64_t j = 0; j < Wo; ++j) {
            float const* g = grid.data<float>() + (((n * Do + k) * Ho + i) * Wo + j) * coords;
            if (a.mode == GridSampleMode::kCubic) {
              double const ix = unnormalize(g[0], W, a.align_corners), iy = unnormalize(g[1], H, a.align_corners);
              auto const x0 = static_cast<int64_t>(std::floor(ix)), y0 = static_cast<int64_t>(std::floor(iy));
              double v = 0;
              for (int64_t yy = y0 - 1; yy <= y0 + 2; ++yy)
                for (int64_t xx = x0 - 1; xx <= x0 + 2; ++xx)
                  v += at(n, c, 0, cubic_tap(yy, H, a), cubic_tap(xx, W, a)) * cubic_kernel(ix - xx) *
                       cubic_kernel(iy - yy);
              y.push_back(v);
              continue;
            }
            double const ix = source(g[0], W, a), iy = source(g[1], H, a), iz = vol ? source(g[2], D, a) : 0.0;
            if (a.mode == GridSampleMode::kNearest) {
              y.push_back(at(n, c, static_cast<int64_t>(std::nearbyint(iz)), static_cast<int64_t>(std::nearbyint(iy)),
                             static_cast<int64_t>(std::nearbyint(ix))));
              continue;
            }
            double const x0 = std::floor(ix), y0 = std::floor(iy), z0 = std::floor(iz);
            double const t[3] = {ix - x0, iy - y0, iz - z0};
            double v = 0;
            for (int64_t dz = 0; dz < (vol ? 2 : 1); ++dz)
              for (int64_t dy = 0; dy < 2; ++dy)
                for (int64_t dx = 0; dx < 2; ++dx)
                  v += at(n, c, static_cast<int64_t>(z0) + dz, static_cast<int64_t>(y0) + dy,
                          static_cast<int64_t>(x0) + dx) *
                       (dx ? t[0] : 1 - t[0]) * (dy ? t[1] : 1 - t[1]) *
                       (!vol ? 1
                        : dz ? t[2]
                             : 1 - t[2]);
            y.push_back(v);
          }
  return y;
}

std::vector<graph::GridSampleAttrs> every_configuration() {
  std::vector<graph::GridSampleAttrs> all;
  for (GridSampleMode m : {GridSampleMode::kLinear, GridSampleMode::kNearest, GridSampleMode::kCubic})
    for (GridSamplePadding p : {GridSamplePadding::kZeros, GridSamplePadding::kBorder, GridSamplePadding::kReflection})
      for (bool align : {false, true}) all.push_back(attrs(m, p, align));
  return all;
}

std::string label(graph::GridSampleAttrs const& a) {
  char const* pads[] = {"zeros", "border", "reflection"};
  char const* modes[] = {"linear", "nearest", "cubic"};
  return std::string(modes[static_cast<int>(a.mode)]) + " " + pads[static_cast<int>(a.padding)] +
         (a.align_corners ? " align_corners" : "");
}

TEST(GridSample, ForwardMatchesTheReferenceInEveryConfiguration) {
  CpuBackend be;
  for (graph::GridSampleAttrs const& a : every_configuration()) {
    SCOPED_TRACE(label(a));
    // Grid points up to 2.5 outside [-1, 1]: reflection folds them more than once.
    OneOp o = grid_sample_op(a, {2, 3, 4, 5}, {2, 3, 6, 2}, 7, kIn, 2.5f);
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
    std::vector<Tensor> const out = run_forward(be, o);
    ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3, 3, 6}));
    std::vector<double> const want = reference(o.inputs[0], o.inputs[1], a);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[0].data<float>()[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "element " << i;
    // 5-D: x [N, C, D, H, W] sampled at (x, y, z) points (linear and nearest).
    if (a.mode == GridSampleMode::kCubic) continue;
    OneOp v = grid_sample_op(a, {2, 2, 3, 4, 5}, {2, 2, 3, 4, 3}, 8, kIn, 2.5f);
    ASSERT_TRUE(be.supports(v.the_op(), v.graph).is_ok()) << be.supports(v.the_op(), v.graph).to_string();
    std::vector<Tensor> const vout = run_forward(be, v);
    ASSERT_EQ(vout[0].shape(), (std::vector<int64_t>{2, 2, 2, 3, 4}));
    std::vector<double> const vwant = reference(v.inputs[0], v.inputs[1], a);
    for (std::size_t i = 0; i < vwant.size(); ++i)
      ASSERT_NEAR(vout[0].data<float>()[i], vwant[i], 1e-5 * (1 + std::fabs(vwant[i]))) << "5-D element " << i;
  }
}

// The padding modes differ on points outside the image: the reference check above covers each.
TEST(GridSample, PaddingModesDifferOutsideTheImage) {
  CpuBackend be;
  std::vector<std::vector<float>> outs;
  for (GridSamplePadding p : {GridSamplePadding::kZeros, GridSamplePadding::kBorder, GridSamplePadding::kReflection})
    outs.push_back(run_forward(be, grid_sample_op(attrs(GridSampleMode::kLinear, p, false), {1, 2, 4, 4}, {1, 5, 5, 2},
                                                  9, kIn, 2.5f))[0]
                       .to_vector());
  EXPECT_NE(outs[0], outs[1]);
  EXPECT_NE(outs[1], outs[2]);
  EXPECT_NE(outs[0], outs[2]);
}

TEST(GridSample, GradientsOfTheInputAndTheGridByFiniteDifferences) {
  CpuBackend be;
  uint32_t seed = 40;
  for (graph::GridSampleAttrs const& a : every_configuration()) {
    SCOPED_TRACE(label(a));
    // Nearest reads are steps in the grid: its gradient is zero, and differences across a rounding
    // boundary are not; the grid is then a constant and only the input's gradient is checked.
    bool const nearest = a.mode == GridSampleMode::kNearest;
    for (bool vol : {false, true}) {
      if (vol && a.mode == GridSampleMode::kCubic) continue;  // bicubic samples 4-D only
      SCOPED_TRACE(vol ? "5-D" : "4-D");
      OneOp o =
          vol ? grid_sample_op(a, {1, 2, 3, 3, 4}, {1, 2, 2, 3, 3}, seed += 3,
                               nearest ? graph::TensorRole::kConstant : kIn)
              : grid_sample_op(a, {2, 2, 3, 4}, {2, 2, 3, 2}, seed += 3, nearest ? graph::TensorRole::kConstant : kIn);
      GradCheckResult const r = grad_check(be, o);
      expect_grads_ok(r);
      EXPECT_GE(r.rel_error[0], 0) << "the input's gradient was not checked";
      if (!nearest) {
        EXPECT_GE(r.rel_error[1], 0) << "the grid's gradient was not checked";
      }
    }
  }
}

// Nearest sampling has a zero gradient for the grid (a step function), and the input's gradient is
// the count of reads of each pixel.
TEST(GridSample, NearestSendsEachOutputsGradientToThePixelItRead) {
  CpuBackend be;
  OneOp o = grid_sample_op(attrs(GridSampleMode::kNearest, GridSamplePadding::kBorder, true), {1, 1, 3, 3},
                           {1, 4, 4, 2}, 5, kIn, 1.f);
  Saved saved;
  std::vector<Tensor> const out = run_forward(be, o, true, 7, &saved);
  Tensor ones(out[0].shape());
  for (int64_t i = 0; i < ones.numel(); ++i) ones.data<float>()[i] = 1.f;
  OpCall call{o.the_op(), o.graph, true, 7};
  std::vector<Tensor> grads;
  ASSERT_TRUE(be.backward_input(call, saved, {ones}, {true, true}, grads).is_ok());
  float total = 0;
  for (float v : grads[0].to_vector()) total += v;
  EXPECT_FLOAT_EQ(total, 16.f);  // 16 reads, each of one pixel
  for (float v : grads[1].to_vector()) EXPECT_EQ(v, 0.f);
}

// The input's gradient scatters within each (n, c) plane in order: the parallel kernel (OpenMP
// over planes, this machine's threads) gives the bits of one thread visiting every position in turn.
TEST(GridSample, InputGradientEqualsTheSerialOrderBitForBit) {
  kernels::hd::GridSampleParams p;
  p.n = 2;
  p.c = 64;
  p.h = p.w = 16;
  p.ho = p.wo = 24;
  Tensor const x = random_tensor({p.n, p.c, p.h, p.w}, 3, -1.f, 1.f);
  Tensor const grid = random_tensor({p.n, p.ho, p.wo, 2}, 4, -1.2f, 1.2f);
  Tensor const dy = random_tensor({p.n, p.c, p.ho, p.wo}, 5, -1.f, 1.f);
  Tensor dx(x.shape()), dgrid(grid.shape()), serial(x.shape());
  kernels::grid_sample_backward(x.data<float>(), grid.data<float>(), dy.data<float>(), p, dx.data<float>(),
                                dgrid.data<float>());
  for (int64_t nc = 0; nc < p.n * p.c; ++nc)
    kernels::hd::grid_sample_input_grad_plane(grid.data<float>(), dy.data<float>(), p, serial.data<float>(), nc);
  EXPECT_EQ(dx.to_vector(), serial.to_vector());
}

// ---- import ----
TEST(GridSampleImport, ShapesAttributesAndRefusals) {
  auto load = [](std::string const& attrs, int opset, std::string const& x = "float[N,3,5,6] x",
                 std::string const& grid = "float[N,4,7,2] g") {
    return graph::load_onnx_text(
        graph::model_text(x + ", " + grid, "float[N,3,4,7] y", {}, "y = GridSample " + attrs + " (x, g)", opset));
  };
  auto typed = [](graph::OpGraph const& g) {
    for (auto const& op : g.ops())
      if (op.type == "GridSample") return std::get<graph::GridSampleAttrs>(op.typed);
    ADD_FAILURE() << "no GridSample";
    return graph::GridSampleAttrs{};
  };
  auto g16 = load("<mode = \"bilinear\", padding_mode = \"reflection\", align_corners = 1>", 16);
  ASSERT_TRUE(g16.is_ok()) << g16.status().to_string();
  EXPECT_EQ(typed(*g16).mode, GridSampleMode::kLinear);
  EXPECT_EQ(typed(*g16).padding, GridSamplePadding::kReflection);
  EXPECT_TRUE(typed(*g16).align_corners);
  for (auto const& op : g16->ops()) {
    if (op.type == "GridSample") {
      EXPECT_EQ(g16->tensor(op.outputs[0]).shape.dims, (std::vector<int64_t>{-1, 3, 4, 7}));
    }
  }
  auto g20 = load("<mode = \"nearest\">", 20);
  ASSERT_TRUE(g20.is_ok()) << g20.status().to_string();
  EXPECT_EQ(typed(*g20).mode, GridSampleMode::kNearest);
  EXPECT_EQ(typed(*g20).padding, GridSamplePadding::kZeros);
  auto dflt = load("", 20);  // opset 20's default is "linear"
  ASSERT_TRUE(dflt.is_ok()) << dflt.status().to_string();
  EXPECT_EQ(typed(*dflt).mode, GridSampleMode::kLinear);

  auto refused = [](Result<graph::OpGraph> const& r, std::string const& words) {
    ASSERT_FALSE(r.is_ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  auto cubic16 = load("<mode = \"bicubic\">", 16), cubic20 = load("<mode = \"cubic\">", 20);
  ASSERT_TRUE(cubic16.is_ok()) << cubic16.status().to_string();
  ASSERT_TRUE(cubic20.is_ok()) << cubic20.status().to_string();
  EXPECT_EQ(typed(*cubic16).mode, GridSampleMode::kCubic);
  EXPECT_EQ(typed(*cubic20).mode, GridSampleMode::kCubic);
  refused(load("<mode = \"cubic\">", 20, "float[N,3,2,5,6] x", "float[N,2,4,7,3] g"), "samples 4-D x [N,C,H,W] only");
  refused(load("<padding_mode = \"mirror\">", 16), "padding_mode 'mirror'");
  refused(load("", 20, "float[N,3,2,5,6] x", "float[N,2,4,7,2] g"), "only x [N,C,H,W] with grid [N,Ho,Wo,2] or");
  refused(load("", 20, "float[N,3,5,6] x", "float[N,4,7,3] g"), "only x [N,C,H,W] with grid [N,Ho,Wo,2] or");
  // 5-D (opset 20): y [N, C, Do, Ho, Wo].
  auto g5 = graph::load_onnx_text(graph::model_text("float[N,3,2,5,6] x, float[N,2,4,7,3] g", "float[N,3,2,4,7] y", {},
                                                    "y = GridSample <mode = \"linear\"> (x, g)", 20));
  ASSERT_TRUE(g5.is_ok()) << g5.status().to_string();
  for (auto const& op : g5->ops())
    if (op.type == "GridSample") {
      EXPECT_EQ(g5->tensor(op.outputs[0]).shape.dims, (std::vector<int64_t>{-1, 3, 2, 4, 7}));
    }
  // A grid of fixed size (a constant) against a batched x.
  refused(graph::load_onnx_text(graph::model_text("float[N,3,5,6] x", "float[N,3,4,7] y",
                                                  {graph::zeros("g", {2, 4, 7, 2})}, "y = GridSample (x, g)", 16)),
          "disagree on the batch");
}

}  // namespace
}  // namespace gp::exec::testing
