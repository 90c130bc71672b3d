// Launchers of the CUDA backend's data-movement and pooling kernels (exec/cuda/move.cc, pool.cc). Each
// enqueues on `stream` and returns cudaGetLastError() (the launch's own error), never
// synchronising; a call with nothing to do launches nothing. The per-element math is in
// kernels/hd/index.h and pool.h, shared with tests/cuda/test_hd_move.cc; the parameter structs are
// built by kernels/hd/move.h. Templates are instantiated for float (index types: int64_t
// and int32_t).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/low_types.h"

#include <cstddef>
#include <cstdint>

#include "kernels/hd/index.h"
#include "kernels/hd/pool.h"

namespace gp::kernels::cuda {

// One pass of a separable op (Pad, Resize; exec/separable_maps.h) along an axis, x [outer, in,
// inner] -> y [outer, out, inner] (idx/w: the axis map on the device, out * taps each), and its
// adjoint gy -> gx [outer, in, inner], deterministic (no atomics).
cudaError_t separable_axis(float const* x, int64_t outer, int64_t in, int64_t out, int64_t inner, int64_t taps,
                           int64_t const* idx, float const* w, float fill, float* y, cudaStream_t stream);
cudaError_t separable_axis_adjoint(float const* gy, int64_t outer, int64_t in, int64_t out, int64_t inner, int64_t taps,
                                   int64_t const* idx, float const* w, float* gx, cudaStream_t stream);

// A one-tap, unit-weight pass (Pad, Tile) of elements of any dtype (T int64_t, int32_t or uint8_t:
// ids and masks), x [outer, in, inner] -> y [outer, out, inner] by hd::axis_copy_source, `fill`
// where the map (idx, `out` entries on the device) is -1. Never differentiated.
template <typename T>
cudaError_t copy_axis(T const* x, int64_t outer, int64_t in, int64_t out, int64_t inner, int64_t const* idx, T fill,
                      T* y, cudaStream_t stream);

// GridSample (kernels/hd/index.h): y one thread per output element; dx one thread per (n, c)
// plane (its scatter in order: deterministic), dgrid one per grid point; dx or dgrid may be null.
cudaError_t grid_sample_forward(float const* x, float const* grid, hd::GridSampleParams const& p, float* y,
                                cudaStream_t stream);
cudaError_t grid_sample_backward(float const* x, float const* grid, float const* dy, hd::GridSampleParams const& p,
                                 float* dx, float* dgrid, cudaStream_t stream);
// Col2Im (kernels/hd/index.h): y one thread per output element (a gather over the kernel's
// offsets in order: deterministic); its backward (Im2Col) one thread per element of dx.
cudaError_t col2im(float const* x, hd::Col2ImParams const& p, float* y, cudaStream_t stream);
cudaError_t im2col(float const* dy, hd::Col2ImParams const& p, float* dx, bool accumulate, cudaStream_t stream);
// OneHot: y [outer, depth, inner] (n elements) is `on` where hd::one_hot_at, else `off`.
// T: float, int64_t, int32_t; I: int64_t, int32_t, float.
template <typename T, typename I>
cudaError_t one_hot(I const* indices, int64_t n, int64_t depth, int64_t inner, T off, T on, T* y, cudaStream_t stream);

// Trilu over `mats` matrices of [rows, cols]: y = x where hd::trilu_keeps(i, j, k, upper), else 0.
template <typename T>
cudaError_t trilu(T const* x, int64_t mats, int64_t rows, int64_t cols, int64_t k, bool upper, T* y,
                  cudaStream_t stream);

// dst[element i] = src[element i] (+= when accumulating) for the p.shape elements; see
// hd::strided_copy_at. Destination positions must be distinct.
template <typename T>
cudaError_t strided_copy(T const* src, T* dst, hd::StridedParams const& p, bool accumulate, cudaStream_t stream);

// dst = (dst +) the sum of src down to the target of p (hd::reduce_at): one thread per target
// element, a fixed summation order, so the result is deterministic.
template <typename T>
cudaError_t reduce_to(T const* src, T* dst, hd::ReduceParams const& p, int64_t target_numel, bool accumulate,
                      cudaStream_t stream);
// An integer ReduceSum, ReduceProd, ReduceMax or ReduceMin (hd::int_reduce_at), one thread per
// target element; T: int64_t, int32_t, int8_t or uint8_t (bool bytes for Max and Min).
template <typename T>
cudaError_t int_reduce(hd::Reduction r, T const* src, T* dst, hd::ReduceParams const& p, int64_t target_numel,
                       cudaStream_t stream);

// Gather (hd::gather_at): data [outer, axis_dim, inner] → out [outer, num_indices, inner].
// *first_bad (device memory) is set to the smallest position j whose index is out of range, or
// to UINT64_MAX when all are in range; the caller reads it back (the one synchronising step).
template <typename T, typename I>
cudaError_t gather(T const* data, int64_t outer, int64_t axis_dim, int64_t inner, I const* indices, int64_t num_indices,
                   T* out, unsigned long long* first_bad, cudaStream_t stream);

// Scratch bytes gather_backward needs (the device's radix-sort temporary storage included).
cudaError_t gather_backward_workspace(int64_t num_indices, int64_t axis_dim, std::size_t* bytes);
// grad_data[o, idx[j], :] += grad_out[o, j, :], deterministically: the indices are sorted stably
// (CUB radix sort) and each distinct index sums its gradients in ascending j (hd::
// gather_backward_at). grad_data is added into: zero it first for a fresh gradient. Out-of-range
// indices are skipped (forward already rejected them). num_indices and axis_dim below 2^31.
template <typename T, typename I>
cudaError_t gather_backward(T const* grad_out, int64_t outer, int64_t axis_dim, int64_t inner, I const* indices,
                            int64_t num_indices, T* grad_data, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream);

// Pooling (hd::pool_forward_at / pool_backward_at). Max pooling writes the arg-max of each output
// (an index into the input plane) that its backward reads; average pooling takes none.
template <typename T>
cudaError_t pool_forward(T const* x, T* y, int32_t* argmax, hd::PoolParams const& p, cudaStream_t stream);
template <typename T>
cudaError_t pool_backward(T const* dy, int32_t const* argmax, T* dx, hd::PoolParams const& p, bool accumulate,
                          cudaStream_t stream);
// MaxPool's Indices output from the arg-max pool_forward wrote (hd::pool_flat_index).
cudaError_t pool_indices(int32_t const* argmax, hd::PoolParams const& p, bool column_major, int64_t* indices,
                         cudaStream_t stream);

// ---- Position-addressed index ops (kernels/cuda/scatter.cu): GatherElements, GatherND,
// ScatterElements. Each is computed from the flat positions in data its indices address; a
// scatter or a gradient combines the values landing on one position in ascending j (the indices
// sorted stably by position, CUB radix sort), as the CPU does: deterministic, no atomics. ----

// pos[j] (j < n) = hd::element_position of indices element j. first_bad (device memory, may be
// null: no check): as gather's.
template <typename I>
cudaError_t element_positions(hd::ElementIndex const& p, I const* indices, int64_t n, int64_t* pos,
                              unsigned long long* first_bad, cudaStream_t stream);
// pos[t * slice + e] = the offset of tuple t (hd::nd_offset) + e, for every output element; a bad
// tuple sets *first_bad to the smallest such t (the position of its first index is t * k).
template <typename I>
cudaError_t nd_positions(hd::NdIndex const& p, I const* indices, int64_t tuples, int64_t* pos,
                         unsigned long long* first_bad, cudaStream_t stream);
// y[j] = x[pos[j]] for j < n, elements of `width` bytes (1, 2, 4 or 8).
cudaError_t gather_positions(void const* x, int64_t const* pos, int64_t n, int width, void* y, cudaStream_t stream);

// The positions sorted (stably, keys below `limit`), with order[k] the j of the k-th: scratch
// bytes, then the sort. n below 2^31.
cudaError_t sort_positions_workspace(int64_t n, int64_t limit, std::size_t* bytes);
cudaError_t sort_positions(int64_t const* pos, int64_t n, int64_t limit, int64_t* sorted, int32_t* order,
                           void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

enum class Combine : int { kAdd, kLast, kMul, kMax, kMin };
// For each distinct position q: y[q] = (init ? init[q] : 0) combined with v[order[k]] in ascending
// k (kAdd: sum, kMul: product, kLast: the last value, kMax and kMin: hd::extremum_of). Positions not
// addressed keep y's value.
cudaError_t combine_at_positions(Combine op, int64_t const* sorted, int32_t const* order, int64_t n, float const* v,
                                 float const* init, float* y, cudaStream_t stream);
// ScatterElements (reduction none) backward, g the output gradient: gdata (holding a copy of g)
// gets 0 at every written position; gupd[j] = g[pos[j]] for the last writer of each position, 0
// for the others.
cudaError_t scatter_assign_backward(int64_t const* sorted, int32_t const* order, int64_t n, float const* g,
                                    float* gdata, float* gupd, cudaStream_t stream);
// ScatterElements (reduction mul) backward: at each position q, gdata[q] = g[q] · Π u (gdata holds
// a copy of g), gupd[j] = g[q] · data[q] · Π of the other updates at q (prefix and suffix products:
// exact with zeros).
cudaError_t scatter_mul_backward(int64_t const* sorted, int32_t const* order, int64_t n, float const* data,
                                 float const* updates, float const* g, float* gdata, float* gupd, cudaStream_t stream);
// ScatterElements (reduction max or min) backward: at each position q the gradient g[q] is shared
// evenly by data[q] and the updates equal to the extremum (hd::extremum_ties); the others get 0
// (gdata holds a copy of g).
cudaError_t scatter_extremum_backward(int64_t const* sorted, int32_t const* order, int64_t n, float const* data,
                                      float const* updates, float const* g, bool max, float* gdata, float* gupd,
                                      cudaStream_t stream);

}  // namespace gp::kernels::cuda
