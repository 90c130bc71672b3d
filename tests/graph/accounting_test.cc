// FLOPs, parameters and saved activations, checked against numbers worked out by hand.
#include <gtest/gtest.h>

#include "graph/accounting.h"
#include "graph/onnx_import.h"
#include "tests/graph/onnx_text.h"

namespace gp::graph {
namespace {

OpGraph must_load(std::string const& text, ImportOptions const& options = {}) {
  auto g = load_onnx_text(text, options);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  if (!g.is_ok()) return OpGraph{};
  return std::move(g).value();
}

Op const& op_named(OpGraph const& g, std::string const& type) {
  for (auto const& op : g.ops())
    if (op.type == type) return op;
  ADD_FAILURE() << "no " << type;
  static Op const none;
  return none;
}

TEST(Accounting, ConvOnModelInput) {
  // x [N,3,32,32] * w [16,3,3,3] + b, pads 1: out [N,16,32,32] = 16384 elements per sample.
  auto g = must_load(model_text("float[N,3,32,32] x", "float[N,16,32,32] y",
                                {zeros("w", {16, 3, 3, 3}), zeros("b", {16})}, "y = Conv<pads = [1,1,1,1]>(x, w, b)"));
  Op const& c = op_named(g, "Conv");
  double const macs = 16384.0 * 27;                            // 442,368
  EXPECT_DOUBLE_EQ(c.fwd_flops_per_sample, 2 * macs + 16384);  // 901,120
  // No input gradient for the model's input: weight-grad 2*MACs + bias grad only.
  EXPECT_DOUBLE_EQ(c.bwd_flops_per_sample, 2 * macs + 16384);
  EXPECT_DOUBLE_EQ(c.bwd_weight_flops_per_sample, 2 * macs + 16384);
  EXPECT_EQ(c.param_bytes, (432 + 16) * 4);
  EXPECT_EQ(c.activation_bytes_per_sample, 3 * 32 * 32 * 4);  // the input
}

TEST(Accounting, ConvWithInputGradAndGroups) {
  // Relu first so the Conv input needs a gradient. Grouped, strided: x [N,8,10,10], w [4,4,3,3],
  // group 2, stride 2, no pads: out [N,4,4,4] = 64 elements; MACs = 64 * 4 * 9 = 2304.
  auto g = must_load(model_text("float[N,8,10,10] x", "float[N,4,4,4] y", {zeros("w", {4, 4, 3, 3})},
                                "r = Relu(x)\n y = Conv<group = 2, strides = [2,2]>(r, w)"));
  Op const& c = op_named(g, "Conv");
  EXPECT_DOUBLE_EQ(c.fwd_flops_per_sample, 2 * 2304.0);
  EXPECT_DOUBLE_EQ(c.bwd_flops_per_sample, 4 * 2304.0);
  EXPECT_DOUBLE_EQ(c.bwd_weight_flops_per_sample, 2 * 2304.0);
  EXPECT_EQ(c.activation_bytes_per_sample, 800 * 4);
  Op const& r = op_named(g, "Relu");
  EXPECT_DOUBLE_EQ(r.fwd_flops_per_sample, 800);
  EXPECT_DOUBLE_EQ(r.bwd_flops_per_sample, 800);
  EXPECT_EQ(r.activation_bytes_per_sample, 800 * 4);  // its output
  // The Relu output is saved by both ops; the graph total counts it once.
  EXPECT_EQ(g.activation_bytes_per_sample(), 2 * 800 * 4);
  EXPECT_EQ(saved_activation_bytes_per_sample(g), 800 * 4);
}

TEST(Accounting, Gemm) {
  // [N,64] x w[32,64]^T + b: K = 64, 32 outputs.
  auto g = must_load(model_text("float[N,64] x", "float[N,32] y", {zeros("w", {32, 64}), zeros("b", {32})},
                                "r = Relu(x)\n y = Gemm<transB = 1>(r, w, b)"));
  Op const& op = op_named(g, "Gemm");
  EXPECT_DOUBLE_EQ(op.fwd_flops_per_sample, 2 * 32 * 64 + 32);         // 4,128
  EXPECT_DOUBLE_EQ(op.bwd_flops_per_sample, 2 * 32 * 64 * 2 + 32);     // 8,224
  EXPECT_DOUBLE_EQ(op.bwd_weight_flops_per_sample, 2 * 32 * 64 + 32);  // 4,128
  EXPECT_EQ(op.param_bytes, (32 * 64 + 32) * 4);                       // 8,320
  EXPECT_EQ(op.activation_bytes_per_sample, 64 * 4);
  EXPECT_EQ(g.param_bytes(), 8320);
  EXPECT_EQ(g.param_count(), 2080);
}

TEST(Accounting, MatMulAndSharedWeightCountedOnce) {
  // Two MatMuls share w [64,32]: x [N,10,64] -> [N,10,32], K = 64.
  auto g = must_load(model_text("float[N,10,64] x", "float[N,10,32] y, float[N,10,32] z", {zeros("w", {64, 32})},
                                "y = MatMul(x, w)\n r = Relu(x)\n z = MatMul(r, w)"));
  double const mm = 2.0 * 10 * 32 * 64;  // 40,960
  Op const& first = g.op(0);
  Op const& second = g.op(2);
  ASSERT_EQ(first.type, "MatMul");
  ASSERT_EQ(second.type, "MatMul");
  EXPECT_DOUBLE_EQ(first.fwd_flops_per_sample, mm);
  EXPECT_DOUBLE_EQ(first.bwd_flops_per_sample, mm);  // weight-grad only: x is the model input
  EXPECT_DOUBLE_EQ(second.bwd_flops_per_sample, 2 * mm);
  EXPECT_DOUBLE_EQ(second.bwd_weight_flops_per_sample, mm);
  EXPECT_EQ(first.param_bytes, 64 * 32 * 4);
  EXPECT_EQ(second.param_bytes, 0);
  EXPECT_EQ(g.param_bytes(), 64 * 32 * 4);
  int64_t sum = 0;
  for (auto const& op : g.ops()) sum += op.param_bytes;
  EXPECT_EQ(sum, g.param_bytes());
}

// One attention head over S = 4 positions of width D = 8:
// q,k,v = r Wq, r Wk, r Wv; s = q k^T / c; p = softmax(s); o = p v.
std::string attention_block_text() {
  return model_text("float[N,4,8] x", "float[N,4,8] o",
                    {zeros("wq", {8, 8}), zeros("wk", {8, 8}), zeros("wv", {8, 8}), zeros("c", {}, 2.8284)}, R"(
      r = Relu(x)
      q = MatMul(r, wq)
      k = MatMul(r, wk)
      v = MatMul(r, wv)
      kt = Transpose<perm = [0,2,1]>(k)
      s = MatMul(q, kt)
      sc = Div(s, c)
      p = Softmax<axis = -1>(sc)
      o = MatMul(p, v)
  )");
}

TEST(Accounting, AttentionBlock) {
  auto g = must_load(attention_block_text(), {.fuse = false});
  // fwd: relu 32; projections 3 * 2*4*8*8 = 1536; q k^T 2*16*8 = 256; Div 16; Softmax 5*16 = 80;
  // p v 2*32*4 = 256.
  EXPECT_DOUBLE_EQ(g.fwd_flops_per_sample(), 32 + 1536 + 256 + 16 + 80 + 256);
  // bwd: relu 32; projections 3 * (512 input + 512 weight); q k^T 2*256; Div 4*16; Softmax 4*16;
  // p v 2*256.
  EXPECT_DOUBLE_EQ(g.bwd_flops_per_sample(), 32 + 3 * 1024 + 512 + 64 + 64 + 512);
  double weight = 0;
  for (auto const& op : g.ops()) weight += op.bwd_weight_flops_per_sample;
  EXPECT_DOUBLE_EQ(weight, 3 * 512);
  EXPECT_EQ(g.param_count(), 3 * 64);  // c is a constant, not a parameter
  // Saved, each tensor once: r 128 B, q 128, kt 128, s 64, p 64, v 128.
  EXPECT_EQ(saved_activation_bytes_per_sample(g), 128 + 128 + 128 + 64 + 64 + 128);
  // Per op: relu r; 3 projections r; q k^T q,kt; Div s; Softmax p; p v p,v.
  EXPECT_EQ(g.activation_bytes_per_sample(), 128 + 3 * 128 + 256 + 64 + 64 + 192);
}

// Imported with its fusions, the Transpose and the Div are in the MatMul (q · kᵀ / c): the same
// product's FLOPs, no Div, and k saved where kt and s were.
TEST(Accounting, AttentionBlockWithTheTransposeAndScaleInTheMatMul) {
  auto g = must_load(attention_block_text());
  EXPECT_EQ(g.num_ops(), 7u);  // Relu, 3 projections, q k^T / c, Softmax, p v
  EXPECT_DOUBLE_EQ(g.fwd_flops_per_sample(), 32 + 1536 + 256 + 80 + 256);
  EXPECT_DOUBLE_EQ(g.bwd_flops_per_sample(), 32 + 3 * 1024 + 512 + 64 + 512);
  // Saved: r, q, k, p, v.
  EXPECT_EQ(saved_activation_bytes_per_sample(g), 128 + 128 + 128 + 64 + 128);
  EXPECT_EQ(g.activation_bytes_per_sample(), 128 + 3 * 128 + 256 + 64 + 192);
}

TEST(Accounting, NormsDropoutAndShapeOps) {
  auto g = must_load(model_text("float[N,5,8] x", "float[N,40] y", {zeros("s", {8}, 1), zeros("b", {8})}, R"(
      l = LayerNormalization(x, s, b)
      r = Constant<value = float {0.1}>()
      t = Constant<value = bool {1}>()
      d = Dropout(l, r, t)
      y = Flatten(d)
  )",
                                17));
  Op const& ln = op_named(g, "LayerNormalization");
  EXPECT_DOUBLE_EQ(ln.fwd_flops_per_sample, 8 * 40);
  EXPECT_EQ(ln.activation_bytes_per_sample, 40 * 4 + 5 * 8);  // input + mean, 1/std per row
  Op const& dr = op_named(g, "Dropout");
  EXPECT_EQ(dr.activation_bytes_per_sample, 40);  // 1-byte mask
  Op const& fl = op_named(g, "Flatten");
  EXPECT_EQ(fl.fwd_flops_per_sample, 0);
  EXPECT_EQ(fl.activation_bytes_per_sample, 0);
}

}  // namespace
}  // namespace gp::graph
