// Strided copies (Transpose, Slice, Expand, Concat, Split and their backward passes) and Expand's
// backward reduction. The index math is kernels/hd/index.h, in int32_t wherever every offset fits
// (hd::strided_fits_int32: a 64-bit division costs several times a 32-bit one, and these copies
// were bound by it), and a copy whose innermost axis is contiguous on both sides moves 4, 8 or 16
// bytes a thread (hd::strided_vector_bytes).
//
// Gather with an index check, and its backward as a deterministic scatter-add: the indices are
// sorted stably by CUB's radix sort and each distinct index sums its gradients in ascending order
// (no atomics, so the result is bit-identical run to run). Index math: kernels/hd/index.h.
#include "kernels/cuda/move.h"

#include <cstdint>

#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/block.cuh"
#include "kernels/cuda/sort.cuh"
#include "kernels/hd/move.h"

namespace gp::kernels::cuda {
namespace {

using detail::aligned;
using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;
using detail::sort_pairs;

template <typename T, typename I>
__global__ void strided_copy_kernel(T const* src, T* dst, hd::StridedParams const p, I n, bool accumulate) {
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) hd::strided_copy_at(src, dst, p, i, accumulate);
}

// A copy in chunks of V (uint32_t, uint2 or uint4: hd::strided_vector_bytes).
template <typename V, typename I>
__global__ void strided_chunk_kernel(V const* src, V* dst, hd::StridedParams const p, I n) {
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) hd::strided_assign_at(src, dst, p, i);
}

template <typename T, typename I>
__global__ void reduce_kernel(T const* src, T* dst, hd::ReduceParams const p, I n, bool accumulate) {
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) hd::reduce_at(src, dst, p, i, accumulate);
}

template <typename T, typename I>
__global__ void int_reduce_kernel(hd::Reduction r, T const* src, T* dst, hd::ReduceParams const p, I n) {
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) hd::int_reduce_at(r, src, dst, p, i);
}

template <typename V>
cudaError_t copy_as(void const* src, void* dst, hd::StridedCopyPlan const& plan, bool accumulate, cudaStream_t stream) {
  int64_t const n = hd::strided_numel(plan.p);
  auto const* s = static_cast<V const*>(src);
  auto* d = static_cast<V*>(dst);
  if (plan.int32)
    strided_copy_kernel<V, int32_t>
        <<<grid_for(n), kBlock, 0, stream>>>(s, d, plan.p, static_cast<int32_t>(n), accumulate);
  else
    strided_copy_kernel<V, int64_t><<<grid_for(n), kBlock, 0, stream>>>(s, d, plan.p, n, accumulate);
  return cudaGetLastError();
}

