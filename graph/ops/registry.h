// The op table: every operator type the importer lowers, each with the rules its family's file
// (graph/ops/<family>.cc) gives it: import-time inference (graph/ops/infer.h), constant folding
// (graph/ops/fold.h), FLOP and activation-byte cost (graph/ops/cost.h) and, where the backends share
// one, the output shapes of a run. The importer resolves each node's OpDef once (Op::def). The list
// of supported ops comes from here, not from a hand-kept list; a test checks that every type in it
// has CPU kernels.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/ops/cost.h"
#include "graph/ops/fold.h"
#include "graph/ops/infer.h"
#include "graph/ops/op_kind.h"

namespace gp::graph::ops {

// Output shapes of one run (the concrete input shapes of a micro-batch of `batch` samples) from
// the shape rule the importer and every backend share.
using RunShapeFn = Result<std::vector<Dims>> (*)(OpGraph const& graph, Op const& op,
                                                 std::vector<Dims> const& input_shapes, int64_t batch);

// The input slots no gradient flows into: conditions, comparisons, indices, shapes, axes
// (mostly ONNX's "non-differentiable" inputs; tests/graph/op_def_test.cc compares them with ONNX's
// schemas): every slot from `from` on, and the listed `slots`.
struct GradFreeInputs {
  std::size_t from = ~std::size_t{0};
  std::vector<std::size_t> slots{};
  bool contains(std::size_t k) const { return k >= from || std::find(slots.begin(), slots.end(), k) != slots.end(); }
};
inline GradFreeInputs every_input() { return {.from = 0}; }         // Equal, Shape, ArgMax, Floor, ...
inline GradFreeInputs inputs_after_first() { return {.from = 1}; }  // Reshape's shape, Reduce*'s axes, ...
inline GradFreeInputs input_slots(std::vector<std::size_t> slots) { return {.slots = std::move(slots)}; }

struct OpDef {
  InferFn infer = nullptr;         // null: the op is only ever folded at import time (Shape, Constant, ...)
  FoldFn fold = nullptr;           // constant folding over static inputs; null: never folded
  bool folds_from_shape = false;   // `fold` reads only the inputs' dims, static or not (Shape, Size)
  CostFn cost = nullptr;           // FLOPs per sample; null: none (shape movement)
  ElemCost per_element{};          // the coefficients cost_per_output_element/cost_per_input_element read
  SavedFn saved = nullptr;         // what the backward keeps; null: nothing
  RunShapeFn run_shape = nullptr;  // null: no shape rule the backends share
  // The weight gradients come out of the input-gradient pass (the normalisations' per-channel
  // vectors): under a B/W split, B computes them too and W only adds them in.
  bool weight_grads_in_b = false;
  // State the op updates when training: output k (k >= 1) is the new value of input
  // state_inputs[k - 1] (BatchNormalization's running mean and variance).
  std::vector<std::size_t> state_inputs{};
  // The outputs a gradient flows back through, a prefix: LayerNormalization's Mean and InvStdDev
  // are computed forward only, and training refuses a graph whose loss depends on them.
  std::size_t differentiable_outputs = ~std::size_t{0};
  // The inputs broadcast against each other numpy-style (Add, Where, Max, ...): the importer reads a
  // fixed-batch export's constant of equal rows as one row where it meets the batch.
  bool broadcasts = false;
  // The inputs no gradient flows into: the importer never trains an initializer that only such
  // inputs read (an attention mask, an index table, a class-weight vector).
  GradFreeInputs grad_free{};
  std::string family{};            // the file that defines it: "linalg", "conv", ..., "folded"
  OpKind kind = OpKind::kUnknown;  // set by define() from the type
};

// An op costing `per_element` FLOPs per output element, forward and backward.
inline OpDef elementwise_op(InferFn infer, ElemCost per_element, SavedFn saved = nullptr, FoldFn fold = nullptr) {
  return {.infer = infer, .fold = fold, .cost = cost_per_output_element, .per_element = per_element, .saved = saved};
}
// An elementwise op whose inputs broadcast against each other numpy-style (OpDef::broadcasts).
inline OpDef broadcasting_op(InferFn infer, ElemCost per_element, SavedFn saved = nullptr, FoldFn fold = nullptr) {
  OpDef def = elementwise_op(infer, per_element, saved, fold);
  def.broadcasts = true;
  return def;
}

// `def` with `free` as its gradient-free inputs.
inline OpDef with_grad_free(OpDef def, GradFreeInputs free) {
  def.grad_free = std::move(free);
  return def;
}

using OpTable = std::map<std::string, OpDef, std::less<>>;

// Adds `type` to the table with its OpKind; a type defined twice, or without a kind in op_kind.h,
// is a programming error (std::logic_error).
void define(OpTable& t, std::string const& type, OpDef def);
inline void define(OpTable& t, std::string const& type, InferFn infer) { define(t, type, OpDef{.infer = infer}); }

// One per family file: adds that family's op types (duplicates are a programming error).
void register_linalg_ops(OpTable& t);  // linalg.cc: Gemm, MatMul, Einsum
void register_conv_ops(OpTable& t);    // conv.cc: Conv, ConvTranspose
void register_pool_ops(OpTable& t);    // pool.cc
void register_norm_ops(OpTable& t);    // norm.cc: BatchNormalization, LayerNormalization, InstanceNormalization, LRN
void register_activation_ops(OpTable& t);  // activation.cc: unary and n-ary elementwise math
void register_binary_ops(OpTable& t);      // binary.cc: Add, Sub, Mul, Div, Pow
void register_reduce_ops(OpTable& t);      // reduce.cc: Reduce*, Softmax, LogSoftmax, CumSum, ArgMax, ArgMin, TopK
void register_view_ops(OpTable& t);        // view.cc: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Cast, Dropout
void register_move_ops(OpTable& t);        // move.cc: Transpose, Concat, Split, Slice, Gather, Expand
void register_index_ops(
    OpTable& t);                     // index.cc: Pad, Tile, Trilu, OneHot, Gather*/Scatter*, Resize, GridSample, Col2Im
void register_rnn_ops(OpTable& t);   // rnn.cc: LSTM, GRU, RNN
void register_loss_ops(OpTable& t);  // loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_logic_ops(OpTable& t);   // logic.cc: comparisons, boolean ops, Where, Mod, ConstantOfShape, ...
void register_folded_ops(OpTable& t);  // folded.cc: Constant, Range, Shape, Size (import time only)

OpTable const& op_table();
OpDef const* find_op(std::string_view type);
std::vector<std::string> op_types();  // sorted

}  // namespace gp::graph::ops
