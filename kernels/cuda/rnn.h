// Launchers of the LSTM, GRU and RNN step kernels (exec/cuda/rnn.cc, sequenced by exec/rnn_plan.cc):
// one thread per element of the [N, H] state running kernels/hd/rnn.h's per-element math, the
// same functions the host twin (tests/cuda/test_hd_rnn.cc) runs. Each enqueues on `stream` and
// returns the launch's error; a step with nothing to do launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/hd/rnn.h"

namespace gp::kernels::cuda {

cudaError_t lstm_forward_step(hd::LstmStep const& s, cudaStream_t stream);
cudaError_t lstm_backward_step(hd::LstmBackStep const& s, cudaStream_t stream);
// dp (3H) += the step's peephole gradients: one thread per j, n summed in order.
cudaError_t lstm_peephole_grad_step(hd::LstmBackStep const& s, float* dp, cudaStream_t stream);
cudaError_t gru_gates_step(hd::GruStep const& s, cudaStream_t stream);
cudaError_t gru_output_step(hd::GruStep const& s, cudaStream_t stream);
cudaError_t gru_backward_step(hd::GruBackStep const& s, cudaStream_t stream);
cudaError_t gru_reset_grad_step(hd::GruBackStep const& s, cudaStream_t stream);
cudaError_t rnn_forward_step(hd::RnnStep const& s, cudaStream_t stream);
cudaError_t rnn_backward_step(hd::RnnBackStep const& s, cudaStream_t stream);
// dst[col] += Σ_i src[i·ld + col] (rows summed in order, one thread per column).
cudaError_t rnn_col_sums(float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst, cudaStream_t stream);

}  // namespace gp::kernels::cuda
