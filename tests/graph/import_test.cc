// Importer edge cases on small inline ONNX text models.
#include <gtest/gtest.h>

#include <limits>

#include <filesystem>
#include <fstream>

#include "graph/onnx_builder.h"
#include "graph/onnx_import.h"
#include "tests/graph/onnx_text.h"

namespace gp::graph {
namespace {

OpGraph must_load(std::string const& text, ImportOptions const& options = {}) {
  auto g = load_onnx_text(text, options);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string() << "\n" << text;
  if (!g.is_ok()) return OpGraph{};
  return std::move(g).value();
}

Op const& op_of_type(OpGraph const& g, std::string const& type) {
  for (auto const& op : g.ops())
    if (op.type == type) return op;
  ADD_FAILURE() << "no op of type " << type;
  static Op const none;
  return none;
}

Shape out_shape(OpGraph const& g, std::string const& type, std::size_t k = 0) {
  Op const& op = op_of_type(g, type);
  if (k >= op.outputs.size()) return {};
  return g.tensor(op.outputs[k]).shape;
}

Shape S(std::vector<int64_t> d) { return Shape{std::move(d)}; }
constexpr int64_t N = kBatch;

// One-node models: `node` reads x (and the initializers) and writes y.
OpGraph one_op(std::string const& input, std::string const& output, std::vector<std::string> const& inits,
               std::string const& node, int opset = 13) {
  return must_load(model_text(input, output, inits, node, opset));
}

TEST(Import, ConvAttrsAndShapes) {
  auto g = one_op("float[N,4,9,9] x", "float[N,6,5,5] y", {zeros("w", {6, 2, 3, 3}), zeros("b", {6})},
                  "y = Conv<strides = [2,2], pads = [1,1,1,1], group = 2>(x, w, b)");
  Op const& op = op_of_type(g, "Conv");
  auto const& a = std::get<ConvAttrs>(op.typed);
  EXPECT_EQ(a.kernel, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(a.strides, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a.dilations, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(a.pads, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(a.group, 2);
  EXPECT_TRUE(a.has_bias);
  EXPECT_EQ(out_shape(g, "Conv"), S({N, 6, 5, 5}));
  EXPECT_EQ(g.tensor(op.inputs[1]).role, TensorRole::kWeight);
  EXPECT_EQ(g.tensor(op.inputs[2]).role, TensorRole::kWeight);
  EXPECT_EQ(g.tensor(op.inputs[0]).role, TensorRole::kInput);
}

TEST(Import, ConvSameUpperPadsAndDilation) {
  auto g = one_op("float[N,1,10,7] x", "float[N,2,4,3] y", {zeros("w", {2, 1, 3, 3})},
                  "y = Conv<auto_pad = \"SAME_UPPER\", strides = [3,3]>(x, w)");
  auto const& a = std::get<ConvAttrs>(op_of_type(g, "Conv").typed);
  // out = ceil(10/3) = 4: total pad = 3*3+3-10 = 2 -> 1,1; ceil(7/3) = 3: total = 6+3-7 = 2 -> 1,1
  EXPECT_EQ(a.pads, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_FALSE(a.has_bias);
  auto g2 =
      one_op("float[N,1,10,10] x", "float[N,2,6,6] y", {zeros("w", {2, 1, 3, 3})}, "y = Conv<dilations = [2,2]>(x, w)");
  EXPECT_EQ(out_shape(g2, "Conv"), S({N, 2, 6, 6}));
}

TEST(Import, BatchNormRolesAndTraining) {
  auto g = one_op("float[N,3,4,4] x", "float[N,3,4,4] y",
                  {zeros("s", {3}, 1), zeros("b", {3}), zeros("m", {3}), zeros("v", {3}, 1)},
                  "y = BatchNormalization<epsilon = 0.001, momentum = 0.8, training_mode = 1>(x, s, b, m, v)", 15);
  Op const& op = op_of_type(g, "BatchNormalization");
  auto const& a = std::get<BatchNormAttrs>(op.typed);
  EXPECT_FLOAT_EQ(a.epsilon, 0.001f);
  EXPECT_FLOAT_EQ(a.momentum, 0.8f);
  EXPECT_TRUE(a.training);
  ASSERT_EQ(op.inputs.size(), 5u);
  EXPECT_EQ(g.tensor(op.inputs[1]).role, TensorRole::kWeight);
  EXPECT_EQ(g.tensor(op.inputs[2]).role, TensorRole::kWeight);
  EXPECT_EQ(g.tensor(op.inputs[3]).role, TensorRole::kConstant);
  EXPECT_EQ(g.tensor(op.inputs[4]).role, TensorRole::kConstant);
  ASSERT_NE(g.tensor(op.inputs[4]).data, nullptr);
  EXPECT_FLOAT_EQ(g.tensor(op.inputs[4]).data->as<float>()[2], 1.0f);
  EXPECT_EQ(g.param_count(), 6);
  EXPECT_EQ(out_shape(g, "BatchNormalization"), S({N, 3, 4, 4}));
}

TEST(Import, Activations) {
  auto g = one_op("float[N,5] x", "float[N,5] y", {},
                  "a = Relu(x)\n b = LeakyRelu<alpha = 0.2>(a)\n c = Sigmoid(b)\n d = Tanh(c)\n e = Sqrt(d)\n"
                  "y = Softmax<axis = -1>(e)");
  EXPECT_EQ(g.num_ops(), 6u);
  EXPECT_FLOAT_EQ(std::get<LeakyReluAttrs>(op_of_type(g, "LeakyRelu").typed).alpha, 0.2f);
  EXPECT_EQ(std::get<SoftmaxAttrs>(op_of_type(g, "Softmax").typed).axis, 1);
  for (auto const& op : g.ops()) EXPECT_EQ(g.tensor(op.outputs[0]).shape, S({N, 5})) << op.type;
}

TEST(Import, Pools) {
  auto g = one_op("float[N,2,7,7] x", "float[N,2,1,1] y", {},
                  "a = MaxPool<kernel_shape = [3,3], strides = [2,2], ceil_mode = 1>(x)\n"
                  "b = AveragePool<kernel_shape = [2,2], pads = [1,1,0,0], count_include_pad = 1>(a)\n"
                  "y = GlobalAveragePool(b)");
  EXPECT_EQ(out_shape(g, "MaxPool"), S({N, 2, 3, 3}));  // ceil((7-3)/2)+1 = 3
  EXPECT_EQ(out_shape(g, "AveragePool"), S({N, 2, 3, 3}));
  EXPECT_EQ(out_shape(g, "GlobalAveragePool"), S({N, 2, 1, 1}));
  auto const& mp = std::get<PoolAttrs>(op_of_type(g, "MaxPool").typed);
  EXPECT_EQ(mp.kind, PoolKind::kMax);
  EXPECT_TRUE(mp.ceil_mode);
  EXPECT_EQ(mp.pads, (std::vector<int64_t>{0, 0, 0, 0}));
  auto const& ap = std::get<PoolAttrs>(op_of_type(g, "AveragePool").typed);
  EXPECT_TRUE(ap.count_include_pad);
  EXPECT_EQ(ap.pads, (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(std::get<PoolAttrs>(op_of_type(g, "GlobalAveragePool").typed).kind, PoolKind::kGlobalAverage);
}

// Flatten's negative axis counts from the back, axis + rank (ONNX's range [-r, r]): -1 keeps the last
// dimension apart. It was read as axis + rank + 1 (everything in the first dimension), which
// ONNX's checker did not see where no output shape was declared.
TEST(Import, FlattenNegativeAxisCountsFromTheBack) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,2,3,4] x) => (float[M,4] a, float[K,12] b) {
      a = Flatten<axis = -1>(x)
      b = Flatten<axis = -2>(x)
    })");
  EXPECT_EQ(g.tensor(g.op(0).outputs[0]).shape, S({-6, 4}));
  EXPECT_EQ(std::get<FlattenAttrs>(g.op(0).typed).axis, 3);
  EXPECT_EQ(g.tensor(g.op(1).outputs[0]).shape, S({-2, 12}));
  EXPECT_EQ(std::get<FlattenAttrs>(g.op(1).typed).axis, 2);
}

TEST(Import, ShapeOps) {
  auto g2 = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,2,3,4] x) => (float[N,4,6] y, float[N2,12] f) {
      f = Flatten<axis = 2>(x)
      t = Transpose<perm = [0,2,1,3]>(x)
      s = Constant<value = int64[3] {0, 4, -1}>()
      y = Reshape(t, s)
    })");
  EXPECT_EQ(out_shape(g2, "Flatten"), S({-2, 12}));
  EXPECT_EQ(std::get<FlattenAttrs>(op_of_type(g2, "Flatten").typed).axis, 2);
  EXPECT_EQ(out_shape(g2, "Transpose"), S({N, 3, 2, 4}));
  EXPECT_EQ(std::get<TransposeAttrs>(op_of_type(g2, "Transpose").typed).perm, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(out_shape(g2, "Reshape"), S({N, 4, 6}));
  Op const& r = op_of_type(g2, "Reshape");
  EXPECT_EQ(std::get<ReshapeAttrs>(r.typed).shape, (std::vector<int64_t>{N, 4, 6}));
  EXPECT_EQ(r.inputs.size(), 1u);  // the folded shape is an attribute, not an input
  EXPECT_EQ(g2.num_ops(), 3u);     // the Constant was folded
}

TEST(Import, ConcatSplitSlice) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,6,4] x) => (float[N,2,4] a, float[N,4,4] b, float[N,6,8] c, float[N,3,2] d) {
      sz = Constant<value = int64[2] {2, 4}>()
      a, b = Split<axis = 1>(x, sz)
      c = Concat<axis = -1>(x, x)
      st = Constant<value = int64[2] {-1, 0}>()
      en = Constant<value = int64[2] {-100, 1000}>()
      ax = Constant<value = int64[2] {1, 2}>()
      sp = Constant<value = int64[2] {-2, 2}>()
      d = Slice(x, st, en, ax, sp)
    })");
  Op const& split = op_of_type(g, "Split");
  EXPECT_EQ(std::get<SplitAttrs>(split.typed).sizes, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(std::get<SplitAttrs>(split.typed).axis, 1);
  EXPECT_EQ(g.tensor(split.outputs[1]).shape, S({N, 4, 4}));
  EXPECT_EQ(std::get<ConcatAttrs>(op_of_type(g, "Concat").typed).axis, 2);
  EXPECT_EQ(out_shape(g, "Concat"), S({N, 6, 8}));
  auto const& sl = std::get<SliceAttrs>(op_of_type(g, "Slice").typed);
  EXPECT_EQ(sl.starts, (std::vector<int64_t>{5, 0}));
  // -1 after clamping is "before the first element" for a negative step: stored as INT64_MIN, which
  // the run-time geometry maps there again (stored -1 it read as the last element).
  EXPECT_EQ(sl.ends, (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 4}));
  EXPECT_EQ(sl.axes, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(sl.steps, (std::vector<int64_t>{-2, 2}));
  EXPECT_EQ(out_shape(g, "Slice"), S({N, 3, 2}));
  // Equal split without sizes.
  auto g2 = one_op("float[N,6] x", "float[N,3] y, float[N,3] z", {}, "y, z = Split<axis = 1>(x)");
  EXPECT_EQ(std::get<SplitAttrs>(op_of_type(g2, "Split").typed).sizes, (std::vector<int64_t>{3, 3}));
}

