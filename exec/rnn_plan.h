// LSTM, GRU and RNN through time, device-agnostic: the sequencing of the per-step matrix products and
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

// What the CPU backend (exec/cpu/rnn.cc) and this plan share: the op's input slots, the saved
// tensors' slots (the same Saved layout on both backends), one call's sizes, and the check of what
// both run.
namespace rnn {

enum Slot : std::size_t { kX = 0, kW = 1, kR = 2, kB = 3, kLens = 4, kH0 = 5, kC0 = 6, kP = 7 };
enum SavedSlot : std::size_t { sX = 0, sW, sR, sB, sP, sH0, sC0, sY, sActs, sState, sMask, sCount };

struct Shape {
  bool lstm = true, lbr = false, rnn = false;        // rnn: a plain RNN (one gate, no LSTM or GRU)
  int64_t T = 0, N = 0, I = 0, H = 0, D = 1, G = 4;  // G: gates
  float clip = 0.f;
  kernels::hd::RnnAct acts[2] = {kernels::hd::RnnAct::kTanh, kernels::hd::RnnAct::kTanh};  // RNN, per direction
  graph::RnnDirection dir = graph::RnnDirection::kForward;
  int64_t GH() const { return G * H; }
  int64_t NH() const { return N * H; }
  bool reversed(int64_t d) const { return dir == graph::RnnDirection::kReverse || d == 1; }
  int64_t time(int64_t d, int64_t step) const { return reversed(d) ? T - 1 - step : step; }
  int64_t prev(int64_t d, int64_t t) const { return reversed(d) ? (t + 1 < T ? t + 1 : -1) : t - 1; }
};

// A forward pass's tensors (internally in layout 0), kept in Saved in SavedSlot order.
struct Tensors {
  Tensor x, w, r, b, p, h0, c0;
  Tensor y, acts, state, mask;  // y [T,D,N,H]; acts [D,T,N,GH]; state: LSTM c / GRU hh [D,T,N,H], RNN none
  std::vector<Tensor> to_saved() const;
};
// f from a forward's Saved; an error naming the op when it holds no forward pass.
Status from_saved(OpCall const& call, Saved const& saved, Tensors& f);

// The sizes of a call whose x is [T, N, I] (layout 0).
Shape shape_of_call(OpCall const& call, std::vector<int64_t> const& x_internal);
// float32 data (sequence_lens int32 or int64), at most the ONNX inputs: what both backends run.
Status check(graph::Op const& op, graph::OpGraph const& graph);

}  // namespace rnn

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
  std::function<Status(kernels::hd::RnnStep const&)> rnn_forward;
  std::function<Status(kernels::hd::RnnBackStep const&)> rnn_backward;
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
