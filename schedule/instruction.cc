#include "schedule/instruction.h"

#include "schedule/schedule_text.h"

namespace gp::schedule {

Stream stream_of(Op op) {
  switch (op) {
    case Op::kSend:
    case Op::kAllReduce:
      return Stream::kSend;
    case Op::kRecv:
      return Stream::kRecv;
    default:
      return Stream::kCompute;
  }
}

char const* op_name(Op op) {
  switch (op) {
    case Op::kForward:
      return "F";
    case Op::kBackward:
      return "B";
    case Op::kWeight:
      return "W";
    case Op::kSend:
      return "SEND";
    case Op::kRecv:
      return "RECV";
    case Op::kAllReduce:
      return "ALLREDUCE";
    case Op::kStep:
      return "STEP";
  }
  return "?";
}

std::string to_string(Instruction const& in) {
  std::string s = op_name(in.op);
  switch (in.op) {
    case Op::kForward:
    case Op::kBackward:
    case Op::kWeight:
      return s + " s" + std::to_string(in.stage) + " m" + std::to_string(in.micro_batch);
    case Op::kSend:
    case Op::kRecv:
      return s + " " + (in.gradient ? "g" : "e") + std::to_string(in.edge) + " m" + std::to_string(in.micro_batch) +
             (in.op == Op::kSend ? " ->d" : " <-d") + std::to_string(in.peer);
    case Op::kAllReduce:
      return s + " s" + std::to_string(in.stage);
    case Op::kStep:
      return s;
  }
  return s;
}

void number_lines(Schedule& schedule) {
  int line = header_line_count(schedule);
  for (auto& device : schedule.devices) {
    ++line;  // "device d:"
    for (auto& in : device) in.line = ++line;
  }
}

}  // namespace gp::schedule
