#include "schedule/dataflow.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

namespace gp::schedule {
namespace {

constexpr int kKinds = 3;  // F, B, W

int kind_of(Op op) { return op == Op::kForward ? 0 : op == Op::kBackward ? 1 : 2; }
Op op_of_kind(int k) { return k == 0 ? Op::kForward : k == 1 ? Op::kBackward : Op::kWeight; }

class Engine {
 public:
  Engine(PlanView const& view, Schedule const& schedule)
      : view_(view),
        sched_(schedule),
        D_(schedule.num_devices()),
        M_(schedule.num_micro_batches),
        split_(split_backward(view, schedule)) {
    next_.assign(D_, {0, 0, 0});
    tied_next_.assign(D_, 0);
    free_.assign(D_, {0.0, 0.0, 0.0});
    remaining_bw_.assign(view.num_stages(), std::vector<int>(D_, 0));
    last_bw_end_.assign(view.num_stages(), std::vector<double>(D_, 0.0));
    for (int d = 0; d < D_; ++d) {
      for (int st = 0; st < kNumStreams; ++st) skip_to_stream(d, st);
      for (auto const& in : sched_.devices[d]) {
        bool const last_kind = split_[in.stage < 0 ? 0 : in.stage][d] ? in.op == Op::kWeight : in.op == Op::kBackward;
        if (in.stage >= 0 && (in.op == Op::kBackward || in.op == Op::kWeight) && last_kind)
          ++remaining_bw_[in.stage][d];
      }
    }
  }

