// Typed attribute structs of the operators graphpipe understands, shared by the importer, the
// accounting/cost model and every backend. Values are normalised by the importer: defaults
// filled in, negative axes made non-negative, inputs that ONNX passes as constant tensors
// (Reshape's shape, Slice's starts, Split's sizes, ...) folded into the struct.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

namespace gp::graph {

struct ConvAttrs {
  std::vector<int64_t> kernel;     // spatial kernel size (kH, kW) or (kL)
  std::vector<int64_t> strides;    // per spatial dim
  std::vector<int64_t> dilations;  // per spatial dim
  std::vector<int64_t> pads;       // begin pads then end pads (ONNX order), explicit after auto_pad
  int64_t group = 1;
  bool has_bias = false;
};

enum class PoolKind : uint8_t { kMax, kAverage, kGlobalAverage };
struct PoolAttrs {
  PoolKind kind = PoolKind::kMax;
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;  // begin then end
  bool count_include_pad = false;
  bool ceil_mode = false;
  std::vector<int64_t> dilations;     // per spatial dim; empty: 1 everywhere
  bool indices_column_major = false;  // MaxPool's Indices output in storage_order 1
};

struct GemmAttrs {
  float alpha = 1.f;
  float beta = 1.f;
  bool trans_a = false;
  bool trans_b = false;
  bool has_bias = false;
};

// ONNX MatMul has no attributes; the importer folds a Transpose that moves an operand's last axis
// next to last (a Q·Kᵀ) and a constant scale of the product or an operand (attention's 1/sqrt(d))
// into the op (graph/onnx_import_fuse_graph.cc): Y = alpha · op(A) · op(B), op(X) being X with its
// last two axes swapped when trans_x. The executors read the stored operand through a transposed
// view and pass alpha to the GEMM: neither a transposed copy nor a scaling pass runs.
struct MatMulAttrs {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.f;
};
// The importer's internal attributes for them (set on the lowered graph, never written to a file).
inline constexpr char kMatMulTransAAttr[] = "graphpipe.trans_a";
inline constexpr char kMatMulTransBAttr[] = "graphpipe.trans_b";
inline constexpr char kMatMulAlphaAttr[] = "graphpipe.alpha";

struct BatchNormAttrs {
  float epsilon = 1e-5f;
  float momentum = 0.9f;
  bool training = true;  // training_mode (opset 14+) or number of outputs > 1
  // Y = max(0, BatchNorm(x)): the Relu that was BatchNorm's only consumer, fused at import
  // (graph/onnx_import_fuse.cc, the raw attribute kBatchNormReluAttr). Backward masks dy by Y > 0.
  bool relu = false;
  // Y = max(0, BatchNorm(x) + z), z input 5 of x's shape: a residual block's tail (BatchNorm, Add,
  // Relu) fused at import (kBatchNormAddAttr; relu is then set too). z's gradient is the masked dy.
  bool residual = false;
};
// The importer's internal attributes for a fused Relu, and a fused Add of input 5 before it, on a
// BatchNormalization node (set after ONNX's checker has run, never written to a file).
inline constexpr char kBatchNormReluAttr[] = "graphpipe.fused_relu";
inline constexpr char kBatchNormAddAttr[] = "graphpipe.fused_add";
inline constexpr std::size_t kBatchNormResidualInput = 5;

struct LayerNormAttrs {
  int64_t axis = -1;  // normalised axis (non-negative after import)
  float epsilon = 1e-5f;
  bool has_bias = true;
};

struct SoftmaxAttrs {
  int64_t axis = 1;
};  // non-negative after import
struct LeakyReluAttrs {
  float alpha = 0.01f;
};
struct GeluAttrs {
  bool tanh_approx = false;
};  // fused from the Erf pattern of torch exports
struct FlattenAttrs {
  int64_t axis = 1;
};
struct ReshapeAttrs {
  std::vector<int64_t> shape;
  bool allowzero = false;
};  // folded from the input
struct TransposeAttrs {
  std::vector<int64_t> perm;
};
struct ConcatAttrs {
  int64_t axis = 0;
};
struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
};
struct SliceAttrs {
  std::vector<int64_t> starts, ends, axes, steps;  // folded from inputs, axes non-negative
};
struct GatherAttrs {
  int64_t axis = 0;
};
struct ReduceAttrs {
  std::vector<int64_t> axes;  // sorted, non-negative; every axis when the node names none
  bool keepdims = true;
  bool noop = false;  // noop_with_empty_axes=1 and no axes: the op is the identity
};                    // every Reduce* op (the op type says which reduction)
struct DropoutAttrs {
  float ratio = 0.5f;
  bool training = false;
};
// RandomUniformLike (a = low, b = high), RandomNormalLike (a = mean, b = scale): input 0 gives only
// the shape. Bernoulli: input 0 is each element's probability of 1. Draws are a pure function of
// OpCall::rng_seed and the element index, as Dropout's mask is, so a pipeline draws what one device
// draws. `seed` is the node's seed attribute, mixed into the draws when the node has one.
enum class RandomKind : uint8_t { kUniform, kNormal, kBernoulli };
struct RandomAttrs {
  RandomKind kind = RandomKind::kUniform;
  float a = 0.f;
  float b = 1.f;
  int32_t dtype = 1;  // ONNX TensorProto data type of the output
  bool has_seed = false;
  float seed = 0.f;
};
struct CastAttrs {
  int32_t to = 1;
};  // ONNX TensorProto data type
struct SqueezeAttrs {
  std::vector<int64_t> axes;
};
struct UnsqueezeAttrs {
  std::vector<int64_t> axes;
};
struct ExpandAttrs {
  std::vector<int64_t> shape;
};