TEST(Import, GatherEmbeddingIsTrainable) {
  auto g = one_op("int64[N,7] ids", "float[N,7,4] y", {zeros("emb", {10, 4})}, "y = Gather(emb, ids)");
  Op const& op = op_of_type(g, "Gather");
  EXPECT_EQ(g.tensor(op.inputs[0]).role, TensorRole::kWeight);
  EXPECT_EQ(std::get<GatherAttrs>(op.typed).axis, 0);
  EXPECT_EQ(out_shape(g, "Gather"), S({N, 7, 4}));
  EXPECT_EQ(g.param_count(), 40);
  // Gather of an activation with a constant index keeps the op; the index becomes a constant.
  auto g2 =
      one_op("float[N,5,3] x", "float[N,3] y", {}, "i = Constant<value = int64 {2}>()\n y = Gather<axis = -2>(x, i)");
  Op const& op2 = op_of_type(g2, "Gather");
  EXPECT_EQ(std::get<GatherAttrs>(op2.typed).axis, 1);
  EXPECT_EQ(g2.tensor(op2.inputs[1]).role, TensorRole::kConstant);
  EXPECT_EQ(out_shape(g2, "Gather"), S({N, 3}));
}

TEST(Import, GemmAndMatMul) {
  auto g = one_op("float[N,8] x", "float[N,3] y", {zeros("w", {3, 8}), zeros("b", {3})},
                  "y = Gemm<transB = 1, alpha = 0.5>(x, w, b)");
  auto const& a = std::get<GemmAttrs>(op_of_type(g, "Gemm").typed);
  EXPECT_TRUE(a.trans_b);
  EXPECT_FALSE(a.trans_a);
  EXPECT_FLOAT_EQ(a.alpha, 0.5f);
  EXPECT_TRUE(a.has_bias);
  EXPECT_EQ(out_shape(g, "Gemm"), S({N, 3}));
  auto g2 = one_op("float[N,5,8] x", "float[N,5,3] y", {zeros("w", {8, 3}), zeros("b", {1, 3})},
                   "m = MatMul(x, w)\n y = Add(m, b)");  // a bias of shape [1,3]: not fused
  EXPECT_EQ(out_shape(g2, "MatMul"), S({N, 5, 3}));
  EXPECT_EQ(g2.param_count(), 27);  // the bias after a MatMul is a parameter
  auto g3 = one_op("float[N,2,5,8] x, float[N,2,8,4] z", "float[N,2,5,4] y", {}, "y = MatMul(x, z)");
  EXPECT_EQ(out_shape(g3, "MatMul"), S({N, 2, 5, 4}));
}

