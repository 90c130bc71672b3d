// Internal to the CPU backend: the signatures of its per-op functions and the helpers they share.
// Each <family>.cc (a family of graph/ops/registry.h) defines the functions of that family's
// operators; cpu_backend.cc lists them all in one explicit kernel table.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exec/backend.h"
#include "exec/low_precision_kernel.h"
#include "exec/op_kernels.h"

namespace gp::exec::cpu {

using exec::attrs_of;
using exec::BackwardFn;
using exec::BothFn;
using exec::CheckFn;
using exec::constant_input;
using exec::ForwardFn;
using exec::no_gradient;
using exec::op_error;
using exec::OpKernels;
using exec::require_attrs;
using exec::wants;

inline constexpr std::size_t kEveryInput = static_cast<std::size_t>(-1);

// One kernel-table entry. float_inputs: the entry runs float32 data (the table's key) and the
// backend refuses an op whose first `float_count` inputs (0: the first min_inputs; kEveryInput:
// all) are not all float32 before its check runs; false: the entry runs every dtype (or those in
// `dtypes` when given: the integer twins of float ops) and its check handles dtypes itself.
struct CpuKernelEntry {
  OpKernels kernels;
  std::size_t min_inputs = 1;
  bool float_inputs = true;
  std::size_t float_count = 0;
  std::vector<DType> dtypes{};  // the table's keys for this entry; empty: as float_inputs says
  // Under a bfloat16 key, the float inputs past the first `low_inputs` are float32 (BatchNorm's
  // scale, bias and statistics), or either dtype when `converts`; 0: every float input has the
  // key's dtype.
  std::size_t low_inputs = 0;
  bool converts = false;
};

// Calls f(T{}) with T the C++ type of `dt` and returns its status: float32 (float), bool (its
// bytes, uint8_t) and the integers (int64, int32, int8, uint8) when kFloats, the integers only
// otherwise; another dtype is an error naming the op.
template <bool kFloats, typename F>
Status dispatch_dtype(OpCall const& call, DType dt, F&& f) {
  switch (dt) {
    case DType::kInt64:
      return f(int64_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kFloat32:
      if constexpr (kFloats) return f(float{});
      break;
    case DType::kBool:
      if constexpr (kFloats) return f(uint8_t{});
      break;
    default:
      break;
  }
  return op_error(call, std::string(kFloats ? "no " : "no integer ") + call.op.type + " of " + graph::dtype_name(dt));
}
template <typename F>
Status with_dtype(OpCall const& call, DType dt, F&& f) {
  return dispatch_dtype<true>(call, dt, std::forward<F>(f));
}
template <typename F>
Status with_int_dtype(OpCall const& call, DType dt, F&& f) {
  return dispatch_dtype<false>(call, dt, std::forward<F>(f));
}

// The integer dtypes index arithmetic runs in (positions, row numbers, token ids).
inline std::vector<DType> const kIndexDTypes{DType::kInt64, DType::kInt32};
// The integer dtypes the per-element integer kernels take (Abs, Sign, Clip, the integer
// reductions, the bitwise ops): dispatch_dtype's integers.
inline std::vector<DType> const kIntDTypes{DType::kInt64, DType::kInt32, DType::kInt8, DType::kUInt8};
using CpuKernelFamily = std::vector<std::pair<OpKind, CpuKernelEntry>>;

// Op families each file lists (cpu_backend.cc joins them into the kernel table; a type listed
// twice is a programming error).
CpuKernelFamily linalg_kernels();      // linalg.cc: Einsum
CpuKernelFamily activation_kernels();  // activation.cc: Clip, Elu, Selu, Softplus, ..., Min, Max
CpuKernelFamily reduce_kernels();      // reduce.cc: Reduce*, LogSoftmax, CumSum, ArgMax, ArgMin, TopK
CpuKernelFamily index_kernels();  // index.cc: Pad, Tile, Trilu, OneHot, Gather*, Scatter*, Resize, GridSample, Col2Im
CpuKernelFamily rnn_kernels();    // rnn.cc: LSTM, GRU, RNN
CpuKernelFamily loss_kernels();   // loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
CpuKernelFamily logic_kernels();  // logic.cc: comparisons, boolean ops, Where, Mod, ConstantOfShape, Range
CpuKernelFamily view_kernels();   // view.cc: Cast, RandomUniformLike, RandomNormalLike, Bernoulli
CpuKernelFamily binary_int_kernels();  // binary.cc: Add, Sub, Mul, Div over integers (index arithmetic), bf16 Add
CpuKernelFamily deconv_kernels();      // conv_transpose.cc: ConvTranspose

// ---- helpers (common.cc) ----
// emit_grad, grad_or_zeros, shape_tensor and shape_of: exec/op_kernels.h (shared with every backend).
// A gradient slot ready to be written in place: the existing tensor when accumulating (then
// `beta` is 1 for primitives that can add), else a new tensor of `shape` (beta 0).
Tensor& grad_slot(std::vector<Tensor>& grads, std::size_t i, std::vector<int64_t> const& shape, bool accumulate,
                  DType dtype = DType::kFloat32);
void add_into(Tensor& dst, Tensor const& src);  // dst += src (same numel)
// float32 <-> bfloat16 (rounded to nearest even); `x` itself when it has dtype `to` already.
Tensor convert_float(Tensor const& x, DType to);

// convert_float as exec/low_precision_kernel.h's ConvertFn.
inline Result<Tensor> convert_float_fn(Tensor const& x, DType to) { return convert_float(x, to); }

// A float32 kernel's bfloat16 twin for ops whose float32 weights stay float32 (mixed precision's
// master weights): exec/low_precision_kernel.h's wrapper around the bf16 kernel.
template <ForwardFn F, BackwardFn B, BackwardFn W>
CpuKernelEntry low_precision_entry(CheckFn check, std::size_t min_inputs) {
  CpuKernelEntry e{low_precision_kernels<F, B, W, convert_float_fn>(check), min_inputs, true, 0, {DType::kBFloat16}};
  e.low_inputs = 1;
  e.converts = true;
  return e;
}

// The other direction: a bfloat16 entry for an op that follows its bf16 input but computes in
// float32 here (exec/low_precision_kernel.h's widened wrappers around the float32 kernel).
template <ForwardFn F, BackwardFn B, BackwardFn W>
CpuKernelEntry widened_entry(CheckFn check, std::size_t min_inputs) {
  return {widened_kernels<F, B, W, convert_float_fn>(check), min_inputs, true, 0, {DType::kBFloat16}};
}

// ---- conv family (conv.cc), pool family (pool.cc) ----
// Whether a Conv or ConvTranspose call has its optional bias input (input 2).
inline bool has_bias(OpCall const& call) { return call.op.inputs.size() > 2 && call.op.inputs[2] != graph::kNoTensor; }
Status conv_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status conv_backward_data(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                          std::vector<Tensor>&, bool);
Status conv_backward_weights(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                             std::vector<Tensor>&, bool);
Status conv_backward_both(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                          std::vector<Tensor>&, std::vector<Tensor>&);
Status pool_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status pool_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                     std::vector<Tensor>&, bool);

// ---- linalg family: Gemm, MatMul (linalg.cc) ----
Status gemm_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status gemm_bf16_check(graph::Op const& op, graph::OpGraph const& graph);  // C a bias row, alpha = beta = 1
Status gemm_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                     std::vector<Tensor>&, bool);
Status matmul_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status matmul_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                       std::vector<Tensor>&, bool);

