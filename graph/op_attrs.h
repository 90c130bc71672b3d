// Typed attribute structs of the operators graphpipe understands, shared by the importer, the
// accounting/cost model and every backend. Values are normalised by the importer: defaults
// filled in, negative axes made non-negative, inputs that ONNX passes as constant tensors
// (Reshape's shape, Slice's starts, Split's sizes, ...) folded into the struct.
#pragma once

#include <cstdint>
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
};

struct GemmAttrs {
  float alpha = 1.f;
  float beta = 1.f;
  bool trans_a = false;
  bool trans_b = false;
  bool has_bias = false;
};

struct MatMulAttrs {};

struct BatchNormAttrs {
  float epsilon = 1e-5f;
  float momentum = 0.9f;
  bool training = true;  // training_mode (opset 14+) or number of outputs > 1
};

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
  std::vector<int64_t> axes;
  bool keepdims = true;
};  // ReduceMean / ReduceSum
struct DropoutAttrs {
  float ratio = 0.5f;
  bool training = false;
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

using OpAttrs = std::variant<std::monostate, ConvAttrs, PoolAttrs, GemmAttrs, MatMulAttrs, BatchNormAttrs,
                             LayerNormAttrs, SoftmaxAttrs, LeakyReluAttrs, GeluAttrs, FlattenAttrs, ReshapeAttrs,
                             TransposeAttrs, ConcatAttrs, SplitAttrs, SliceAttrs, GatherAttrs, ReduceAttrs,
                             DropoutAttrs, CastAttrs, SqueezeAttrs, UnsqueezeAttrs, ExpandAttrs>;

}  // namespace gp::graph
