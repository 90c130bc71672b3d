// LSTM, GRU and RNN step kernels: grid-stride loops over kernels/hd/rnn.h's per-element functions.
#include "kernels/cuda/block.cuh"
#include "kernels/cuda/rnn.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

// What each kernel runs per index: a tag type per hd function, so one kernel template serves all.
struct LstmForward {
  static GP_HD void at(hd::LstmStep const& s, int64_t n, int64_t j) { hd::lstm_forward_at(s, n, j); }
};
struct LstmBackward {
  static GP_HD void at(hd::LstmBackStep const& s, int64_t n, int64_t j) { hd::lstm_backward_at(s, n, j); }
};
struct GruGates {
  static GP_HD void at(hd::GruStep const& s, int64_t n, int64_t j) { hd::gru_gates_at(s, n, j); }
};
struct GruOutput {
  static GP_HD void at(hd::GruStep const& s, int64_t n, int64_t j) { hd::gru_output_at(s, n, j); }
};
struct GruBackward {
  static GP_HD void at(hd::GruBackStep const& s, int64_t n, int64_t j) { hd::gru_backward_at(s, n, j); }
};
struct GruResetGrad {
  static GP_HD void at(hd::GruBackStep const& s, int64_t n, int64_t j) { hd::gru_reset_grad_at(s, n, j); }
};

struct RnnForward {
  static GP_HD void at(hd::RnnStep const& s, int64_t n, int64_t j) { hd::rnn_forward_at(s, n, j); }
};
struct RnnBackward {
  static GP_HD void at(hd::RnnBackStep const& s, int64_t n, int64_t j) { hd::rnn_backward_at(s, n, j); }
};

template <typename Op, typename Step>
__global__ void step_kernel(Step const s, int64_t n) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) Op::at(s, e / s.h, e % s.h);
}

template <typename Op, typename Step>
cudaError_t launch_step(Step const& s, cudaStream_t stream) {
  int64_t const n = s.n * s.h;
  if (n == 0) return cudaSuccess;
  step_kernel<Op><<<grid_for(n), kBlock, 0, stream>>>(s, n);
  return cudaGetLastError();
}

__global__ void peephole_kernel(hd::LstmBackStep const s, float* dp) {
  for (int64_t j = global_thread(); j < s.h; j += grid_threads()) hd::lstm_peephole_grad_at(s, dp, j);
}

__global__ void col_sums_kernel(float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) hd::rnn_col_sum_at(src, rows, ld, dst, c);
}

}  // namespace

cudaError_t lstm_forward_step(hd::LstmStep const& s, cudaStream_t stream) {
  return launch_step<LstmForward>(s, stream);
}
cudaError_t lstm_backward_step(hd::LstmBackStep const& s, cudaStream_t stream) {
  return launch_step<LstmBackward>(s, stream);
}
cudaError_t lstm_peephole_grad_step(hd::LstmBackStep const& s, float* dp, cudaStream_t stream) {
  if (s.h == 0) return cudaSuccess;
  peephole_kernel<<<grid_for(s.h), kBlock, 0, stream>>>(s, dp);
  return cudaGetLastError();
}
cudaError_t gru_gates_step(hd::GruStep const& s, cudaStream_t stream) { return launch_step<GruGates>(s, stream); }
cudaError_t gru_output_step(hd::GruStep const& s, cudaStream_t stream) { return launch_step<GruOutput>(s, stream); }
cudaError_t gru_backward_step(hd::GruBackStep const& s, cudaStream_t stream) {
  return launch_step<GruBackward>(s, stream);
}
cudaError_t gru_reset_grad_step(hd::GruBackStep const& s, cudaStream_t stream) {
  return launch_step<GruResetGrad>(s, stream);
}
cudaError_t rnn_forward_step(hd::RnnStep const& s, cudaStream_t stream) { return launch_step<RnnForward>(s, stream); }
cudaError_t rnn_backward_step(hd::RnnBackStep const& s, cudaStream_t stream) {
  return launch_step<RnnBackward>(s, stream);
}
cudaError_t rnn_col_sums(float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  col_sums_kernel<<<grid_for(cols), kBlock, 0, stream>>>(src, rows, cols, ld, dst);
  return cudaGetLastError();
}

}  // namespace gp::kernels::cuda