// ---- norm family (norm.cc); Softmax (reduce family, reduce.cc) ----
Status batchnorm_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status batchnorm_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                          std::vector<Tensor>&, bool);
Status layernorm_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status layernorm_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                          std::vector<Tensor>&, bool);
Status instnorm_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status instnorm_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                         std::vector<Tensor>&, bool);
Status lrn_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status lrn_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                    std::vector<Tensor>&, bool);
Status softmax_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status softmax_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                        std::vector<Tensor>&, bool);

// ---- activation family (activation.cc); Pow, Add, Sub, Mul, Div (binary family, binary.cc); Dropout
// (view family, view.cc) ----
Status unary_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
// y = max(0, y) in place, and dy where y > 0, else 0 (Relu's gradient from its output y), float32
// or bfloat16, as the Relu op computes them; for BatchNormalization with a fused Relu.
void relu_in_place(Tensor& y);
// y = max(0, y + z) in place (z of y's shape and dtype): BatchNormalization's fused residual.
void add_relu_in_place(Tensor& y, Tensor const& z);
Tensor relu_grad_from_output(Tensor const& y, Tensor const& dy);
Status unary_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                      std::vector<Tensor>&, bool);
Status pow_check(graph::Op const&, graph::OpGraph const&);
Status pow_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status pow_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                    std::vector<Tensor>&, bool);
Status binary_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status binary_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                       std::vector<Tensor>&, bool);
Status binary_check(graph::Op const&, graph::OpGraph const&);
Status dropout_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status dropout_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                        std::vector<Tensor>&, bool);

// ---- views (view.cc), data movement (move.cc), ReduceSum/ReduceMean (reduce.cc) ----
Status reshape_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status reshape_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                        std::vector<Tensor>&, bool);
Status expand_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status expand_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                       std::vector<Tensor>&, bool);
Status transpose_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status transpose_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                          std::vector<Tensor>&, bool);
Status concat_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status concat_bytes_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status concat_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                       std::vector<Tensor>&, bool);
Status split_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status split_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                      std::vector<Tensor>&, bool);
Status slice_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status slice_bytes_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status slice_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                      std::vector<Tensor>&, bool);
Status gather_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status gather_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                       std::vector<Tensor>&, bool);
Status reduce_forward(OpCall const&, std::vector<Tensor> const&, std::vector<Tensor>&, Saved*);
Status reduce_backward(OpCall const&, Saved const&, std::vector<Tensor> const&, std::vector<bool> const&,
                       std::vector<Tensor>&, bool);

}  // namespace gp::exec::cpu
