// Launchers for the CUDA backend's device operations (exec/backend.h): fill, add-into, losses
// and optimizer updates (block copies are cudaMemcpy2DAsync). Each enqueues on `stream` and returns cudaGetLastError()
// (the launch's own error), never synchronising. The per-element math is in kernels/hd/*.h,
// shared with the host tests. fill and add_inplace are instantiated for float, bfloat16 and half
// (kernels/cuda/low_types.h); the rest for float.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/low_types.h"
#include "kernels/hd/optim.h"
#include "kernels/optim.h"

namespace gp::kernels::cuda {

template <typename T>
cudaError_t fill(T* dst, float value, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t add_inplace(T* dst, T const* src, int64_t n, cudaStream_t stream);  // dst += src

// Loss scaling (exec/loss_scale.h): x *= factor; and *flag (an int the caller zeroed) set to 1 where
// any of x[0, n) is inf or NaN. float32 only: the scaled gradients are the float32 master weights'.
cudaError_t scale_inplace(float* x, float factor, int64_t n, cudaStream_t stream);
// x *= *factor (device memory), read when the kernel runs (a captured step's loss scale).
cudaError_t scale_inplace(float* x, float const* factor, int64_t n, cudaStream_t stream);
cudaError_t flag_nonfinite(float const* x, int64_t n, int* flag, cudaStream_t stream);
// hd::note_bad_index on one thread: verdict[1] = the bad index verdict[0] names (kernels/hd/index.h).
cudaError_t note_bad_index(unsigned long long* verdict, void const* idx, bool idx64, int64_t scale,
                           cudaStream_t stream);

// Losses: per-row values into row_loss[rows] (sum_to_double sums them on the device), gradients
// scaled by `scale`. Labels out of [0, classes) set *bad_row (device int64, initialised to -1
// by the caller) to the smallest such row and give that row loss 0.
template <typename T>
cudaError_t softmax_cross_entropy(T const* logits, int64_t const* labels, int64_t rows, int64_t classes, float scale,
                                  float* row_loss, T* grad, int64_t* bad_row, cudaStream_t stream);
template <typename T>
cudaError_t mse(T const* pred, T const* target, int64_t n, float scale, float* elem_loss, T* grad, cudaStream_t stream);
// *out = (x[0] + ... + x[n-1]) / divisor, summed in double by one block in a fixed order (the same
// value every run): a micro-batch's loss left on the device for a read once a step.
cudaError_t sum_to_double(float const* x, int64_t n, double divisor, double* out, cudaStream_t stream);

// Optimizer updates with kernels/optim.h's semantics (PyTorch 1.13).
template <typename T>
cudaError_t sgd_update(T* w, T const* g, T* buf, int64_t n, float lr, float momentum, float weight_decay,
                       cudaStream_t stream);
template <typename T>
cudaError_t adam_update(T* w, T const* g, T* m, T* v, int64_t n, AdamParams const& p, cudaStream_t stream);
// Every parameter of `entries` (device memory) in one launch, one block per chunk of `chunks`
// (device memory; hd::multi_tensor_chunks): the per-parameter updates above, bit for bit.
cudaError_t multi_sgd_update(hd::MultiTensorEntry const* entries, hd::MultiTensorChunk const* chunks,
                             int64_t num_chunks, float lr, float momentum, float weight_decay, cudaStream_t stream);
cudaError_t multi_adam_update(hd::MultiTensorEntry const* entries, hd::MultiTensorChunk const* chunks,
                              int64_t num_chunks, AdamParams const& p, cudaStream_t stream);

}  // namespace gp::kernels::cuda
