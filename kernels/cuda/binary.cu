// Broadcasting arithmetic and the sums down to a shape that its backward needs (launchers in
// kernels/cuda/math.h; index math in kernels/hd/binary.h). Grid-stride loops; int32 indices where
// every offset fits (cheaper division), int64 beyond.
//
// Pow with a tensor exponent (launchers in kernels/cuda/math.h): numpy broadcasting of base and
// exponent through hd::BinaryIndex, per-element math in kernels/hd/binary.h. The backward kernel
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
__global__ void binary_kernel(hd::BinaryKind kind, hd::BinaryIndex const p, T const* __restrict__ a,
                              T const* __restrict__ b, T* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = hd::binary_op(kind, a[oa], b[ob]);
  }
}

// Integer arithmetic, y = f(a, b) broadcast (F: IntBinary, IntBitwise or IntMod below, the CPU's per-element
// functions). With first_zero (Div, Mod), a zero divisor's position goes into *first_zero (the
// smallest, by atomicMin); f gives 0 there.
template <typename T, typename I, typename F>
__global__ void int_arith_kernel(hd::BinaryIndex const p, T const* __restrict__ a, T const* __restrict__ b, F f,
                                 T* __restrict__ y, unsigned long long* first_zero) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    T const z = b[ob];
    if (first_zero != nullptr && z == 0) atomicMin(first_zero, static_cast<unsigned long long>(i));
    y[i] = f(a[oa], z);
  }
}

struct IntBinary {
  hd::BinaryKind kind;
  template <typename T>
  __device__ T operator()(T x, T z) const {
    return hd::int_binary_op(kind, x, z);
  }
};
struct IntBitwise {
  hd::BitwiseKind kind;
  template <typename T>
  __device__ T operator()(T x, T z) const {
    return hd::bitwise_value(kind, x, z);
  }
};
struct IntMod {
  bool fmod;
  template <typename T>
  __device__ T operator()(T x, T z) const {
    return hd::int_mod_value(x, z, fmod);
  }
};

// The launch of int_arith_kernel; first_zero (two words, see math.h) is set to all ones first.
template <typename T, typename F>
cudaError_t launch_int_arith(hd::BinaryIndex const& index, T const* a, T const* b, F f, T* y,
                             unsigned long long* first_zero, cudaStream_t stream) {
  if (first_zero != nullptr)
    if (cudaError_t e = cudaMemsetAsync(first_zero, 0xff, 2 * sizeof(unsigned long long), stream); e != cudaSuccess)
      return e;
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    int_arith_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, f, y, first_zero);
  } else {
    int_arith_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, f, y, first_zero);
  }
  return cudaGetLastError();
}

template <typename T, typename I>
__global__ void broadcast_scaled_kernel(hd::BinaryIndex const p, T const* __restrict__ x, float scale,
                                        T* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = static_cast<T>(scale * static_cast<float>(x[oa]));
  }
}

// One thread per output element: short sums, or many outputs.
template <typename T, typename I>
__global__ void sum_thread_kernel(hd::SumIndex const p, T const* __restrict__ x, float scale, T* __restrict__ y) {
  I const n = static_cast<I>(p.out_count);
  I const stride = static_cast<I>(grid_threads());
  for (I o = static_cast<I>(global_thread()); o < n; o += stride)
    y[o] = static_cast<T>(scale * hd::sum_partial(x, p, hd::dim_offset(p.kept, o), I(0), I(1)));
}

// One block per output element: long sums over few outputs.
template <typename T, typename I>
__global__ void sum_block_kernel(hd::SumIndex const p, T const* __restrict__ x, float scale, T* __restrict__ y) {
  __shared__ float smem[32];
  I const n = static_cast<I>(p.out_count);
  for (I o = static_cast<I>(blockIdx.x); o < n; o += static_cast<I>(gridDim.x)) {
    float const part =
        hd::sum_partial(x, p, hd::dim_offset(p.kept, o), static_cast<I>(threadIdx.x), static_cast<I>(blockDim.x));
    float const total = detail::block_sum(part, smem);
    if (threadIdx.x == 0) y[o] = static_cast<T>(scale * total);
  }
}

template <typename I>
__global__ void mod_kernel(hd::BinaryIndex const p, float const* __restrict__ a, float const* __restrict__ b, bool fmod,
                           float* __restrict__ y) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    y[i] = hd::mod_value(a[oa], b[ob], fmod);
  }
}

template <typename I>
__global__ void mod_b_grad_kernel(hd::BinaryIndex const p, float const* __restrict__ a, float const* __restrict__ b,
                                  float const* __restrict__ dy, bool fmod, float* __restrict__ full) {
  I const n = static_cast<I>(p.numel);
  I const stride = static_cast<I>(grid_threads());
  for (I i = static_cast<I>(global_thread()); i < n; i += stride) {
    I oa = 0, ob = 0;
    hd::binary_offsets(p, i, oa, ob);
    full[i] = hd::mod_b_grad(a[oa], b[ob], dy[i], fmod);
  }
}

}  // namespace

cudaError_t mod_forward(hd::BinaryIndex const& index, float const* a, float const* b, bool fmod, float* y,
                        cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel))
    mod_kernel<int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, fmod, y);
  else
    mod_kernel<int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, fmod, y);
  return cudaGetLastError();
}

template <typename T>
cudaError_t int_mod(hd::BinaryIndex const& index, T const* a, T const* b, bool fmod, T* y,
                    unsigned long long* first_zero, cudaStream_t stream) {
  if (first_zero == nullptr) return cudaErrorInvalidValue;  // Mod always checks its divisors
  return launch_int_arith(index, a, b, IntMod{fmod}, y, first_zero, stream);
}
template cudaError_t int_mod<int64_t>(hd::BinaryIndex const&, int64_t const*, int64_t const*, bool, int64_t*,
                                      unsigned long long*, cudaStream_t);