template <typename V>
cudaError_t copy_chunks(void const* src, void* dst, hd::StridedCopyPlan const& plan, cudaStream_t stream) {
  int64_t const n = hd::strided_numel(plan.p);
  auto const* s = static_cast<V const*>(src);
  auto* d = static_cast<V*>(dst);
  if (plan.int32)
    strided_chunk_kernel<V, int32_t><<<grid_for(n), kBlock, 0, stream>>>(s, d, plan.p, static_cast<int32_t>(n));
  else
    strided_chunk_kernel<V, int64_t><<<grid_for(n), kBlock, 0, stream>>>(s, d, plan.p, n);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t strided_copy(T const* src, T* dst, hd::StridedParams const& p, bool accumulate, cudaStream_t stream) {
  if (hd::strided_numel(p) == 0) return cudaSuccess;
  hd::StridedCopyPlan const plan =
      hd::plan_strided_copy(p, static_cast<int>(sizeof(T)), reinterpret_cast<std::uintptr_t>(src),
                            reinterpret_cast<std::uintptr_t>(dst), accumulate);
  switch (plan.chunk_bytes) {
    case 16:
      return copy_chunks<uint4>(src, dst, plan, stream);
    case 8:
      return copy_chunks<uint2>(src, dst, plan, stream);
    case 4:
      return copy_chunks<uint32_t>(src, dst, plan, stream);
    default:
      return copy_as<T>(src, dst, plan, accumulate, stream);
  }
}

template <typename T>
cudaError_t reduce_to(T const* src, T* dst, hd::ReduceParams const& p, int64_t target_numel, bool accumulate,
                      cudaStream_t stream) {
  if (target_numel == 0) return cudaSuccess;
  if (hd::reduce_fits_int32(p))
    reduce_kernel<T, int32_t>
        <<<grid_for(target_numel), kBlock, 0, stream>>>(src, dst, p, static_cast<int32_t>(target_numel), accumulate);
  else
    reduce_kernel<T, int64_t><<<grid_for(target_numel), kBlock, 0, stream>>>(src, dst, p, target_numel, accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t int_reduce(hd::Reduction r, T const* src, T* dst, hd::ReduceParams const& p, int64_t target_numel,
                       cudaStream_t stream) {
  if (target_numel == 0) return cudaSuccess;
  if (hd::reduce_fits_int32(p))
    int_reduce_kernel<T, int32_t>
        <<<grid_for(target_numel), kBlock, 0, stream>>>(r, src, dst, p, static_cast<int32_t>(target_numel));
  else
    int_reduce_kernel<T, int64_t><<<grid_for(target_numel), kBlock, 0, stream>>>(r, src, dst, p, target_numel);
  return cudaGetLastError();
}

template cudaError_t strided_copy<float>(float const*, float*, hd::StridedParams const&, bool, cudaStream_t);
// Masks and indices (Expand of a bool mask or int64 ids), copied by element size.
template cudaError_t strided_copy<int64_t>(int64_t const*, int64_t*, hd::StridedParams const&, bool, cudaStream_t);
template cudaError_t strided_copy<int32_t>(int32_t const*, int32_t*, hd::StridedParams const&, bool, cudaStream_t);
template cudaError_t strided_copy<uint8_t>(uint8_t const*, uint8_t*, hd::StridedParams const&, bool, cudaStream_t);
// bfloat16 and half activations (Transpose under mixed precision).
#define GP_LOW(T) template cudaError_t strided_copy<T>(T const*, T*, hd::StridedParams const&, bool, cudaStream_t);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW
template cudaError_t reduce_to<float>(float const*, float*, hd::ReduceParams const&, int64_t, bool, cudaStream_t);
#define GP_INT_REDUCE(T) \
  template cudaError_t int_reduce<T>(hd::Reduction, T const*, T*, hd::ReduceParams const&, int64_t, cudaStream_t);
GP_INT_REDUCE(int64_t)
GP_INT_REDUCE(int32_t)
GP_INT_REDUCE(int8_t)
GP_INT_REDUCE(uint8_t)
#undef GP_INT_REDUCE

}  // namespace gp::kernels::cuda

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename I>
__global__ void check_indices_kernel(I const* indices, int64_t num_indices, int64_t axis_dim,
                                     unsigned long long* first_bad) {
  for (int64_t j = global_thread(); j < num_indices; j += grid_threads()) {
    int64_t k = 0;
    if (!hd::resolve_index(static_cast<int64_t>(indices[j]), axis_dim, k))
      atomicMin(first_bad, static_cast<unsigned long long>(j));
  }
}

template <typename T, typename I, typename E>
__global__ void gather_kernel(T const* data, int64_t axis_dim, int64_t inner, I const* indices, int64_t num_indices,
                              T* out, E n) {
  E const stride = static_cast<E>(grid_threads());
  for (E e = static_cast<E>(global_thread()); e < n; e += stride)
    hd::gather_at(data, axis_dim, inner, indices, num_indices, out, e);
}

template <typename I>
__global__ void keys_kernel(I const* indices, int64_t num_indices, int64_t axis_dim, int32_t* keys,
                            int32_t* positions) {
  for (int64_t j = global_thread(); j < num_indices; j += grid_threads()) {
    keys[j] = hd::gather_key(indices, j, axis_dim);
    positions[j] = static_cast<int32_t>(j);
  }
}

template <typename T, typename E>
__global__ void segment_sum_kernel(T const* grad_out, int64_t axis_dim, int64_t inner, int32_t const* keys,
                                   int32_t const* positions, int64_t num_indices, T* grad_data, E n) {
  E const stride = static_cast<E>(grid_threads());
  for (E e = static_cast<E>(global_thread()); e < n; e += stride)
    hd::gather_backward_at(grad_out, axis_dim, inner, keys, positions, num_indices, grad_data, e);
}

}  // namespace

template <typename T, typename I>
cudaError_t gather(T const* data, int64_t outer, int64_t axis_dim, int64_t inner, I const* indices, int64_t num_indices,
                   T* out, unsigned long long* first_bad, cudaStream_t stream) {
  if (cudaError_t e = cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream); e != cudaSuccess) return e;
  if (num_indices == 0) return cudaSuccess;
  check_indices_kernel<I><<<grid_for(num_indices), kBlock, 0, stream>>>(indices, num_indices, axis_dim, first_bad);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  int64_t const n = outer * num_indices * inner;
  if (n == 0) return cudaSuccess;
  if (hd::gather_fits_int32(outer, axis_dim, inner, num_indices))
    gather_kernel<T, I, int32_t>
        <<<grid_for(n), kBlock, 0, stream>>>(data, axis_dim, inner, indices, num_indices, out, static_cast<int32_t>(n));
  else
    gather_kernel<T, I, int64_t>
        <<<grid_for(n), kBlock, 0, stream>>>(data, axis_dim, inner, indices, num_indices, out, n);
  return cudaGetLastError();
}

