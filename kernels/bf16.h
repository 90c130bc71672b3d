// bfloat16 <-> float32 and float16 <-> float32: the top 16 bits of an IEEE float32, rounded to nearest even (as
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

// float32 -> IEEE half, rounded to nearest even (as __float2half_rn): overflow past 65504 (from
// 65520 up) to infinity, subnormals exact, NaN a quiet NaN. For writing fp16 tensors on the host
// (an export of fp16 weights).
GP_BF16_HD inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  uint32_t const sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                        // 65520 and up: infinity
  if (a >= 0x38800000u) {  // a normal half: rebias the exponent (127 - 15), round at bit 13
    uint32_t const r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // up to 2^-25 (a tie): zero
  // A subnormal half counts units of 2^-24: |f| = m * 2^(e - 150), so the count is m >> (126 - e).
  uint32_t const e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
  uint32_t const q = m >> shift, rem = m & ((1u << shift) - 1u), tie = 1u << (shift - 1);
  return static_cast<uint16_t>(sign | (q + (rem > tie || (rem == tie && (q & 1u)))));
}

// Whole arrays (vectorised by the compiler).
void float_to_bf16(float const* src, int64_t n, uint16_t* dst);
void bf16_to_float(uint16_t const* src, int64_t n, float* dst);
void float_to_half(float const* src, int64_t n, uint16_t* dst);
// dst += src, the sum rounded once to bfloat16.
void add_inplace_bf16(uint16_t* dst, uint16_t const* src, int64_t n);
// y = a + b, each float32 sum rounded once to bfloat16.
void add_bf16(uint16_t const* a, uint16_t const* b, int64_t n, uint16_t* y);

}  // namespace gp::kernels
