// The process CPU allocator's cache of large blocks (exec/tensor.cc).
//
// A block of 4 MiB or more is kept when it is freed and handed out again for an allocation of the
// same size class (rounded up to whole MiB), up to host_cache_limit_bytes() together. Such blocks
// come from mmap when the heap has no room, and every page of a fresh one faults on first touch:
// filling a fresh 38.5 MB batch (64 ResNet images) took 23 ms on this project's 2-core machine and
// 4 ms when the block was reused, and the data and activation tensors of a training step have the
// sizes of the last step's. CPU training of ResNet-18 at batch 64 took 6.7-7.3 s a step with 6.1
// million page faults in 5 steps without the cache, 4.1-4.2 s with 0.65 million with it.
// A failed allocation empties the cache and tries again. Builds with AddressSanitizer keep nothing,
// so that a use after free is still caught.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gp::exec {

inline constexpr std::size_t kHostCacheMinBytes = std::size_t{4} << 20;
inline constexpr std::size_t kHostCacheLimitBytes = std::size_t{4} << 30;

// What the cache may hold: a quarter of the machine's memory, at most 4 GiB.
std::size_t host_cache_limit_bytes();
int64_t host_cached_bytes();  // kept now, not in use
void release_host_cache();    // frees every kept block
bool host_cache_enabled();    // false under AddressSanitizer

}  // namespace gp::exec