cudaError_t gather_backward_workspace(int64_t num_indices, int64_t axis_dim, std::size_t* bytes) {
  std::size_t temp = 0;
  if (num_indices > 0) {
    cudaError_t const e =
        sort_pairs<int32_t>(nullptr, temp, nullptr, nullptr, nullptr, nullptr, num_indices, axis_dim, nullptr);
    if (e != cudaSuccess) return e;
  }
  *bytes = 4 * aligned(static_cast<std::size_t>(num_indices) * sizeof(int32_t)) + temp;
  return cudaSuccess;
}

template <typename T, typename I>
cudaError_t gather_backward(T const* grad_out, int64_t outer, int64_t axis_dim, int64_t inner, I const* indices,
                            int64_t num_indices, T* grad_data, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream) {
  int64_t const n = outer * num_indices * inner;
  if (n == 0) return cudaSuccess;
  std::size_t const array = aligned(static_cast<std::size_t>(num_indices) * sizeof(int32_t));
  if (workspace_bytes < 4 * array) return cudaErrorInvalidValue;
  auto* base = static_cast<unsigned char*>(workspace);
  auto* keys_in = reinterpret_cast<int32_t*>(base);
  auto* keys_out = reinterpret_cast<int32_t*>(base + array);
  auto* pos_in = reinterpret_cast<int32_t*>(base + 2 * array);
  auto* pos_out = reinterpret_cast<int32_t*>(base + 3 * array);
  std::size_t temp_bytes = workspace_bytes - 4 * array;
  keys_kernel<I><<<grid_for(num_indices), kBlock, 0, stream>>>(indices, num_indices, axis_dim, keys_in, pos_in);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (cudaError_t e =
          sort_pairs(base + 4 * array, temp_bytes, keys_in, keys_out, pos_in, pos_out, num_indices, axis_dim, stream);
      e != cudaSuccess)
    return e;
  if (hd::gather_fits_int32(outer, axis_dim, inner, num_indices))
    segment_sum_kernel<T, int32_t><<<grid_for(n), kBlock, 0, stream>>>(grad_out, axis_dim, inner, keys_out, pos_out,
                                                                       num_indices, grad_data, static_cast<int32_t>(n));
  else
    segment_sum_kernel<T, int64_t>
        <<<grid_for(n), kBlock, 0, stream>>>(grad_out, axis_dim, inner, keys_out, pos_out, num_indices, grad_data, n);
  return cudaGetLastError();
}

#define GP_GATHER_INSTANTIATE(T, I)                                                                                  \
  template cudaError_t gather<T, I>(T const*, int64_t, int64_t, int64_t, I const*, int64_t, T*, unsigned long long*, \
                                    cudaStream_t);                                                                   \
  template cudaError_t gather_backward<T, I>(T const*, int64_t, int64_t, int64_t, I const*, int64_t, T*, void*,      \
                                             std::size_t, cudaStream_t);