// ---- elementwise activations with parameters (graph/ops/eltwise.h) ----
// Clip's bounds (folded from its inputs, +-inf when absent); Elu/Celu/ThresholdedRelu alpha;
// Selu alpha and gamma; HardSigmoid alpha and beta.
struct ClipAttrs {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
};
struct ActivationAttrs {
  float alpha = 0.f;
  float beta = 0.f;
  float gamma = 0.f;
};
struct ModAttrs {
  bool fmod = false;
};
// BitShift's direction attribute ("LEFT" or "RIGHT").
struct BitShiftAttrs {
  bool left = true;
};

// ---- reductions along one axis (graph/ops/reduce.h) ----
struct CumSumAttrs {
  int64_t axis = 0;  // folded from the input, non-negative
  bool exclusive = false;
  bool reverse = false;
};
struct ArgReduceAttrs {  // ArgMax, ArgMin
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
};
struct TopKAttrs {  // the outputs always in order (ONNX's sorted = 0 leaves the order free)
  int64_t axis = -1;
  int64_t k = 1;        // folded from the K input (the attribute before opset 10)
  bool largest = true;  // false: the k smallest
};

// ---- data movement (graph/ops/move.h) ----
enum class PadMode : uint8_t { kConstant, kReflect, kEdge, kWrap };
struct PadAttrs {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> pads;  // begin then end, one pair per input axis (axes input folded in)
  float value = 0.f;          // constant_value (folded)
};
struct TileAttrs {
  std::vector<int64_t> repeats;  // one per axis (folded)
};
struct TriluAttrs {
  bool upper = true;
  int64_t k = 0;  // diagonal offset (folded)
};
struct OneHotAttrs {
  int64_t axis = -1;       // of the output, normalised at import
  int64_t depth = 0;       // folded from the depth input
  double off = 0, on = 1;  // folded from the values input, whose dtype the output has
};
struct GatherElementsAttrs {
  int64_t axis = 0;
};
struct GatherNDAttrs {
  int64_t batch_dims = 0;  // only 0 is supported (the importer refuses others)
};
enum class ScatterReduction : uint8_t { kNone, kAdd, kMul, kMax, kMin };
struct ScatterElementsAttrs {
  int64_t axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
};
struct ScatterNDAttrs {
  ScatterReduction reduction = ScatterReduction::kNone;
};
enum class ResizeMode : uint8_t { kNearest, kLinear, kCubic };
enum class ResizeCoord : uint8_t {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kHalfPixelSymmetric,  // opset 19: half_pixel centred on the output canvas
};
enum class ResizeNearest : uint8_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
struct ResizeAttrs {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  std::vector<float> scales;   // one per axis (output / input), from the scales input or sizes
  std::vector<int64_t> sizes;  // output dims (the batch axis keeps the input's)
  float cubic_coeff_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation_value = 0.f;
  // Opset 18: linear and cubic downsampling widen their filter by 1/scale (nearest ignores it).
  bool antialias = false;
};

// GridSample: output [N, C, Ho, Wo] samples x [N, C, H, W] at grid [N, Ho, Wo, 2]'s (x, y) in
// [-1, 1], or [N, C, Do, Ho, Wo] x [N, C, D, H, W] at (x, y, z); modes linear (opset 16's bilinear),
// nearest and cubic (opset 16's bicubic; 4-D only), as torch's grid_sample.
enum class GridSampleMode : uint8_t { kLinear, kNearest, kCubic };
enum class GridSamplePadding : uint8_t { kZeros, kBorder, kReflection };
struct GridSampleAttrs {
  GridSampleMode mode = GridSampleMode::kLinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
};

