// Col2Im (torch's nn.Fold) on the CPU backend: forward against loops written here from ONNX's
// definition (1-D, 2-D with pads, strides and dilations, 3-D), the input's gradient by finite
// differences, and import: the shape from image_shape and block_shape, and refusals.
#include "graph/onnx_import.h"
#include "tests/exec/op_harness.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec::testing {
namespace {

struct Case {
  std::vector<int64_t> image, block, dilations, strides, pads;
  int64_t n = 2, c = 2;
};

graph::Col2ImAttrs attrs_of_case(Case const& k) {
  graph::Col2ImAttrs a;
  a.image = k.image;
  a.block = k.block;
  a.dilations = k.dilations;
  a.strides = k.strides;
  a.pads = k.pads;
  return a;
}

std::vector<Case> cases() {
  return {
      {{5}, {3}, {1}, {1}, {1, 1}},                                      // 1-D, padded
      {{5, 6}, {2, 3}, {1, 2}, {2, 1}, {1, 0, 0, 2}},                    // 2-D: every attribute, uneven pads
      {{6, 6}, {3, 3}, {1, 1}, {2, 2}, {1, 1, 1, 1}, 1, 3},              // nn.Fold(3, padding=1, stride=2)
      {{3, 4, 3}, {2, 2, 2}, {1, 1, 1}, {1, 2, 1}, {0, 0, 1, 0, 1, 0}},  // 3-D
  };
}

// Blocks along a dim, as ONNX counts them.
int64_t blocks(int64_t image, int64_t k, int64_t d, int64_t s, int64_t pb, int64_t pe) {
  return (image + pb + pe - (d * (k - 1) + 1)) / s + 1;
}

TEST(Col2Im, ForwardSumsEveryColumnEntryIntoItsPixel) {
  CpuBackend be;
  for (Case const& k : cases()) {
    std::size_t const sp = k.image.size();
    SCOPED_TRACE(std::to_string(sp) + "-D image " + Tensor(k.image).shape_string());
    int64_t K = 1, L = 1, P = 1;
    std::vector<int64_t> nb(sp);
    for (std::size_t i = 0; i < sp; ++i) {
      nb[i] = blocks(k.image[i], k.block[i], k.dilations[i], k.strides[i], k.pads[i], k.pads[sp + i]);
      K *= k.block[i];
      L *= nb[i];
      P *= k.image[i];
    }
    Tensor const x = random_tensor({k.n, k.c * K, L}, 11, -1.f, 1.f);
    OneOp o = make_op("Col2Im", attrs_of_case(k), {{"x", x, kIn}});
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
    std::vector<Tensor> const out = run_forward(be, o);
    std::vector<int64_t> want_shape{k.n, k.c};
    want_shape.insert(want_shape.end(), k.image.begin(), k.image.end());
    ASSERT_EQ(out[0].shape(), want_shape);
    // Scatter every entry of x onto its pixel, in doubles.
    std::vector<double> want(static_cast<std::size_t>(k.n * k.c * P), 0.0);
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t c = 0; c < k.c; ++c)
        for (int64_t kk = 0; kk < K; ++kk)
          for (int64_t l = 0; l < L; ++l) {
            int64_t kr = kk, lr = l, pixel = 0;
            bool inside = true;
            for (std::size_t i = sp; i-- > 0;) {  // the last dim varies fastest
              int64_t const ki = kr % k.block[i], bi = lr % nb[i];
              kr /= k.block[i];
              lr /= nb[i];
              int64_t const pos = bi * k.strides[i] - k.pads[i] + ki * k.dilations[i];
              inside = inside && pos >= 0 && pos < k.image[i];
              int64_t stride = 1;
              for (std::size_t j = i + 1; j < sp; ++j) stride *= k.image[j];
              pixel += pos * stride;
            }
            if (inside) want[(n * k.c + c) * P + pixel] += x.data<float>()[((n * k.c + c) * K + kk) * L + l];
          }
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[0].data<float>()[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

TEST(Col2Im, InputGradientByFiniteDifferences) {
  CpuBackend be;
  uint32_t seed = 30;
  for (Case const& k : cases()) {
    SCOPED_TRACE(std::to_string(k.image.size()) + "-D");
    int64_t K = 1, L = 1;
    std::size_t const sp = k.image.size();
    for (std::size_t i = 0; i < sp; ++i) {
      K *= k.block[i];
      L *= blocks(k.image[i], k.block[i], k.dilations[i], k.strides[i], k.pads[i], k.pads[sp + i]);
    }
    OneOp o = make_op("Col2Im", attrs_of_case(k), {{"x", random_tensor({k.n, k.c * K, L}, seed += 2), kIn}});
    GradCheckResult const r = grad_check(be, o);
    expect_grads_ok(r);
    EXPECT_GE(r.rel_error[0], 0) << "the input's gradient was not checked";
  }
}

// ---- import ----
// "int64[k] name = {v, ...}": an initializer of these values.
std::string ints(std::string const& name, std::vector<int64_t> const& values) {
  std::string s = "int64[" + std::to_string(values.size()) + "] " + name + " = {";
  for (std::size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s + "}";
}

TEST(Col2ImImport, ShapeFromImageAndBlockShapesAndRefusals) {
  auto load = [](std::string const& x, std::vector<int64_t> const& image, std::vector<int64_t> const& block,
                 std::string const& attrs, std::string const& y) {
    return graph::load_onnx_text(graph::model_text(x, y, {ints("image", image), ints("block", block)},
                                                   "y = Col2Im " + attrs + " (x, image, block)", 18));
  };
  // nn.Fold((6, 6), 3, padding=1, stride=2): 9 values per block, 3x3 blocks.
  auto g = load("float[N,18,9] x", {6, 6}, {3, 3}, "<pads = [1, 1, 1, 1], strides = [2, 2]>", "float[N,2,6,6] y");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  for (auto const& op : g->ops())
    if (op.type == "Col2Im") {
      EXPECT_EQ(g->tensor(op.outputs[0]).shape.dims, (std::vector<int64_t>{-1, 2, 6, 6}));
      EXPECT_EQ(op.inputs.size(), 1u) << "image_shape and block_shape are attributes once imported";
    }
  auto refused = [](Result<graph::OpGraph> const& r, std::string const& words) {
    ASSERT_FALSE(r.is_ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  refused(load("float[N,18,8] x", {6, 6}, {3, 3}, "<pads = [1, 1, 1, 1], strides = [2, 2]>", "float[N,2,6,6] y"),
          "the input must be [N, C*9, 9]");
  refused(load("float[N,16,1] x", {2, 2, 2, 2}, {2, 2, 2, 2}, "", "float[N,1,2,2,2,2] y"), "4 spatial dims");
  // image_shape computed at run time.
  refused(graph::load_onnx_text(graph::model_text("float[N,18,9] x, int64[2] image", "float[N,2,6,6] y",
                                                  {ints("block", {3, 3})}, "y = Col2Im (x, image, block)", 18)),
          "image_shape");
}

}  // namespace
}  // namespace gp::exec::testing