GP_GATHER_INSTANTIATE(float, int64_t)
GP_GATHER_INSTANTIATE(float, int32_t)
#undef GP_GATHER_INSTANTIATE
// Masks and indices, by element size (forward only: never differentiated).
#define GP_GATHER_BYTES_INSTANTIATE(T, I)                                                                            \
  template cudaError_t gather<T, I>(T const*, int64_t, int64_t, int64_t, I const*, int64_t, T*, unsigned long long*, \
                                    cudaStream_t);
GP_GATHER_BYTES_INSTANTIATE(int64_t, int64_t)
GP_GATHER_BYTES_INSTANTIATE(int64_t, int32_t)
GP_GATHER_BYTES_INSTANTIATE(int32_t, int64_t)
GP_GATHER_BYTES_INSTANTIATE(int32_t, int32_t)
GP_GATHER_BYTES_INSTANTIATE(uint8_t, int64_t)
GP_GATHER_BYTES_INSTANTIATE(uint8_t, int32_t)
#undef GP_GATHER_BYTES_INSTANTIATE

namespace {
template <typename T, typename I>
__global__ void one_hot_kernel(I const* __restrict__ indices, int64_t n, int64_t depth, int64_t inner, T off, T on,
                               T* __restrict__ y) {
  for (int64_t e = global_thread(); e < n; e += grid_threads())
    y[e] = hd::one_hot_at(indices, e, depth, inner) ? on : off;
}
}  // namespace

template <typename T, typename I>
cudaError_t one_hot(I const* indices, int64_t n, int64_t depth, int64_t inner, T off, T on, T* y, cudaStream_t stream) {
  if (n > 0) one_hot_kernel<T, I><<<grid_for(n), kBlock, 0, stream>>>(indices, n, depth, inner, off, on, y);
  return cudaGetLastError();
}
#define GP_ONE_HOT_INSTANTIATE(T, I) \
  template cudaError_t one_hot<T, I>(I const*, int64_t, int64_t, int64_t, T, T, T*, cudaStream_t);
GP_ONE_HOT_INSTANTIATE(float, int64_t)
GP_ONE_HOT_INSTANTIATE(float, int32_t)
GP_ONE_HOT_INSTANTIATE(int64_t, int64_t)
GP_ONE_HOT_INSTANTIATE(int64_t, int32_t)
GP_ONE_HOT_INSTANTIATE(int32_t, int64_t)
GP_ONE_HOT_INSTANTIATE(int32_t, int32_t)
GP_ONE_HOT_INSTANTIATE(float, float)
GP_ONE_HOT_INSTANTIATE(int64_t, float)
GP_ONE_HOT_INSTANTIATE(int32_t, float)
#undef GP_ONE_HOT_INSTANTIATE

namespace {
template <typename T>
__global__ void trilu_kernel(T const* __restrict__ x, int64_t n, int64_t rows, int64_t cols, int64_t k, bool upper,
                             T* __restrict__ y) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    int64_t const j = e % cols, i = (e / cols) % rows;
    y[e] = hd::trilu_keeps(i, j, k, upper) ? x[e] : T(0);
  }
}
}  // namespace

template <typename T>
cudaError_t trilu(T const* x, int64_t mats, int64_t rows, int64_t cols, int64_t k, bool upper, T* y,
                  cudaStream_t stream) {
  int64_t const n = mats * rows * cols;
  if (n > 0) trilu_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(x, n, rows, cols, k, upper, y);
  return cudaGetLastError();
}
template cudaError_t trilu<float>(float const*, int64_t, int64_t, int64_t, int64_t, bool, float*, cudaStream_t);
template cudaError_t trilu<int64_t>(int64_t const*, int64_t, int64_t, int64_t, int64_t, bool, int64_t*, cudaStream_t);
template cudaError_t trilu<int32_t>(int32_t const*, int64_t, int64_t, int64_t, int64_t, bool, int32_t*, cudaStream_t);
template cudaError_t trilu<uint8_t>(uint8_t const*, int64_t, int64_t, int64_t, int64_t, bool, uint8_t*, cudaStream_t);

