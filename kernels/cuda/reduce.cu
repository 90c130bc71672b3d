// The reductions ReduceMax/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, and LogSoftmax, Hardmax,
// CumSum, ArgMax/ArgMin, TopK along one axis (launchers in kernels/cuda/math.h): one thread per row of the
// input seen as [rows, cols], or per line of [outer, dim, inner], running the CPU backend's own
// functions (kernels/hd/reduce.h), so both compute the same values in the same order. A row or line
// is serial: these ops are rare in models and their rows short.
#include <type_traits>

#include "kernels/cuda/math.h"
#include "kernels/cuda/block.cuh"
#include "kernels/hd/reduce.h"

namespace gp::kernels::cuda {
namespace {

using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;

__global__ void reduce_rows_kernel(hd::Reduction r, float const* __restrict__ x, int64_t rows, int64_t cols,
                                   float* __restrict__ y, int64_t* __restrict__ arg) {
  for (int64_t i = global_thread(); i < rows; i += grid_threads()) {
    int64_t a = -1;
    y[i] = static_cast<float>(hd::reduce_row(r, x + i * cols, cols, a));
    if (arg) arg[i] = a;
  }
}

__global__ void reduce_rows_backward_kernel(hd::Reduction r, float const* __restrict__ x, float const* __restrict__ y,
                                            int64_t const* __restrict__ arg, float const* __restrict__ dy, int64_t rows,
                                            int64_t cols, float* __restrict__ dx) {
  for (int64_t i = global_thread(); i < rows; i += grid_threads())
    hd::reduce_row_backward(r, x ? x + i * cols : nullptr, y ? static_cast<double>(y[i]) : 0.0, arg ? arg[i] : -1,
                            dy[i], cols, dx + i * cols);
}

// Line i of [outer, dim, inner] starts at (i / inner) * dim * inner + i % inner, stride inner.
__device__ __forceinline__ int64_t line_start(int64_t i, int64_t dim, int64_t inner) {
  return (i / inner) * dim * inner + i % inner;
}

__global__ void log_softmax_kernel(float const* __restrict__ x, int64_t lines, int64_t dim, int64_t inner,
                                   float* __restrict__ y) {
  for (int64_t i = global_thread(); i < lines; i += grid_threads()) {
    int64_t const e = line_start(i, dim, inner);
    hd::log_softmax_line(x + e, dim, inner, y + e);
  }
}

__global__ void log_softmax_backward_kernel(float const* __restrict__ y, float const* __restrict__ g, int64_t lines,
                                            int64_t dim, int64_t inner, float* __restrict__ dx) {
  for (int64_t i = global_thread(); i < lines; i += grid_threads()) {
    int64_t const e = line_start(i, dim, inner);
    hd::log_softmax_line_backward(y + e, g + e, dim, inner, dx + e);
  }
}

// idx[i] of line i; with one_hot, y (zeroed here) gets 1 at each line's maximum (Hardmax).
template <typename T>
__global__ void arg_extremum_kernel(T const* __restrict__ x, int64_t lines, int64_t dim, int64_t inner, bool max,
                                    bool last, int64_t* __restrict__ idx, float* __restrict__ one_hot) {
  for (int64_t i = global_thread(); i < lines; i += grid_threads()) {
    int64_t const e = line_start(i, dim, inner);
    int64_t const k = hd::arg_extremum_line(x + e, dim, inner, max, last);
    if (idx) idx[i] = k;
    if (one_hot) {
      for (int64_t j = 0; j < dim; ++j) one_hot[e + j * inner] = 0.f;
      if (dim > 0) one_hot[e + k * inner] = 1.f;
    }
  }
}

template <typename T>
__global__ void cumsum_kernel(T const* __restrict__ x, int64_t lines, int64_t dim, int64_t inner, bool exclusive,
                              bool reverse, T* __restrict__ y) {
  for (int64_t i = global_thread(); i < lines; i += grid_threads()) {
    int64_t const e = line_start(i, dim, inner);
    if constexpr (std::is_same_v<T, int64_t>)
      hd::cumsum_line_int<int64_t, uint64_t>(x + e, dim, inner, exclusive, reverse, y + e);
    else if constexpr (std::is_same_v<T, int32_t>)
      hd::cumsum_line_int<int32_t, uint32_t>(x + e, dim, inner, exclusive, reverse, y + e);
    else
      hd::cumsum_line(x + e, dim, inner, exclusive, reverse, y + e);
  }
}

// Line i's k best into [outer, k, inner] (line i of the output starts at (i / inner) * k * inner + i % inner).
template <typename T>
__global__ void topk_kernel(T const* __restrict__ x, int64_t lines, int64_t dim, int64_t inner, int64_t k, bool largest,
                            T* __restrict__ y, int64_t* __restrict__ idx) {
  for (int64_t i = global_thread(); i < lines; i += grid_threads()) {
    int64_t const o = line_start(i, k, inner);
    hd::topk_line(x + line_start(i, dim, inner), dim, inner, k, largest, y + o, idx + o, inner);
  }
}

__global__ void topk_backward_kernel(float const* __restrict__ dy, int64_t const* __restrict__ idx, int64_t n,
                                     int64_t dim, int64_t inner, int64_t k, float* __restrict__ dx) {
  for (int64_t e = global_thread(); e < n; e += grid_threads()) dx[hd::topk_source(e, k, dim, inner, idx[e])] = dy[e];
}

}  // namespace

cudaError_t log_softmax(float const* x, int64_t outer, int64_t dim, int64_t inner, float* y, cudaStream_t stream) {
  int64_t const lines = outer * inner;
  if (lines > 0 && dim > 0) log_softmax_kernel<<<grid_for(lines), kBlock, 0, stream>>>(x, lines, dim, inner, y);
  return cudaGetLastError();
}

cudaError_t log_softmax_backward(float const* y, float const* dy, int64_t outer, int64_t dim, int64_t inner, float* dx,
                                 cudaStream_t stream) {
  int64_t const lines = outer * inner;
  if (lines > 0 && dim > 0)
    log_softmax_backward_kernel<<<grid_for(lines), kBlock, 0, stream>>>(y, dy, lines, dim, inner, dx);
  return cudaGetLastError();
}

template <typename T>
cudaError_t arg_extremum(T const* x, int64_t outer, int64_t dim, int64_t inner, bool max, bool last, int64_t* idx,
                         float* one_hot, cudaStream_t stream) {
  int64_t const lines = outer * inner;
  if (lines > 0)
    arg_extremum_kernel<T><<<grid_for(lines), kBlock, 0, stream>>>(x, lines, dim, inner, max, last, idx, one_hot);
  return cudaGetLastError();
}
template cudaError_t arg_extremum<float>(float const*, int64_t, int64_t, int64_t, bool, bool, int64_t*, float*,
                                         cudaStream_t);
template cudaError_t arg_extremum<int64_t>(int64_t const*, int64_t, int64_t, int64_t, bool, bool, int64_t*, float*,
                                           cudaStream_t);
template cudaError_t arg_extremum<int32_t>(int32_t const*, int64_t, int64_t, int64_t, bool, bool, int64_t*, float*,
                                           cudaStream_t);

template <typename T>
cudaError_t cumsum(T const* x, int64_t outer, int64_t dim, int64_t inner, bool exclusive, bool reverse, T* y,
                   cudaStream_t stream) {
  int64_t const lines = outer * inner;
  if (lines > 0 && dim > 0)
    cumsum_kernel<T><<<grid_for(lines), kBlock, 0, stream>>>(x, lines, dim, inner, exclusive, reverse, y);
  return cudaGetLastError();
}
template cudaError_t cumsum<float>(float const*, int64_t, int64_t, int64_t, bool, bool, float*, cudaStream_t);
template cudaError_t cumsum<int64_t>(int64_t const*, int64_t, int64_t, int64_t, bool, bool, int64_t*, cudaStream_t);
template cudaError_t cumsum<int32_t>(int32_t const*, int64_t, int64_t, int64_t, bool, bool, int32_t*, cudaStream_t);

template <typename T>
cudaError_t topk(T const* x, int64_t outer, int64_t dim, int64_t inner, int64_t k, bool largest, T* y, int64_t* idx,
                 cudaStream_t stream) {
  int64_t const lines = outer * inner;
  if (lines > 0 && k > 0)
    topk_kernel<T><<<grid_for(lines), kBlock, 0, stream>>>(x, lines, dim, inner, k, largest, y, idx);
  return cudaGetLastError();
}
template cudaError_t topk<float>(float const*, int64_t, int64_t, int64_t, int64_t, bool, float*, int64_t*,
                                 cudaStream_t);
template cudaError_t topk<int64_t>(int64_t const*, int64_t, int64_t, int64_t, int64_t, bool, int64_t*, int64_t*,
                                   cudaStream_t);
template cudaError_t topk<int32_t>(int32_t const*, int64_t, int64_t, int64_t, int64_t, bool, int32_t*, int64_t*,
                                   cudaStream_t);

cudaError_t topk_backward(float const* dy, int64_t const* idx, int64_t outer, int64_t dim, int64_t inner, int64_t k,
                          float* dx, cudaStream_t stream) {
  int64_t const n = outer * k * inner;
  if (n > 0) topk_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(dy, idx, n, dim, inner, k, dx);
  return cudaGetLastError();
}

cudaError_t reduce_rows(hd::Reduction r, float const* x, int64_t rows, int64_t cols, float* y, int64_t* arg,
                        cudaStream_t stream) {
  if (rows > 0) reduce_rows_kernel<<<grid_for(rows), kBlock, 0, stream>>>(r, x, rows, cols, y, arg);
  return cudaGetLastError();
}

cudaError_t reduce_rows_backward(hd::Reduction r, float const* x, float const* y, int64_t const* arg, float const* dy,
                                 int64_t rows, int64_t cols, float* dx, cudaStream_t stream) {
  if (rows > 0 && cols > 0)
    reduce_rows_backward_kernel<<<grid_for(rows), kBlock, 0, stream>>>(r, x, y, arg, dy, rows, cols, dx);
  return cudaGetLastError();
}

}  // namespace gp::kernels::cuda