  DataflowResult run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int d = 0; d < D_; ++d)
        for (int st = 0; st < kNumStreams; ++st)
          while (next_[d][st] < size(d) && try_run(d, st, nullptr)) progress = true;
      // A STEP that ran some of its tied all-reduces and then waited moved the other devices on.
      progress = progress || std::exchange(tied_progress_, false);
    }
    DataflowResult result;
    result.timeline = std::move(timeline_);
    result.timeline.num_devices = D_;
    for (int d = 0; d < D_; ++d)
      for (int st = 0; st < kNumStreams; ++st)
        if (next_[d][st] < size(d)) {
          std::string why;
          try_run(d, st, &why);
          result.blocked.push_back({d, next_[d][st], why});
        }
    return result;
  }

 private:
  int size(int d) const { return static_cast<int>(sched_.devices[d].size()); }

  void skip_to_stream(int d, int st) {
    auto const& list = sched_.devices[d];
    while (next_[d][st] < size(d) && static_cast<int>(stream_of(list[next_[d][st]].op)) != st) ++next_[d][st];
  }
  void advance(int d, int st) {
    ++next_[d][st];
    skip_to_stream(d, st);
  }

  uint64_t compute_key(int stage, int device, int kind, int mb) const {
    return ((static_cast<uint64_t>(stage) * kKinds + kind) * M_ + mb) * D_ + device;
  }
  uint64_t message_key(bool grad, int edge, int mb, int src, int dst) const {
    return (((static_cast<uint64_t>(edge) * 2 + grad) * M_ + mb) * D_ + src) * D_ + dst;
  }

  std::optional<double> compute_end(int stage, int device, int kind, int mb, std::string* why) const {
    auto it = compute_.find(compute_key(stage, device, kind, mb));
    if (it != compute_.end()) return it->second;
    if (why)
      *why = std::string(op_name(op_of_kind(kind))) + " s" + std::to_string(stage) + " m" + std::to_string(mb) +
             " on device " + std::to_string(device);
    return std::nullopt;
  }
  std::optional<double> recv_end(bool grad, int edge, int mb, int src, int dst, int self, std::string* why) const {
    auto it = recv_.find(message_key(grad, edge, mb, src, dst));
    if (it != recv_.end()) return it->second;
    if (why) {
      Instruction r{Op::kRecv, -1, mb, edge, grad, self == dst ? src : dst, 0};
      *why = to_string(r) + " on device " + std::to_string(self);
    }
    return std::nullopt;
  }

  // Ready time of the inputs of a compute instruction, or nullopt (and why) if one is missing.
  std::optional<double> compute_ready(int d, Instruction const& in, std::string* why) const {
    double ready = 0;
    auto need = [&](std::optional<double> t) {
      if (!t) return false;
      ready = std::max(ready, *t);
      return true;
    };
    int const s = in.stage, m = in.micro_batch;
    if (in.op == Op::kForward) {
      for (int e : view_.in_edges(s))
        for (auto const& p : view_.pieces(e)) {
          if (p.dst_device != d) continue;
          if (!need(p.local() ? compute_end(p.src_stage, d, 0, m, why)
                              : recv_end(false, e, m, p.src_device, d, d, why)))
            return std::nullopt;
        }
    } else if (in.op == Op::kBackward) {
      if (!need(compute_end(s, d, 0, m, why))) return std::nullopt;
      for (int e : view_.out_edges(s))
        for (auto const& p : view_.pieces(e)) {
          if (p.src_device != d) continue;
          if (!need(p.local() ? compute_end(p.dst_stage, d, 1, m, why) : recv_end(true, e, m, d, p.dst_device, d, why)))
            return std::nullopt;
        }
    } else if (in.op == Op::kWeight) {
      if (!need(compute_end(s, d, 1, m, why))) return std::nullopt;
    }
    return ready;
  }

  double duration(int d, Instruction const& in) const {
    auto const& st = view_.stage(in.stage);
    switch (in.op) {
      case Op::kForward:
        return st.fwd_s;
      case Op::kBackward:
        return view_.backward_s(in.stage, split_[in.stage][d]);
      case Op::kWeight:
        return st.bwd_weight_s;
      default:
        return 0;
    }
  }

  void record(int d, Stream st, Instruction const& in, double start, double end) {
    timeline_.intervals.push_back({d, st, in.op, in.stage, in.micro_batch, start, end, to_string(in)});
  }

  double piece_seconds(int edge, int src, int dst) const {
    for (auto const& p : view_.pieces(edge))
      if (p.src_device == src && p.dst_device == dst) return p.seconds;
    return 0;
  }

  bool try_run(int d, int st, std::string* why) {
    int const idx = next_[d][st];
    Instruction const& in = sched_.devices[d][idx];
    auto& free = free_[d];
    switch (in.op) {
      case Op::kForward:
      case Op::kBackward:
      case Op::kWeight: {
        auto ready = compute_ready(d, in, why);
        if (!ready) return false;
        double const start = std::max(free[0], *ready);
        double const end = start + duration(d, in);
        free[0] = end;
        compute_[compute_key(in.stage, d, kind_of(in.op), in.micro_batch)] = end;
        record(d, Stream::kCompute, in, start, end);
        bool const last_kind = split_[in.stage][d] ? in.op == Op::kWeight : in.op == Op::kBackward;
        if (last_kind) {
          --remaining_bw_[in.stage][d];
          last_bw_end_[in.stage][d] = std::max(last_bw_end_[in.stage][d], end);
        }
        advance(d, st);
        return true;
      }
      case Op::kSend: {
        auto const& edge = view_.plan().edges[in.edge];
        auto produced = in.gradient ? compute_end(edge.dst, d, 1, in.micro_batch, why)
                                    : compute_end(edge.src, d, 0, in.micro_batch, why);
        if (!produced) return false;
        int const src = in.gradient ? in.peer : d, dst = in.gradient ? d : in.peer;
        double const start = std::max(free[1], *produced);
        double const end = start + piece_seconds(in.edge, src, dst);
        free[1] = end;
        sent_[message_key(in.gradient, in.edge, in.micro_batch, src, dst)] = {start, end};
        record(d, Stream::kSend, in, start, end);
        advance(d, st);
        return true;
      }
      case Op::kRecv: {
        int const src = in.gradient ? d : in.peer, dst = in.gradient ? in.peer : d;
        auto it = sent_.find(message_key(in.gradient, in.edge, in.micro_batch, src, dst));
        if (it == sent_.end()) {
          if (why) {
            Instruction s{Op::kSend, -1, in.micro_batch, in.edge, in.gradient, d, 0};
            *why = to_string(s) + " on device " + std::to_string(in.peer);
          }
          return false;
        }
        double const start = std::max(free[2], it->second.first);
        double const end = std::max(start, it->second.second);
        free[2] = end;
        recv_[message_key(in.gradient, in.edge, in.micro_batch, src, dst)] = end;
        if (end > start) record(d, Stream::kRecv, in, start, end);
        advance(d, st);
        return true;
      }
      case Op::kAllReduce: {
        // A collective: runs when every replica's send stream has reached it and its backwards are done.
        double start = 0;
        for (int r : view_.stage(in.stage).devices) {
          if (next_[r][1] >= size(r) || sched_.devices[r][next_[r][1]].op != Op::kAllReduce ||
              sched_.devices[r][next_[r][1]].stage != in.stage) {
            if (why) *why = "ALLREDUCE s" + std::to_string(in.stage) + " on device " + std::to_string(r);
            return false;
          }
          if (remaining_bw_[in.stage][r] > 0) {
            if (why)
              *why = "the last backward of stage " + std::to_string(in.stage) + " on device " + std::to_string(r);
            return false;
          }
          start = std::max({start, free_[r][1], last_bw_end_[in.stage][r]});
        }
        double const end = start + view_.stage(in.stage).allreduce_s;
        for (int r : view_.stage(in.stage).devices) {
          free_[r][1] = end;
          record(r, Stream::kSend, sched_.devices[r][next_[r][1]], start, end);
          advance(r, 1);
        }
        return true;
      }
      case Op::kStep: {
        for (int other = 1; other < kNumStreams; ++other)
          if (next_[d][other] < idx) {
            if (why) *why = to_string(sched_.devices[d][next_[d][other]]) + " on device " + std::to_string(d);
            return false;
          }
        // The tied weights' all-reduces (PlanView::tied_groups), each once every device of its
        // group has reached STEP with that group next, in the groups' order.
        auto const& mine = view_.tied_groups_of(d);
        while (tied_next_[d] < static_cast<int>(mine.size())) {
          int const g = mine[tied_next_[d]];
          TiedGroup const& group = view_.tied_groups()[g];
          double ready = 0;
          for (int r : group.devices) {
            if (!at_step(r) || view_.tied_groups_of(r)[tied_next_[r]] != g) {
              if (why) *why = "STEP on device " + std::to_string(r) + " (the tied weights' all-reduce)";
              return false;
            }
            ready = std::max({ready, free_[r][0], free_[r][1], free_[r][2]});
          }
          double const end = ready + group.allreduce_s;
          tied_progress_ = true;
          for (int r : group.devices) {
            free_[r][1] = end;
            ++tied_next_[r];
            if (end > ready)
              timeline_.intervals.push_back({r, Stream::kSend, Op::kAllReduce, -1, -1, ready, end, "ALLREDUCE tied"});
          }
        }
        double const start = std::max({free[0], free[1], free[2]});
        // The optimizer updates every stage the device hosts (priced when the plan says how long).
        double update = 0;
        for (int stage : view_.stages_on(d)) update += view_.stage(stage).update_s;
        free[0] = start + update;
        record(d, Stream::kCompute, in, start, start + update);
        advance(d, st);
        return true;
      }
    }
    return false;
  }

  // Device r waits at its STEP with every other stream done up to it.
  bool at_step(int r) const {
    int const idx = next_[r][0];
    if (idx >= size(r) || sched_.devices[r][idx].op != Op::kStep) return false;
    for (int other = 1; other < kNumStreams; ++other)
      if (next_[r][other] < idx) return false;
    return true;
  }

  PlanView const& view_;
  Schedule const& sched_;
  int D_, M_;
  std::vector<std::vector<bool>> split_;
  std::vector<std::array<int, kNumStreams>> next_;
  std::vector<int> tied_next_;  // per device: its next tied group (index into tied_groups_of)
  bool tied_progress_ = false;  // a tied all-reduce ran since run() last looked
  std::vector<std::array<double, kNumStreams>> free_;
  std::vector<std::vector<int>> remaining_bw_;
  std::vector<std::vector<double>> last_bw_end_;
  std::unordered_map<uint64_t, double> compute_, recv_;
  std::unordered_map<uint64_t, std::pair<double, double>> sent_;
  Timeline timeline_;
};

}  // namespace

std::vector<std::vector<bool>> split_backward(PlanView const& view, Schedule const& schedule) {
  std::vector<std::vector<bool>> split(view.num_stages(), std::vector<bool>(schedule.num_devices(), false));
  for (int d = 0; d < schedule.num_devices(); ++d)
    for (auto const& in : schedule.devices[d])
      if (in.op == Op::kWeight && in.stage >= 0 && in.stage < view.num_stages()) split[in.stage][d] = true;
  return split;
}

DataflowResult run_dataflow(PlanView const& view, Schedule const& schedule) { return Engine(view, schedule).run(); }

}  // namespace gp::schedule
