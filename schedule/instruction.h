// The instruction set of a schedule: per device, an ordered list of compute and communication
// instructions. Plain data; text form in schedule/schedule_text.h.
//
// Execution semantics (shared by the simulator, the validator's dry run and the executor): a device
// runs its list on three in-order streams. Compute (F, B, W, STEP) waits for its inputs: F for its
// stage's incoming activations (a RECV earlier in the list, or the producing F on the same device),
// B for its F and the incoming gradients, W for its B. SEND is eager (buffered): it waits only for
// the instruction that produced its tensor and earlier SENDs/ALLREDUCEs of the device. RECV takes
// the matching message once it has arrived, in list order. ALLREDUCE waits for the stage's last
// backward on every replica. STEP waits for everything before it.
#pragma once

#include <string>
#include <vector>

namespace gp::schedule {

inline constexpr int kScheduleFormatVersion = 1;

enum class Op { kForward, kBackward, kWeight, kSend, kRecv, kAllReduce, kStep };

// Which stream of its device an instruction runs on.
enum class Stream { kCompute = 0, kSend = 1, kRecv = 2 };
inline constexpr int kNumStreams = 3;

struct Instruction {
  Op op = Op::kForward;
  int stage = -1;        // F, B, W, ALLREDUCE
  int micro_batch = -1;  // F, B, W, SEND, RECV
  int edge = -1;         // SEND, RECV: index into Plan::edges
  bool gradient =
      false;      // SEND, RECV: the gradient flowing back along the edge (token g<k>), else the activation (e<k>)
  int peer = -1;  // SEND: destination device; RECV: source device
  int line = 0;   // line in the schedule text (set by the parser and by number_lines)

  bool operator==(Instruction const& o) const {
    return op == o.op && stage == o.stage && micro_batch == o.micro_batch && edge == o.edge && gradient == o.gradient &&
           peer == o.peer;
  }
};

struct Schedule {
  int version = kScheduleFormatVersion;
  std::string policy;  // the builder that made it ("gpipe", "1f1b", ..., "hand-written")
  std::string model;   // the plan's model name, for the reader
  int num_stages = 0;  // of the plan it was built for
  int num_micro_batches = 0;
  std::vector<std::vector<Instruction>> devices;  // devices[d] = d's instructions in order

  int num_devices() const { return static_cast<int>(devices.size()); }
};

Stream stream_of(Op op);
char const* op_name(Op op);  // "F", "B", "W", "SEND", "RECV", "ALLREDUCE", "STEP"
// One instruction as written in the text format, e.g. "F s2 m0", "SEND e3 m0 ->d3".
std::string to_string(Instruction const& in);
// Sets Instruction::line to the line each instruction has in print_schedule's output, so that
// messages about built schedules point into the file the user would save.
void number_lines(Schedule& schedule);

}  // namespace gp::schedule
