// LSTM and GRU through time, device-agnostic: the sequencing of the per-step matrix products and
// gate kernels here, the primitives in RnnPrimitives (the CUDA backend gives cuBLASLt and
// kernels/cuda/rnn.cu; the host twin test gives plain loops over kernels/hd/rnn.h). Same inputs,
// outputs, saved tensors and gradients as the CPU backend's exec/cpu/rnn.cc, which shares the
// per-element math (kernels/hd/rnn.h) but sequences the steps in its own code, the reference the
// twin test compares with. Internally every tensor is in layout 0 ([seq, batch, ...]); layout 1 is
// permuted at the edges.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "exec/op_kernels.h"
#include "exec/tensor.h"
#include "kernels/hd/rnn.h"

namespace gp::exec {

// A rows × cols operand as the product sees it: stored row-major at p with `ld` elements between
// stored rows, and read transposed when t (then the stored matrix is cols × rows).
struct RnnMat {
  float const* p = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  bool t = false;
};

struct RnnPrimitives {
  // c [a.rows, b.cols] (rows `ldc` apart) = a · b, or += when accumulate.
  std::function<Status(RnnMat const& a, RnnMat const& b, float* c, int64_t ldc, bool accumulate)> gemm;
  // A new zero tensor on the device.
  std::function<Result<Tensor>(std::vector<int64_t> const& shape)> zeros;
  // A new contiguous tensor: out dim i is x's dim perm[i].
  std::function<Result<Tensor>(Tensor const& x, std::vector<int64_t> const& perm)> permute;
  // dst[0, n) = src[0, n) (device memory, not overlapping).
  std::function<Status(float const* src, float* dst, int64_t n)> copy;
  // The sequence_lens input's values on the host.
  std::function<Result<std::vector<int64_t>>(Tensor const& lens)> host_ints;
  // One call per element e in [0, n·h) of the step (kernels/hd/rnn.h).
  std::function<Status(kernels::hd::LstmStep const&)> lstm_forward;
  std::function<Status(kernels::hd::LstmBackStep const&)> lstm_backward;
  // hd::lstm_peephole_grad_at for j in [0, h).
  std::function<Status(kernels::hd::LstmBackStep const&, float* dp)> lstm_peephole_grad;
  std::function<Status(kernels::hd::GruStep const&)> gru_gates, gru_output;
  std::function<Status(kernels::hd::GruBackStep const&)> gru_backward, gru_reset_grad;
  // hd::rnn_col_sum_at for col in [0, cols).
  std::function<Status(float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst)> col_sums;
};

// Forward: Y, Y_h (and Y_c for LSTM) as the op has outputs; `saved` (when given) holds what the
// backward pass reads.
Status rnn_plan_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved,
                        RnnPrimitives const& prims);
// Every gradient `want` asks for (slots of the op's inputs), fresh, in the op's layout.
Status rnn_plan_grads(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& want, std::vector<Tensor>& result, RnnPrimitives const& prims);

}  // namespace gp::exec
