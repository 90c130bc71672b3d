#include "schedule/p2p_order.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gp::schedule {

namespace {

std::string str(int v) { return std::to_string(v); }

std::string at(int device, Instruction const& in) {
  return "device " + str(device) + " line " + str(in.line) + " (" + to_string(in) + ")";
}

constexpr char const* kFix =
    "build the schedule with a policy whose sends and receives this check accepts (fill-drain "
    "'graphpipe schedule --policy gpipe' orders every device pair), or run on a transport that matches messages by key "
    "(--launcher threads or --launcher mpi with --backend cpu)";

// The messages of one channel a -> b: instruction indices on a (SENDs) and on b (RECVs), in order.
struct Channel {
  std::vector<int> sends, recvs;
};

class DryRun {
 public:
  explicit DryRun(Schedule const& s) : s_(s), D_(s.num_devices()), dev_(static_cast<std::size_t>(D_)) {}

  Status check_channels() {
    for (int d = 0; d < D_; ++d) {
      auto const& list = s_.devices[d];
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        Instruction const& in = list[i];
        if (in.op == Op::kAllReduce) members_[in.stage].insert(d);
        if (in.op != Op::kSend && in.op != Op::kRecv) continue;
        if (in.peer < 0 || in.peer >= D_ || in.peer == d)
          return invalid_argument(at(d, in) + ": peer device " + str(in.peer) + " is not another device of the " +
                                  str(D_) + " in the schedule");
        if (in.op == Op::kSend)
          channels_[{d, in.peer}].sends.push_back(i);
        else
          channels_[{in.peer, d}].recvs.push_back(i);
      }
    }
    for (auto const& [pair, ch] : channels_) {
      auto const [a, b] = pair;
      std::size_t const n = std::min(ch.sends.size(), ch.recvs.size());
      for (std::size_t k = 0; k < n; ++k) {
        Instruction const& snd = s_.devices[a][ch.sends[k]];
        Instruction const& rcv = s_.devices[b][ch.recvs[k]];
        if (snd.edge == rcv.edge && snd.gradient == rcv.gradient && snd.micro_batch == rcv.micro_batch) continue;
        return invalid_argument(
            "devices " + str(a) + " and " + str(b) + " order their messages differently: message " + str(int(k) + 1) +
            " from device " + str(a) + " to device " + str(b) + " is " + at(a, snd) + " but " + at(b, rcv) +
            " receives it in that position; NCCL pairs a device pair's messages by order, not by key, so they "
            "would be swapped; fix: " +
            kFix);
      }
      if (ch.sends.size() != ch.recvs.size()) {
        bool const more_sends = ch.sends.size() > n;
        int const dev = more_sends ? a : b;
        Instruction const& extra = s_.devices[dev][more_sends ? ch.sends[n] : ch.recvs[n]];
        return invalid_argument("device " + str(a) + " sends " + str(int(ch.sends.size())) + " messages to device " +
                                str(b) + ", which receives " + str(int(ch.recvs.size())) + ": " + at(dev, extra) +
                                " has no partner on device " + str(more_sends ? b : a) + "; fix: " + kFix);
      }
      for (std::size_t k = 0; k < n; ++k) {
        seq_[{a, ch.sends[k]}] = static_cast<int>(k);
        seq_[{b, ch.recvs[k]}] = static_cast<int>(k);
      }
      send_issued_[pair].assign(n, false);
      recv_issued_[pair].assign(n, false);
    }
    return Status::ok();
  }

