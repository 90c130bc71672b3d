// Elementwise activations and math that oneDNN's eltwise does not offer with ONNX's exact formula,
// as plain loops: forward y = f(x) and backward grad_x = grad_y · f'(x) from the saved input. Also
// the loops of PRelu, Clip with run-time bounds, and the selection of variadic Min/Max.
//
// Elementwise erf, which oneDNN's eltwise does not offer, forward and backward.
#pragma once

#include <cstdint>

#include "kernels/hd/activation.h"

namespace gp::kernels {

// The per-element formulas live in kernels/hd/activation.h, which the CUDA kernels share.
using hd::Pointwise;
using hd::PointwiseParams;

void pointwise_forward(Pointwise f, PointwiseParams const& p, float const* x, int64_t n, float* y);
void pointwise_backward(Pointwise f, PointwiseParams const& p, float const* x, float const* grad_y, int64_t n,
                        float* grad_x);

// PRelu with the slope already broadcast to x: y = x < 0 ? slope · x : x.
void prelu_forward(float const* x, float const* slope, int64_t n, float* y);
// grad_x = grad_y · (x < 0 ? slope : 1); grad_slope_full = grad_y · (x < 0 ? x : 0), per element of
// x (the caller sums it over the broadcast axes). Either output may be null.
void prelu_backward(float const* x, float const* slope, float const* grad_y, int64_t n, float* grad_x,
                    float* grad_slope_full);

// y = min(max(x, lo), hi). Every grad_y element goes to exactly one of x (lo < x ≤ hi), lo (x ≤ lo)
// and hi (x > hi), as oneDNN's clip does; grad_lo and grad_hi (nullable) receive sums.
void clip_forward(float const* x, int64_t n, float lo, float hi, float* y);
void clip_backward(float const* x, float const* grad_y, int64_t n, float lo, float hi, float* grad_x, double* grad_lo,
                   double* grad_hi);

// One step of a running Min/Max over inputs: where x beats acc (strictly, so ties keep the earlier
// input; a NaN always wins, as numpy's maximum propagates it), acc takes x and which takes k.
void select_step(float const* x, int64_t n, bool take_max, int32_t k, float* acc, int32_t* which);
// out = grad_y where which == k, else 0.
void selected_grad(float const* grad_y, int32_t const* which, int32_t k, int64_t n, float* out);

}  // namespace gp::kernels

namespace gp::kernels {

void erf_forward(float const* x, int64_t n, float* y);
// grad_x = grad_y · 2/√π · exp(−x²)
void erf_backward(float const* x, float const* grad_y, int64_t n, float* grad_x);

}  // namespace gp::kernels