namespace {
// One pass of a separable op (Pad, Resize) along an axis: x [outer, in, inner] -> y [outer, out, inner],
// output position o reading input positions idx[o * taps + t] with weights w[o * taps + t] (an
// index of -1 writes `fill`), summed in the CPU's order (exec/cpu/index.cc's apply_axis).
__global__ void separable_axis_kernel(float const* __restrict__ x, int64_t outer, int64_t in, int64_t out,
                                      int64_t inner, int64_t taps, int64_t const* __restrict__ idx,
                                      float const* __restrict__ w, float fill, float* __restrict__ y) {
  int64_t const n = outer * out * inner;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    int64_t const i = e % inner, o = (e / inner) % out, b = e / (inner * out);
    int64_t const* ix = idx + o * taps;
    float const* wo = w + o * taps;
    if (ix[0] < 0) {
      y[e] = fill;
      continue;
    }
    float acc = wo[0] * x[(b * in + ix[0]) * inner + i];
    for (int64_t t = 1; t < taps; ++t) acc += wo[t] * x[(b * in + ix[t]) * inner + i];
    y[e] = acc;
  }
}

// Its adjoint: gx [outer, in, inner] = the sum over every (o, t) that reads input j, in ascending
// (o, t) as the CPU adds them; one thread per input element, so no atomics.
__global__ void separable_axis_adjoint_kernel(float const* __restrict__ gy, int64_t outer, int64_t in, int64_t out,
                                              int64_t inner, int64_t taps, int64_t const* __restrict__ idx,
                                              float const* __restrict__ w, float* __restrict__ gx) {
  int64_t const n = outer * in * inner;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    int64_t const i = e % inner, j = (e / inner) % in, b = e / (inner * in);
    float acc = 0.f;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t t = 0; t < taps; ++t)
        if (idx[o * taps + t] == j) acc += w[o * taps + t] * gy[(b * out + o) * inner + i];
    gx[e] = acc;
  }
}
template <typename T, typename I>
__global__ void copy_axis_kernel(T const* __restrict__ x, I outer, I in, I out, I inner,
                                 int64_t const* __restrict__ idx, T fill, T* __restrict__ y) {
  I const n = outer * out * inner;
  I const stride = static_cast<I>(grid_threads());
  for (I e = static_cast<I>(global_thread()); e < n; e += stride) {
    I const s = hd::axis_copy_source(e, in, out, inner, idx);
    y[e] = s < 0 ? fill : x[s];
  }
}
}  // namespace

template <typename T>
cudaError_t copy_axis(T const* x, int64_t outer, int64_t in, int64_t out, int64_t inner, int64_t const* idx, T fill,
                      T* y, cudaStream_t stream) {
  int64_t const n = outer * out * inner;
  if (n <= 0) return cudaGetLastError();
  if (detail::fits_int32(n) && detail::fits_int32(outer * in * inner)) {
    copy_axis_kernel<T, int32_t>
        <<<grid_for(n), kBlock, 0, stream>>>(x, static_cast<int32_t>(outer), static_cast<int32_t>(in),
                                             static_cast<int32_t>(out), static_cast<int32_t>(inner), idx, fill, y);
  } else {
    copy_axis_kernel<T, int64_t><<<grid_for(n), kBlock, 0, stream>>>(x, outer, in, out, inner, idx, fill, y);
  }
  return cudaGetLastError();
}
template cudaError_t copy_axis<int64_t>(int64_t const*, int64_t, int64_t, int64_t, int64_t, int64_t const*, int64_t,
                                        int64_t*, cudaStream_t);
template cudaError_t copy_axis<int32_t>(int32_t const*, int64_t, int64_t, int64_t, int64_t, int64_t const*, int32_t,
                                        int32_t*, cudaStream_t);
template cudaError_t copy_axis<uint8_t>(uint8_t const*, int64_t, int64_t, int64_t, int64_t, int64_t const*, uint8_t,
                                        uint8_t*, cudaStream_t);

