// The in-process transport's effective bandwidth in the planner's link model: a ring all-reduce of
// B bytes over r devices takes 2 (r - 1) / r * B / bandwidth. Measured with worker threads summing
// a gradient-sized buffer, so that plans made for worker threads price their all-reduces and
// transfers at what this machine's memory system delivers, not at a GPU interconnect's speed.
#pragma once

#include <cstdint>

namespace gp::exec {

// Bytes per second; `bytes` per member, mean of `repeats` all-reduces over 2 threads.
double measure_in_process_bandwidth(int64_t bytes = int64_t{8} << 20, int repeats = 5);

}  // namespace gp::exec
