// The stable (key, value) radix sort the deterministic scatters share (Gather's backward in
// move.cu, the position-addressed index ops in scatter.cu): CUB's radix sort over only the key
// bits that can be set, and the 256-byte alignment of the arrays carved out of one workspace.
// Private to kernels/cuda.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

namespace gp::kernels::cuda::detail {

inline std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Bits of keys in [0, limit] (the largest possible key, e.g. an out-of-range marker): the radix
// sort looks at no more.
template <typename Key>
int key_bits(int64_t limit) {
  int bits = 1;
  while (bits < static_cast<int>(8 * sizeof(Key)) - 1 && (int64_t{1} << bits) <= limit) ++bits;
  return bits;
}

// Stable: values of equal keys keep their input order. `temp` null: only `temp_bytes` is set.
template <typename Key>
cudaError_t sort_pairs(void* temp, std::size_t& temp_bytes, Key const* keys_in, Key* keys_out, int32_t const* values_in,
                       int32_t* values_out, int64_t n, int64_t limit, cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out,
                                         static_cast<int>(n), 0, key_bits<Key>(limit), stream);
}

}  // namespace gp::kernels::cuda::detail
