// Operator identity as a value: every type the op table defines (graph/ops/registry.h) has an
// OpKind, resolved once with its OpDef (OpDef::kind, Op::kind()). Code outside graph/ picks
// behaviour by comparing kinds, never op-type strings: a misspelt kind does not compile, where a
// misspelt string silently never matches. The op table refuses a type without a kind when it is
// built, and a test checks that every kind has a definition.
#pragma once

#include <cstdint>
#include <string_view>

namespace gp::graph::ops {

// X(name) for every op type of the op table, in the order of the enum below.
// (A macro list, which clang-format would re-indent on every run.)
// clang-format off
#define GP_OP_KINDS(X) \
  X(Abs) X(Acos) X(Acosh) X(Add) X(And) X(ArgMax) X(ArgMin) X(Asin) X(Asinh) X(Atan) X(Atanh)               \
  X(AveragePool) X(BatchNormalization) X(Bernoulli) X(BitShift) X(BitwiseAnd) X(BitwiseNot) X(BitwiseOr)     \
  X(BitwiseXor) X(BlackmanWindow) X(Cast) X(Ceil) X(Celu) X(Clip)       \
  X(Col2Im) X(Concat) X(Constant) X(ConstantOfShape) X(Conv) X(ConvTranspose) X(Cos) X(Cosh) X(CumSum) X(Div)         \
  X(Dropout) X(Einsum) X(Elu) X(Equal) X(Erf) X(Exp) X(Expand) X(EyeLike) X(Flatten) X(Floor) X(GRU)        \
  X(Gather) X(GatherElements) X(GatherND) X(Gelu) X(Gemm) X(GlobalAveragePool) X(Greater) X(GreaterOrEqual) \
  X(GridSample) X(HammingWindow) X(HannWindow) X(HardSigmoid) X(HardSwish) X(Hardmax) X(Identity)           \
  X(InstanceNormalization) X(LRN) X(LSTM) X(LayerNormalization) X(LeakyRelu) X(Less) X(LessOrEqual) X(Log)  \
  X(LogSoftmax) X(MatMul) X(Max) X(MaxPool) X(Mean) X(Min) X(Mod) X(Mul) X(Neg)                             \
  X(NegativeLogLikelihoodLoss) X(NonZero) X(Not) X(OneHot) X(Or) X(PRelu) X(Pad) X(Pow) X(RNN) X(RandomNormalLike)     \
  X(RandomUniformLike) X(Range) X(Reciprocal) X(ReduceL1) X(ReduceL2) X(ReduceLogSum) X(ReduceLogSumExp)    \
  X(ReduceMax) X(ReduceMean) X(ReduceMin) X(ReduceProd) X(ReduceSum) X(ReduceSumSquare) X(Relu) X(Reshape)  \
  X(Resize) X(Round) X(Scatter) X(ScatterElements) X(ScatterND) X(Selu) X(Shape) X(Shrink) X(Sigmoid)       \
  X(Sign) X(Sin) X(Sinh) X(Size) X(Slice) X(Softmax) X(SoftmaxCrossEntropyLoss) X(Softplus) X(Softsign)     \
  X(Split) X(Sqrt) X(Squeeze) X(Sub) X(Sum) X(Tan) X(Tanh) X(ThresholdedRelu) X(Tile) X(TopK) X(Transpose)  \
  X(Trilu) X(Unsqueeze) X(Where) X(Xor)
// clang-format on

enum class OpKind : uint16_t {
  kUnknown,  // a type the op table lacks (hand-built test graphs)
#define GP_OP_KIND_ENUMERATOR(name) k##name,
  GP_OP_KINDS(GP_OP_KIND_ENUMERATOR)
#undef GP_OP_KIND_ENUMERATOR
};

// The kind of an ONNX op type, kUnknown when it has none.
OpKind op_kind(std::string_view type);
// The ONNX op type of a kind ("" for kUnknown).
std::string_view op_kind_name(OpKind kind);

}  // namespace gp::graph::ops
