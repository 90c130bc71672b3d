// The forms current exporters write (torch.onnx.export(..., dynamo=True): IR version 10, opsets
// 18-20): axes as inputs, Split's num_outputs, Pad's axes, Resize's axes, LayerNormalization and
// Gelu as single operators, CastLike, model-local functions, and symbolic batch names other than N.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/onnx_import.h"
#include "graph/ops/move.h"
#include "tests/graph/onnx_text.h"

namespace gp::graph {
namespace {

constexpr int64_t N = kBatch;

// A model in ONNX text with IR version `ir` and default-domain opset `opset`; `extra` follows the
// graph (model-local functions) and `imports` adds opset imports (their domains).
std::string model(std::string const& inputs, std::string const& outputs, std::vector<std::string> const& inits,
                  std::string const& body, int opset = 20, int ir = 10, std::string const& imports = "",
                  std::string const& extra = "") {
  std::string s = model_text(inputs, outputs, inits, body, opset);
  auto const header_end = s.find('>');
  s = "<ir_version: " + std::to_string(ir) + ", opset_import: [\"\" : " + std::to_string(opset) + imports + "]" +
      s.substr(header_end);
  return s + extra;
}

OpGraph must_load(std::string const& text) {
  auto g = load_onnx_text(text);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string() << "\n" << text;
  if (!g.is_ok()) return OpGraph{};
  return std::move(g).value();
}

std::string must_fail(std::string const& text) {
  auto g = load_onnx_text(text);
  EXPECT_FALSE(g.is_ok()) << "imported:\n" << text;
  return g.is_ok() ? std::string() : g.status().message();
}

std::vector<Op const*> ops_of_type(OpGraph const& g, std::string const& type) {
  std::vector<Op const*> out;
  for (auto const& op : g.ops())
    if (op.type == type) out.push_back(&op);
  return out;
}

Shape out_shape(OpGraph const& g, std::string const& type, std::size_t k = 0) {
  auto const ops = ops_of_type(g, type);
  if (ops.empty() || k >= ops[0]->outputs.size()) return {};
  return g.tensor(ops[0]->outputs[k]).shape;
}

Shape S(std::vector<int64_t> d) { return Shape{std::move(d)}; }

TEST(ImportCurrentOnnx, LayerNormAndGeluOfOpset20WithDynamoBatchName) {
  auto g = must_load(model("float[batch,6,8] x", "float[batch,6,8] y", {zeros("s", {8}, 1), zeros("b", {8})},
                           "n = LayerNormalization<axis = -1, epsilon = 0.00001, stash_type = 1>(x, s, b)\n"
                           "y = Gelu<approximate = \"tanh\">(n)"));
  ASSERT_EQ(ops_of_type(g, "LayerNormalization").size(), 1u);
  auto const gelu = ops_of_type(g, "Gelu");
  ASSERT_EQ(gelu.size(), 1u);
  EXPECT_TRUE(std::get<GeluAttrs>(gelu[0]->typed).tanh_approx);
  EXPECT_EQ(out_shape(g, "Gelu"), S({N, 6, 8}));
  EXPECT_EQ(g.tensor(g.inputs()[0]).shape, S({N, 6, 8}));
}

TEST(ImportCurrentOnnx, SymbolicBatchNamedS0) {
  auto g = must_load(model("float[s0,4] x", "float[s0,4] y", {}, "y = Relu(x)", 18, 9));
  EXPECT_EQ(out_shape(g, "Relu"), S({N, 4}));
  // Only the first dimension is the batch: a second symbolic one is refused by name.
  auto const msg = must_fail(model("float[batch,seq] x", "float[batch,seq] y", {}, "y = Relu(x)"));
  EXPECT_NE(msg.find("dynamic dimension 1 ('seq')"), std::string::npos) << msg;
}

TEST(ImportCurrentOnnx, ReduceAxesAsInputOpset18) {
  auto g = must_load(model("float[N,3,4,5] x", "float[N,3] y", {},
                           "axes2 = Constant<value = int64[2] {2, 3}>()\n"
                           "y = ReduceMean<keepdims = 0>(x, axes2)",
                           18));
  EXPECT_EQ(out_shape(g, "ReduceMean"), S({N, 3}));
  auto g2 = must_load(model("float[N,3,4] x", "float[N,1,4] y", {},
                            "a = Constant<value = int64[1] {1}>()\n"
                            "y = ReduceSumSquare<keepdims = 1>(x, a)",
                            23));
  EXPECT_EQ(out_shape(g2, "ReduceSumSquare"), S({N, 1, 4}));
}

TEST(ImportCurrentOnnx, SqueezeUnsqueezeAxesAsInputs) {
  auto g = must_load(model("float[N,3] x", "float[N,3] y", {},
                           "a = Constant<value = int64[1] {1}>()\n"
                           "u = Unsqueeze(x, a)\n"
                           "y = Squeeze(u, a)",
                           21));
  EXPECT_EQ(out_shape(g, "Unsqueeze"), S({N, 1, 3}));
  EXPECT_EQ(out_shape(g, "Squeeze"), S({N, 3}));
}

TEST(ImportCurrentOnnx, SplitNumOutputsOpset18) {
  auto g = must_load(model("float[N,8] x", "float[N,3] a, float[N,3] b, float[N,2] c", {},
                           "a, b, c = Split<axis = 1, num_outputs = 3>(x)", 18));
  auto const split = ops_of_type(g, "Split");
  ASSERT_EQ(split.size(), 1u);
  EXPECT_EQ(std::get<SplitAttrs>(split[0]->typed).sizes, (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(out_shape(g, "Split", 2), S({N, 2}));
  auto const msg =
      must_fail(model("float[N,8] x", "float[N,4] a, float[N,4] b", {}, "a, b = Split<axis = 1, num_outputs = 3>(x)"));
  EXPECT_NE(msg.find("Split"), std::string::npos) << msg;
}

TEST(ImportCurrentOnnx, PadWithAxesInputOpset19) {
  auto g = must_load(model("float[N,3,4] x", "float[N,3,7] y", {},
                           "p = Constant<value = int64[2] {1, 2}>()\n"
                           "v = Constant<value = float {0.5}>()\n"
                           "a = Constant<value = int64[1] {-1}>()\n"
                           "y = Pad<mode = \"wrap\">(x, p, v, a)",
                           19));
  auto const pad = ops_of_type(g, "Pad");
  ASSERT_EQ(pad.size(), 1u);
  auto const& attrs = std::get<PadAttrs>(pad[0]->typed);
  EXPECT_EQ(attrs.pads, (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
  EXPECT_EQ(attrs.mode, PadMode::kWrap);
  EXPECT_EQ(out_shape(g, "Pad"), S({N, 3, 7}));
}

TEST(ImportCurrentOnnx, ResizeWithAxesOpset18) {
  auto g = must_load(model("float[N,2,4,6] x", "float[N,2,8,12] y", {},
                           "s = Constant<value = float[2] {2.0, 2.0}>()\n"
                           "y = Resize<mode = \"nearest\", axes = [2, 3]>(x, , s)",
                           18));
  auto const resize = ops_of_type(g, "Resize");
  ASSERT_EQ(resize.size(), 1u);
  EXPECT_EQ(std::get<ResizeAttrs>(resize[0]->typed).scales, (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(out_shape(g, "Resize"), S({N, 2, 8, 12}));
  // Sizes with keep_aspect_ratio_policy: one scale for both axes, the smaller ratio (2 of 2 and 3).
  auto g2 = must_load(model("float[N,2,4,6] x", "float[N,2,8,12] y", {},
                            "z = Constant<value = int64[2] {8, 18}>()\n"
                            "y = Resize<mode = \"linear\", axes = [2, 3], keep_aspect_ratio_policy = "
                            "\"not_larger\">(x, , , z)",
                            19));
  EXPECT_EQ(out_shape(g2, "Resize"), S({N, 2, 8, 12}));
  // not_smaller with sizes 5, 9: the larger ratio 1.5 for both axes, sizes round(1.5 * 4) = 6, 9.
  auto g3 = must_load(model("float[N,2,4,6] x", "float[N,2,6,9] y", {},
                            "z = Constant<value = int64[2] {5, 9}>()\n"
                            "y = Resize<mode = \"linear\", axes = [2, 3], keep_aspect_ratio_policy = "
                            "\"not_smaller\">(x, , , z)",
                            19));
  EXPECT_EQ(out_shape(g3, "Resize"), S({N, 2, 6, 9}));
  auto const resize3 = ops_of_type(g3, "Resize");
  ASSERT_EQ(resize3.size(), 1u);
  EXPECT_EQ(std::get<ResizeAttrs>(resize3[0]->typed).scales, (std::vector<float>{1, 1, 1.5f, 1.5f}));
  // Antialiased downsampling imports (its values: the ONNX node tests; its gradient: IndexOps);
  // tf_crop_and_resize is refused with the modes that work.
  auto g4 = must_load(model("float[N,2,4,6] x", "float[N,2,2,3] y", {},
                            "s = Constant<value = float[2] {0.5, 0.5}>()\n"
                            "y = Resize<mode = \"linear\", axes = [2, 3], antialias = 1>(x, , s)",
                            18));
  auto const resize4 = ops_of_type(g4, "Resize");
  ASSERT_EQ(resize4.size(), 1u);
  EXPECT_TRUE(std::get<ResizeAttrs>(resize4[0]->typed).antialias);
  auto const msg = must_fail(model("float[N,2,4,6] x", "float[N,2,2,3] y", {},
                                   "s = Constant<value = float[2] {0.5, 0.5}>()\n"
                                   "y = Resize<mode = \"linear\", axes = [2, 3], coordinate_transformation_mode = "
                                   "\"tf_crop_and_resize\">(x, , s)",
                                   18));
  EXPECT_NE(msg.find("'tf_crop_and_resize' (use half_pixel, half_pixel_symmetric"), std::string::npos) << msg;
}

TEST(ImportCurrentOnnx, CastLikeOfAConstantFolds) {
  auto g = must_load(model("float[N,4] x", "float[N,4] y", {},
                           "c = Constant<value = double {2.0}>()\n"
                           "cf = CastLike(c, x)\n"
                           "y = Mul(x, cf)",
                           20));
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  EXPECT_EQ(g.tensor(mul[0]->inputs[1]).dtype, DType::kFloat32);
  EXPECT_TRUE(ops_of_type(g, "CastLike").empty());
}

std::string const kDouble =
    "<domain: \"local\", opset_import: [\"\" : 20]>\n"
    "Double (a) => (b) {\n"
    "  two = Constant<value = float {2.0}>()\n"
    "  b = Mul(a, two)\n"
    "}\n";

TEST(ImportCurrentOnnx, ModelLocalFunctionsAreInlined) {
  auto g = must_load(model("float[N,4] x", "float[N,4] y", {},
                           "h = local.Double(x)\n"
                           "y = local.Double(h)",
                           20, 10, ", \"local\" : 1", kDouble));
  EXPECT_EQ(ops_of_type(g, "Mul").size(), 2u);
  EXPECT_EQ(out_shape(g, "Mul"), S({N, 4}));
}

TEST(ImportCurrentOnnx, RecursiveFunctionsAreRefused) {
  std::string const loop =
      "<domain: \"local\", opset_import: [\"\" : 20, \"local\" : 1]>\n"
      "Ping (a) => (b) {\n  b = local.Pong(a)\n}\n"
      "<domain: \"local\", opset_import: [\"\" : 20, \"local\" : 1]>\n"
      "Pong (a) => (b) {\n  b = local.Ping(a)\n}\n";
  ImportOptions unchecked;
  unchecked.run_checker = false;  // our check, not ONNX's checker, must refuse it
  auto g = load_onnx_text(
      model("float[N,4] x", "float[N,4] y", {}, "y = local.Ping(x)", 20, 10, ", \"local\" : 1", loop), unchecked);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("calls itself"), std::string::npos) << g.status().message();
}

TEST(ImportCurrentOnnx, FunctionsThatExpandPastTheNodeLimitAreRefused) {
  // Each level calls the next twice: 2^20 nodes from 20 functions.
  std::string fns;
  for (int k = 0; k < 20; ++k)
    fns += "<domain: \"local\", opset_import: [\"\" : 20, \"local\" : 1]>\nF" + std::to_string(k) +
           " (a) => (b) {\n  h = local.F" + std::to_string(k + 1) + "(a)\n  b = local.F" + std::to_string(k + 1) +
           "(h)\n}\n";
  fns += "<domain: \"local\", opset_import: [\"\" : 20]>\nF20 (a) => (b) {\n  b = Relu(a)\n}\n";
  ImportOptions unchecked;
  unchecked.run_checker = false;
  auto g = load_onnx_text(model("float[N,4] x", "float[N,4] y", {}, "y = local.F0(x)", 20, 10, ", \"local\" : 1", fns),
                          unchecked);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("inlining the model-local functions makes more than"), std::string::npos)
      << g.status().message();
}

TEST(ImportCurrentOnnx, ZeroStridesInsideAFunctionAreRefusedBeforeShapeInference) {
  std::string const conv =
      "<domain: \"local\", opset_import: [\"\" : 20]>\n"
      "C (a, w) => (b) {\n  b = Conv<strides = [0, 0]>(a, w)\n}\n";
  ImportOptions unchecked;
  unchecked.run_checker = false;
  auto g = load_onnx_text(model("float[N,1,4,4] x", "float[N,1,2,2] y", {zeros("w", {1, 1, 3, 3})}, "y = local.C(x, w)",
                                20, 10, ", \"local\" : 1", conv),
                          unchecked);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("every entry of 'strides' must be positive"), std::string::npos)
      << g.status().message();
}

TEST(ImportCurrentOnnx, IrVersionNewerThanOurOnnxIsRefusedWithTheVersions) {
  auto const msg = must_fail(model("float[N,4] x", "float[N,4] y", {}, "y = Relu(x)", 20, 99));
  EXPECT_NE(msg.find("IR version 99"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ONNX 1.18.0 reads IR versions up to 11"), std::string::npos) << msg;
}

TEST(ImportCurrentOnnx, UnsupportedOperatorNamesTheNodes) {
  auto const msg = must_fail(model("float[N,4] x", "float[N,4] y", {},
                                   "r = LpNormalization <p = 1> (x)\n"
                                   "y = Add(x, r)"));
  EXPECT_NE(msg.find("unsupported operator: LpNormalization (1 node: #0)"), std::string::npos) << msg;
}

// The values of the constant an Add adds (its second operand), which a node of `folded_type` folded
// into at import: no such node is left.
std::vector<float> added_constant(OpGraph const& g, std::string const& folded_type) {
  std::vector<float> v;
  for (Op const* op : ops_of_type(g, "Add")) {
    auto const& data = g.tensor(op->inputs[1]).data;
    EXPECT_NE(data, nullptr) << folded_type << " did not fold into a constant";
    if (data) v.assign(data->as<float>(), data->as<float>() + data->numel());
  }
  EXPECT_TRUE(ops_of_type(g, folded_type).empty());
  return v;
}

// EyeLike is a constant of its input's shape (opset 9): folded at import in the dtype asked for,
// ones on diagonal k; over the batch dim it is refused with the fix.
TEST(ImportCurrentOnnx, EyeLikeOfAFixedShapeIsAConstant) {
  // The eye is the constant operand the weight w is added to.
  auto eye_added = [](OpGraph const& g) { return added_constant(g, "EyeLike"); };
  auto g = must_load(model("float[N,3] x", "float[N,4] y", {zeros("w", {3, 4}, 0.5)},
                           "e = EyeLike <k = 1> (w)\n"
                           "m = Add(w, e)\n"
                           "y = MatMul(x, m)"));
  EXPECT_EQ(eye_added(g), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  // int64 (dtype 7) below the diagonal, cast back to float.
  auto i = must_load(model("float[N,3] x", "float[N,3] y", {zeros("w", {3, 3}, 0.5)},
                           "e = EyeLike <dtype = 7, k = -1> (w)\n"
                           "f = Cast <to = 1> (e)\n"
                           "m = Add(w, f)\n"
                           "y = MatMul(x, m)"));
  EXPECT_EQ(eye_added(i), (std::vector<float>{0, 0, 0, 1, 0, 0, 0, 1, 0}));
  auto const msg = must_fail(model("float[N,4] x", "float[N,4] y", {}, "e = EyeLike(x)\ny = Add(x, e)"));
  EXPECT_NE(msg.find("EyeLike of [N,4], which holds the batch size"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("EyeLike '': EyeLike ''"), std::string::npos) << "the node named twice: " << msg;
  // Constants built at import hold float32/float64 and integers: a 16-bit dtype is refused by name.
  auto const half = must_fail(model("float[N,4] x", "float[N,4] y", {zeros("w", {3, 3})},
                                    "e = EyeLike<dtype = 10>(w)\nc = Cast<to = 1>(e)\ny = Add(x, x)"));
  EXPECT_NE(half.find("EyeLike of dtype float16"), std::string::npos) << half;
}

// NonZero of a value known at import (TorchScript writes it for a masked assignment over a mask
// built from shapes, as in HF Longformer) folds to the coordinates of the non-zero elements, int64
// [rank, count] in row-major order; over a value computed at run time its output's shape depends
// on the data: refused, naming the input.
TEST(ImportCurrentOnnx, NonZeroOfAValueKnownAtImportIsItsCoordinates) {
  auto added = [](OpGraph const& g) { return added_constant(g, "NonZero"); };
  // [[0, 1.5], [-2, 0]]: (0, 1) and (1, 0), as rows [0, 1] and [1, 0].
  auto g = must_load(model("float[N,4] x", "float[N,4] y", {},
                           "c = Constant <value = float[2,2] {0, 1.5, -2, 0}> ()\n"
                           "nz = NonZero(c)\n"
                           "f = Cast <to = 1> (nz)\n"
                           "shape = Constant <value = int64[2] {1, 4}> ()\n"
                           "r = Reshape(f, shape)\n"
                           "y = Add(x, r)"));
  EXPECT_EQ(added(g), (std::vector<float>{0, 1, 1, 0}));
  // A bool mask [2, 1, 3] true at (0, 0, 2), (1, 0, 0), (1, 0, 1): rows of 3 coordinates each.
  auto b = must_load(model("float[N,9] x", "float[N,9] y", {},
                           "c = Constant <value = bool[2,1,3] {0, 0, 1, 1, 1, 0}> ()\n"
                           "nz = NonZero(c)\n"
                           "f = Cast <to = 1> (nz)\n"
                           "shape = Constant <value = int64[2] {1, 9}> ()\n"
                           "r = Reshape(f, shape)\n"
                           "y = Add(x, r)"));
  EXPECT_EQ(added(b), (std::vector<float>{0, 1, 1, 0, 0, 0, 2, 0, 1}));
  auto const msg =
      must_fail(model("float[N,4] x", "float[N,4] y", {}, "nz = NonZero(x)\nf = Cast <to = 1> (nz)\ny = Add(x, x)"));
  EXPECT_NE(msg.find("its input 'x' is computed at run time, so its output shape is dynamic"), std::string::npos)
      << msg;
}

// Sequences whose sizes and positions are known at import (TorchScript's torch.split, chunk,
// tensor_split and unbind, with sizes computed from shapes) are lists of values: SplitToSequence is
// a Split (each piece squeezed without keepdims), SequenceAt an element, SequenceErase/Insert edit
// the list, SequenceLength is a constant and ConcatFromSequence a Concat (a stack with new_axis).
TEST(ImportCurrentOnnx, SequencesKnownAtImportAreListsOfValues) {
  // Sizes [2, 2, 2] computed from the shape (Tile of 6 / 3, as tensor_split writes them); the list
  // [p0, p1, p2] erased at 0 and piece 2 inserted in front: Concat(p2, p1, p2).
  auto g = must_load(model("float[N,6,4] x", "float[N,6,4] y", {},
                           "s = Shape(x)\n"
                           "one = Constant <value = int64[1] {1}> ()\n"
                           "d = Gather(s, one)\n"
                           "three = Constant <value = int64[1] {3}> ()\n"
                           "q = Div(d, three)\n"
                           "sizes = Tile(q, three)\n"
                           "seq = SplitToSequence <axis = 1> (x, sizes)\n"
                           "two = Constant <value = int64 {2}> ()\n"
                           "p2 = SequenceAt(seq, two)\n"
                           "zero = Constant <value = int64 {0}> ()\n"
                           "rest = SequenceErase(seq, zero)\n"
                           "edited = SequenceInsert(rest, p2, zero)\n"
                           "n = SequenceLength(edited)\n"
                           "nf = Cast <to = 1> (n)\n"
                           "c = ConcatFromSequence <axis = 1> (edited)\n"
                           "y = Add(c, nf)"));
  auto const splits = ops_of_type(g, "Split");
  auto const concats = ops_of_type(g, "Concat");
  ASSERT_EQ(splits.size(), 1u);
  ASSERT_EQ(concats.size(), 1u);
  EXPECT_EQ(std::get<SplitAttrs>(splits[0]->typed).sizes, (std::vector<int64_t>{2, 2, 2}));
  auto const& pieces = splits[0]->outputs;
  EXPECT_EQ(concats[0]->inputs, (std::vector<TensorId>{pieces[2], pieces[1], pieces[2]}));
  EXPECT_EQ(g.tensor(concats[0]->outputs[0]).shape.dims, (std::vector<int64_t>{N, 6, 4}));
  for (Op const* add : ops_of_type(g, "Add")) {  // the length, 3, a constant
    auto const& data = g.tensor(add->inputs[1]).data;
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(data->as<float>()[0], 3.f);
  }
  // unbind and stack: pieces of one squeezed (keepdims 0), stacked back along a new last axis.
  auto u = must_load(model("float[N,6,4] x", "float[N,6,4] y", {},
                           "seq = SplitToSequence <axis = 2, keepdims = 0> (x)\n"
                           "y = ConcatFromSequence <axis = -1, new_axis = 1> (seq)"));
  EXPECT_EQ(ops_of_type(u, "Squeeze").size(), 4u);
  EXPECT_EQ(ops_of_type(u, "Unsqueeze").size(), 4u);
  ASSERT_EQ(ops_of_type(u, "Concat").size(), 1u);
  EXPECT_EQ(u.tensor(ops_of_type(u, "Squeeze")[0]->outputs[0]).shape.dims, (std::vector<int64_t>{N, 6}));
  EXPECT_EQ(u.tensor(ops_of_type(u, "Concat")[0]->outputs[0]).shape.dims, (std::vector<int64_t>{N, 6, 4}));
  // What import cannot resolve is refused with the reason.
  std::string msg = must_fail(model("float[N,6] x", "float[N,6] y", {},
                                    "seq = SplitToSequence <axis = 0> (x)\n"
                                    "zero = Constant <value = int64 {0}> ()\n"
                                    "y = SequenceAt(seq, zero)"));
  EXPECT_NE(msg.find("it splits the batch dimension into a sequence"), std::string::npos) << msg;
  msg = must_fail(model("float[N,6] x", "float[N,1] y", {},
                        "seq = SplitToSequence <axis = 1> (x)\n"
                        "k = ArgMax <axis = 1> (x)\n"
                        "y = SequenceAt(seq, k)"));
  EXPECT_NE(msg.find("its position ('k') is computed at run time"), std::string::npos) << msg;
  // Tile's repeats must be 1-D (torch 2.15's TorchScript export of HF Mamba's tensor_split has a
  // rank-2 one, which ONNX Runtime refuses too).
  msg = must_fail(model("float[N,6] x", "float[N,6] y", {},
                        "q = Constant <value = int64[1] {2}> ()\n"
                        "r = Constant <value = int64[1,1] {3}> ()\n"
                        "sizes = Tile(q, r)\n"
                        "seq = SplitToSequence <axis = 1> (x, sizes)\n"
                        "y = ConcatFromSequence <axis = 1> (seq)"));
  EXPECT_NE(msg.find("its repeats must be a 1-D tensor, got rank 2"), std::string::npos) << msg;
}

// The window ops (opset 17; torch.stft's window) fold to constants of their size: periodic (N = size)
// by default, symmetric (N = size - 1) with periodic = 0, in output_datatype. The values are the
// spec's formula with pi (ONNX's own node tests compute theirs with 3.1415: conformance allow list).
TEST(ImportCurrentOnnx, WindowOpsAreConstantsOfTheirSize) {
  auto window = [](std::string const& op, int64_t size, std::string const& attrs) {
    OpGraph g =
        must_load(model("float[N," + std::to_string(size) + "] x", "float[N," + std::to_string(size) + "] y", {},
                        "n = Constant <value_int = " + std::to_string(size) + "> ()\n" + "w = " + op + attrs +
                            " (n)\n" + "y = Mul(x, w)"));
    EXPECT_TRUE(ops_of_type(g, op).empty());
    std::vector<double> v;
    for (Op const* mul : ops_of_type(g, "Mul")) {
      auto const& data = g.tensor(mul->inputs[1]).data;
      EXPECT_NE(data, nullptr) << op << " is not a constant";
      if (data) v.assign(data->as<float>(), data->as<float>() + data->numel());
    }
    return v;
  };
  auto near = [](std::vector<double> const& got, std::vector<double> const& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
  };
  near(window("HannWindow", 4, ""), {0, 0.5, 1, 0.5});
  near(window("HannWindow", 5, " <periodic = 0>"), {0, 0.5, 1, 0.5, 0});
  near(window("HammingWindow", 3, " <periodic = 0>"), {4.0 / 46, 1, 4.0 / 46});
  near(window("HammingWindow", 4, ""), {4.0 / 46, 25.0 / 46, 1, 25.0 / 46});
  near(window("BlackmanWindow", 4, ""), {0, 0.34, 1, 0.34});
  near(window("BlackmanWindow", 1, " <periodic = 0>"), {1});  // N = 0: one sample of 1, as torch
  auto const msg = must_fail(model("float[N,4] x, int64 n", "float[N,4] y", {}, "w = HannWindow(n)\ny = Mul(x, w)"));
  EXPECT_NE(msg.find("computed at run time"), std::string::npos) << msg;
}

// ImportOptions::fixed_inputs (how the ONNX node-test runner gives a Reshape its shape): the named
// graph inputs become initializers; a name that is no input, or bytes that are no TensorProto, fail.
TEST(ImportCurrentOnnx, FixedInputsMustNameGraphInputsAndHoldTensors) {
  std::string const text = model("float[N,4] x, int64[2] s", "float[N,2,2] y", {}, "y = Reshape(x, s)");
  EXPECT_NE(must_fail(text).find("computed at run time"), std::string::npos);
  ImportOptions unknown;
  unknown.fixed_inputs["shape"] = "";
  auto g = load_onnx_text(text, unknown);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("a fixed input 'shape' is no graph input of the model"), std::string::npos)
      << g.status().message();
  ImportOptions garbage;
  garbage.fixed_inputs["s"] = std::string("\xff\xff\xff", 3);
  g = load_onnx_text(text, garbage);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("fixed input 's' is not a serialized ONNX TensorProto"), std::string::npos)
      << g.status().message();
}

// torch.flip as the dynamo exporter writes it (an unrolled bidirectional nn.RNN reverses its
// sequence so): Slice(starts -1, ends INT64_MIN, steps -1). The importer clamps the end to -1,
// "before the first element"; stored so, the run-time geometry counted it from the back as the
// last element and the slice came out empty ("cannot squeeze axis 0 of [0,4,12]").
TEST(ImportCurrentOnnx, AFlipSliceKeepsEveryElementAtRunTime) {
  auto g = must_load(model("float[N,6] x", "float[N,6] y",
                           {zeros("s", {1}, -1, "int64"), zeros("e", {1}, -9223372036854775808.0, "int64"),
                            zeros("a", {1}, 1, "int64"), zeros("st", {1}, -1, "int64")},
                           "y = Slice(x, s, e, a, st)"));
  auto const slices = ops_of_type(g, "Slice");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(g.tensor(slices[0]->outputs[0]).shape.dims, (std::vector<int64_t>{-1, 6}));
  auto geo = ops::slice_geometry(*slices[0], {4, 6});
  ASSERT_TRUE(geo.is_ok()) << geo.status().to_string();
  EXPECT_EQ(geo->out_shape, (std::vector<int64_t>{4, 6}));  // was [4, 0]
  EXPECT_EQ(geo->src_strides, (std::vector<int64_t>{6, -1}));
  EXPECT_EQ(geo->offset, 5);
}

// torch 2.x's TorchScript export of nn.MultiheadAttention: a Slice end computed as
// Reshape((3 + -1) % 3, [1]) beside Shape arithmetic on the batch. Mod and the comparisons fold, so
// the Slice is static and the head split keeps the batch symbolic.
TEST(ImportCurrentOnnx, ModAndComparisonsOfShapeValuesFold) {
  auto g = must_load(model("float[N,6,16] x", "float[N,6,2,8] y", {},
                           "s = Shape(x)\n"
                           "three = Constant<value = int64[1] {3}>()\n"
                           "minus = Constant<value = int64 {-1}>()\n"
                           "two = Add(three, minus)\n"
                           "m = Mod(two, three)\n"
                           "one = Constant<value = int64[1] {1}>()\n"
                           "end = Reshape(m, one)\n"
                           "zero = Constant<value = int64[1] {0}>()\n"
                           "b = Slice(s, zero, one)\n"
                           "t = Slice(s, one, end)\n"
                           "lt = Less(two, three)\n"
                           "ge = Not(lt)\n"
                           "k = Where(ge, three, two)\n"
                           "four = Constant<value = int64[1] {4}>()\n"
                           "d = Mul(k, four)\n"
                           "shape4 = Concat<axis = 0>(b, k, t, d)\n"
                           "r = Reshape(x, shape4)\n"
                           "y = Transpose<perm = [0, 2, 1, 3]>(r)",
                           17, 8));
  EXPECT_TRUE(ops_of_type(g, "Mod").empty());
  EXPECT_TRUE(ops_of_type(g, "Less").empty());
  EXPECT_EQ(out_shape(g, "Reshape"), S({N, 2, 6, 8}));
  EXPECT_EQ(out_shape(g, "Transpose"), S({N, 6, 2, 8}));
}

// HF BERT's token_type_ids buffer, GatherElements by position ids known at import time: folded.
TEST(ImportCurrentOnnx, GatherElementsOfConstantsFolds) {
  auto g = must_load(model("float[N,3] x", "float[N,3] y", {},
                           "data = Constant<value = float[1,4] {10, 20, 30, 40}>()\n"
                           "idx = Constant<value = int64[1,3] {3, 0, -1}>()\n"
                           "v = GatherElements<axis = 1>(data, idx)\n"
                           "y = Mul(x, v)",
                           17, 8));
  EXPECT_TRUE(ops_of_type(g, "GatherElements").empty());
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  TensorInfo const& v = g.tensor(mul[0]->inputs[1]);
  ASSERT_NE(v.data, nullptr);
  EXPECT_EQ(v.data->to_doubles(), (std::vector<double>{40, 10, 40}));
}

// torchvision Swin's shifted-window mask: slice assignments into zeros become ScatterND over
// constants, folded at import (with reductions add, mul, max, min too); over run-time values it
// runs (tests/exec/test_ops_index.cc), but tuples that address the batch axis without following the
// micro-batch are refused.
TEST(ImportCurrentOnnx, ScatterNDOfConstantsFolds) {
  auto g = must_load(model("float[N,2,3] x", "float[N,2,3] y", {},
                           "data = Constant<value = float[2,3] {0, 0, 0, 0, 0, 0}>()\n"
                           "idx = Constant<value = int64[2,2] {1, 2, 0, -3}>()\n"
                           "upd = Constant<value = float[2] {5, 7}>()\n"
                           "rows = Constant<value = int64[1,1] {0}>()\n"
                           "row = Constant<value = float[1,3] {1, 1, 1}>()\n"
                           "m0 = ScatterND(data, idx, upd)\n"
                           "m = ScatterND<reduction = \"add\">(m0, rows, row)\n"
                           "y = Mul(x, m)",
                           18, 8));
  EXPECT_TRUE(ops_of_type(g, "ScatterND").empty());
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  TensorInfo const& m = g.tensor(mul[0]->inputs[1]);
  ASSERT_NE(m.data, nullptr);
  EXPECT_EQ(m.data->to_doubles(), (std::vector<double>{8, 1, 1, 0, 0, 5}));
  // Reductions mul, max and min (opset 18), one after the other on that result.
  auto r = must_load(model("float[N,2,3] x", "float[N,2,3] y", {},
                           "m = Constant<value = float[2,3] {8, 1, 1, 0, 0, 5}>()\n"
                           "rows = Constant<value = int64[1,1] {0}>()\n"
                           "row = Constant<value = float[1,3] {2, 3, 0.5}>()\n"
                           "hi_idx = Constant<value = int64[2,2] {1, 0, 0, 2}>()\n"
                           "hi = Constant<value = float[2] {4, 0.25}>()\n"
                           "lo_idx = Constant<value = int64[2,2] {0, 0, 1, 2}>()\n"
                           "lo = Constant<value = float[2] {10, 7}>()\n"
                           "a = ScatterND<reduction = \"mul\">(m, rows, row)\n"
                           "b = ScatterND<reduction = \"max\">(a, hi_idx, hi)\n"
                           "c = ScatterND<reduction = \"min\">(b, lo_idx, lo)\n"
                           "y = Mul(x, c)",
                           18, 8));
  auto const rmul = ops_of_type(r, "Mul");
  ASSERT_EQ(rmul.size(), 1u);
  ASSERT_NE(r.tensor(rmul[0]->inputs[1]).data, nullptr);
  EXPECT_EQ(r.tensor(rmul[0]->inputs[1]).data->to_doubles(), (std::vector<double>{10, 3, 0.5, 4, 0, 5}));
  std::string const err = must_fail(model("float[N,3] x, float[N] u", "float[N,3] y", {},
                                          "idx = Constant<value = int64[1,1] {0}>()\n"
                                          "y = ScatterND(x, idx, u)",
                                          18, 8));
  EXPECT_NE(err.find("ScatterND"), std::string::npos) << err;
}

// The dynamo exporter's adaptive pooling (torchvision VGG at 64x64) clamps static int64 window
// indices with Min and Max: folded, integers and floats alike.
TEST(ImportCurrentOnnx, MinAndMaxOfConstantsFold) {
  auto g = must_load(model("float[N,3] x", "float[N,3] y", {},
                           "a = Constant<value = int64[3] {0, 5, 9}>()\n"
                           "hi = Constant<value = int64 {6}>()\n"
                           "lo = Constant<value = int64 {1}>()\n"
                           "m = Min(a, hi)\n"
                           "k = Max(m, lo)\n"
                           "f = Cast<to = 1>(k)\n"
                           "y = Mul(x, f)"));
  EXPECT_TRUE(ops_of_type(g, "Min").empty());
  EXPECT_TRUE(ops_of_type(g, "Max").empty());
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  TensorInfo const& f = g.tensor(mul[0]->inputs[1]);
  ASSERT_NE(f.data, nullptr);
  EXPECT_EQ(f.data->to_doubles(), (std::vector<double>{1, 5, 6}));
}

// The dynamo exporter's index_put broadcasts its index tensors' shapes with Max: Max of the batch
// size N and 1 is N (N >= 1), and Min of them 1; against a number above 1 the order depends on N,
// and the import says so.
TEST(ImportCurrentOnnx, MinAndMaxOfShapesThatHoldTheBatchFoldWhereTheOrderIsKnown) {
  auto g = must_load(model("float[N,3] x", "float[N,3] y", {},
                           "s = Shape(x)\n"
                           "c = Constant<value = int64[2] {1, 3}>()\n"
                           "m = Max(s, c)\n"
                           "lo = Min(s, c)\n"
                           "z = ConstantOfShape<value = float[1] {1}>(lo)\n"
                           "e = Expand(z, m)\n"
                           "y = Mul(x, e)"));
  EXPECT_TRUE(ops_of_type(g, "Max").empty());
  EXPECT_TRUE(ops_of_type(g, "Min").empty());
  auto const expand = ops_of_type(g, "Expand");
  ASSERT_EQ(expand.size(), 1u);
  EXPECT_EQ(g.tensor(expand[0]->outputs[0]).shape.dims, (std::vector<int64_t>{kBatch, 3}));
  EXPECT_EQ(g.tensor(expand[0]->inputs[0]).shape.dims, (std::vector<int64_t>{1, 3}));
  for (char const* op : {"Max", "Min"}) {
    std::string const err = must_fail(model("float[N,3] x", "float[N,3] y", {},
                                            std::string("s = Shape(x)\n"
                                                        "c = Constant<value = int64[2] {4, 3}>()\n"
                                                        "m = ") +
                                                op +
                                                "(s, c)\n"
                                                "e = Expand(x, m)\n"
                                                "y = Mul(x, e)"));
    EXPECT_NE(err.find(std::string(op) + " of shape values that hold the batch size, whose order depends on it"),
              std::string::npos)
        << err;
  }
}

// An If whose condition is known at import (TorchScript writes one before scatter_reduce, and
// scripted code for every Python `if`, both on shapes) is the branch it takes: its nodes in place
// of the If, the other branch never read (an operator graphpipe lacks may sit there), nested Ifs
// too; a weight read only inside the branch trains. A condition computed from the data, or an
// unsupported operator in the branch taken, is refused by name.
std::string if_model(int64_t width_tested, std::string const& then_extra = "", std::string const& else_op = "Det") {
  return model("float[N,3] x", "float[N,3] y", {"float[3,3] w = {1, 0, 0, 0, 2, 0, 0, 0, 3}"},
               "s = Shape(x)\n"
               "one = Constant<value = int64 {1}>()\n"
               "d = Gather<axis = 0>(s, one)\n"
               "k = Constant<value = int64 {" +
                   std::to_string(width_tested) +
                   "}>()\n"
                   "c = Equal(d, k)\n"
                   "y = If(c) <then_branch = g1 () => (float[N,3] a) {\n"
                   "  m = MatMul(x, w)\n" +
                   then_extra +
                   "  a = Relu(m)\n"
                   "}, else_branch = g2 () => (float[N,3] b) {\n"
                   "  sq = Mul(x, x)\n"
                   "  b = " +
                   else_op + "(sq)\n}>",
               17, 8);
}

TEST(ImportCurrentOnnx, AnIfWhoseConditionIsKnownAtImportIsTheBranchItTakes) {
  // x has 3 columns: the then branch, whose weight trains; the else branch's Det is never read.
  auto g = must_load(if_model(3));
  EXPECT_EQ(ops_of_type(g, "MatMul").size(), 1u);
  EXPECT_EQ(ops_of_type(g, "Relu").size(), 1u);
  EXPECT_TRUE(ops_of_type(g, "Mul").empty());
  bool w_trains = false;
  for (auto const& c : g.weight_choices()) w_trains = w_trains || (c.name == "w" && c.trainable);
  EXPECT_TRUE(w_trains);
  EXPECT_EQ(out_shape(g, "Relu"), S({N, 3}));
  // Not 4 columns: the else branch (with an operator graphpipe runs).
  auto e = must_load(if_model(4, "", "Neg"));
  EXPECT_TRUE(ops_of_type(e, "MatMul").empty());
  EXPECT_EQ(ops_of_type(e, "Neg").size(), 1u);
  EXPECT_EQ(ops_of_type(e, "Mul").size(), 1u);
  // A nested If in the branch taken, its own condition known too.
  auto n = must_load(if_model(3,
                              "  t = Constant<value = bool {0}>()\n"
                              "  m2 = If(t) <then_branch = h1 () => (float[N,3] p) { p = Neg(m) },"
                              " else_branch = h2 () => (float[N,3] q) { q = Sigmoid(m) }>\n",
                              "Neg"));
  EXPECT_EQ(ops_of_type(n, "Sigmoid").size(), 1u);
  EXPECT_TRUE(ops_of_type(n, "Neg").empty());
  // A value the branch reads is kept as it is: a linear layer's MatMul is not fused into a Gemm
  // with its Add when the branch reads the product too.
  auto f = must_load(model("float[N,3] x", "float[N,3] y",
                           {"float[3,3] w = {1, 0, 0, 0, 2, 0, 0, 0, 3}", "float[3] b = {1, 2, 3}"},
                           "p = MatMul(x, w)\n"
                           "lin = Add(p, b)\n"
                           "t = Constant<value = bool {1}>()\n"
                           "y = If(t) <then_branch = g1 () => (float[N,3] a) { a = Mul(p, lin) },"
                           " else_branch = g2 () => (float[N,3] c) { c = Neg(lin) }>",
                           17, 8));
  EXPECT_EQ(ops_of_type(f, "MatMul").size(), 1u);
  EXPECT_EQ(ops_of_type(f, "Mul").size(), 1u);
  // The importer's rewrites reach into branches: CastLike and IsNaN in the branch taken become a
  // Cast and Equal/Not there.
  auto r = must_load(if_model(3,
                              "  like = CastLike(m, x)\n"
                              "  nan = IsNaN(like)\n"
                              "  keep = Not(nan)\n"
                              "  kf = Cast<to = 1>(keep)\n"
                              "  m3 = Mul(like, kf)\n",
                              "Neg"));
  EXPECT_FALSE(ops_of_type(r, "Equal").empty());
  EXPECT_EQ(ops_of_type(r, "Relu").size(), 1u);
  // The branch taken holds an operator graphpipe lacks: refused by name.
  std::string const det = must_fail(if_model(4));
  EXPECT_NE(det.find("unsupported operator Det (node '', in the branch an If takes at import)"), std::string::npos)
      << det;
  // A condition from the data.
  std::string const dyn = must_fail(model("float[N,3] x", "float[N,3] y", {},
                                          "r = ReduceSum<keepdims = 0>(x)\n"
                                          "z = Constant<value = float {0}>()\n"
                                          "c = Greater(r, z)\n"
                                          "y = If(c) <then_branch = g1 () => (float[N,3] a) { a = Relu(x) },"
                                          " else_branch = g2 () => (float[N,3] b) { b = Neg(x) }>",
                                          17, 8));
  EXPECT_NE(dyn.find("If '': its condition is computed at run time from the data"), std::string::npos) << dyn;
  // A condition on the batch size (which varies with the micro-batch): refused where the batch
  // size is read as data.
  std::string const on_batch = must_fail(model("float[N,3] x", "float[N,3] y", {},
                                               "s = Shape(x)\n"
                                               "zero = Constant<value = int64 {0}>()\n"
                                               "n = Gather<axis = 0>(s, zero)\n"
                                               "one = Constant<value = int64 {1}>()\n"
                                               "c = Greater(n, one)\n"
                                               "y = If(c) <then_branch = g1 () => (float[N,3] a) { a = Relu(x) },"
                                               " else_branch = g2 () => (float[N,3] b) { b = Neg(x) }>",
                                               17, 8));
  EXPECT_NE(on_batch.find("value 'n' depends on the batch size and is used as data"), std::string::npos) << on_batch;
}

// A Loop whose trip count and condition are known at import is unrolled: its body once per pass,
// each pass's values distinct tensors, the iteration number a constant, carried values (tensors or
// sequences) handed on, scan outputs stacked on a new first axis; a weight read in the body trains.
std::string loop_model(std::string const& trips, std::string const& cond, std::string const& body_extra = "",
                       std::string const& cond_out = "co = Identity(ci)") {
  return model("float[N,3] x", "float[N,3] y, float[K,N,3] s", {"float[3,3] w = {1, 0, 0, 0, 2, 0, 0, 0, 3}"},
               "m = Constant<value = int64 " + trips + ">()\n" + "c = Constant<value = bool {" + cond +
                   "}>()\n"
                   "y, s = Loop(m, c, x) <body = b (int64 i, bool ci, float[N,3] v) =>"
                   " (bool co, float[N,3] vo, float[N,3] so) {\n" +
                   body_extra + "  " + cond_out +
                   "\n"
                   "  p = MatMul(v, w)\n"
                   "  vo = Relu(p)\n"
                   "  so = Identity(p)\n}>",
               17, 8);
}

TEST(ImportCurrentOnnx, ALoopWhoseTripCountIsKnownAtImportIsUnrolled) {
  auto g = must_load(loop_model("{3}", "1"));
  auto const mm = ops_of_type(g, "MatMul");
  ASSERT_EQ(mm.size(), 3u);
  // Each pass reads the one before: pass k's MatMul reads pass k-1's Relu.
  auto const relus = ops_of_type(g, "Relu");
  ASSERT_EQ(relus.size(), 3u);
  EXPECT_EQ(mm[0]->inputs[0], g.inputs()[0]);
  EXPECT_EQ(mm[1]->inputs[0], relus[0]->outputs[0]);
  EXPECT_EQ(mm[2]->inputs[0], relus[1]->outputs[0]);
  EXPECT_NE(g.tensor(mm[1]->outputs[0]).name, g.tensor(mm[2]->outputs[0]).name);
  EXPECT_EQ(g.outputs()[0], relus[2]->outputs[0]);
  // The scan output: the passes' products stacked on a new first axis.
  EXPECT_EQ(g.tensor(g.outputs()[1]).shape, S({3, N, 3}));
  auto const concat = ops_of_type(g, "Concat");
  ASSERT_EQ(concat.size(), 1u);
  EXPECT_EQ(concat[0]->inputs.size(), 3u);
  bool w_trains = false;
  for (auto const& c : g.weight_choices()) w_trains = w_trains || (c.name == "w" && c.trainable);
  EXPECT_TRUE(w_trains);
  // A trip count of shape [1] (TorchScript's) works as a scalar; the body's condition, computed
  // from the iteration number, stops the loop after the pass where it turns false (two passes).
  auto two = must_load(loop_model("[1] {5}", "1", "  one = Constant<value = int64 {1}>()\n", "co = Less(i, one)"));
  EXPECT_EQ(ops_of_type(two, "MatMul").size(), 2u);
  EXPECT_EQ(two.tensor(two.outputs()[1]).shape, S({2, N, 3}));
  // A condition false at the start runs no pass: the carried value is the initial one, but the
  // scan output has no shape to take.
  std::string const none = must_fail(loop_model("{3}", "0"));
  EXPECT_NE(none.find("Loop '' runs no pass, so its scan output 's' is empty"), std::string::npos) << none;
  // A condition computed from the data is control flow graphpipe does not run.
  std::string const dyn = must_fail(loop_model("{3}", "1",
                                               "  r = ReduceSum<keepdims = 0>(v)\n"
                                               "  z = Constant<value = float {0}>()\n",
                                               "co = Greater(r, z)"));
  EXPECT_NE(dyn.find("Loop '': its body's condition ('co/iter0') is computed at run time from the data"),
            std::string::npos)
      << dyn;
  // An operator graphpipe lacks in the body: refused by name, where it sits.
  std::string const det = must_fail(loop_model("{2}", "1", "  dm = Det(w)\n"));
  EXPECT_NE(det.find("unsupported operator Det (node '', in the body of Loop '')"), std::string::npos) << det;
  // A trip count that depends on the batch size varies with the micro-batch.
  std::string const on_batch = must_fail(model("float[N,3] x", "float[N,3] y", {},
                                               "sh = Shape(x)\n"
                                               "zero = Constant<value = int64 {0}>()\n"
                                               "m = Gather<axis = 0>(sh, zero)\n"
                                               "y = Loop(m, \"\", x) <body = b (int64 i, bool ci, float[N,3] v) =>"
                                               " (bool co, float[N,3] vo) { co = Identity(ci) \n vo = Relu(v) }>",
                                               17, 8));
  EXPECT_FALSE(on_batch.empty());
  // A weight handed into the loop as a carried value trains: it is followed into the body's input,
  // where a MatMul reads it as its weight, and the loss reaches it back through the passes.
  auto carried = must_load(model("float[N,3] x", "float[N,3] y", {"float[3,3] w = {1, 0, 0, 0, 2, 0, 0, 0, 3}"},
                                 "m = Constant<value = int64 {2}>()\n"
                                 "c = Constant<value = bool {1}>()\n"
                                 "y, wl = Loop(m, c, x, w) <body = b (int64 i, bool ci, float[N,3] h, float[3,3] wv) =>"
                                 " (bool co, float[N,3] h2, float[3,3] wv2) {\n"
                                 "  co = Identity(ci)\n"
                                 "  p = MatMul(h, wv)\n"
                                 "  h2 = Relu(p)\n"
                                 "  wv2 = Identity(wv)\n}>",
                                 17, 8));
  ASSERT_EQ(ops_of_type(carried, "MatMul").size(), 2u);
  for (auto const* op : ops_of_type(carried, "MatMul"))
    EXPECT_EQ(carried.tensor(op->inputs[1]).role, TensorRole::kWeight);
  // Without a condition input, a for loop: the body's condition is ignored (here computed from the
  // data), the trip count alone counts the passes.
  std::string const for_loop =
      "m = Constant<value = int64 {3}>()\n"
      "y = Loop(m, \"\", x) <body = b (int64 i, bool ci, float[N,3] v) => (bool co, "
      "float[N,3] vo) {\n"
      "  r = ReduceSum<keepdims = 0>(v)\n"
      "  z = Constant<value = float {0}>()\n"
      "  co = Greater(r, z)\n"
      "  vo = Relu(v)\n}>";
  auto three = must_load(model("float[N,3] x", "float[N,3] y", {}, for_loop, 17, 8));
  EXPECT_EQ(ops_of_type(three, "Relu").size(), 3u);
  // Too many passes to unroll: a for loop is refused before any pass, a loop with a condition once
  // it has run past the limit.
  std::string huge_for = for_loop;
  huge_for.replace(huge_for.find("{3}"), 3, "{100000}");
  std::string const huge = must_fail(model("float[N,3] x", "float[N,3] y", {}, huge_for, 17, 8));
  EXPECT_NE(huge.find("unrolling it takes more than 16384 passes, or more than 200000 unrolled nodes with the loops "
                      "before it (its body has 4)"),
            std::string::npos)
      << huge;
  std::string const endless = must_fail(loop_model("{9223372036854775807}", "1"));
  EXPECT_NE(endless.find("unrolling it takes more than 16384 passes"), std::string::npos) << endless;
  // Nested loops multiply: 40 passes of a loop of 40 passes add 1,600 nodes, past a limit of 1,000
  // (ImportOptions::max_nodes, 200,000 by default), refused by the inner loop that would cross it.
  ImportOptions small;
  small.max_nodes = 1000;
  auto nested = load_onnx_text(model("float[N,3] x", "float[N,3] y", {},
                                     "m = Constant<value = int64 {40}>()\n"
                                     "y = Loop(m, \"\", x) <body = outer (int64 i, bool ci, float[N,3] v) => "
                                     "(bool co, float[N,3] vo) {\n"
                                     "  co = Identity(ci)\n"
                                     "  k = Constant<value = int64 {40}>()\n"
                                     "  vo = Loop(k, \"\", v) <body = inner (int64 j, bool cj, float[N,3] w) => "
                                     "(bool cjo, float[N,3] wo) {\n"
                                     "    cjo = Identity(cj)\n"
                                     "    wo = Relu(w)\n  }>\n}>",
                                     17, 8),
                               small);
  ASSERT_FALSE(nested.is_ok());
  EXPECT_NE(nested.status().message().find("more than 1000 unrolled nodes with the loops before it"), std::string::npos)
      << nested.status().message();
}

// TorchScript's scripted split (MViTv2's pooling attention): a Loop that inserts a slice per pass
// into a sequence it carries, read back by ConcatFromSequence after it.
TEST(ImportCurrentOnnx, ALoopThatBuildsASequenceIsUnrolledIntoItsElements) {
  auto g = must_load(model("float[N,6] x", "float[N,6] y", {},
                           "m = Constant<value = int64[1] {3}>()\n"
                           "c = Constant<value = bool {1}>()\n"
                           "e = SequenceEmpty<dtype = 1>()\n"
                           "bounds = Constant<value = int64[4] {0, 2, 4, 6}>()\n"
                           "ax = Constant<value = int64[1] {1}>()\n"
                           "ax0 = Constant<value = int64[1] {0}>()\n"
                           "seq = Loop(m, c, e) <body = b (int64 i, bool ci, seq(float) acc) => (bool co, seq(float) "
                           "out) {\n"
                           "  lo = Gather<axis = 0>(bounds, i)\n"
                           "  one = Constant<value = int64 {1}>()\n"
                           "  i1 = Add(i, one)\n"
                           "  hi = Gather<axis = 0>(bounds, i1)\n"
                           "  lo1 = Unsqueeze(lo, ax0)\n"
                           "  hi1 = Unsqueeze(hi, ax0)\n"
                           "  piece = Slice(x, lo1, hi1, ax)\n"
                           "  act = Sigmoid(piece)\n"
                           "  out = SequenceInsert(acc, act)\n"
                           "  co = Identity(ci)\n}>\n"
                           "y = ConcatFromSequence<axis = 1>(seq)",
                           17, 8));
  auto const slices = ops_of_type(g, "Slice");
  ASSERT_EQ(slices.size(), 3u);
  for (auto const* sl : slices) EXPECT_EQ(g.tensor(sl->outputs[0]).shape, S({N, 2}));
  EXPECT_EQ(ops_of_type(g, "Sigmoid").size(), 3u);
  EXPECT_EQ(out_shape(g, "Concat"), S({N, 6}));
}

// A Scan over an axis of known length is unrolled: each element a Gather at its position (from the
// end in reverse), the state handed on, the scan output stacked along its axis (reversed too).
TEST(ImportCurrentOnnx, AScanOverALengthKnownAtImportIsUnrolled) {
  auto scan = [](std::string const& attrs) {
    return model("float[N,3] s0, float[N,4,3] xs", "float[N,3] sum, float[N,4,3] partial", {},
                 "sum, partial = Scan(s0, xs) <num_scan_inputs = 1" + attrs +
                     ", body = b (float[N,3] acc, float[N,3] x) => (float[N,3] a2, float[N,3] o) {\n"
                     "  a2 = Add(acc, x)\n"
                     "  o = Identity(a2)\n}>",
                 17, 8);
  };
  auto g = must_load(scan(", scan_input_axes = [1], scan_output_axes = [1]"));
  auto const gathers = ops_of_type(g, "Gather");
  ASSERT_EQ(gathers.size(), 4u);
  EXPECT_EQ(ops_of_type(g, "Add").size(), 4u);
  EXPECT_EQ(g.tensor(gathers[0]->outputs[0]).shape, S({N, 3}));
  EXPECT_EQ(g.tensor(g.outputs()[1]).shape, S({N, 4, 3}));
  // The positions: 0, 1, 2, 3 forward, 3, 2, 1, 0 in reverse.
  auto positions = [](OpGraph const& graph) {
    std::vector<double> at;
    for (auto const* op : ops_of_type(graph, "Gather")) at.push_back(graph.tensor(op->inputs[1]).data->to_doubles()[0]);
    return at;
  };
  EXPECT_EQ(positions(g), (std::vector<double>{0, 1, 2, 3}));
  auto r = must_load(scan(", scan_input_axes = [1], scan_input_directions = [1], scan_output_axes = [1]"));
  EXPECT_EQ(positions(r), (std::vector<double>{3, 2, 1, 0}));
  // Scanning the batch axis has no length known at import.
  std::string const batch = must_fail(model("float[N,3] s0, float[N,3] xs", "float[N,3] sum", {},
                                            "sum = Scan(s0, xs) <num_scan_inputs = 1, body = b (float[N,3] acc, "
                                            "float[3] x) => (float[N,3] a2) { a2 = Add(acc, x) }>",
                                            17, 8));
  EXPECT_NE(batch.find("whose length is the batch size"), std::string::npos) << batch;
}

// MaxPool's Indices output (torch's return_indices) is an int64 output of the pooled shape that
// carries no gradient; storage_order 1 (column-major spatial positions) is kept in the attributes.
TEST(ImportCurrentOnnx, MaxPoolIndicesAreAnInt64OutputWithoutGradient) {
  auto g = must_load(model("float[N,2,4,4] x", "float[N,2,2,2] y, int64[N,2,2,2] i", {},
                           "y, i = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(x)", 18, 8));
  auto const pools = ops_of_type(g, "MaxPool");
  ASSERT_EQ(pools.size(), 1u);
  ASSERT_EQ(pools[0]->outputs.size(), 2u);
  EXPECT_EQ(g.tensor(pools[0]->outputs[1]).dtype, DType::kInt64);
  EXPECT_EQ(g.tensor(pools[0]->outputs[1]).shape, S({N, 2, 2, 2}));
  EXPECT_FALSE(std::get<PoolAttrs>(pools[0]->typed).indices_column_major);
  auto c = must_load(model("float[N,2,4,4] x", "float[N,2,2,2] y, int64[N,2,2,2] i", {},
                           "y, i = MaxPool<kernel_shape = [2, 2], strides = [2, 2], storage_order = 1>(x)", 18, 8));
  ASSERT_EQ(ops_of_type(c, "MaxPool").size(), 1u);
  EXPECT_TRUE(std::get<PoolAttrs>(ops_of_type(c, "MaxPool")[0]->typed).indices_column_major);
}

// Integer Div of constants folds as the runtime divides (and ONNX's reference): truncated toward
// zero, so -7 / 2 is -3 (floored division would give -4).
TEST(ImportCurrentOnnx, IntegerDivOfConstantsFoldsTruncatedAsTheRuntimeDivides) {
  auto g = must_load(model("float[N,3] x", "float[N,3] y", {},
                           "a = Constant<value = int64[3] {-7, 7, 6}>()\n"
                           "b = Constant<value = int64[3] {2, -2, 4}>()\n"
                           "q = Div(a, b)\n"
                           "f = Cast<to = 1>(q)\n"
                           "y = Mul(x, f)"));
  EXPECT_TRUE(ops_of_type(g, "Div").empty());
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  TensorInfo const& f = g.tensor(mul[0]->inputs[1]);
  ASSERT_NE(f.data, nullptr);
  EXPECT_EQ(f.data->to_doubles(), (std::vector<double>{-3, -3, 1}));
}

// DeBERTa's log-bucketed relative positions (SEW-D's TorchScript export): distances from a Range
// over a static length through Log, Ceil and a Clip of int64 into the bucket range, all known at
// import, fold to one constant. Before, Log did not fold, and the int64 Clip it fed was left to run
// (and refused: no integer Clip kernel). A Clip of int64 values computed at run time keeps its
// bounds as inputs, exact.
TEST(ImportCurrentOnnx, LogBucketsAndIntegerClipOfValuesKnownAtImportFold) {
  auto g = must_load(model("float[N,4] x", "float[N,4] y", {},
                           "start = Constant<value = int64 {0}>()\n"
                           "limit = Constant<value = int64 {4}>()\n"
                           "step = Constant<value = int64 {1}>()\n"
                           "r = Range(start, limit, step)\n"
                           "f = Cast<to = 1>(r)\n"
                           "one = Constant<value = float {1}>()\n"
                           "two = Constant<value = float {2}>()\n"
                           "f1 = Add(f, one)\n"
                           "l = Log(f1)\n"
                           "l2 = Mul(l, two)\n"
                           "c = Ceil(l2)\n"
                           "i = Cast<to = 7>(c)\n"
                           "lo = Constant<value = int64 {0}>()\n"
                           "hi = Constant<value = int64 {2}>()\n"
                           "k = Clip(i, lo, hi)\n"
                           "kf = Cast<to = 1>(k)\n"
                           "y = Mul(x, kf)"));
  for (char const* op : {"Log", "Ceil", "Clip", "Cast"}) EXPECT_TRUE(ops_of_type(g, op).empty()) << op;
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  TensorInfo const& buckets = g.tensor(mul[0]->inputs[1]);
  ASSERT_NE(buckets.data, nullptr);
  // ceil(2 log(1..4)) = 0, 2, 3, 3, clipped to [0, 2].
  EXPECT_EQ(buckets.data->to_doubles(), (std::vector<double>{0, 2, 2, 2}));
  int64_t const big = (int64_t{1} << 40) + 1;
  auto ids = must_load(model("int64[N,4] t", "int64[N,4] u", {},
                             "lo = Constant<value = int64 {-1}>()\n"
                             "hi = Constant<value = int64 {" +
                                 std::to_string(big) +
                                 "}>()\n"
                                 "u = Clip(t, lo, hi)"));
  auto const clip = ops_of_type(ids, "Clip");
  ASSERT_EQ(clip.size(), 1u);
  ASSERT_EQ(clip[0]->inputs.size(), 3u);
  ASSERT_NE(ids.tensor(clip[0]->inputs[2]).data, nullptr);
  EXPECT_EQ(ids.tensor(clip[0]->inputs[2]).data->as<int64_t>()[0], big);
}

// OneHot of indices known at import folds (DeepSeek-V3's TorchScript file builds a Tile's repeats
// from one, which stopped its import: "its repeats ... is computed at run time"): negative indices
// count from the end, an index out of range sets nothing, the values' dtype is the result's.
TEST(ImportCurrentOnnx, OneHotOfIndicesKnownAtImportFolds) {
  auto g = must_load(model("float[N,2,3] x", "float[N,2,3] y", {},
                           "i = Constant<value = int64[2] {1, -1}>()\n"
                           "d = Constant<value = int64 {3}>()\n"
                           "v = Constant<value = int64[2] {0, 5}>()\n"
                           "h = OneHot<axis = -1>(i, d, v)\n"
                           "f = Cast<to = 1>(h)\n"
                           "y = Mul(x, f)",
                           17, 8));
  EXPECT_TRUE(ops_of_type(g, "OneHot").empty());
  auto const mul = ops_of_type(g, "Mul");
  ASSERT_EQ(mul.size(), 1u);
  ASSERT_NE(g.tensor(mul[0]->inputs[1]).data, nullptr);
  EXPECT_EQ(g.tensor(mul[0]->inputs[1]).data->to_doubles(), (std::vector<double>{0, 5, 0, 0, 0, 5}));
  // Along axis 0, an index past the depth: the column of zeros.
  auto a = must_load(model("float[N,3,2] x", "float[N,3,2] y", {},
                           "i = Constant<value = int64[2] {0, 7}>()\n"
                           "d = Constant<value = int64 {3}>()\n"
                           "v = Constant<value = float[2] {-1, 1}>()\n"
                           "h = OneHot<axis = 0>(i, d, v)\n"
                           "y = Mul(x, h)",
                           17, 8));
  auto const mul0 = ops_of_type(a, "Mul");
  ASSERT_EQ(mul0.size(), 1u);
  ASSERT_NE(a.tensor(mul0[0]->inputs[1]).data, nullptr);
  EXPECT_EQ(a.tensor(mul0[0]->inputs[1]).data->to_doubles(), (std::vector<double>{1, -1, -1, -1, -1, -1}));
}

// Range over a static length folds; over the batch size it stays an op with a batch-long output.
TEST(ImportCurrentOnnx, RangeOverTheBatchIsKeptAndStaticRangesFold) {
  auto g = must_load(model("float[N,3] x", "int64[N] y", {},
                           "s = Shape(x)\n"
                           "zero = Constant<value = int64 {0}>()\n"
                           "one = Constant<value = int64 {1}>()\n"
                           "n = Gather<axis = 0>(s, zero)\n"
                           "three = Constant<value = int64 {3}>()\n"
                           "t = Range(zero, three, one)\n"
                           "r = Range(zero, n, one)\n"
                           "last = Constant<value = int64[1] {-1}>()\n"
                           "t1 = Slice(t, last, three)\n"
                           "y = Add(r, t1)",
                           17, 8));
  auto const ranges = ops_of_type(g, "Range");
  ASSERT_EQ(ranges.size(), 1u) << "the static Range folds";
  EXPECT_EQ(g.tensor(ranges[0]->outputs[0]).shape, S({N}));
  auto const& a = std::get<RangeAttrs>(ranges[0]->typed);
  EXPECT_EQ(a.limit_batch, 1);
  EXPECT_EQ(a.start, 0);
  EXPECT_EQ(a.delta, 1);
}

// The dynamo exporter guards attention's softmax with Where(IsNaN(p), 0, p): IsNaN becomes
// Not(Equal(p, p)), which every backend runs.
// IsInf compares with an infinity of the input's type: |x| for both signs, x itself for one, and
// NaN (never equal) for neither; ONNX's three IsInf node tests run in the conformance test.
TEST(ImportCurrentOnnx, IsInfBecomesEqualToAnInfinity) {
  struct Case {
    std::string attrs;
    bool abs;
    float value;
  };
  float const inf = std::numeric_limits<float>::infinity();
  for (Case const& c :
       {Case{"", true, inf}, Case{"<detect_negative = 0>", false, inf}, Case{"<detect_positive = 0>", false, -inf},
        Case{"<detect_positive = 0, detect_negative = 0>", false, std::nanf("")}}) {
    SCOPED_TRACE(c.attrs);
    auto g = must_load(model("float[N,4] x", "bool[N,4] y", {}, "y = IsInf" + c.attrs + "(x)"));
    EXPECT_TRUE(ops_of_type(g, "IsInf").empty());
    EXPECT_EQ(ops_of_type(g, "Abs").size(), c.abs ? 1u : 0u);
    auto const eq = ops_of_type(g, "Equal");
    ASSERT_EQ(eq.size(), 1u);
    auto const& k = g.tensor(eq[0]->inputs[1]);
    ASSERT_TRUE(k.data);
    ASSERT_EQ(k.data->dtype, DType::kFloat32);
    float const v = *k.data->as<float>();
    EXPECT_TRUE(std::isnan(c.value) ? std::isnan(v) : v == c.value) << v;
    EXPECT_EQ(out_shape(g, "Equal"), S({N, 4}));
  }
  // float64 compares in float64; other dtypes are left for the unsupported-operator message.
  auto d = must_load(model("double[N,2] x", "bool[N,2] y", {}, "y = IsInf(x)"));
  auto const eq = ops_of_type(d, "Equal");
  ASSERT_EQ(eq.size(), 1u);
  EXPECT_EQ(d.tensor(eq[0]->inputs[1]).data->dtype, DType::kFloat64);
  EXPECT_NE(must_fail(model("float16[N,2] x", "bool[N,2] y", {}, "y = IsInf(x)")).find("IsInf"), std::string::npos);
}

TEST(ImportCurrentOnnx, IsNaNBecomesNotEqualToItself) {
  auto g = must_load(model("float[N,4] x", "float[N,4] y", {},
                           "p = Softmax<axis = -1>(x)\n"
                           "n = IsNaN(p)\n"
                           "zero = Constant<value = float {0}>()\n"
                           "y = Where(n, zero, p)"));
  EXPECT_TRUE(ops_of_type(g, "IsNaN").empty());
  auto const eq = ops_of_type(g, "Equal");
  ASSERT_EQ(eq.size(), 1u);
  EXPECT_EQ(eq[0]->inputs[0], eq[0]->inputs[1]);
  EXPECT_EQ(ops_of_type(g, "Not").size(), 1u);
  EXPECT_EQ(out_shape(g, "Where"), S({N, 4}));
}

// x.chunk(2, dim=1) whose pieces are used one by one: the dynamo exporter writes SplitToSequence
// (one chunk size) read by SequenceAt at constant positions (ShuffleNetV2). It imports as a Split.
TEST(ImportCurrentOnnx, ASplitToSequenceReadAtConstantPositionsIsASplit) {
  auto g = must_load(model("float[batch,6,4] x", "float[batch,3,4] y", {},
                           "size = Constant<value = int64 {3}>()\n"
                           "seq = SplitToSequence<axis = 1, keepdims = 1>(x, size)\n"
                           "zero = Constant<value = int64 {0}>()\n"
                           "last = Constant<value = int32 {-1}>()\n"
                           "a = SequenceAt(seq, zero)\n"
                           "b = SequenceAt(seq, last)\n"
                           "y = Sub(b, a)"));
  EXPECT_TRUE(ops_of_type(g, "SplitToSequence").empty());
  EXPECT_TRUE(ops_of_type(g, "SequenceAt").empty());
  auto const split = ops_of_type(g, "Split");
  ASSERT_EQ(split.size(), 1u);
  ASSERT_EQ(split[0]->outputs.size(), 2u);
  EXPECT_EQ(g.tensor(split[0]->outputs[0]).shape, S({N, 3, 4}));
  auto const sub = ops_of_type(g, "Sub");
  ASSERT_EQ(sub.size(), 1u);
  EXPECT_EQ(sub[0]->inputs[0], split[0]->outputs[1]) << "position -1 is the last piece";
  EXPECT_EQ(sub[0]->inputs[1], split[0]->outputs[0]);
  // One size that does not divide: the last piece is smaller; sizes given as a list; opset 11's
  // attribute forms.
  for (int opset : {11, 20}) {
    auto h = must_load(model("float[batch,7] x", "float[batch,1] y", {},
                             "size = Constant<value = int64 {3}>()\n"
                             "seq = SplitToSequence<axis = -1>(x, size)\n"
                             "two = Constant<value = int64 {2}>()\n"
                             "y = SequenceAt(seq, two)",
                             opset, 6));
    auto const s = ops_of_type(h, "Split");
    ASSERT_EQ(s.size(), 1u) << "opset " << opset;
    ASSERT_EQ(s[0]->outputs.size(), 3u);
    EXPECT_EQ(h.tensor(s[0]->outputs[2]).shape, S({N, 1}));
    auto l = must_load(model("float[batch,5,2] x", "float[batch,4,2] y", {},
                             "sizes = Constant<value = int64[2] {1, 4}>()\n"
                             "seq = SplitToSequence<axis = 1, keepdims = 0>(x, sizes)\n"
                             "one = Constant<value = int64 {1}>()\n"
                             "y = SequenceAt(seq, one)",
                             opset, 6));
    ASSERT_EQ(ops_of_type(l, "Split").size(), 1u);
    EXPECT_EQ(out_shape(l, "Split", 1), S({N, 4, 2})) << "keepdims is ignored where sizes are given";
  }
}

// Without sizes the pieces are single elements, squeezed where keepdims = 0.
TEST(ImportCurrentOnnx, ASplitToSequenceOfSingleElementsSqueezesThemAndOtherReadsAreRefused) {
  for (int opset : {11, 20}) {
    auto g = must_load(model("float[batch,3,4] x", "float[batch,4] y", {},
                             "seq = SplitToSequence<axis = 1, keepdims = 0>(x)\n"
                             "one = Constant<value = int64 {1}>()\n"
                             "two = Constant<value = int64 {2}>()\n"
                             "a = SequenceAt(seq, one)\n"
                             "b = SequenceAt(seq, two)\n"
                             "y = Mul(a, b)",
                             opset, 6));
    auto const split = ops_of_type(g, "Split");
    ASSERT_EQ(split.size(), 1u) << "opset " << opset;
    EXPECT_EQ(split[0]->outputs.size(), 3u);
    EXPECT_EQ(out_shape(g, "Mul"), S({N, 4}));
  }
  // Since 2026-12-03 (stop 56) a sequence read any other way is resolved at import too (before,
  // refused): its length is a constant.
  auto n = must_load(model("float[batch,6] x", "int64 n", {},
                           "size = Constant<value = int64 {3}>()\n"
                           "seq = SplitToSequence<axis = 1>(x, size)\n"
                           "n = SequenceLength(seq)"));
  ASSERT_EQ(n.outputs().size(), 1u);
  auto const& length = n.tensor(n.outputs()[0]).data;
  ASSERT_NE(length, nullptr);
  EXPECT_EQ(length->as<int64_t>()[0], 2);
  // So does a split into more than 4,096 pieces (a file must not make the importer build them).
  std::string const why3 = must_fail(model("float[batch,1000000000] x", "float[batch,1] y", {},
                                           "size = Constant<value = int64 {1}>()\n"
                                           "seq = SplitToSequence<axis = 1>(x, size)\n"
                                           "zero = Constant<value = int64 {0}>()\n"
                                           "y = SequenceAt(seq, zero)"));
  EXPECT_NE(why3.find("SplitToSequence"), std::string::npos) << why3;
  // A position that is no constant keeps the sequence too.
  std::string const why2 = must_fail(model("float[batch,6] x, int64 i", "float[batch,3] y", {},
                                           "size = Constant<value = int64 {3}>()\n"
                                           "seq = SplitToSequence<axis = 1>(x, size)\n"
                                           "y = SequenceAt(seq, i)"));
  EXPECT_NE(why2.find("SequenceAt"), std::string::npos) << why2;
}

// PixelShuffle (DepthToSpace, CRD from torch; DCR ONNX's default) and SpaceToDepth: a Reshape to
// six dims, a Transpose and a Reshape back, the batch copied through both shapes (the values are
// ONNX's node tests', run in the conformance test).
TEST(ImportCurrentOnnx, DepthToSpaceAndSpaceToDepthAreReshapesAroundATranspose) {
  struct Case {
    std::string node;
    std::vector<int64_t> perm, blocks;
    Shape out;
  };
  for (Case const& c :
       {Case{"y = DepthToSpace<blocksize = 2, mode = \"CRD\">(x)",
             {0, 1, 4, 2, 5, 3},
             {0, 3, 2, 2, 4, 5},
             S({N, 3, 8, 10})},
        Case{"y = DepthToSpace<blocksize = 2>(x)", {0, 3, 4, 1, 5, 2}, {0, 2, 2, 3, 4, 5}, S({N, 3, 8, 10})},
        Case{"y = SpaceToDepth<blocksize = 1>(x)", {0, 3, 5, 1, 2, 4}, {0, 12, 4, 1, 5, 1}, S({N, 12, 4, 5})}}) {
    SCOPED_TRACE(c.node);
    auto g = must_load(model("float[batch,12,4,5] x", "float[batch,d,h,w] y", {}, c.node));
    EXPECT_TRUE(ops_of_type(g, "DepthToSpace").empty());
    auto const t = ops_of_type(g, "Transpose");
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(std::get<TransposeAttrs>(t[0]->typed).perm, c.perm);
    ASSERT_EQ(ops_of_type(g, "Reshape").size(), 2u);
    Shape blocks = S(c.blocks);
    blocks.dims[0] = N;
    EXPECT_EQ(out_shape(g, "Reshape"), blocks);
    EXPECT_EQ(g.tensor(g.outputs().at(0)).shape, c.out);
  }
  auto s2d =
      must_load(model("float[batch,3,4,6] x", "float[batch,12,2,3] y", {}, "y = SpaceToDepth<blocksize = 2>(x)"));
  EXPECT_EQ(s2d.tensor(s2d.outputs().at(0)).shape, S({N, 12, 2, 3}));
  // What cannot be written as reshapes is refused by name and reason.
  std::string why =
      must_fail(model("float[batch,12,h,w] x", "float[batch,3,h2,w2] y", {}, "y = DepthToSpace<blocksize = 2>(x)"));
  EXPECT_NE(why.find("DepthToSpace '"), std::string::npos) << why;
  EXPECT_NE(why.find("known at import"), std::string::npos) << why;
  why = must_fail(model("float[batch,6,4,4] x", "float[batch,1,8,8] y", {}, "y = DepthToSpace<blocksize = 2>(x)"));
  EXPECT_NE(why.find("6 channels do not divide into blocks of 2x2"), std::string::npos) << why;
  why = must_fail(model("float[batch,3,5,4] x", "float[batch,12,2,2] y", {}, "y = SpaceToDepth<blocksize = 2>(x)"));
  EXPECT_NE(why.find("must both be multiples of the blocksize 2"), std::string::npos) << why;
}

// Opsets 24-28 (torch 2.15 writes them with opset_version=24..28; graphpipe builds against ONNX
// 1.18, opset 23): what did not change imports as before; Swish is rewritten as Sigmoid and Mul;
// SpaceToDepth's mode CRD (opset 28) is its own permutation; what changed and is not imported
// (Attention's cache lengths and sliding window) and the operators those opsets added are refused
// by name, before ONNX 1.18's checker would refuse them in its words; opset 29 is refused.
TEST(ImportCurrentOnnx, OpsetsNewerThanTheOnnxGraphpipeBuildsAgainst) {
  std::string const mlp = "h = Gemm<transB = 1>(x, w)\n s = Sigmoid(h)\n y = Mul(h, s)";
  for (int opset : {24, 25, 26, 27, 28}) {
    SCOPED_TRACE(opset);
    auto g = must_load(model("float[batch,4] x", "float[batch,4] y", {zeros("w", {4, 4}, 0.5)}, mlp, opset));
    EXPECT_EQ(ops_of_type(g, "Gemm").size(), 1u);
    EXPECT_EQ(ops_of_type(g, "Sigmoid").size(), 1u);
  }
  // Swish(x) = x * sigmoid(alpha * x): SiLU without alpha, a Mul by alpha with it.
  auto silu = must_load(model("float[batch,4] x", "float[batch,4] y", {}, "y = Swish(x)", 24));
  EXPECT_EQ(ops_of_type(silu, "Sigmoid").size(), 1u);
  EXPECT_EQ(ops_of_type(silu, "Mul").size(), 1u);
  auto swish = must_load(model("float[batch,4] x", "float[batch,4] y", {}, "y = Swish<alpha = 1.5>(x)", 26));
  EXPECT_EQ(ops_of_type(swish, "Mul").size(), 2u);
  EXPECT_EQ(swish.tensor(swish.outputs().at(0)).shape, S({N, 4}));
  // Attributes those opsets added that change nothing here are dropped: SpaceToDepth's mode DCR
  // (its only mode before), Range's stash_type (float16 and bfloat16 only).
  auto dcr = must_load(model("float[batch,3,4,6] x", "float[batch,12,2,3] y", {},
                             "y = SpaceToDepth<blocksize = 2, mode = \"DCR\">(x)", 28));
  auto const t = ops_of_type(dcr, "Transpose");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(std::get<TransposeAttrs>(t[0]->typed).perm, (std::vector<int64_t>{0, 3, 5, 1, 2, 4}));
  auto range =
      must_load(model("float[batch,5] x", "float[batch,5] y", {},
                      "s = Constant<value = float {0}>()\n l = Constant<value = float {5}>()\n"
                      " d = Constant<value = float {1}>()\n r = Range<stash_type = 1>(s, l, d)\n y = Add(x, r)",
                      27));
  EXPECT_EQ(ops_of_type(range, "Add").size(), 1u);
  // Refused by name.
  std::string why = must_fail(model("float[batch,3,4,6] x", "float[batch,12,2,3] y", {},
                                    "y = SpaceToDepth<blocksize = 2, mode = \"CRD\">(x)", 28));
  EXPECT_NE(why.find("mode 'CRD' (opset 28) is not imported"), std::string::npos) << why;
  why = must_fail(
      model("float[batch,4] x", "float[batch,4] y", {}, "a = Constant<value = int64 {1}>()\n y = CumProd(x, a)", 26));
  EXPECT_NE(why.find("unsupported operator (added after opset 23): CumProd '"), std::string::npos) << why;
  EXPECT_NE(why.find("re-export with opset_version 23 or lower"), std::string::npos) << why;
  std::string const qkv = "float[batch,2,4,8] q, float[batch,2,4,8] k, float[batch,2,4,8] v";
  why = must_fail(model(qkv, "float[batch,2,4,8] y", {}, "y = Attention<left_window_size = 2>(q, k, v)", 25));
  EXPECT_NE(why.find("left_window_size 2 (opset 25's sliding window) is not imported"), std::string::npos) << why;
  why =
      must_fail(model(qkv + ", int64[batch] len", "float[batch,2,4,8] y", {}, "y = Attention(q, k, v, , , , len)", 24));
  EXPECT_NE(why.find("nonpad_kv_seqlen input"), std::string::npos) << why;
  auto attention = must_load(
      model(qkv, "float[batch,2,4,8] y", {}, "y = Attention<is_causal = 1, left_window_size = -1>(q, k, v)", 25));
  EXPECT_TRUE(ops_of_type(attention, "Attention").empty());
  EXPECT_FALSE(ops_of_type(attention, "Softmax").empty());
  why = must_fail(model("float[batch,4] x", "float[batch,4] y", {}, "y = Relu(x)", 29));
  EXPECT_NE(why.find("opset 29; graphpipe imports opsets 7-28"), std::string::npos) << why;
}

// Opset 23's RMSNormalization and Attention (what a current exporter writes for rms_norm and
// scaled_dot_product_attention at opset 23) and Mish have no OpDef here: they import as the
// function body ONNX defines for them, expanded in place, and their weights train.
TEST(ImportCurrentOnnx, FunctionOperatorsExpandIntoTheirOnnxBodies) {
  // A graph value already named like the first expansion's values: the names must not collide.
  auto g = must_load(model("float[N,2,4,8] x", "float[N,2,4,8] y", {zeros("scale", {8}, 1)},
                           "\"RMSNormalization/fn0/X\" = Identity(x)\n"
                           "n = RMSNormalization<axis = -1, epsilon = 0.00001>(\"RMSNormalization/fn0/X\", scale)\n"
                           "a = Attention<is_causal = 1>(n, n, n)\n"
                           "y = Mish(a)",
                           23, 10));
  for (char const* type : {"RMSNormalization", "Attention", "Mish"}) EXPECT_TRUE(ops_of_type(g, type).empty()) << type;
  EXPECT_FALSE(ops_of_type(g, "Softmax").empty());   // Attention's
  EXPECT_FALSE(ops_of_type(g, "Softplus").empty());  // Mish's
  EXPECT_EQ(g.tensor(g.outputs().at(0)).shape, S({N, 2, 4, 8}));
  int renamed = 0;
  for (auto const& op : g.ops()) {
    EXPECT_NE(op.name.rfind("RMSNormalization/fn0/", 0), 0u) << op.name;
    renamed += op.name.rfind("RMSNormalization/fn1/", 0) == 0;
  }
  EXPECT_GT(renamed, 0);
  bool scale_trains = false;
  for (auto const& c : g.weight_choices()) scale_trains = scale_trains || (c.name == "scale" && c.trainable);
  EXPECT_TRUE(scale_trains);
  // SequenceMap's body holds a Loop over the sequence, which the expansion of function bodies does
  // not take: refused with the reason (AffineGrid's, with If branches, was too before it got a
  // lowering of its own).
  std::string const why =
      must_fail(model("float[N,4] x", "float[N,4] y", {},
                      "s = SplitToSequence<axis = 1, keepdims = 1>(x)\n"
                      " m = SequenceMap<body = g (float[N,1] e) => (float[N,1] r) { r = Relu(e) }>(s)\n"
                      " y = ConcatFromSequence<axis = 1>(m)",
                      23, 10));
  EXPECT_NE(why.find("SequenceMap: its function body has subgraphs"), std::string::npos) << why;
  // What `graphpipe ops` lists: the function operators whose bodies hold only operators graphpipe runs.
  auto const& listed = function_op_types();
  auto has = [&](char const* t) { return std::find(listed.begin(), listed.end(), t) != listed.end(); };
  for (char const* t : {"Attention", "RMSNormalization", "RotaryEmbedding", "GroupNormalization", "Mish"})
    EXPECT_TRUE(has(t)) << t;
  for (char const* t : {"AffineGrid", "SequenceMap", "DynamicQuantizeLinear", "LayerNormalization", "CastLike"})
    EXPECT_FALSE(has(t)) << t;
}

// Old opsets' GlobalMaxPool and Upsample import as what both backends run: a ReduceMax over the
// spatial axes, and a Resize with Upsample's asymmetric coordinates (floor for nearest).
TEST(ImportCurrentOnnx, GlobalMaxPoolAndUpsampleOfOldOpsetsImport) {
  auto g = must_load(model("float[N,3,5,4] x", "float[N,3,1,1] y", {}, "y = GlobalMaxPool(x)", 13, 8));
  ASSERT_EQ(ops_of_type(g, "ReduceMax").size(), 1u);
  EXPECT_EQ(out_shape(g, "ReduceMax"), S({N, 3, 1, 1}));
  for (int opset : {8, 9}) {
    std::string const node = opset == 8 ? "y = Upsample<mode = \"linear\", scales = [1.0, 1.0, 2.0, 3.0]>(x)"
                                        : "y = Upsample<mode = \"linear\">(x, scales)";
    std::vector<std::string> const inits = {"float[4] scales = {1.0, 1.0, 2.0, 3.0}"};
    g = must_load(
        model("float[N,1,2,3] x", "float[N,1,4,9] y", opset == 9 ? inits : std::vector<std::string>{}, node, opset, 4));
    auto const resize = ops_of_type(g, "Resize");
    ASSERT_EQ(resize.size(), 1u) << opset;
    EXPECT_EQ(out_shape(g, "Resize"), S({N, 1, 4, 9}));
    auto const& a = std::get<ResizeAttrs>(resize[0]->typed);
    EXPECT_EQ(a.mode, ResizeMode::kLinear);
    EXPECT_EQ(a.coord, ResizeCoord::kAsymmetric);
  }
  // Opset 10's own Resize(X, scales) stays refused with the fix.
  std::string const why = must_fail(model("float[N,1,2,3] x", "float[N,1,4,6] y",
                                          {"float[4] scales = {1.0, 1.0, 2.0, 2.0}"}, "y = Resize(x, scales)", 10, 5));
  EXPECT_NE(why.find("re-export with opset 11 or later"), std::string::npos) << why;
}

}  // namespace
}  // namespace gp::graph
