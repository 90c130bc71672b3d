// Per-operator accounting: FLOPs per sample (forward; backward split into input-grad and
// weight-grad), trainable parameter bytes, and the activation bytes per sample that the op keeps
// for its backward pass.
//
// Rules (per sample: only tensors with the batch dimension count; an op on weights alone, such
// as a Transpose of a weight matrix, costs 0 per sample):
//  - Conv: fwd = 2*MACs (+ out elements with a bias), MACs = out elements * C_in/group * kernel
//    volume. bwd = input-grad 2*MACs + weight-grad 2*MACs (+ out elements for the bias grad);
//    no input-grad when the input is the model's input data.
//  - Gemm / MatMul: fwd = 2 * out elements * K (+ out elements for Gemm's bias/scales).
//    bwd = 2 * out elements * K for each operand that needs a gradient; the gradient of an
//    operand without the batch dimension (a weight or weight-derived tensor) is weight-grad;
//    model inputs and constants get none.
//  - Elementwise: fwd = out elements * c, with c = 1 (Add, Sub, Mul, Div, Relu, Equal, Where),
//    2 (LeakyRelu, Pow, Sqrt, Dropout), 4 (Sigmoid, Tanh), 8 (Gelu); bwd per element
//    from each op's OpDef::per_element (Add 0: the gradient passes through; Relu 1; Mul 2; Div 4).
//  - BatchNormalization ~ 8/elem fwd, 12/elem bwd; LayerNormalization ~ 8/elem fwd, 12 bwd;
//    Softmax ~ 5/elem fwd, 4/elem bwd; pooling: out elements * kernel volume fwd, in elements
//    bwd; reductions: in elements fwd and bwd.
//  - Shape movement (Reshape, Flatten, Transpose, Concat, Split, Slice, Gather, Squeeze,
//    Unsqueeze, Expand, Cast, Identity): 0 FLOPs.
//  - param_bytes: the kWeight tensors an op consumes; a weight shared by several ops is counted
//    at its first consumer only, so the sum over ops equals OpGraph::param_bytes().
//  - activation bytes: the tensors the op's VJP reads (see saved_for_backward) plus internal state
//    (Dropout's mask at 1 byte/element, LayerNorm's mean and 1/std at 8 bytes/row). Conv, Gelu,
//    LeakyRelu, BatchNorm, MaxPool save their input; Relu, Sigmoid, Tanh, Sqrt, Softmax their
//    output; Gemm, MatMul, Mul, Div, Pow both (batched) inputs; Gather its indices; Add, Sub,
//    pooling by averaging, reductions and shape ops nothing. A tensor saved by two ops counts in
//    both ops' numbers; saved_activation_bytes_per_sample() counts each tensor once.
// Each op's rule lives with its family (OpDef::cost and OpDef::saved, graph/ops/<family>.cc); an op
// type the table lacks costs nothing.
#pragma once

#include <vector>

#include "graph/op_graph.h"
#include "graph/ops/cost.h"

namespace gp::graph {

using ops::OpCost;
using ops::SavedForBackward;

// `tensors` is indexed by TensorId (OpGraph::tensors(), or the importer's list before finalize).
SavedForBackward saved_for_backward(Op const& op, std::vector<TensorInfo> const& tensors);
OpCost op_cost(Op const& op, std::vector<TensorInfo> const& tensors);

// Fills every op's accounting fields; param bytes go to the first consumer of each weight.
void fill_accounting(std::vector<Op>& ops, std::vector<TensorInfo> const& tensors);

// Activation memory per sample kept for backward over the whole graph, each tensor once.
int64_t saved_activation_bytes_per_sample(OpGraph const& graph);

}  // namespace gp::graph
