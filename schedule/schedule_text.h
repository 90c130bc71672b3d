// The schedule text format: a versioned header, then one block per device, one instruction a line.
//
//   # comments run to the end of the line
//   graphpipe-schedule 1
//   policy 1f1b
//   stages 2
//   micro-batches 2
//   devices 2
//   device 0:
//     F s0 m0
//     SEND e0 m0 ->d1      # activation of plan edge 0, micro-batch 0, to device 1
//     RECV g0 m0 <-d1      # gradient of plan edge 0 coming back from device 1
//     B s0 m0
//     W s0 m0              # weight gradient, when the backward is split
//     ALLREDUCE s0         # only for replicated stages
//     STEP
//   device 1:
//     ...
#pragma once

#include <string>

#include "core/status.h"
#include "schedule/instruction.h"

namespace gp::schedule {

std::string print_schedule(Schedule const& schedule);
// Errors name the line: "line 12: unknown instruction 'FW' (expected F, B, W, SEND, RECV, ALLREDUCE or STEP)".
Result<Schedule> parse_schedule(std::string const& text);
Result<Schedule> read_schedule_file(std::string const& path);
Status write_schedule_file(Schedule const& schedule, std::string const& path);
// Lines print_schedule writes before the first "device" line.
int header_line_count(Schedule const& schedule);

}  // namespace gp::schedule
