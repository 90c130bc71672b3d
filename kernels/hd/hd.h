// GP_HD marks math shared by a CUDA kernel and its host twin: __host__ __device__ under nvcc,
// plain inline C++ under g++/clang, so host tests run the very function the kernel runs.
#pragma once

#if defined(__CUDACC__)
#define GP_HD __host__ __device__ __forceinline__
#else
#define GP_HD inline
#endif