  Status run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int d = 0; d < D_; ++d) progress = advance(d) || progress;
    }
    std::vector<int> stuck;
    for (int d = 0; d < D_; ++d)
      if (dev_[d].pc < static_cast<int>(s_.devices[d].size())) stuck.push_back(d);
    if (stuck.empty()) return Status::ok();
    return invalid_argument(describe_cycle(stuck.front()));
  }

 private:
  struct Message {
    std::pair<int, int> channel;  // (sender, receiver)
    int k = 0;
  };
  struct Device {
    int pc = 0;
    std::vector<Message> queued;  // SENDs not issued yet
    bool waiting = false;         // a group is issued and not done
    std::vector<Message> group;   // its sends
    std::optional<Message> recv;  // its receive
    bool arrived = false;         // at the collective of pc (after the group's sends)
  };

  Message message_of(int d, Instruction const& in, int i) const {
    std::pair<int, int> const ch = in.op == Op::kSend ? std::make_pair(d, in.peer) : std::make_pair(in.peer, d);
    return {ch, seq_.at({d, i})};
  }
  // The collective a device reaches at `in`: a stage, -1 for the loss all-reduce after STEP.
  static std::optional<int> collective(Instruction const& in) {
    if (in.op == Op::kAllReduce) return in.stage;
    if (in.op == Op::kStep) return -1;
    return std::nullopt;
  }
  bool collective_done(int c) const {
    if (c >= 0) return arrived_.count(c) && arrived_.at(c).size() == members_.at(c).size();
    for (int e = 0; e < D_; ++e)
      if (!dev_[e].arrived && dev_[e].pc < static_cast<int>(s_.devices[e].size())) return false;
    return true;
  }

  bool sends_done(Device const& x) const {
    for (auto const& m : x.group)
      if (!recv_issued_.at(m.channel)[m.k]) return false;
    return true;
  }

  // Runs device d as far as it can; true if it moved.
  bool advance(int d) {
    Device& x = dev_[d];
    auto const& list = s_.devices[d];
    bool moved = false;
    while (x.pc < static_cast<int>(list.size())) {
      Instruction const& in = list[x.pc];
      if (x.waiting) {
        if (!sends_done(x)) break;
        if (x.recv && !send_issued_.at(x.recv->channel)[x.recv->k]) break;
        if (auto c = collective(in)) {
          if (!x.arrived) {
            x.arrived = true;
            if (*c >= 0) arrived_[*c].insert(d);
            moved = true;
          }
          if (!collective_done(*c)) break;
        }
        x.waiting = false;
        x.group.clear();
        x.recv.reset();
        x.arrived = false;
        ++x.pc;
        moved = true;
        continue;
      }
      if (in.op == Op::kSend) {
        x.queued.push_back(message_of(d, in, x.pc));
        ++x.pc;
        moved = true;
        continue;
      }
      if (in.op != Op::kRecv && !collective(in)) {  // compute: never waits on the transport
        ++x.pc;
        moved = true;
        continue;
      }
      x.group = std::move(x.queued);
      x.queued.clear();
      for (auto const& m : x.group) send_issued_[m.channel][m.k] = true;
      if (in.op == Op::kRecv) {
        x.recv = message_of(d, in, x.pc);
        recv_issued_[x.recv->channel][x.recv->k] = true;
      }
      x.waiting = true;
      moved = true;
    }
    return moved;
  }

  // What blocked device d waits for: another device and the reason (the first open dependency).
  std::pair<int, std::string> waits_for(int d) const {
    Device const& x = dev_[d];
    for (auto const& m : x.group)
      if (!recv_issued_.at(m.channel)[m.k]) {
        int const b = m.channel.second;
        Instruction const& r = s_.devices[b][channels_.at(m.channel).recvs[m.k]];
        Instruction const& snd = s_.devices[d][channels_.at(m.channel).sends[m.k]];
        return {b, "its issued " + to_string(snd) + " (line " + str(snd.line) + ") is only done when " + at(b, r) +
                       " is reached"};
      }
    if (x.recv && !send_issued_.at(x.recv->channel)[x.recv->k]) {
      int const a = x.recv->channel.first;
      Instruction const& snd = s_.devices[a][channels_.at(x.recv->channel).sends[x.recv->k]];
      return {a, "it needs " + at(a, snd) + ", which is issued only at device " + str(a) +
                     "'s next RECV, ALLREDUCE or STEP after it"};
    }
    Instruction const& in = s_.devices[d][x.pc];
    int const c = in.op == Op::kAllReduce ? in.stage : -1;
    for (int e = 0; e < D_; ++e) {
      if (e == d || dev_[e].pc >= static_cast<int>(s_.devices[e].size())) continue;
      bool const member = c == -1 || members_.at(c).count(e);
      bool const there = c == -1 ? dev_[e].arrived : arrived_.count(c) && arrived_.at(c).count(e);
      if (member && !there)
        return {e, "it waits for device " + str(e) + " to reach " + (c == -1 ? "STEP" : "ALLREDUCE s" + str(c))};
    }
    return {d, "nothing (internal: no open dependency)"};
  }

  std::string describe_cycle(int start) const {
    std::vector<int> path;
    std::map<int, std::size_t> seen;
    int d = start;
    while (!seen.count(d)) {
      seen[d] = path.size();
      path.push_back(d);
      d = waits_for(d).first;
    }
    std::string text =
        "the schedule deadlocks on the NCCL transport (a send is issued with its device's next RECV, ALLREDUCE "
        "or STEP and is done only when its receiver gets there): cyclic wait ";
    for (std::size_t i = seen[d]; i < path.size(); ++i) {
      int const e = path[i];
      text += (i > seen[d] ? "; " : "") + at(e, s_.devices[e][dev_[e].pc]) + " waits for device " +
              str(waits_for(e).first) + ": " + waits_for(e).second;
    }
    return text + "; fix: move the RECV a device waits in after the RECV its peer needs first, or " + kFix;
  }

  Schedule const& s_;
  int D_;
  std::vector<Device> dev_;
  std::map<std::pair<int, int>, Channel> channels_;
  std::map<std::pair<int, int>, int> seq_;  // (device, index) -> position in its channel
  std::map<std::pair<int, int>, std::vector<bool>> send_issued_, recv_issued_;
  std::map<int, std::set<int>> members_, arrived_;
};

}  // namespace

Status check_ordered_transport(Schedule const& schedule) {
  DryRun run(schedule);
  RETURN_IF_ERROR(run.check_channels());
  return run.run();
}

}  // namespace gp::schedule
