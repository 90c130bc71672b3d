// Launchers of the CUDA math kernels behind exec/cuda/activation.cc, binary.cc, reduce.cc,
// view.cc and norm.cc (LayerNormalization, BatchNormalization's inference-mode backward and its
// kernels where cuDNN refuses a shape):
// elementwise activations, broadcasting arithmetic, Pow with a tensor exponent, sums down to a
// shape, Softmax, LayerNormalization, Dropout. Each enqueues on `stream` and returns
// cudaGetLastError() (the launch's own error), never synchronising; n == 0 launches nothing. The
// per-element and per-row math is in kernels/hd/ (activation.h, binary.h, norm.h, view.h), shared with the host twins
// in tests/cuda/test_hd_*.cc. Every result is deterministic: no atomics, fixed reduction trees. Templates are
// instantiated for float.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/low_types.h"

#include <cstdint>

#include "kernels/hd/norm.h"
#include "kernels/hd/binary.h"
#include "kernels/hd/activation.h"
#include "kernels/hd/logic.h"
#include "kernels/hd/reduce.h"
#include "kernels/hd/view.h"

namespace gp::kernels::cuda {

// The reductions of kernels/hd/reduce.h over x seen as [rows, cols], one thread per row (reduce.cu):
// y[rows] and, for Max/Min, the extremum's column (arg may be null otherwise); the backward writes
// dx [rows, cols] from dy[rows], reading x, y and arg where the reduction needs them (else null).
cudaError_t reduce_rows(hd::Reduction r, float const* x, int64_t rows, int64_t cols, float* y, int64_t* arg,
                        cudaStream_t stream);
cudaError_t reduce_rows_backward(hd::Reduction r, float const* x, float const* y, int64_t const* arg, float const* dy,
                                 int64_t rows, int64_t cols, float* dx, cudaStream_t stream);

// Along one axis of x seen as [outer, dim, inner], one thread per line (reduce.cu, the functions of
// kernels/hd/reduce.h): LogSoftmax and its backward (from y); the index of each line's maximum or
// minimum into idx[outer·inner] (may be null) and, with one_hot (Hardmax's float output, may be
// null), 1 there and 0 elsewhere on the line; running sums (floats, or wrapping int64/int32).
cudaError_t log_softmax(float const* x, int64_t outer, int64_t dim, int64_t inner, float* y, cudaStream_t stream);
cudaError_t log_softmax_backward(float const* y, float const* dy, int64_t outer, int64_t dim, int64_t inner, float* dx,
                                 cudaStream_t stream);
template <typename T>
cudaError_t arg_extremum(T const* x, int64_t outer, int64_t dim, int64_t inner, bool max, bool last, int64_t* idx,
                         float* one_hot, cudaStream_t stream);
template <typename T>
cudaError_t cumsum(T const* x, int64_t outer, int64_t dim, int64_t inner, bool exclusive, bool reverse, T* y,
                   cudaStream_t stream);
// TopK (kernels/hd/reduce.h's topk_line, one thread per line): each line's k best values into y and
// their positions into idx, both [outer, k, inner]; its backward writes dy [outer, k, inner] into
// dx [outer, dim, inner] at those positions (dx zeroed by the caller; a line's positions are
// distinct, so no element is written twice). T: float, int64_t, int32_t.
template <typename T>
cudaError_t topk(T const* x, int64_t outer, int64_t dim, int64_t inner, int64_t k, bool largest, T* y, int64_t* idx,
                 cudaStream_t stream);
cudaError_t topk_backward(float const* dy, int64_t const* idx, int64_t outer, int64_t dim, int64_t inner, int64_t k,
                          float* dx, cudaStream_t stream);

// Variadic Max/Min (activation.cu): input k's step into the running extremum acc (which: the input
// each element came from), and the gradient reaching input k. PRelu with the slope already
// broadcast to x: y, and dx and the full-shape slope gradient (either may be null).
cudaError_t select_step(float const* x, int64_t n, bool take_max, int32_t k, float* acc, int32_t* which,
                        cudaStream_t stream);
cudaError_t selected_grad(float const* gy, int32_t const* which, int32_t k, int64_t n, float* out, cudaStream_t stream);
cudaError_t prelu_forward(float const* x, float const* slope, int64_t n, float* y, cudaStream_t stream);
cudaError_t prelu_backward(float const* x, float const* slope, float const* gy, int64_t n, float* gx, float* gslope,
                           cudaStream_t stream);

// y = f(x); dx = f'(kept)·dy with kept = y where hd::unary_backward_uses_output(kind), else x.
template <typename T>
cudaError_t unary_forward(hd::UnaryKind kind, float alpha, T const* x, T* y, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t unary_backward(hd::UnaryKind kind, float alpha, T const* kept, T const* dy, T* dx, int64_t n,
                           cudaStream_t stream);

// Clip with bounds computed at run time (hd::clip_at, the CPU's loop): bounds, two floats of device
// memory, get *lo and *hi (a null bound: its default) as the kernels run, so no host reads them;
// backward writes dx and the full-shape gradients of lo and hi (each nullable) for sum_to.
cudaError_t clip_bounds(float const* lo, float const* hi, float lo_default, float hi_default, float* bounds,
                        cudaStream_t stream);
cudaError_t clip_forward(float const* x, int64_t n, float const* bounds, float* y, cudaStream_t stream);
cudaError_t clip_backward(float const* x, float const* dy, int64_t n, float const* bounds, float* dx, float* to_lo,
                          float* to_hi, cudaStream_t stream);
// Neg, Abs or Sign of int64_t, int32_t, int8_t or uint8_t (hd::int_unary_at, the CPU's function).
template <typename T>
cudaError_t int_unary(hd::IntUnaryKind kind, T const* x, int64_t n, T* y, cudaStream_t stream);
// Clip of int64_t, int32_t, int8_t or uint8_t (hd::int_clip_at, the CPU's function): lo and hi point
// at device scalars, or are null for no bound; read by the kernel, not the host.
template <typename T>
cudaError_t int_clip(T const* x, int64_t n, T const* lo, T const* hi, T* y, cudaStream_t stream);

// y = f(x) and dx = f'(x)·dy for the other activations (hd::Pointwise: the CPU's own formulas).
template <typename T>
cudaError_t pointwise_forward(hd::Pointwise f, hd::PointwiseParams p, T const* x, T* y, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t pointwise_backward(hd::Pointwise f, hd::PointwiseParams p, T const* x, T const* dy, T* dx, int64_t n,
                               cudaStream_t stream);

// The logic family (kernels/cuda/logic.cu): y[i] = a ∘ b as one byte (comparisons, And/Or/Xor),
// Not, Where (cx maps an output element to the condition and x, yy to y), and the full-shape
// gradient of Where's x (to_x) or y (cd maps an output element to the condition and dy).
template <typename T>
cudaError_t logic_binary(hd::LogicKind kind, hd::BinaryIndex const& index, T const* a, T const* b, uint8_t* y,
                         cudaStream_t stream);
cudaError_t logical_not(uint8_t const* x, uint8_t* y, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t where(hd::BinaryIndex const& cx, hd::BinaryIndex const& yy, uint8_t const* c, T const* x, T const* y,
                  T* out, cudaStream_t stream);
template <typename T>
cudaError_t where_grad(hd::BinaryIndex const& cd, uint8_t const* c, T const* dy, bool to_x, T* full,
                       cudaStream_t stream);

// ConstantOfShape (y[i] = v) and Range (y[i] = start + i·delta, computed in double).
template <typename T>
cudaError_t fill_value(T* y, int64_t n, T v, cudaStream_t stream);
template <typename T>
cudaError_t iota(T* y, int64_t n, double start, double delta, cudaStream_t stream);

// y[i] = a[offset_a(i)] ∘ b[offset_b(i)] over the index's output (hd::make_binary_index).
template <typename T>
cudaError_t binary(hd::BinaryKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                   cudaStream_t stream);
// Integer Add/Sub/Mul/Div (T int64_t or int32_t; hd::int_binary_op, the CPU's function) over the
// index's output. Div needs `first_zero`, two words of device memory (exec/cuda/deferred_checks.h's
// Verdict) set to all ones first: the first gets the smallest output position whose divisor is 0
// (that output is 0); the other kinds take null (cudaErrorInvalidValue otherwise).
template <typename T>
cudaError_t int_binary(hd::BinaryKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                       unsigned long long* first_zero, cudaStream_t stream);
// Mod of float32 (hd::mod_value) over the index's output, and the full-shape gradient to b
// (hd::mod_b_grad, dy in the output's layout) for sum_to to sum down.
cudaError_t mod_forward(hd::BinaryIndex const& index, float const* a, float const* b, bool fmod, float* y,
                        cudaStream_t stream);
cudaError_t mod_b_grad(hd::BinaryIndex const& index, float const* a, float const* b, float const* dy, bool fmod,
                       float* full, cudaStream_t stream);
// Mod of int64_t, int32_t, int8_t or uint8_t (hd::int_mod_value, the CPU's function). first_zero: two words of device
// memory, set to all ones first; the first gets the smallest output position whose divisor is 0.
template <typename T>
cudaError_t int_mod(hd::BinaryIndex const& index, T const* a, T const* b, bool fmod, T* y,
                    unsigned long long* first_zero, cudaStream_t stream);
// The bitwise family of int64_t, int32_t, int8_t or uint8_t (hd::bitwise_value, the CPU's function)
// over the index's output; BitwiseNot reads a only (b may be a, its index a's).
template <typename T>
cudaError_t bitwise(hd::BitwiseKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                    cudaStream_t stream);
// y[i] = scale · x[offset_a(i)]: x broadcast to the index's output (b strides unused).
template <typename T>
cudaError_t broadcast_scaled(hd::BinaryIndex const& index, T const* x, float scale, T* y, cudaStream_t stream);
// Pow with a tensor exponent: y[i] = a[offset_a(i)]^b[offset_b(i)]; backward writes the
// full-shape gradient of one operand, full[i] = hd::pow_grad(wrt, ...), for sum_to to sum down.
template <typename T>
cudaError_t pow_forward(hd::BinaryIndex const& index, T const* a, T const* b, T* y, cudaStream_t stream);
template <typename T>
cudaError_t pow_backward(hd::PowOperand wrt, hd::BinaryIndex const& index, T const* a, T const* b, T const* y,
                         T const* dy, T* full, cudaStream_t stream);
// y[o] = scale · Σ_r x[kept(o) + summed(r)] (hd::make_sum_index): ReduceSum/ReduceMean, and the
// gradient of a broadcast input. One thread per output for short sums, one block otherwise.
template <typename T>
cudaError_t sum_to(hd::SumIndex const& index, T const* x, float scale, T* y, cudaStream_t stream);

// Softmax over the middle axis of x seen as [outer, axis, inner].
template <typename T>
cudaError_t softmax_forward(T const* x, int64_t outer, int64_t axis, int64_t inner, T* y, cudaStream_t stream);
template <typename T>
cudaError_t softmax_backward(T const* y, T const* dy, int64_t outer, int64_t axis, int64_t inner, T* dx,
                             cudaStream_t stream);

// LayerNormalization of [rows, cols] rows: y, and per row the mean and 1/√(var + eps) (float).
// bias may be null.
template <typename T>
cudaError_t layernorm_forward(T const* x, T const* scale, T const* bias, int64_t rows, int64_t cols, float eps, T* y,
                              float* mean, float* rstd, cudaStream_t stream);
template <typename T>
cudaError_t layernorm_backward_input(T const* x, T const* scale, float const* mean, float const* rstd, T const* dy,
                                     int64_t rows, int64_t cols, T* dx, cudaStream_t stream);
// Floats of scratch layernorm_backward_params needs (partial column sums over row chunks).
int64_t layernorm_params_scratch(int64_t rows, int64_t cols);
// dscale[c] = Σ_r dy·x̂, dbias[c] = Σ_r dy (dbias may be null): fresh values, two passes.
template <typename T>
cudaError_t layernorm_backward_params(T const* x, float const* mean, float const* rstd, T const* dy, int64_t rows,
                                      int64_t cols, float* scratch, T* dscale, T* dbias, cudaStream_t stream);

// BatchNormalization's inference-mode backward over x seen as [batch, channels, spatial], with the
// running mean and inv_std = 1/√(var + eps) per channel: dx = dy·scale·inv_std; dscale[c] =
// Σ dy·(x − mean)·inv_std and dbias[c] = Σ dy over batch and spatial (fresh values, one block per
// channel).
template <typename T>
cudaError_t batchnorm_infer_backward_input(T const* dy, T const* scale, float const* inv_std, int64_t batch,
                                           int64_t channels, int64_t spatial, T* dx, cudaStream_t stream);
template <typename T>
cudaError_t batchnorm_infer_backward_params(T const* x, T const* dy, float const* mean, float const* inv_std,
                                            int64_t batch, int64_t channels, int64_t spatial, T* dscale, T* dbias,
                                            cudaStream_t stream);

// BatchNormalization, x seen as [batch, channels, spatial]. Training runs on our kernels
// (exec/cuda/norm.cc): T is float, or a 16-bit float whose scale, bias and statistics are float32.
// Forward: y with the batch's mean and biased variance, the saved mean and inv_std = 1/√(var +
// eps), and the running statistics' update next = running·momentum + batch·(1 − momentum) with
// ONNX's momentum and the unbiased variance (exec/cpu/norm.cc's rule). Backward: dx, dscale and
// dbias from the saved mean and inv_std. Each channel is split over blocks (hd::bn_split); their
// partial sums go to `scratch`, batchnorm_scratch_floats() floats. Inference forward: y with the
// given mean and inv_std, one thread per element. `relu`: y = max(0, ·) (a fused Relu,
// BatchNormAttrs::relu), after adding `z` (a fused residual of x's shape; null: none); backward's
// `y` (that output; null without a Relu) masks dy by y > 0, and `dz` (null: not wanted) gets the
// masked dy.
int64_t batchnorm_scratch_floats(int64_t batch, int64_t channels, int64_t spatial);
template <typename T>
cudaError_t batchnorm_train_forward(T const* x, float const* scale, float const* bias, float const* running_mean,
                                    float const* running_var, int64_t batch, int64_t channels, int64_t spatial,
                                    float eps, float momentum, bool relu, T const* z, T* y, float* mean, float* inv_std,
                                    float* next_mean, float* next_var, float* scratch, cudaStream_t stream);
template <typename T>
cudaError_t batchnorm_infer_forward(T const* x, T const* scale, T const* bias, float const* mean, float const* inv_std,
                                    int64_t batch, int64_t channels, int64_t spatial, bool relu, T* y,
                                    cudaStream_t stream);
template <typename T>
cudaError_t batchnorm_train_backward(T const* x, T const* dy, T const* y, float const* scale, float const* mean,
                                     float const* inv_std, int64_t batch, int64_t channels, int64_t spatial, T* dx,
                                     T* dz, float* dscale, float* dbias, float* scratch, cudaStream_t stream);
// y = max(0, y + z) in place (a fused residual and Relu after cuDNN's BatchNorm, or in inference
// mode); z null: y = max(0, y) (a fused Relu alone).
template <typename T>
cudaError_t add_relu_in_place(T* y, T const* z, int64_t n, cudaStream_t stream);
// LRN across channels (kernels/hd/norm.h): y and the denominator d; dx from x, d and dy.
cudaError_t lrn_forward(float const* x, hd::LrnParams const& p, int64_t n, float* y, float* d, cudaStream_t stream);
cudaError_t lrn_backward(float const* x, float const* d, float const* dy, hd::LrnParams const& p, int64_t n, float* dx,
                         cudaStream_t stream);

// Cast: y = hd::cast_value(x) (to_bool: x != 0, for ONNX's bool; float to integer truncates and
// saturates, NaN gives 0).
template <typename From, typename To>
cudaError_t cast(From const* x, To* y, int64_t n, bool to_bool, cudaStream_t stream);
// RandomUniformLike (a = low, b = high) or RandomNormalLike (normal: a = mean, b = scale), and
// Bernoulli: the CPU's draws (kernels/hd/view.h) for the seed hd::seed_of(seed) (read when the
// kernel runs where it comes from a slot).
cudaError_t random_fill(bool normal, hd::SeedSource seed, float a, float b, float* y, int64_t n, cudaStream_t stream);
template <typename To>
cudaError_t bernoulli(hd::SeedSource seed, float const* p, To* y, int64_t n, cudaStream_t stream);

// Training dropout with hd::dropout_keep's mask (the CPU's): y = x·keep/(1 − ratio), mask = keep,
// for the seed hd::seed_of(seed).
template <typename T>
cudaError_t dropout_forward(T const* x, int64_t n, float ratio, hd::SeedSource seed, T* y, uint8_t* mask,
                            cudaStream_t stream);
template <typename T>
cudaError_t dropout_backward(T const* dy, uint8_t const* mask, int64_t n, float ratio, T* dx, cudaStream_t stream);

}  // namespace gp::kernels::cuda
