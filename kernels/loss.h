// Loss functions over plain float buffers: forward returns the SUM of per-row losses so callers
// can average over a whole batch split into micro-batches (grad gets the same `scale`).
#pragma once

#include <cstdint>

namespace gp::kernels {

// Softmax cross-entropy with integer labels over `rows` rows of `classes` logits (row-major).
// Returns sum over rows of -log softmax(logits)[label]. Labels must lie in [0, classes): the
// caller validates them (returns the first bad row in *bad_row, else -1).
double softmax_cross_entropy_forward(float const* logits, int64_t const* labels, int64_t rows, int64_t classes,
                                     int64_t* bad_row);
// grad = scale * (softmax(logits) - onehot(label)).
void softmax_cross_entropy_backward(float const* logits, int64_t const* labels, int64_t rows, int64_t classes,
                                    float scale, float* grad);

// Mean squared error parts: returns sum (pred - target)^2; grad = scale * 2 (pred - target).
double mse_forward(float const* pred, float const* target, int64_t n);
void mse_backward(float const* pred, float const* target, int64_t n, float scale, float* grad);

}  // namespace gp::kernels