std::vector<std::string> op_types(OpGraph const& g) {
  std::vector<std::string> types;
  for (OpId id : g.topo_order()) types.push_back(g.op(id).type);
  return types;
}

TEST(Import, FusesALinearLayerIntoOneGemmOverTheRows) {
  // torch's Linear on a [N,5,8] input: MatMul by the transposed weight, then the bias (first).
  auto g = one_op("float[N,5,8] x", "float[N,5,3] y", {zeros("w", {3, 8}), zeros("b", {3})},
                  "wt = Transpose<perm = [1,0]>(w)\n m = MatMul(x, wt)\n y = Add(b, m)");
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Reshape", "Gemm", "Reshape"}));
  Op const& gemm = op_of_type(g, "Gemm");
  auto const& a = std::get<GemmAttrs>(gemm.typed);
  EXPECT_TRUE(a.trans_b);
  EXPECT_FALSE(a.trans_a);
  EXPECT_TRUE(a.has_bias);
  EXPECT_EQ(g.tensor(gemm.inputs[0]).shape, S({5 * N, 8}));  // the rows, 5 per sample
  EXPECT_EQ(g.tensor(gemm.inputs[1]).name, "w");
  EXPECT_EQ(g.tensor(gemm.inputs[2]).name, "b");
  EXPECT_EQ(out_shape(g, "Gemm"), S({5 * N, 3}));
  EXPECT_EQ(g.tensor(g.outputs().at(0)).name, "y");
  EXPECT_EQ(g.tensor(g.outputs().at(0)).shape, S({N, 5, 3}));
  EXPECT_EQ(g.param_count(), 27);
  EXPECT_EQ(g.fwd_flops_per_sample(), 2.0 * 5 * 8 * 3 + 5 * 3);  // MatMul's and Add's, as before

  // Rank 2: no reshapes. A weight not transposed, the bias second.
  auto g2 =
      one_op("float[N,8] x", "float[N,3] y", {zeros("w", {8, 3}), zeros("b", {3})}, "m = MatMul(x, w)\n y = Add(m, b)");
  EXPECT_EQ(op_types(g2), (std::vector<std::string>{"Gemm"}));
  EXPECT_FALSE(std::get<GemmAttrs>(g2.op(0).typed).trans_b);

  // No bias (Linear(bias=False)): the transpose alone is worth a Gemm.
  auto g3 = one_op("float[N,5,8] x", "float[N,5,3] y", {zeros("w", {3, 8})}, "wt = Transpose(w)\n y = MatMul(x, wt)");
  EXPECT_EQ(op_types(g3), (std::vector<std::string>{"Reshape", "Gemm", "Reshape"}));
  EXPECT_FALSE(std::get<GemmAttrs>(op_of_type(g3, "Gemm").typed).has_bias);
}

TEST(Import, LeavesAMatMulThatIsNoLinearLayerAlone) {
  // Nothing to fuse: a MatMul by a weight with no transpose and no bias.
  EXPECT_EQ(op_types(one_op("float[N,5,8] x", "float[N,5,3] y", {zeros("w", {8, 3})}, "y = MatMul(x, w)")),
            (std::vector<std::string>{"MatMul"}));
  // The bias is an activation, not an initializer: the transpose is fused, the Add stays.
  EXPECT_EQ(op_types(one_op("float[N,5,8] x, float[N,5,3] b", "float[N,5,3] y", {zeros("w", {3, 8})},
                            "wt = Transpose(w)\n m = MatMul(x, wt)\n y = Add(m, b)")),
            (std::vector<std::string>{"Reshape", "Gemm", "Reshape", "Add"}));
  // The product is also a graph output: it stays a tensor of its own, so the Add stays.
  auto r = load_onnx_text(model_text("float[N,5,8] x", "float[N,5,3] y, float[N,5,3] m",
                                     {zeros("w", {3, 8}), zeros("b", {3})},
                                     "wt = Transpose(w)\n m = MatMul(x, wt)\n y = Add(m, b)"));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(op_types(*r), (std::vector<std::string>{"Reshape", "Gemm", "Reshape", "Add"}));
  EXPECT_EQ(r->tensor(r->outputs().at(1)).name, "m");
  // The transposed weight has a second use: the Transpose stays (and so does the MatMul).
  auto t = load_onnx_text(model_text("float[N,5,8] x", "float[N,5,3] y, float[8,3] wt", {zeros("w", {3, 8})},
                                     "wt = Transpose(w)\n y = MatMul(x, wt)"));
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(op_types(*t), (std::vector<std::string>{"Transpose", "MatMul"}));
}

TEST(Import, ElementwiseBroadcast) {
  auto g = one_op("float[N,3,4] x, float[N,1,4] z", "float[N,3,4] y", {zeros("c", {1}, 2)},
                  "a = Add(x, z)\n b = Sub(a, c)\n d = Mul(b, x)\n e = Div(d, z)\n y = Pow(e, c)");
  for (auto const& op : g.ops()) EXPECT_EQ(g.tensor(op.outputs[0]).shape, S({N, 3, 4})) << op.type;
  EXPECT_EQ(g.param_count(), 0);  // a single number stays a constant
  Op const& sub = op_of_type(g, "Sub");
  EXPECT_EQ(g.tensor(sub.inputs[1]).role, TensorRole::kConstant);
  // A learned tensor added into the activations (a position embedding) is a parameter.
  auto g2 = one_op("float[N,3,4] x", "float[N,3,4] y", {zeros("pos", {1, 3, 4})}, "y = Add(x, pos)");
  EXPECT_EQ(g2.param_count(), 12);
  EXPECT_EQ(g2.tensor(op_of_type(g2, "Add").inputs[1]).role, TensorRole::kWeight);
}

