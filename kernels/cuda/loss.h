// Launchers of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as graph ops (exec/cuda/loss.cc;
// per-position math in kernels/hd/loss.h). Each enqueues on `stream` and returns the launch's error.
// Sums run in one block in a fixed order (double accumulators): deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/hd/loss.h"

namespace gp::kernels::cuda {

// cls[i], w[i] of every target position (hd::loss_pick); *first_bad (device) = the smallest bad
// position, or all ones.
template <typename I>
cudaError_t loss_pick(hd::LossParams const& p, I const* target, float const* weight, int64_t* cls, float* w,
                      unsigned long long* first_bad, cudaStream_t stream);
// y = log_softmax of x over the class axis ([N, C, D]).
cudaError_t loss_log_softmax(hd::LossParams const& p, float const* x, float* y, cudaStream_t stream);
// values[i] = hd::loss_value at every position.
cudaError_t loss_values(hd::LossParams const& p, float const* src, int64_t const* cls, float const* w, float* values,
                        cudaStream_t stream);
// sums[0] = Σ values, sums[1] = Σ w (double); out (may be null) = Σ values, or / Σ w when `mean`.
cudaError_t loss_sums(float const* values, float const* w, int64_t m, bool mean, double* sums, float* out,
                      cudaStream_t stream);
// dx (zeroed by the caller): the scores' gradient. reduction 0 none (g per position), 1 sum, 2
// mean (g[0] / sums[1]); logp: the SCE's log-probabilities (null: NLL); logp_grad may be null.
cudaError_t loss_backward(hd::LossParams const& p, int reduction, float const* g, double const* sums,
                          int64_t const* cls, float const* w, float const* logp, float const* logp_grad, float* dx,
                          cudaStream_t stream);

}  // namespace gp::kernels::cuda
