// The logic family's kernels (launchers in kernels/cuda/math.h; per-element math in
// kernels/hd/logic.h, broadcasting through hd::BinaryIndex): comparisons and boolean operators
// into one byte per element, Not, Where and the full-shape gradient of Where's x or y; the fills of
// ConstantOfShape and Range over the batch. Grid-stride
// loops; int32 indices where every offset fits, int64 beyond.
#include "kernels/cuda/block.cuh"
#include "kernels/cuda/math.h"
#include "kernels/hd/logic.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T, typename I>
__global__ void logic_kernel(hd::LogicKind kind, hd::BinaryIndex const p, T const* __restrict__ a,
                             T const* __restrict__ b, uint8_t* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = hd::logic_op(kind, a[oa], b[ob]);
  }
}

__global__ void not_kernel(uint8_t const* __restrict__ x, uint8_t* __restrict__ y, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = hd::logical_not(x[i]);
}

// cx maps output element i to (condition, x), yy to (y, y).
template <typename T, typename I>
__global__ void where_kernel(hd::BinaryIndex const cx, hd::BinaryIndex const yy, uint8_t const* __restrict__ c,
                             T const* __restrict__ x, T const* __restrict__ y, T* __restrict__ out) {
  I const n = static_cast<I>(cx.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oc = 0, ox = 0, oy = 0, unused = 0;
    hd::binary_offsets(cx, i, oc, ox);
    hd::binary_offsets(yy, i, oy, unused);
    out[i] = hd::where_value(c[oc], x[ox], y[oy]);
  }
}

// cd maps output element i to (condition, dy).
template <typename T, typename I>
__global__ void where_grad_kernel(hd::BinaryIndex const cd, uint8_t const* __restrict__ c, T const* __restrict__ dy,
                                  bool to_x, T* __restrict__ full) {
  I const n = static_cast<I>(cd.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oc = 0, od = 0;
    hd::binary_offsets(cd, i, oc, od);
    full[i] = hd::where_grad(c[oc], dy[od], to_x);
  }
}

template <typename T>
__global__ void fill_kernel(T* __restrict__ y, int64_t n, T v) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = v;
}

template <typename T>
__global__ void iota_kernel(T* __restrict__ y, int64_t n, double start, double delta) {
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    y[i] = static_cast<T>(start + static_cast<double>(i) * delta);
}

}  // namespace

template <typename T>
cudaError_t fill_value(T* y, int64_t n, T v, cudaStream_t stream) {
  if (n > 0) fill_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(y, n, v);
  return cudaGetLastError();
}

template <typename T>
cudaError_t iota(T* y, int64_t n, double start, double delta, cudaStream_t stream) {
  if (n > 0) iota_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(y, n, start, delta);
  return cudaGetLastError();
}

template cudaError_t fill_value<float>(float*, int64_t, float, cudaStream_t);
template cudaError_t fill_value<int64_t>(int64_t*, int64_t, int64_t, cudaStream_t);
template cudaError_t fill_value<int32_t>(int32_t*, int64_t, int32_t, cudaStream_t);
template cudaError_t fill_value<uint8_t>(uint8_t*, int64_t, uint8_t, cudaStream_t);
template cudaError_t iota<int64_t>(int64_t*, int64_t, double, double, cudaStream_t);
template cudaError_t iota<int32_t>(int32_t*, int64_t, double, double, cudaStream_t);

template <typename T>
cudaError_t logic_binary(hd::LogicKind kind, hd::BinaryIndex const& index, T const* a, T const* b, uint8_t* y,
                         cudaStream_t stream) {
  if (index.numel <= 0) return cudaSuccess;
  if (detail::fits_int32(index.numel))
    logic_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(kind, index, a, b, y);
  else
    logic_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(kind, index, a, b, y);
  return cudaGetLastError();
}

cudaError_t logical_not(uint8_t const* x, uint8_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  not_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t where(hd::BinaryIndex const& cx, hd::BinaryIndex const& yy, uint8_t const* c, T const* x, T const* y,
                  T* out, cudaStream_t stream) {
  if (cx.numel <= 0) return cudaSuccess;
  if (detail::fits_int32(cx.numel))
    where_kernel<T, int32_t><<<grid_for(cx.numel), kBlock, 0, stream>>>(cx, yy, c, x, y, out);
  else
    where_kernel<T, int64_t><<<grid_for(cx.numel), kBlock, 0, stream>>>(cx, yy, c, x, y, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t where_grad(hd::BinaryIndex const& cd, uint8_t const* c, T const* dy, bool to_x, T* full,
                       cudaStream_t stream) {
  if (cd.numel <= 0) return cudaSuccess;
  if (detail::fits_int32(cd.numel))
    where_grad_kernel<T, int32_t><<<grid_for(cd.numel), kBlock, 0, stream>>>(cd, c, dy, to_x, full);
  else
    where_grad_kernel<T, int64_t><<<grid_for(cd.numel), kBlock, 0, stream>>>(cd, c, dy, to_x, full);
  return cudaGetLastError();
}

#define GP_LOGIC_INSTANTIATE(T)                                                                                     \
  template cudaError_t logic_binary<T>(hd::LogicKind, hd::BinaryIndex const&, T const*, T const*, uint8_t*,         \
                                       cudaStream_t);                                                               \
  template cudaError_t where<T>(hd::BinaryIndex const&, hd::BinaryIndex const&, uint8_t const*, T const*, T const*, \
                                T*, cudaStream_t);
GP_LOGIC_INSTANTIATE(float)
GP_LOGIC_INSTANTIATE(int64_t)
GP_LOGIC_INSTANTIATE(int32_t)
GP_LOGIC_INSTANTIATE(int8_t)
GP_LOGIC_INSTANTIATE(uint8_t)
#undef GP_LOGIC_INSTANTIATE
template cudaError_t where_grad<float>(hd::BinaryIndex const&, uint8_t const*, float const*, bool, float*,
                                       cudaStream_t);

}  // namespace gp::kernels::cuda