// Size folds like Shape: here 12N, divided back to N and used as a reshape dimension.
TEST(Import, SizeFoldsWithTheBatch) {
  auto g = load_onnx_text(model_text("float[N,3,4] x", "float[N,12] y", {}, R"(
      s = Size(x)
      twelve = Constant<value = int64 {12}>()
      n = Div(s, twelve)
      axes = Constant<value = int64[1] {0}>()
      n1 = Unsqueeze(n, axes)
      t = Constant<value = int64[1] {12}>()
      shape = Concat<axis = 0>(n1, t)
      y = Reshape(x, shape)
  )"));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(out_shape(*g, "Reshape"), S({N, 12}));
}

TEST(Import, ReduceDropoutLayerNorm) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 17]>
    net (float[N,5,8] x) => (float[N,5,1] a, float[N,8] b, float[N,5,8] c, float[N,5,8] d)
        <float[8] s = {1,1,1,1,1,1,1,1}, float[8] o = {0,0,0,0,0,0,0,0}> {
      a = ReduceMean<axes = [-1]>(x)
      ax = Constant<value = int64[1] {1}>()
      b = ReduceSum<keepdims = 0>(x, ax)
      r = Constant<value = float {0.25}>()
      t = Constant<value = bool {1}>()
      c = Dropout(x, r, t)
      d = LayerNormalization<axis = -1, epsilon = 0.0001>(x, s, o)
    })");
  auto const& rm = std::get<ReduceAttrs>(op_of_type(g, "ReduceMean").typed);
  EXPECT_EQ(rm.axes, (std::vector<int64_t>{2}));
  EXPECT_TRUE(rm.keepdims);
  auto const& rs = std::get<ReduceAttrs>(op_of_type(g, "ReduceSum").typed);
  EXPECT_EQ(rs.axes, (std::vector<int64_t>{1}));
  EXPECT_FALSE(rs.keepdims);
  EXPECT_EQ(out_shape(g, "ReduceSum"), S({N, 8}));
  auto const& dr = std::get<DropoutAttrs>(op_of_type(g, "Dropout").typed);
  EXPECT_FLOAT_EQ(dr.ratio, 0.25f);
  EXPECT_TRUE(dr.training);
  EXPECT_EQ(op_of_type(g, "Dropout").inputs.size(), 1u);
  auto const& ln = std::get<LayerNormAttrs>(op_of_type(g, "LayerNormalization").typed);
  EXPECT_EQ(ln.axis, 2);
  EXPECT_FLOAT_EQ(ln.epsilon, 1e-4f);
  EXPECT_TRUE(ln.has_bias);
  EXPECT_EQ(g.param_count(), 16);
}

TEST(Import, UnsqueezeSqueezeCastExpandWhereEqualOnActivations) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,3] x) => (float[N,3] y, bool[N,3] e) {
      ax = Constant<value = int64[2] {1, -1}>()
      u = Unsqueeze(x, ax)
      s = Squeeze(u, ax)
      c = Cast<to = 7>(s)
      sh = Constant<value = int64[3] {2, 1, 1}>()
      big = Expand(x, sh)
      zero = Constant<value = float {0}>()
      e = Equal(x, zero)
      y = Where(e, zero, x)
    })");
  EXPECT_EQ(std::get<UnsqueezeAttrs>(op_of_type(g, "Unsqueeze").typed).axes, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(out_shape(g, "Unsqueeze"), S({N, 1, 3, 1}));
  EXPECT_EQ(std::get<SqueezeAttrs>(op_of_type(g, "Squeeze").typed).axes, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(out_shape(g, "Squeeze"), S({N, 3}));
  EXPECT_EQ(std::get<CastAttrs>(op_of_type(g, "Cast").typed).to, 7);
  EXPECT_EQ(g.tensor(op_of_type(g, "Cast").outputs[0]).dtype, DType::kInt64);
  EXPECT_EQ(out_shape(g, "Expand"), S({2, N, 3}));
  EXPECT_EQ(std::get<ExpandAttrs>(op_of_type(g, "Expand").typed).shape, (std::vector<int64_t>{2, N, 3}));
  EXPECT_EQ(g.tensor(op_of_type(g, "Equal").outputs[0]).dtype, DType::kBool);
  EXPECT_EQ(out_shape(g, "Where"), S({N, 3}));
}

TEST(Import, IdentityIsRemovedAndRewired) {
  auto g =
      one_op("float[N,4] x", "float[N,4] y", {}, "a = Relu(x)\n b = Identity(a)\n c = Identity(b)\n y = Sigmoid(c)");
  ASSERT_EQ(g.num_ops(), 2u);
  Op const& relu = op_of_type(g, "Relu");
  Op const& sig = op_of_type(g, "Sigmoid");
  EXPECT_EQ(sig.inputs[0], relu.outputs[0]);
  EXPECT_EQ(g.successors(relu.id), std::vector<OpId>{sig.id});
  // An Identity that is the graph output: the output becomes the producer's tensor.
  auto g2 = one_op("float[N,4] x", "float[N,4] y", {}, "a = Relu(x)\n y = Identity(a)");
  ASSERT_EQ(g2.num_ops(), 1u);
  EXPECT_EQ(g2.outputs()[0], op_of_type(g2, "Relu").outputs[0]);
}

// torch's dynamic flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, with the batch size
// read at run time. Folding keeps the batch symbolic.
TEST(Import, FoldsShapeGatherUnsqueezeConcatReshape) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[batch,2,3,4] x) => (float[batch,24] y) {
      s = Shape(x)
      i = Constant<value = int64 {0}>()
      n = Gather<axis = 0>(s, i)
      ax = Constant<value = int64[1] {0}>()
      nu = Unsqueeze(n, ax)
      m = Constant<value = int64[1] {-1}>()
      shape = Concat<axis = 0>(nu, m)
      y = Reshape(x, shape)
    })");
  ASSERT_EQ(g.num_ops(), 1u);
  Op const& r = op_of_type(g, "Reshape");
  EXPECT_EQ(std::get<ReshapeAttrs>(r.typed).shape, (std::vector<int64_t>{N, 24}));
  EXPECT_EQ(out_shape(g, "Reshape"), S({N, 24}));
  EXPECT_EQ(r.inputs.size(), 1u);
}

// Attention-style head split: the batch times the head count as one dimension.
TEST(Import, FoldsBatchTimesHeads) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[batch,10,32] x) => (float[b4,10,8] y) {
      s = Shape(x)
      i = Constant<value = int64 {0}>()
      n = Gather<axis = 0>(s, i)
      h = Constant<value = int64 {4}>()
      nh = Mul(n, h)
      ax = Constant<value = int64[1] {0}>()
      nhu = Unsqueeze(nh, ax)
      rest = Constant<value = int64[2] {10, 8}>()
      shape = Concat<axis = 0>(nhu, rest)
      t = Transpose<perm = [0,2,1]>(x)
      t2 = Transpose<perm = [0,2,1]>(t)
      y = Reshape(t2, shape)
    })");
  EXPECT_EQ(out_shape(g, "Reshape"), S({-4, 10, 8}));
  EXPECT_EQ(g.tensor(op_of_type(g, "Reshape").outputs[0]).bytes_per_sample(), 4 * 10 * 8 * 4);
}