template cudaError_t int_mod<int32_t>(hd::BinaryIndex const&, int32_t const*, int32_t const*, bool, int32_t*,
                                      unsigned long long*, cudaStream_t);
template cudaError_t int_mod<int8_t>(hd::BinaryIndex const&, int8_t const*, int8_t const*, bool, int8_t*,
                                     unsigned long long*, cudaStream_t);
template cudaError_t int_mod<uint8_t>(hd::BinaryIndex const&, uint8_t const*, uint8_t const*, bool, uint8_t*,
                                      unsigned long long*, cudaStream_t);

template <typename T>
cudaError_t bitwise(hd::BitwiseKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                    cudaStream_t stream) {
  return launch_int_arith(index, a, b, IntBitwise{kind}, y, nullptr, stream);
}
template cudaError_t bitwise<int64_t>(hd::BitwiseKind, hd::BinaryIndex const&, int64_t const*, int64_t const*, int64_t*,
                                      cudaStream_t);
template cudaError_t bitwise<int32_t>(hd::BitwiseKind, hd::BinaryIndex const&, int32_t const*, int32_t const*, int32_t*,
                                      cudaStream_t);
template cudaError_t bitwise<int8_t>(hd::BitwiseKind, hd::BinaryIndex const&, int8_t const*, int8_t const*, int8_t*,
                                     cudaStream_t);
template cudaError_t bitwise<uint8_t>(hd::BitwiseKind, hd::BinaryIndex const&, uint8_t const*, uint8_t const*, uint8_t*,
                                      cudaStream_t);

cudaError_t mod_b_grad(hd::BinaryIndex const& index, float const* a, float const* b, float const* dy, bool fmod,
                       float* full, cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel))
    mod_b_grad_kernel<int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, dy, fmod, full);
  else
    mod_b_grad_kernel<int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, a, b, dy, fmod, full);
  return cudaGetLastError();
}

template <typename T>
cudaError_t binary(hd::BinaryKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                   cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    binary_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(kind, index, a, b, y);
  } else {
    binary_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(kind, index, a, b, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t int_binary(hd::BinaryKind kind, hd::BinaryIndex const& index, T const* a, T const* b, T* y,
                       unsigned long long* first_zero, cudaStream_t stream) {
  // Div checks its divisors (first_zero given); Add, Sub, Mul, Max and Min have none to check.
  if ((kind == hd::BinaryKind::kDiv) != (first_zero != nullptr)) return cudaErrorInvalidValue;
  return launch_int_arith(index, a, b, IntBinary{kind}, y, first_zero, stream);
}

template <typename T>
cudaError_t broadcast_scaled(hd::BinaryIndex const& index, T const* x, float scale, T* y, cudaStream_t stream) {
  if (index.numel <= 0) return cudaGetLastError();
  if (detail::fits_int32(index.numel)) {
    broadcast_scaled_kernel<T, int32_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, x, scale, y);
  } else {
    broadcast_scaled_kernel<T, int64_t><<<grid_for(index.numel), kBlock, 0, stream>>>(index, x, scale, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t sum_to(hd::SumIndex const& index, T const* x, float scale, T* y, cudaStream_t stream) {
  int64_t const outs = index.out_count, total = index.out_count * index.summed_count;
  if (outs <= 0) return cudaGetLastError();
  // Block per output while the outputs alone cannot fill the GPU and each sum is long.
  bool const per_block = index.summed_count >= 256 && outs < (int64_t{1} << 15);
  bool const narrow = detail::fits_int32(total) && detail::fits_int32(outs);
  if (per_block) {
    unsigned const grid = detail::grid_rows(outs);
    if (narrow) {
      sum_block_kernel<T, int32_t><<<grid, kBlock, 0, stream>>>(index, x, scale, y);
    } else {
      sum_block_kernel<T, int64_t><<<grid, kBlock, 0, stream>>>(index, x, scale, y);
    }
  } else if (narrow) {
    sum_thread_kernel<T, int32_t><<<grid_for(outs), kBlock, 0, stream>>>(index, x, scale, y);
  } else {
    sum_thread_kernel<T, int64_t><<<grid_for(outs), kBlock, 0, stream>>>(index, x, scale, y);
  }
  return cudaGetLastError();
}

template cudaError_t binary<float>(hd::BinaryKind, hd::BinaryIndex const&, float const*, float const*, float*,
                                   cudaStream_t);
template cudaError_t broadcast_scaled<float>(hd::BinaryIndex const&, float const*, float, float*, cudaStream_t);
template cudaError_t int_binary<int64_t>(hd::BinaryKind, hd::BinaryIndex const&, int64_t const*, int64_t const*,
                                         int64_t*, unsigned long long*, cudaStream_t);
template cudaError_t int_binary<int32_t>(hd::BinaryKind, hd::BinaryIndex const&, int32_t const*, int32_t const*,
                                         int32_t*, unsigned long long*, cudaStream_t);
template cudaError_t sum_to<float>(hd::SumIndex const&, float const*, float, float*, cudaStream_t);
// Mixed precision's Add of two 16-bit tensors and its gradient sums (accumulated in float).
#define GP_LOW(T)                                                                                               \
  template cudaError_t binary<T>(hd::BinaryKind, hd::BinaryIndex const&, T const*, T const*, T*, cudaStream_t); \
  template cudaError_t broadcast_scaled<T>(hd::BinaryIndex const&, T const*, float, T*, cudaStream_t);          \
  template cudaError_t sum_to<T>(hd::SumIndex const&, T const*, float, T*, cudaStream_t);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW

}  // namespace gp::kernels::cuda

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