cudaError_t separable_axis(float const* x, int64_t outer, int64_t in, int64_t out, int64_t inner, int64_t taps,
                           int64_t const* idx, float const* w, float fill, float* y, cudaStream_t stream) {
  int64_t const n = outer * out * inner;
  if (n > 0) separable_axis_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, outer, in, out, inner, taps, idx, w, fill, y);
  return cudaGetLastError();
}

cudaError_t separable_axis_adjoint(float const* gy, int64_t outer, int64_t in, int64_t out, int64_t inner, int64_t taps,
                                   int64_t const* idx, float const* w, float* gx, cudaStream_t stream) {
  int64_t const n = outer * in * inner;
  if (n > 0)
    separable_axis_adjoint_kernel<<<grid_for(n), kBlock, 0, stream>>>(gy, outer, in, out, inner, taps, idx, w, gx);
  return cudaGetLastError();
}

namespace {
__global__ void grid_sample_forward_kernel(float const* __restrict__ x, float const* __restrict__ grid,
                                           hd::GridSampleParams const p, float* __restrict__ y, int64_t n) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) hd::grid_sample_forward_at(x, grid, p, y, e);
}
__global__ void grid_sample_input_grad_kernel(float const* __restrict__ grid, float const* __restrict__ dy,
                                              hd::GridSampleParams const p, float* __restrict__ dx, int64_t planes) {
  for (int64_t nc = global_thread(); nc < planes; nc += grid_threads())
    hd::grid_sample_input_grad_plane(grid, dy, p, dx, nc);
}
__global__ void grid_sample_grid_grad_kernel(float const* __restrict__ x, float const* __restrict__ grid,
                                             float const* __restrict__ dy, hd::GridSampleParams const p,
                                             float* __restrict__ dgrid, int64_t points) {
  for (int64_t e = global_thread(); e < points; e += grid_threads())
    hd::grid_sample_grid_grad_at(x, grid, dy, p, dgrid, e);
}
}  // namespace

namespace {
__global__ void col2im_kernel(float const* __restrict__ x, hd::Col2ImParams const p, float* __restrict__ y, int64_t n) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) hd::col2im_at(x, p, y, e);
}
__global__ void im2col_kernel(float const* __restrict__ dy, hd::Col2ImParams const p, float* __restrict__ dx, int64_t n,
                              bool accumulate) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) hd::im2col_at(dy, p, dx, e, accumulate);
}
}  // namespace

cudaError_t col2im(float const* x, hd::Col2ImParams const& p, float* y, cudaStream_t stream) {
  int64_t const n = p.n * p.c * hd::col2im_plane(p);
  if (n > 0) col2im_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, p, y, n);
  return cudaGetLastError();
}

cudaError_t im2col(float const* dy, hd::Col2ImParams const& p, float* dx, bool accumulate, cudaStream_t stream) {
  int64_t const n = p.n * p.c * hd::col2im_taps(p) * hd::col2im_blocks(p);
  if (n > 0) im2col_kernel<<<grid_for(n), kBlock, 0, stream>>>(dy, p, dx, n, accumulate);
  return cudaGetLastError();
}

cudaError_t grid_sample_forward(float const* x, float const* grid, hd::GridSampleParams const& p, float* y,
                                cudaStream_t stream) {
  int64_t const n = p.n * p.c * p.dout * p.ho * p.wo;
  if (n > 0) grid_sample_forward_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, grid, p, y, n);
  return cudaGetLastError();
}

cudaError_t grid_sample_backward(float const* x, float const* grid, float const* dy, hd::GridSampleParams const& p,
                                 float* dx, float* dgrid, cudaStream_t stream) {
  int64_t const planes = p.n * p.c, points = p.n * p.dout * p.ho * p.wo;
  if (dx && planes > 0) grid_sample_input_grad_kernel<<<grid_for(planes), kBlock, 0, stream>>>(grid, dy, p, dx, planes);
  if (dgrid && points > 0)
    grid_sample_grid_grad_kernel<<<grid_for(points), kBlock, 0, stream>>>(x, grid, dy, p, dgrid, points);
  return cudaGetLastError();
}

}  // namespace gp::kernels::cuda