TEST(Import, ConstantOfShapeRangeFold) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,4] x) => (float[N,4] y) {
      sh = Constant<value = int64[1] {4}>()
      ones = ConstantOfShape<value = float[1] {1}>(sh)
      a = Constant<value = float {0}>()
      b = Constant<value = float {4}>()
      d = Constant<value = float {1}>()
      r = Range(a, b, d)
      w = Add(ones, r)
      y = Mul(x, w)
    })");
  ASSERT_EQ(g.num_ops(), 1u);
  Op const& mul = op_of_type(g, "Mul");
  TensorInfo const& w = g.tensor(mul.inputs[1]);
  EXPECT_EQ(w.role, TensorRole::kConstant);
  ASSERT_NE(w.data, nullptr);
  EXPECT_EQ(w.data->to_doubles(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Import, FusesErfGelu) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,16] x) => (float[N,16] y) {
      s2 = Constant<value = float {1.4142135}>()
      one = Constant<value = float {1.0}>()
      half = Constant<value = float {0.5}>()
      d = Div(x, s2)
      e = Erf(d)
      a = Add(e, one)
      m = Mul(x, a)
      y = Mul(m, half)
    })");
  ASSERT_EQ(g.num_ops(), 1u);
  Op const& op = g.op(0);
  EXPECT_EQ(op.type, "Gelu");
  EXPECT_EQ(op.domain, "");
  EXPECT_FALSE(std::get<GeluAttrs>(op.typed).tanh_approx);
  EXPECT_EQ(g.tensor(op.inputs[0]).name, "x");
  EXPECT_EQ(g.tensor(op.outputs[0]).name, "y");
}

TEST(Import, FusesDecomposedLayerNorm) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,5,8] x) => (float[N,5,8] y) <float[8] w = {1,1,1,1,1,1,1,1}, float[8] b = {0,0,0,0,0,0,0,0}> {
      m = ReduceMean<axes = [-1]>(x)
      d = Sub(x, m)
      two = Constant<value = float {2.0}>()
      p = Pow(d, two)
      v = ReduceMean<axes = [-1]>(p)
      eps = Constant<value = float {0.00001}>()
      ve = Add(v, eps)
      s = Sqrt(ve)
      n = Div(d, s)
      nw = Mul(n, w)
      y = Add(nw, b)
    })");
  ASSERT_EQ(g.num_ops(), 1u);
  Op const& op = g.op(0);
  EXPECT_EQ(op.type, "LayerNormalization");
  auto const& a = std::get<LayerNormAttrs>(op.typed);
  EXPECT_EQ(a.axis, 2);
  EXPECT_NEAR(a.epsilon, 1e-5f, 1e-9);
  EXPECT_TRUE(a.has_bias);
  ASSERT_EQ(op.inputs.size(), 3u);
  EXPECT_EQ(g.tensor(op.inputs[1]).role, TensorRole::kWeight);
  EXPECT_EQ(g.tensor(op.inputs[2]).role, TensorRole::kWeight);
  EXPECT_EQ(g.param_count(), 16);
}

TEST(Import, PartialPatternIsNotFused) {
  // The Erf result is also a graph output: fusing would lose it, so the chain stays as it is.
  auto g = load_onnx_text(model_text("float[N,4] x", "float[N,4] y, float[N,4] e", {}, R"(
      s2 = Constant<value = float {1.4142135}>()
      one = Constant<value = float {1.0}>()
      half = Constant<value = float {0.5}>()
      d = Div(x, s2)
      e = Erf(d)
      a = Add(e, one)
      m = Mul(x, a)
      y = Mul(m, half)
  )"));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(op_of_type(*g, "Erf").type, "Erf");
  for (Op const& op : g->ops()) EXPECT_NE(op.type, "Gelu");
}

// BatchNormalization -> Relu, the Relu its only reader: one BatchNormalization with the Relu fused,
// writing the Relu's output (in training mode, opset 15, with its running statistics named).
TEST(Import, FusesAReluIntoTheBatchNormBeforeIt) {
  std::string const body = R"(
      n, rm, rv = BatchNormalization<training_mode = 1>(x, s, b, m, v)
      r = Relu(n)
      y = Add(r, x)
  )";
  std::vector<std::string> const inits{zeros("s", {3}, 1), zeros("b", {3}), zeros("m", {3}), zeros("v", {3}, 1)};
  OpGraph const g = must_load(model_text("float[N,3,4,4] x", "float[N,3,4,4] y", inits, body, 15));
  ASSERT_EQ(g.num_ops(), 2u);
  Op const& bn = op_of_type(g, "BatchNormalization");
  EXPECT_TRUE(std::get<BatchNormAttrs>(bn.typed).relu);
  EXPECT_TRUE(std::get<BatchNormAttrs>(bn.typed).training);
  ASSERT_FALSE(bn.outputs.empty());
  EXPECT_EQ(g.tensor(bn.outputs[0]).name, "r");
  EXPECT_EQ(g.tensor(bn.outputs[0]).shape, S({N, 3, 4, 4}));
  EXPECT_EQ(g.tensor(op_of_type(g, "Add").inputs[0]).name, "r");
  // Told not to, the importer keeps them apart.
  OpGraph const apart = must_load(model_text("float[N,3,4,4] x", "float[N,3,4,4] y", inits, body, 15), {.fuse = false});
  ASSERT_EQ(apart.num_ops(), 3u);
  EXPECT_FALSE(std::get<BatchNormAttrs>(op_of_type(apart, "BatchNormalization").typed).relu);
}

// Not fused where the normalised value is needed without the Relu: another reader, or a graph output.
TEST(Import, ABatchNormWhoseOutputIsReadElsewhereKeepsItsRelu) {
  std::vector<std::string> const inits{zeros("s", {3}, 1), zeros("b", {3}), zeros("m", {3}), zeros("v", {3}, 1)};
  for (auto const& [outputs, body] : std::vector<std::pair<std::string, std::string>>{
           {"float[N,3,4,4] y", "n = BatchNormalization(x, s, b, m, v)\n r = Relu(n)\n y = Add(r, n)"},
           {"float[N,3,4,4] y, float[N,3,4,4] n", "n = BatchNormalization(x, s, b, m, v)\n y = Relu(n)"}}) {
    SCOPED_TRACE(body);
    OpGraph const g = must_load(model_text("float[N,3,4,4] x", outputs, inits, body));
    EXPECT_EQ(op_of_type(g, "Relu").type, "Relu");
    EXPECT_FALSE(std::get<BatchNormAttrs>(op_of_type(g, "BatchNormalization").typed).relu);
  }
}

// A residual block's tail, BatchNormalization -> Add(·, z) -> Relu, with z of the normalised
// value's shape: one BatchNormalization with z as input 5 (BatchNormAttrs::residual and relu),
// writing the Relu's output. Fused after lowering, where the shapes are known (here z is a second
// graph input).
TEST(Import, FusesAResidualBlocksTailIntoItsBatchNorm) {
  std::vector<std::string> const inits{zeros("s", {3}, 1), zeros("b", {3}), zeros("m", {3}), zeros("v", {3}, 1)};
  std::string const body = "n = BatchNormalization(x, s, b, m, v)\n a = Add(z, n)\n y = Relu(a)";
  OpGraph const g = must_load(model_text("float[N,3,4,4] x, float[N,3,4,4] z", "float[N,3,4,4] y", inits, body));
  ASSERT_EQ(g.num_ops(), 1u);
  Op const& bn = g.op(0);
  auto const& a = std::get<BatchNormAttrs>(bn.typed);
  EXPECT_TRUE(a.relu);
  EXPECT_TRUE(a.residual);
  ASSERT_EQ(bn.inputs.size(), kBatchNormResidualInput + 1);
  EXPECT_EQ(g.tensor(bn.inputs[kBatchNormResidualInput]).name, "z");
  EXPECT_EQ(g.tensor(bn.outputs[0]).name, "y");
  EXPECT_FALSE(g.find_tensor("n"));  // the normalised value and the sum leave the graph
  EXPECT_FALSE(g.find_tensor("a"));
  // Told not to, the importer keeps the three apart.
  OpGraph const apart =
      must_load(model_text("float[N,3,4,4] x, float[N,3,4,4] z", "float[N,3,4,4] y", inits, body), {.fuse = false});
  EXPECT_EQ(apart.num_ops(), 3u);
}

