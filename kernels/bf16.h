// bfloat16 <-> float32 (and float16 -> float32): the top 16 bits of an IEEE float32, rounded to nearest even (as
// oneDNN, PyTorch and the CUDA intrinsics round), NaN kept a quiet NaN. Host and device alike (no state).
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define GP_BF16_HD __host__ __device__
#else
#define GP_BF16_HD
#endif

namespace gp::kernels {

GP_BF16_HD inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

GP_BF16_HD inline float bf16_to_float(uint16_t b) {
  uint32_t const u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// IEEE half (float16) -> float32, exactly (subnormals, infinities and NaN included): for reading
// fp16 tensors on the host (the CUDA backend computes in them).
GP_BF16_HD inline float half_to_float(uint16_t h) {
  uint32_t const sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t const exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t u = sign;
  if (exp == 31) {
    u |= 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    u |= ((exp + 112u) << 23) | (mant << 13);
  } else if (mant != 0) {  // subnormal: mant * 2^-24, normalised
    int e = -1;
    uint32_t m = mant;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      ++e;
    }
    u |= (static_cast<uint32_t>(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Whole arrays (vectorised by the compiler).
void float_to_bf16(float const* src, int64_t n, uint16_t* dst);
void bf16_to_float(uint16_t const* src, int64_t n, float* dst);
// dst += src, the sum rounded once to bfloat16.
void add_inplace_bf16(uint16_t* dst, uint16_t const* src, int64_t n);
// y = a + b, each float32 sum rounded once to bfloat16.
void add_bf16(uint16_t const* a, uint16_t const* b, int64_t n, uint16_t* y);

}  // namespace gp::kernels
