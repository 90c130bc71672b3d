// The reductions ReduceMax/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp (launchers in
// kernels/cuda/math.h): one thread per row of the input seen as [rows, cols], running the CPU
// backend's own per-row functions (kernels/hd/reduce.h), so both compute the same values in the
// same order. A row's reduction is serial: these ops are rare in models and their rows short.
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

}  // namespace

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