// Attention's scores as torch exports them: k permuted to [N,H,D,T] (perm 0,2,3,1) and the product
// divided by a constant. One MatMul reads k through a Transpose by 0,2,1,3 (its innermost axis
// kept) as transB, scaled by alpha = 1/c; with --no-fusion the three stay apart.
TEST(Import, FoldsAttentionsKeyTransposeAndScaleIntoTheMatMul) {
  std::string const body = R"(
      kt = Transpose<perm = [0,2,3,1]>(k)
      s = MatMul(q, kt)
      y = Div(s, c)
  )";
  std::string const text =
      model_text("float[N,2,4,3] q, float[N,4,2,3] k", "float[N,2,4,4] y", {zeros("c", {}, 4)}, body);
  OpGraph const g = must_load(text);
  ASSERT_EQ(g.num_ops(), 2u);
  Op const& mm = op_of_type(g, "MatMul");
  auto const& a = std::get<MatMulAttrs>(mm.typed);
  EXPECT_FALSE(a.trans_a);
  EXPECT_TRUE(a.trans_b);
  EXPECT_FLOAT_EQ(a.alpha, 0.25f);
  EXPECT_EQ(g.tensor(mm.outputs[0]).name, "y");
  EXPECT_EQ(g.tensor(mm.outputs[0]).shape, S({N, 2, 4, 4}));
  TensorInfo const& k = g.tensor(mm.inputs[1]);  // [N,2,4,3]: k with its heads moved out, D innermost
  EXPECT_EQ(k.shape, S({N, 2, 4, 3}));
  EXPECT_EQ(std::get<TransposeAttrs>(g.op(k.producer).typed).perm, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_FALSE(g.find_tensor("c"));  // the folded factor leaves with the Div
  EXPECT_EQ(must_load(text, {.fuse = false}).num_ops(), 3u);
}

// Not folded where the Transpose's output is read elsewhere, where its perm does not bring the last
// axis next to last (the innermost axis would move anyway), where the "scale" divides a constant by
// the product, is a tensor rather than one number, or is a trained weight. A Transpose of the last
// two axes of a 3-D operand goes away entirely, and a scaled operand folds like a scaled product,
// before or after its Transpose.
TEST(Import, FoldsOnlyTransposesOfTheLastAxisAndOneNumberConstantScales) {
  struct Case {
    std::string inputs, outputs, body;
    std::vector<std::string> inits;
    std::size_t ops;  // after import
    bool trans_b;
    float alpha;
  };
  std::string const qk = "float[N,4,3] q, float[N,5,3] k";
  std::vector<Case> const cases{
      {qk, "float[N,4,5] y, float[N,3,5] kt", "kt = Transpose<perm = [0,2,1]>(k)\n y = MatMul(q, kt)", {}, 2, false, 1},
      {"float[N,2,4,3] q, float[N,3,2,5] k",
       "float[N,2,4,5] y",
       "kt = Transpose<perm = [0,2,1,3]>(k)\n y = MatMul(q, kt)",
       {},
       2,
       false,
       1},
      {qk,
       "float[N,4,5] y",
       "kt = Transpose<perm = [0,2,1]>(k)\n s = MatMul(q, kt)\n y = Div(c, s)",
       {zeros("c", {}, 2)},
       2,
       true,
       1},
      {qk,
       "float[N,4,5] y",
       "kt = Transpose<perm = [0,2,1]>(k)\n s = MatMul(q, kt)\n y = Mul(s, c)",
       {zeros("c", {5}, 2)},
       2,
       true,
       1},
      {qk,
       "float[N,4,5] y",
       "kt = Transpose<perm = [0,2,1]>(k)\n s = MatMul(q, kt)\n y = Mul(s, w)",
       {zeros("w", {1}, 2)},
       2,
       true,
       1},
      {qk,
       "float[N,4,5] y",
       "kt = Transpose<perm = [0,2,1]>(k)\n qs = Mul(c, q)\n y = MatMul(qs, kt)",
       {zeros("c", {}, 2)},
       1,
       true,
       2},
      // HF's decomposed attention: q and Kᵀ scaled apart, the scale after the Transpose.
      {qk,
       "float[N,4,5] y",
       "kt = Transpose<perm = [0,2,1]>(k)\n ks = Mul(kt, c)\n qs = Mul(q, c)\n y = MatMul(qs, ks)",
       {zeros("c", {}, 0.5)},
       1,
       true,
       0.25f}};
  for (Case const& c : cases) {
    SCOPED_TRACE(c.body);
    ImportOptions options;  // c (one number) is a constant; w is trained by pattern
    if (c.body.find("w)") != std::string::npos) options.trainable = {"w"};
    OpGraph const g = must_load(model_text(c.inputs, c.outputs, c.inits, c.body), options);
    EXPECT_EQ(g.num_ops(), c.ops);
    auto const& a = std::get<MatMulAttrs>(op_of_type(g, "MatMul").typed);
    EXPECT_FALSE(a.trans_a);
    EXPECT_EQ(a.trans_b, c.trans_b);
    EXPECT_FLOAT_EQ(a.alpha, c.alpha);
  }
}

// Not fused where z broadcasts (the sum is not z's shape), or where the sum is needed without the
// Relu: the BatchNorm keeps its own Relu-less output and the Add and Relu stay.
TEST(Import, AResidualTailThatBroadcastsOrIsReadElsewhereStaysApart) {
  std::vector<std::string> const inits{zeros("s", {3}, 1), zeros("b", {3}), zeros("m", {3}), zeros("v", {3}, 1),
                                       zeros("zb", {3, 1, 1})};
  for (auto const& [io, body] : std::vector<std::pair<std::pair<std::string, std::string>, std::string>>{
           {{"float[N,3,4,4] x", "float[N,3,4,4] y"},
            "n = BatchNormalization(x, s, b, m, v)\n a = Add(n, zb)\n y = Relu(a)"},
           {{"float[N,3,4,4] x, float[N,3,4,4] z", "float[N,3,4,4] y, float[N,3,4,4] a"},
            "n = BatchNormalization(x, s, b, m, v)\n a = Add(n, z)\n y = Relu(a)"}}) {
    SCOPED_TRACE(io.first);
    OpGraph const g = must_load(model_text(io.first, io.second, inits, body));
    EXPECT_EQ(g.num_ops(), 3u);
    EXPECT_FALSE(std::get<BatchNormAttrs>(op_of_type(g, "BatchNormalization").typed).residual);
  }
}