// Col2Im (torch's nn.Fold): x [N, C·prod(block), L] summed into [N, C, image...]; the sliding
// blocks' geometry per spatial dim (image_shape and block_shape are inputs in ONNX, static here).
struct Col2ImAttrs {
  std::vector<int64_t> image, block, dilations, strides;
  std::vector<int64_t> pads;  // begin then end
};

// ---- convolution family (graph/ops/conv.h) ----
struct ConvTransposeAttrs {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;            // begin then end, explicit
  std::vector<int64_t> output_padding;  // per spatial dim
  int64_t group = 1;
  bool has_bias = false;
};
struct InstanceNormAttrs {
  float epsilon = 1e-5f;
};
// LRN across channels: y = x / (bias + alpha / size · Σ x²)^beta, the sum over the `size`
// channels around each (ONNX: floor((size-1)/2) before, ceil((size-1)/2) after).
struct LrnAttrs {
  int64_t size = 0;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.f;
};
struct EinsumAttrs {
  std::string equation;  // as given, spaces removed
};

// ---- recurrent layers (graph/ops/rnn.h) ----
enum class RnnKind : uint8_t { kLstm, kGru, kRnn };
enum class RnnDirection : uint8_t { kForward, kReverse, kBidirectional };
// A plain RNN's activation f in h = f(x·Wᵀ + h_prev·Rᵀ + Wb + Rb): each one's derivative is a
// function of its output, which is all the backward pass keeps.
enum class RnnActivation : uint8_t { kTanh, kRelu, kSigmoid };
struct RnnAttrs {
  RnnKind kind = RnnKind::kLstm;
  int64_t hidden_size = 0;
  RnnDirection direction = RnnDirection::kForward;
  bool linear_before_reset = false;                                                      // GRU
  std::array<RnnActivation, 2> activations{RnnActivation::kTanh, RnnActivation::kTanh};  // RNN, per direction
  int64_t layout = 0;  // 0: [seq, batch, ...]; 1: [batch, seq, ...]
  float clip = 0.f;    // 0: none
};

// ---- losses as graph ops (graph/ops/loss.h) ----
enum class LossReduction : uint8_t { kNone, kSum, kMean };
struct LossAttrs {  // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
  LossReduction reduction = LossReduction::kMean;
  bool has_ignore_index = false;
  int64_t ignore_index = -100;
};

// ---- values built from a shape (graph/ops/logic.h) ----
struct ConstantOfShapeAttrs {
  std::vector<int64_t> shape;  // may hold the batch (negative entries)
  double value = 0;
  int32_t dtype = 1;  // ONNX TensorProto data type of the output
};
// Range whose limit holds the batch size (HF GPT-2's row index arange(batch)): start, start + delta,
// ... below limit + limit_batch * N, computed per micro-batch. A static Range is folded at import.
struct RangeAttrs {
  double start = 0;
  double limit = 0;
  int64_t limit_batch = 0;
  double delta = 1;
};

using OpAttrs =
    std::variant<std::monostate, ConvAttrs, PoolAttrs, GemmAttrs, MatMulAttrs, BatchNormAttrs, LayerNormAttrs,
                 SoftmaxAttrs, LeakyReluAttrs, GeluAttrs, FlattenAttrs, ReshapeAttrs, TransposeAttrs, ConcatAttrs,
                 SplitAttrs, SliceAttrs, GatherAttrs, ReduceAttrs, DropoutAttrs, CastAttrs, SqueezeAttrs,
                 UnsqueezeAttrs, ExpandAttrs, ClipAttrs, ActivationAttrs, ModAttrs, CumSumAttrs, ArgReduceAttrs,
                 PadAttrs, TileAttrs, TriluAttrs, GatherElementsAttrs, ScatterElementsAttrs, ResizeAttrs,
                 ConvTransposeAttrs, InstanceNormAttrs, EinsumAttrs, RnnAttrs, LossAttrs, ConstantOfShapeAttrs,
                 RandomAttrs, GatherNDAttrs, RangeAttrs, TopKAttrs, OneHotAttrs, LrnAttrs, GridSampleAttrs, Col2ImAttrs,
                 ScatterNDAttrs, BitShiftAttrs>;

}  // namespace gp::graph
