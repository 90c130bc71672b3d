// The 16-bit float types of mixed precision (graph/precision.h) in our kernels: bfloat16 and
// IEEE half, stored as CUDA's __nv_bfloat16 and __half. Kernels load them, compute in float and
// round once on store (static_cast both ways), so every template instantiated for float is
// instantiated for these by listing them, not by new code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// X(T) for each 16-bit float type: explicit instantiations of a launcher.
#define GP_FOR_LOW_FLOAT_TYPES(X) X(__nv_bfloat16) X(__half)