// ---- bad input -----------------------------------------------------------------------------

TEST(ImportErrors, MissingFile) {
  auto g = load_onnx("/nonexistent/dir/model.onnx");
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_NE(g.status().message().find("/nonexistent/dir/model.onnx: no such model file"), std::string::npos)
      << g.status().message();
}

TEST(ImportErrors, GarbageBytesAndTextFiles) {
  auto g = load_onnx_bytes(std::string("\xff\xff\xff\xff garbage \x01\x02", 16), "junk.onnx");
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kParseError);
  EXPECT_NE(g.status().message().find("junk.onnx: not an ONNX model"), std::string::npos) << g.status().message();
  // A file that happens to parse as protobuf but holds no model.
  std::string const path = std::string(GP_BINARY_DIR) + "/import_test_not_a_model.onnx";
  { std::ofstream(path) << "hello"; }
  auto g2 = load_onnx(path);
  ASSERT_FALSE(g2.is_ok());
  EXPECT_NE(g2.status().message().find(path + ": not an ONNX model"), std::string::npos) << g2.status().message();
  std::filesystem::remove(path);
}

TEST(ImportErrors, CheckerFailure) {
  auto g = load_onnx_text(model_text("float[N,4] x", "float[N,4] y", {}, "y = Relu(undefined_tensor)"));
  ASSERT_FALSE(g.is_ok());
  std::string const msg = g.status().message();
  EXPECT_NE(msg.find("<onnx text>: the ONNX checker rejects the model: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("undefined_tensor"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ImportErrors, ListsEveryUnsupportedOpOnce) {
  auto g = load_onnx_text(model_text("float[N,4] x", "float[N,4] y", {}, R"(
      a = LpNormalization(x)
      b = Unique(a)
      c = LpNormalization(b)
      d = Relu(c)
      y = Unique(d)
  )"));
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  std::string const msg = g.status().message();
  EXPECT_NE(msg.find("unsupported operators: LpNormalization (2 nodes: #0, #2); Unique (2 nodes: #1, #4)."),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("LpNormalization", msg.find("LpNormalization") + 1), std::string::npos) << msg;  // once
  EXPECT_NE(msg.find("Supported: Abs Acos"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(ImportErrors, DynamicNonBatchDimension) {
  auto g = load_onnx_text(model_text("float[N,seq,4] x", "float[N,seq,4] y", {}, "y = Relu(x)"));
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().message(),
            "<onnx text>: input 'x' has a dynamic dimension 1 ('seq'); only the first (batch) dimension may be "
            "dynamic: export the model with a fixed size for that dimension");
}

TEST(ImportErrors, RunTimeShapeIsDynamic) {
  // A Reshape whose shape comes from data, not from static shapes.
  auto g = load_onnx_text(model_text("float[N,4] x, int64[2] s", "float[N,4] y", {}, "y = Reshape(x, s)"));
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("its shape ('s') is computed at run time"), std::string::npos)
      << g.status().message();
}

// Add, Sub, Mul and Div take one type for both inputs: a file that mixes them is invalid and named
// as such (torch 2.15 wrote Wav2Vec2 at opset 25 with a bool mask added to float scores).
TEST(ImportErrors, ArithmeticOfTwoDtypesIsAnInvalidFile) {
  auto g = load_onnx_text(model_text("float[N,4] x, bool[N,4] m", "float[N,4] y", {}, "y = Add(x, m)"));
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("its inputs are float32 and bool, where ONNX requires one type for both"),
            std::string::npos)
      << g.status().message();
}

TEST(ImportErrors, OpsetOutOfRange) {
  auto g = load_onnx_text(model_text("float[N,4] x", "float[N,4] y", {}, "y = Relu(x)", 6));
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("opset 6; graphpipe imports opsets 7-28"), std::string::npos)
      << g.status().message();
}

// ---- files and external data ---------------------------------------------------------------

OnnxModelBuilder small_linear() {
  OnnxModelBuilder b("linear", 13, 7);
  b.add_input("x", {kBatch, 300});
  b.add_output("y", {kBatch, 200});
  b.add_initializer("w", {300, 200}, InitRule{InitRule::Kind::kOnes});
  b.add_node("MatMul", {"x", "w"}, {"y"});
  return b;
}

TEST(ImportFiles, ExternalDataRelativeToModelFolder) {
  namespace fs = std::filesystem;
  fs::path const dir = fs::path(GP_BINARY_DIR) / "import_test_external";
  fs::create_directories(dir);
  SaveOptions save;
  save.external_data = SaveOptions::ExternalData::kAlways;
  ASSERT_TRUE(small_linear().save((dir / "m.onnx").string(), save).is_ok());
  auto g = load_onnx((dir / "m.onnx").string());
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  TensorInfo const& w = g->tensor(*g->find_tensor("w"));
  EXPECT_EQ(w.role, TensorRole::kWeight);
  ASSERT_NE(w.data, nullptr);
  EXPECT_EQ(w.data->numel(), 60000);
  EXPECT_FLOAT_EQ(w.data->as<float>()[59999], 1.0f);
  ImportOptions no_weights;
  no_weights.load_weights = false;
  auto g2 = load_onnx((dir / "m.onnx").string(), no_weights);
  ASSERT_TRUE(g2.is_ok()) << g2.status().to_string();
  EXPECT_EQ(g2->tensor(*g2->find_tensor("w")).data, nullptr);
  EXPECT_EQ(g2->param_count(), 60000);
  // The data file gone: a clear error.
  for (auto const& e : fs::directory_iterator(dir))
    if (e.path().filename() != "m.onnx") fs::remove(e.path());
  auto g3 = load_onnx((dir / "m.onnx").string());
  ASSERT_FALSE(g3.is_ok());
  EXPECT_NE(g3.status().message().find((dir / "m.onnx").string() + ":"), std::string::npos) << g3.status().message();
  EXPECT_NE(g3.status().message().find("m.onnx"), std::string::npos);
  fs::remove_all(dir);
}

// A model of opset 24 that graphpipe rewrites before ONNX 1.18's checker (its Swish) is checked in
// memory, where the checker cannot open external data: its initializers stored outside the file are
// checked as typed inputs, and the data is read as usual (tests/data/onnx/README.md).
TEST(ImportFiles, ARewrittenNewerOpsetModelWithExternalDataImports) {
  std::string const path = std::string(GP_SOURCE_DIR) + "/tests/data/onnx/swish_opset24_external/model.onnx";
  auto g = load_onnx(path);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  TensorInfo const& w = g->tensor(*g->find_tensor("w"));
  ASSERT_NE(w.data, nullptr);
  EXPECT_FLOAT_EQ(w.data->as<float>()[15], 15.f / 16);
  int sigmoids = 0, swishes = 0;
  for (auto const& op : g->ops()) {
    sigmoids += op.type == "Sigmoid";
    swishes += op.type == "Swish";
  }
  EXPECT_EQ(sigmoids, 1);
  EXPECT_EQ(swishes, 0);
}

// An attribute of opset 27 that ONNX 1.18's checker does not know (Range's stash_type), dropped by
// the importer: the checker sees the model as adapted, not the file it would read again.
TEST(ImportFiles, ANewerAttributeDroppedFromAFileIsCheckedInMemory) {
  auto g = load_onnx(std::string(GP_SOURCE_DIR) + "/tests/data/onnx/range_stash_type_opset27/model.onnx");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  int adds = 0;
  for (auto const& op : g->ops()) adds += op.type == "Add";
  EXPECT_EQ(adds, 1);
}

// Planning imports without the weights, but a fixed-batch export's bool mask stored outside the
// file is a constant the lowering narrows to one row: it is read all the same.
TEST(ImportFiles, AFixedBatchMaskInExternalDataIsReadWithoutTheWeights) {
  namespace fs = std::filesystem;
  fs::path const dir = fs::path(GP_BINARY_DIR) / "import_test_external_mask";
  fs::create_directories(dir);
  OnnxModelBuilder b("mask", 17, 1);
  b.add_input("x", {3, 2, 4, 4});
  b.add_output("y", {3, 2, 4, 4});
  TensorData mask;
  mask.dtype = DType::kBool;
  mask.dims = {3, 1, 4, 4};
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) mask.bytes.push_back(std::byte{j <= i});
  b.add_initializer("mask", std::move(mask), false);
  b.add_initializer("lowest", TensorData::from_floats({}, {-3e38f}), false);
  b.add_node("Where", {"mask", "x", "lowest"}, {"y"});
  SaveOptions save;
  save.external_data = SaveOptions::ExternalData::kAlways;
  ASSERT_TRUE(b.save((dir / "m.onnx").string(), save).is_ok());
  for (bool weights : {true, false}) {
    auto g = load_onnx((dir / "m.onnx").string(), ImportOptions{.load_weights = weights});
    ASSERT_TRUE(g.is_ok()) << (weights ? "with" : "without") << " the weights: " << g.status().message();
    EXPECT_EQ(g->tensor(op_of_type(*g, "Where").inputs[0]).shape, S({1, 1, 4, 4}));
  }
  fs::remove_all(dir);
}

TEST(ImportFiles, UnnamedNodesGetTypeNames) {
  auto g = one_op("float[N,4] x", "float[N,4] y", {}, "a = Relu(x)\n y = Relu(a)");
  EXPECT_TRUE(g.find_op("Relu_0").has_value());
  EXPECT_TRUE(g.find_op("Relu_1").has_value());
  EXPECT_EQ(g.name(), "net");
}

}  // namespace
}  // namespace gp::graph

