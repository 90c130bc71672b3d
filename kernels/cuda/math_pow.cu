// Pow with a tensor exponent (launchers in kernels/cuda/math.h): numpy broadcasting of base and
// exponent through hd::BinaryIndex, per-element math in kernels/hd/pow.h. The backward kernel
// writes one operand's full-shape gradient; sum_to sums it down to that operand's shape.
#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

template <typename T, typename I>
__global__ void pow_forward_kernel(hd::BinaryIndex const p, T const* __restrict__ a, T const* __restrict__ b,
                                   T* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = hd::pow_value(a[oa], b[ob]);
  }
}

template <typename T, typename I>
__global__ void pow_backward_kernel(hd::PowOperand wrt, hd::BinaryIndex const p, T const* __restrict__ a,
                                    T const* __restrict__ b, T const* __restrict__ y, T const* __restrict__ dy,
                                    T* __restrict__ full) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    full[i] = hd::pow_grad(wrt, a[oa], b[ob], y[i], dy[i]);
  }
}

}  // namespace

template <typename T>
cudaError_t pow_forward(hd::BinaryIndex const& index, T const* a, T const* b, T* y, cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    pow_forward_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, y);
  } else {
    pow_forward_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t pow_backward(hd::PowOperand wrt, hd::BinaryIndex const& index, T const* a, T const* b, T const* y,
                         T const* dy, T* full, cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    pow_backward_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(wrt, index, a, b, y, dy, full);
  } else {
    pow_backward_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(wrt, index, a, b, y, dy, full);
  }
  return cudaGetLastError();
}

template cudaError_t pow_forward<float>(hd::BinaryIndex const&, float const*, float const*, float*, cudaStream_t);
template cudaError_t pow_backward<float>(hd::PowOperand, hd::BinaryIndex const&, float const*, float const*,
                                         float const*, float const*, float*, cudaStream_t);

}  // namespace gp::kernels::cuda
