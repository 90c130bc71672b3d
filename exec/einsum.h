// Einsum for one or two operands, device-agnostic: the label algebra here, three device
// primitives in EinsumPrimitives (the CPU backend gives oneDNN-free host loops and oneDNN matmul,
// the CUDA backend strided-copy and reduction kernels and cuBLASLt). Each operand is first reduced
// to the labels the contraction needs (diagonals and sums), then the pair is permuted to
// [batch, M, K] · [batch, K, N] and multiplied. The backward pass is the same machinery with the
// output gradient as an operand, then the reduction's transpose.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "exec/op_kernels.h"
#include "exec/tensor.h"
#include "graph/ops/einsum.h"
#include "kernels/hd/index.h"

namespace gp::exec {

struct EinsumPrimitives {
  // A new contiguous tensor of `y_shape` with y[idx] = x[idx · x_strides] (a permutation of x).
  std::function<Result<Tensor>(Tensor const& x, std::vector<int64_t> const& x_strides,
                               std::vector<int64_t> const& y_shape)>
      permute;
  // A new tensor of `out_shape`: zero, then out[idx · out_strides] += src[idx · src_strides] for
  // every idx of `space` (out positions repeat where out_strides has zeros: a sum). Contributions
  // to one position are added in row-major order of idx.
  std::function<Result<Tensor>(Tensor const& src, std::vector<int64_t> const& src_strides,
                               std::vector<int64_t> const& out_strides, std::vector<int64_t> const& space,
                               std::vector<int64_t> const& out_shape)>
      strided_sum;
  // c [nb, nm, nn] = a [nb, nm, nk] · b [nb, nk, nn] (contiguous).
  std::function<Result<Tensor>(Tensor const& a, Tensor const& b, int64_t nb, int64_t nm, int64_t nk, int64_t nn)>
      batched_gemm;
};

// One or two float32 operands (what both backends run).
Status einsum_check(graph::Op const& op, graph::OpGraph const& graph);
// The op's equation parsed for these operands, and every label's size.
Status einsum_setup(OpCall const& call, std::vector<Tensor> const& in, graph::ops::EinsumSpec& spec,
                    std::vector<int64_t>& size);

// How a device runs EinsumPrimitives::strided_sum on kernels/hd/index.h's per-element functions:
// the label space splits into the dims `out` keeps (a nonzero out stride: distinct positions) and
// those summed into them. Nothing summed: zero `out`, then hd::strided_copy_at over `copy`;
// else one hd::reduce_at per out element over `reduce` (`targets` of them, out's numel). False
// when a side needs more than kMaxRank dims after merging.
struct EinsumSumPlan {
  bool copy_only = false;
  kernels::hd::StridedParams copy;
  kernels::hd::ReduceParams reduce;
  int64_t targets = 0;
};
bool einsum_sum_plan(std::vector<int64_t> const& src_strides, std::vector<int64_t> const& out_strides,
                     std::vector<int64_t> const& space, EinsumSumPlan& plan);

// The output of the Einsum `spec` (label sizes `size`) over one or two operands.
Result<Tensor> einsum_forward(std::vector<Tensor> const& in, graph::ops::EinsumSpec const& spec,
                              std::vector<int64_t> const& size, EinsumPrimitives const& ops);
// The gradient of operand i given the output gradient dy.
Result<Tensor> einsum_gradient(std::vector<Tensor> const& in, std::size_t i, Tensor const& dy,
                               graph::ops::EinsumSpec const& spec, std::vector<int64_t> const& size,
                               EinsumPrimitives const& ops);

}  // namespace gp::exec