namespace gp::graph {
namespace {

TEST(Import, FixedBatchInFileBecomesSymbolic) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[2,8] x) => (float[2,2,4] y) {
      s = Constant<value = int64[3] {2, 2, 4}>()
      y = Reshape(x, s)
    })");
  EXPECT_EQ(g.tensor(g.inputs()[0]).shape, S({N, 8}));
  EXPECT_EQ(out_shape(g, "Reshape"), S({N, 2, 4}));
}

// torch.onnx.export's default (dynamo, no dynamic_shapes) fixes the batch at the example's size B
// and spells it as a number: HF's repeat_kv expands [B, kv, 1, T, d] to [B, kv, n_rep, T, d], and
// its causal mask is a constant [B, 1, T, T] of B equal rows added to the scores. The Expand's B
// where x holds the batch is the batch; the mask is read as its one row, which broadcasts over any
// batch. Rows that differ cannot follow another batch size: the error says to re-export.
TEST(Import, AFixedBatchExportsConstantsFollowTheBatch) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 17]>
    net (float[3,2,4] x) => (float[3,2,2,4] y) {
      s = Constant<value = int64[4] {3, 2, 2, 4}>()
      one = Constant<value = int64[1] {1}>()
      xu = Unsqueeze(x, one)
      xe = Expand(xu, s)
      m = Constant<value = float[3,1,1,4] {0, -3e38, 0, 0, 0, -3e38, 0, 0, 0, -3e38, 0, 0}>()
      y = Add(xe, m)
    })");
  EXPECT_EQ(out_shape(g, "Expand"), S({N, 2, 2, 4}));
  EXPECT_EQ(out_shape(g, "Add"), S({N, 2, 2, 4}));
  Op const& add = op_of_type(g, "Add");
  TensorInfo const& mask = g.tensor(add.inputs[1]);
  EXPECT_EQ(mask.shape, S({1, 1, 1, 4}));
  ASSERT_NE(mask.data, nullptr);
  EXPECT_EQ(mask.data->to_doubles(), (std::vector<double>{0, -3e38f, 0, 0}));

  auto differ = load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    net (float[3,4] x) => (float[3,4] y) {
      m = Constant<value = float[3,4] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}>()
      y = Add(x, m)
    })");
  ASSERT_FALSE(differ.is_ok());
  EXPECT_NE(differ.status().message().find("exported with, whose rows differ"), std::string::npos)
      << differ.status().message();
  EXPECT_NE(differ.status().message().find("re-export the model with a dynamic batch dimension"), std::string::npos);
  // A learned tensor of the batch size where x holds the batch cannot follow it either: the
  // broadcast error says the export fixed the batch.
  auto other = load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
    net (float[3,4] x) => (float[3,4] y) <float[3,4] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> {
      y = Add(x, w)
    })");
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("fixed batch size of 3"), std::string::npos) << other.status().message();
}

}  // namespace
}  // namespace gp::graph

namespace gp::graph {
namespace {

TEST(Import, FusesZeroPadIntoAveragePool) {
  auto g = must_load(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,2,5,5] x) => (float[N,2,5,5] y) {
      p = Constant<value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}>()
      xp = Pad<mode = "constant">(x, p)
      y = AveragePool<kernel_shape = [3,3], strides = [1,1]>(xp)
    })");
  ASSERT_EQ(g.num_ops(), 1u);
  auto const& a = std::get<PoolAttrs>(op_of_type(g, "AveragePool").typed);
  EXPECT_EQ(a.pads, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_TRUE(a.count_include_pad);
  EXPECT_EQ(out_shape(g, "AveragePool"), S({N, 2, 5, 5}));
  // A reflect pad stays a Pad.
  auto r = load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 13]>
    net (float[N,2,5,5] x) => (float[N,2,5,5] y) {
      p = Constant<value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}>()
      xp = Pad<mode = "reflect">(x, p)
      y = AveragePool<kernel_shape = [3,3]>(xp)
    })");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->num_ops(), 2u);
  EXPECT_EQ(std::get<PadAttrs>(op_of_type(*r, "Pad").typed).mode, PadMode::kReflect);
}

}  // namespace
}  // namespace gp::graph
