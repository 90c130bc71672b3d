// Device helpers shared by every kernel file (one per op family, and device_ops.cu): launch geometry and
// deterministic warp/block sums (a fixed shuffle tree, so a row's result does not depend on
// scheduling). Private to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gp::kernels::cuda::detail {

inline constexpr int kBlock = 256;
// Grid-stride loops cover the rest; enough blocks to fill any current GPU several times.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 16;

inline unsigned grid_for(int64_t n, int block = kBlock) {
  int64_t const b = (n + block - 1) / block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}
inline unsigned grid_rows(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }
// Threads per row for the one-block-per-row kernels (declared __launch_bounds__(kMaxRowBlock)): a
// power of two in [32, kMaxRowBlock], about one element per thread, then several per thread.
inline constexpr int kMaxRowBlock = 1024;
inline int row_block(int64_t cols) {
  int b = 32;
  while (b < kMaxRowBlock && b < cols) b *= 2;
  return b;
}
// int32 indices suffice: every offset is below n, and n plus one grid-stride step stays in range.
inline bool fits_int32(int64_t n) { return n < (int64_t{1} << 30); }

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The block's total in every thread. blockDim.x a multiple of 32; every thread calls it; smem
// holds 32 floats and may be reused by the next call.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* smem) {
  v = kMax ? warp_max(v) : warp_sum(v);
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (warps == 1) return v;
  __syncthreads();  // the previous call's readers are done with smem
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float const id = kMax ? -INFINITY : 0.f;
  v = lane < warps ? smem[lane] : id;
  return kMax ? warp_max(v) : warp_sum(v);
}
__device__ __forceinline__ float block_sum(float v, float* smem) { return block_reduce<false>(v, smem); }
__device__ __forceinline__ float block_max(float v, float* smem) { return block_reduce<true>(v, smem); }

}  // namespace gp::kernels::cuda::detail
