// A timeline: per device, intervals of compute and communication. Produced by the simulator and,
// in the same form, recorded by the executor, so predicted and measured runs can be compared.
#pragma once

#include <string>
#include <vector>

#include "schedule/instruction.h"

namespace gp::schedule {

struct Interval {
  int device = 0;
  Stream stream = Stream::kCompute;
  Op op = Op::kForward;
  int stage = -1;
  int micro_batch = -1;
  double start_s = 0;
  double end_s = 0;
  std::string label;  // the instruction as written, e.g. "F s2 m0", "SEND e3 m0 ->d3"
};

struct Timeline {
  int num_devices = 0;
  std::vector<Interval> intervals;
  double end_s() const;
};

}  // namespace gp::schedule
