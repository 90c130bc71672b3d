#include "schedule/schedule_text.h"
#include "core/file_io.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace gp::schedule {
namespace {

std::string header_text(Schedule const& s) {
  std::string h = "# graphpipe schedule: one block per device, one instruction a line (see schedule/schedule_text.h)\n";
  h += "graphpipe-schedule " + std::to_string(s.version) + "\n";
  if (!s.model.empty()) h += "model " + s.model + "\n";
  if (!s.policy.empty()) h += "policy " + s.policy + "\n";
  h += "stages " + std::to_string(s.num_stages) + "\n";
  h += "micro-batches " + std::to_string(s.num_micro_batches) + "\n";
  h += "devices " + std::to_string(s.num_devices()) + "\n";
  return h;
}

std::vector<std::string> split_words(std::string const& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool parse_int(std::string_view text, int& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && out >= 0;
}

// "s3" -> 3 for prefix "s".
bool parse_tagged(std::string const& word, std::string_view prefix, int& out) {
  if (word.size() <= prefix.size() || word.compare(0, prefix.size(), prefix) != 0) return false;
  return parse_int(std::string_view(word).substr(prefix.size()), out);
}

Status line_error(int line, std::string const& msg) { return parse_error("line " + std::to_string(line) + ": " + msg); }

Result<Instruction> parse_instruction(std::vector<std::string> const& w, int line) {
  Instruction in;
  in.line = line;
  std::string const& name = w[0];
  std::string const text = [&] {
    std::string t;
    for (auto const& x : w) t += (t.empty() ? "" : " ") + x;
    return t;
  }();
  if (name == "F" || name == "B" || name == "W") {
    in.op = name == "F" ? Op::kForward : name == "B" ? Op::kBackward : Op::kWeight;
    if (w.size() != 3 || !parse_tagged(w[1], "s", in.stage) || !parse_tagged(w[2], "m", in.micro_batch))
      return line_error(line, "malformed '" + text + "' (expected '" + name + " s<stage> m<micro-batch>', e.g. '" +
                                  name + " s2 m0')");
    return in;
  }
  if (name == "SEND" || name == "RECV") {
    bool const send = name == "SEND";
    in.op = send ? Op::kSend : Op::kRecv;
    std::string const arrow = send ? "->d" : "<-d";
    std::string const example = send ? "SEND e3 m0 ->d3" : "RECV e3 m0 <-d1";
    bool ok = w.size() == 4 && w[1].size() >= 2 && (w[1][0] == 'e' || w[1][0] == 'g') &&
              parse_int(std::string_view(w[1]).substr(1), in.edge) && parse_tagged(w[2], "m", in.micro_batch) &&
              parse_tagged(w[3], arrow, in.peer);
    if (!ok)
      return line_error(line, "malformed '" + text + "' (expected '" + name + " e<edge>|g<edge> m<micro-batch> " +
                                  arrow + "<device>', e.g. '" + example + "')");
    in.gradient = w[1][0] == 'g';
    return in;
  }
  if (name == "ALLREDUCE") {
    in.op = Op::kAllReduce;
    if (w.size() != 2 || !parse_tagged(w[1], "s", in.stage))
      return line_error(line, "malformed '" + text + "' (expected 'ALLREDUCE s<stage>')");
    return in;
  }
  if (name == "STEP") {
    in.op = Op::kStep;
    if (w.size() != 1) return line_error(line, "malformed '" + text + "' (STEP takes no operands)");
    return in;
  }
  return line_error(line, "unknown instruction '" + name + "' (expected F, B, W, SEND, RECV, ALLREDUCE or STEP)");
}

}  // namespace

int header_line_count(Schedule const& schedule) {
  std::string const h = header_text(schedule);
  return static_cast<int>(std::count(h.begin(), h.end(), '\n'));
}

std::string print_schedule(Schedule const& schedule) {
  std::string out = header_text(schedule);
  for (int d = 0; d < schedule.num_devices(); ++d) {
    out += "device " + std::to_string(d) + ":\n";
    for (auto const& in : schedule.devices[d]) out += "  " + to_string(in) + "\n";
  }
  return out;
}

Result<Schedule> parse_schedule(std::string const& text) {
  Schedule s;
  s.version = 0;
  int declared_devices = -1;
  bool have_stages = false, have_mb = false;
  int current = -1;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    if (auto hash = raw.find('#'); hash != std::string::npos) raw.resize(hash);
    auto w = split_words(raw);
    if (w.empty()) continue;
    if (s.version == 0) {
      int v = 0;
      if (w.size() != 2 || w[0] != "graphpipe-schedule" || !parse_int(w[1], v))
        return line_error(line, "expected the header 'graphpipe-schedule " + std::to_string(kScheduleFormatVersion) +
                                    "' before anything else");
      if (v != kScheduleFormatVersion)
        return line_error(line, "schedule format version " + std::to_string(v) +
                                    " is not supported (this graphpipe reads " +
                                    std::to_string(kScheduleFormatVersion) + "); rebuild it with 'graphpipe schedule'");
      s.version = v;
      continue;
    }
    if (w[0] == "device") {
      int d = -1;
      std::string tag = w.size() == 2 ? w[1] : "";
      if (!tag.empty() && tag.back() == ':') tag.pop_back();
      if (w.size() != 2 || w[1].back() != ':' || !parse_int(tag, d))
        return line_error(line, "malformed device line (expected 'device <n>:')");
      if (d != current + 1)
        return line_error(line, "device " + std::to_string(d) + " out of order (expected 'device " +
                                    std::to_string(current + 1) + ":')");
      if (declared_devices >= 0 && d >= declared_devices)
        return line_error(line, "device " + std::to_string(d) + " but the header says 'devices " +
                                    std::to_string(declared_devices) + "'");
      current = d;
      s.devices.emplace_back();
      continue;
    }
    if (current < 0) {
      int value = 0;
      if (w[0] == "policy" || w[0] == "model") {
        if (w.size() != 2) return line_error(line, "'" + w[0] + "' takes one word");
        (w[0] == "policy" ? s.policy : s.model) = w[1];
      } else if (w[0] == "stages" || w[0] == "micro-batches" || w[0] == "devices") {
        if (w.size() != 2 || !parse_int(w[1], value))
          return line_error(line, "'" + w[0] + "' takes one non-negative integer");
        if (w[0] == "stages")
          s.num_stages = value, have_stages = true;
        else if (w[0] == "micro-batches")
          s.num_micro_batches = value, have_mb = true;
        else
          declared_devices = value;
      } else if (w[0] == "F" || w[0] == "B" || w[0] == "W" || w[0] == "SEND" || w[0] == "RECV" || w[0] == "ALLREDUCE" ||
                 w[0] == "STEP") {
        return line_error(line, "instruction before the first 'device <n>:' line");
      } else {
        return line_error(line, "unknown header key '" + w[0] +
                                    "' (expected policy, model, stages, micro-batches, devices or 'device <n>:')");
      }
      continue;
    }
    ASSIGN_OR_RETURN(Instruction ins, parse_instruction(w, line));
    s.devices[current].push_back(ins);
  }
  if (s.version == 0) return parse_error("empty schedule: expected the header 'graphpipe-schedule 1'");
  if (!have_stages || !have_mb || declared_devices < 0)
    return parse_error("the header must give 'stages', 'micro-batches' and 'devices'");
  if (s.num_devices() != declared_devices)
    return parse_error("the header says 'devices " + std::to_string(declared_devices) + "' but " +
                       std::to_string(s.num_devices()) + " device blocks follow");
  return s;
}

Result<Schedule> read_schedule_file(std::string const& path) {
  ASSIGN_OR_RETURN(std::string text, read_whole_file(path, "schedule file"));
  auto r = parse_schedule(text);
  if (!r.is_ok()) return r.status().with_context(path);
  return r;
}

Status write_schedule_file(Schedule const& schedule, std::string const& path) {
  return write_file_atomic(path, print_schedule(schedule), "schedule file");
}

}  // namespace gp::schedule
