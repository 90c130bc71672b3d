// What a link between two pipeline workers of one process costs, in the planner's link model
// (partition::Link: latency + bytes / bandwidth), measured on this machine so that plans for
// worker threads price their all-reduces and transfers at what the transport delivers here, not at
// a cluster file's interconnect.
//
// - CPU workers (measure_in_process_bandwidth): a ring all-reduce of B bytes over r devices takes
//   2 (r - 1) / r * B / bandwidth; measured with two threads summing a gradient-sized buffer, i.e.
//   at what this machine's memory system delivers.
// - Device workers (measure_device_link): a tensor made on one worker's device is sent through the
//   in-process transport as a pipeline's activation is (with the sender's fence) and received into
//   the other's memory (a copy within one GPU, a peer copy between two), the receiver synchronised:
//   a small tensor's time is the latency (a fence, a copy launch, a synchronisation), and the
//   large one's extra time per byte the bandwidth.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "exec/backend.h"

namespace gp::exec {

// Bytes per second; `bytes` per member, mean of `repeats` all-reduces over 2 threads.
double measure_in_process_bandwidth(int64_t bytes = int64_t{8} << 20, int repeats = 5);

struct MeasuredLink {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};
// `from`'s device to `to`'s, through the in-process transport: the median of `repeats` transfers
// of 4 KiB (the latency) and of `bytes` (their difference per byte: the bandwidth), after one
// warm-up of each. An error of either backend is returned.
Result<MeasuredLink> measure_device_link(Backend& from, Backend& to, int64_t bytes = int64_t{8} << 20, int repeats = 5);

}  // namespace gp::exec
