#include "schedule/validate.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "schedule/dataflow.h"
#include "schedule/memory.h"
#include "schedule/plan_view.h"
#include "schedule/units.h"

namespace gp::schedule {
namespace {

std::string str(int x) { return std::to_string(x); }
std::string quoted(Instruction const& in) { return "'" + to_string(in) + "'"; }

Instruction compute(Op op, int s, int m) { return Instruction{op, s, m, -1, false, -1, 0}; }
Instruction transfer(Op op, bool grad, int e, int m, int peer) { return Instruction{op, -1, m, e, grad, peer, 0}; }

class Checker {
 public:
  Checker(partition::Plan const& plan, PlanView const& view, Schedule const& s, CheckOptions const& o)
      : plan_(plan), view_(view), s_(s), opt_(o), D_(s.num_devices()), M_(s.num_micro_batches) {}

  std::vector<Violation> run() {
    check_references();
    if (!v_.empty()) return std::move(v_);
    index_instructions();
    check_once_and_order();
    check_transfers();
    check_allreduce_and_step();
    if (!v_.empty()) return std::move(v_);
    check_deadlock();
    if (!v_.empty()) return std::move(v_);
    check_memory();
    return std::move(v_);
  }

 private:
  void add(int d, int index, std::string rule, std::string msg, std::string fix = {}) {
    int const line = d >= 0 && index >= 0 ? s_.devices[d][index].line : 0;
    v_.push_back({d, line, std::move(rule), std::move(msg), std::move(fix)});
  }
  int line_of(int d, int index) const { return index >= 0 ? s_.devices[d][index].line : 0; }

  // The non-local piece of `edge` between the two devices, or nullptr.
  Piece const* find_piece(int edge, int src, int dst) const {
    for (auto const& p : view_.pieces(edge))
      if (p.src_device == src && p.dst_device == dst && !p.local()) return &p;
    return nullptr;
  }

  void check_references() {
    int const n = view_.num_stages();
    int const E = static_cast<int>(plan_.edges.size());
    for (int d = 0; d < D_; ++d) {
      auto const& list = s_.devices[d];
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        auto const& in = list[i];
        bool const has_stage =
            in.op == Op::kForward || in.op == Op::kBackward || in.op == Op::kWeight || in.op == Op::kAllReduce;
        bool const has_mb = in.op != Op::kAllReduce && in.op != Op::kStep;
        if (has_stage && in.stage >= n) {
          add(d, i, "reference",
              quoted(in) + " names stage " + str(in.stage) + " but the plan has stages 0.." + str(n - 1));
          continue;
        }
        if (has_mb && in.micro_batch >= M_) {
          add(d, i, "reference",
              quoted(in) + " names micro-batch " + str(in.micro_batch) + " but the schedule has " + str(M_) +
                  " (m0..m" + str(M_ - 1) + ")");
          continue;
        }
        if (has_stage && !view_.runs_on(in.stage, d)) {
          std::string devs;
          for (int x : view_.stage(in.stage).devices) devs += (devs.empty() ? "" : ",") + str(x);
          add(d, i, "placement",
              quoted(in) + ": stage " + str(in.stage) + " does not run on device " + str(d) +
                  " in the plan (its devices: " + devs + ")",
              "move it to one of the stage's devices");
          continue;
        }
        if (in.op == Op::kAllReduce && view_.stage(in.stage).devices.size() < 2)
          add(d, i, "allreduce",
              quoted(in) + ": stage " + str(in.stage) + " has one replica, there is nothing to all-reduce",
              "remove the line");
        if (in.op == Op::kSend || in.op == Op::kRecv) {
          if (in.edge >= E) {
            add(d, i, "reference",
                quoted(in) + " names plan edge " + str(in.edge) + " but the plan has " + str(E) + " edges");
            continue;
          }
          if (in.peer >= D_) {
            add(d, i, "reference",
                quoted(in) + " names device " + str(in.peer) + " but the schedule has " + str(D_) + " devices");
            continue;
          }
          bool const outgoing_data = (in.op == Op::kSend) != in.gradient;  // data flowing along the edge
          int const src = outgoing_data ? d : in.peer, dst = outgoing_data ? in.peer : d;
          if (!find_piece(in.edge, src, dst)) {
            auto const& edge = plan_.edges[in.edge];
            std::string expect;
            for (auto const& p : view_.pieces(in.edge)) {
              if (p.local()) continue;
              if (outgoing_data && p.src_device == d) expect += (expect.empty() ? "d" : ", d") + str(p.dst_device);
              if (!outgoing_data && p.dst_device == d) expect += (expect.empty() ? "d" : ", d") + str(p.src_device);
            }
            add(d, i, "route",
                quoted(in) + ": plan edge " + str(in.edge) + " (stage " + str(edge.src) + " -> " + str(edge.dst) +
                    ") moves no data between device " + str(src) + " and device " + str(dst),
                expect.empty() ? "remove the line (device " + str(d) + " takes no part in this edge's transfers)"
                               : "use peer " + expect +
                                     " (replica routing: piece i goes from replica i mod r to replica i mod r')");
          }
        }
      }
    }
  }

  uint64_t ckey(int kind, int s, int d, int m) const {
    return ((static_cast<uint64_t>(s) * 3 + kind) * D_ + d) * M_ + m;
  }
  uint64_t tkey(bool grad, int e, int m, int src, int dst) const {
    return (((static_cast<uint64_t>(e) * 2 + grad) * M_ + m) * D_ + src) * D_ + dst;
  }
  static int kind(Op op) { return op == Op::kForward ? 0 : op == Op::kBackward ? 1 : 2; }
  int first(int k, int s, int d, int m) const {
    auto it = compute_.find(ckey(k, s, d, m));
    return it == compute_.end() || it->second.empty() ? -1 : it->second.front();
  }

  void index_instructions() {
    for (int d = 0; d < D_; ++d) {
      auto const& list = s_.devices[d];
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        auto const& in = list[i];
        switch (in.op) {
          case Op::kForward:
          case Op::kBackward:
          case Op::kWeight:
            compute_[ckey(kind(in.op), in.stage, d, in.micro_batch)].push_back(i);
            break;
          case Op::kSend:
          case Op::kRecv: {
            bool const outgoing_data = (in.op == Op::kSend) != in.gradient;
            int const src = outgoing_data ? d : in.peer, dst = outgoing_data ? in.peer : d;
            (in.op == Op::kSend ? sends_ : recvs_)[tkey(in.gradient, in.edge, in.micro_batch, src, dst)].push_back(i);
            break;
          }
          case Op::kAllReduce:
            allreduce_[static_cast<uint64_t>(in.stage) * D_ + d].push_back(i);
            break;
          case Op::kStep:
            step_[d].push_back(i);
            break;
        }
      }
    }
  }

  void check_once_and_order() {
    static char const* names[] = {"F", "B", "W"};
    for (int s = 0; s < view_.num_stages(); ++s)
      for (int d : view_.stage(s).devices) {
        bool has_w = false;
        for (int m = 0; m < M_ && !has_w; ++m) has_w = compute_.count(ckey(2, s, d, m)) > 0;
        for (int m = 0; m < M_; ++m) {
          for (int k = 0; k < (has_w ? 3 : 2); ++k) {
            auto it = compute_.find(ckey(k, s, d, m));
            std::string const what = std::string(names[k]) + " s" + str(s) + " m" + str(m);
            if (it == compute_.end()) {
              std::string const hint =
                  k == 2 ? " (other micro-batches of this stage split B and W, so every one must)" : "";
              add(d, -1, "once", "device " + str(d) + " never runs '" + what + "'" + hint,
                  "add '" + what + "' to device " + str(d) + "'s block");
            } else if (it->second.size() > 1) {
              add(d, it->second[1], "once",
                  "'" + what + "' runs twice on device " + str(d) + " (lines " + str(line_of(d, it->second[0])) +
                      " and " + str(line_of(d, it->second[1])) + ")",
                  "remove one of them");
            }
          }
          int const f = first(0, s, d, m), b = first(1, s, d, m), w = first(2, s, d, m);
          if (f >= 0 && b >= 0 && b < f)
            add(d, b, "order",
                "'B s" + str(s) + " m" + str(m) + "' comes before its forward (line " + str(line_of(d, f)) + ")",
                "move it after line " + str(line_of(d, f)));
          if (b >= 0 && w >= 0 && w < b)
            add(d, w, "order",
                "'W s" + str(s) + " m" + str(m) + "' comes before its B (line " + str(line_of(d, b)) + ")",
                "move it after line " + str(line_of(d, b)));
        }
      }
  }

  void check_transfers() {
    for (int e = 0; e < static_cast<int>(plan_.edges.size()); ++e)
      for (auto const& p : view_.pieces(e)) {
        if (p.local()) continue;
        for (int grad = 0; grad < 2; ++grad)
          for (int m = 0; m < M_; ++m) check_transfer(p, grad != 0, m);
      }
  }

  void check_transfer(Piece const& p, bool grad, int m) {
    int const sender = grad ? p.dst_device : p.src_device;
    int const receiver = grad ? p.src_device : p.dst_device;
    // Producer on the sender, consumer on the receiver.
    Instruction const producer = grad ? compute(Op::kBackward, p.dst_stage, m) : compute(Op::kForward, p.src_stage, m);
    Instruction const consumer = grad ? compute(Op::kBackward, p.src_stage, m) : compute(Op::kForward, p.dst_stage, m);
    Instruction const send = transfer(Op::kSend, grad, p.edge, m, receiver);
    Instruction const recv = transfer(Op::kRecv, grad, p.edge, m, sender);
    uint64_t const key = tkey(grad, p.edge, m, p.src_device, p.dst_device);
    auto const* sends = find(sends_, key);
    auto const* recvs = find(recvs_, key);
    int const prod = first(kind(producer.op), producer.stage, sender, m);
    int const cons = first(kind(consumer.op), consumer.stage, receiver, m);
    if (!sends && !recvs) {
      add(receiver, cons, "match",
          quoted(consumer) + " on device " + str(receiver) + " needs " + (grad ? "gradient" : "activation") + " '" +
              (grad ? "g" : "e") + str(p.edge) + " m" + str(m) + "' from device " + str(sender) +
              ", but no SEND/RECV moves it",
          "add " + quoted(send) + " to device " + str(sender) + " after " + quoted(producer) + ", and " + quoted(recv) +
              " to device " + str(receiver) + " before " + quoted(consumer));
      return;
    }
    if (!recvs) {
      add(sender, sends->front(), "match", quoted(send) + " has no matching receive on device " + str(receiver),
          "add " + quoted(recv) + " to device " + str(receiver) + " before " + quoted(consumer));
    } else if (recvs->size() > 1) {
      add(receiver, (*recvs)[1], "match", quoted(recv) + " appears twice on device " + str(receiver), "remove one");
    }
    if (!sends) {
      add(receiver, recvs->front(), "match", quoted(recv) + " has no matching send on device " + str(sender),
          "add " + quoted(send) + " to device " + str(sender) + " after " + quoted(producer));
    } else if (sends->size() > 1) {
      add(sender, (*sends)[1], "match", quoted(send) + " appears twice on device " + str(sender), "remove one");
    }
    if (sends && prod >= 0 && sends->front() < prod)
      add(sender, sends->front(), "send-after-produce",
          quoted(send) + " comes before " + quoted(producer) + " (line " + str(line_of(sender, prod)) +
              "), which produces it",
          "move it after line " + str(line_of(sender, prod)));
    if (recvs && cons >= 0 && recvs->front() > cons)
      add(receiver, recvs->front(), "recv-before-use",
          quoted(recv) + " comes after " + quoted(consumer) + " (line " + str(line_of(receiver, cons)) +
              "), which needs it",
          "move it before line " + str(line_of(receiver, cons)));
  }

  static std::vector<int> const* find(std::unordered_map<uint64_t, std::vector<int>> const& map, uint64_t key) {
    auto it = map.find(key);
    return it == map.end() ? nullptr : &it->second;
  }

  void check_allreduce_and_step() {
    for (int s = 0; s < view_.num_stages(); ++s) {
      if (view_.stage(s).devices.size() < 2) continue;
      for (int d : view_.stage(s).devices) {
        int last = -1;  // the stage's last backward on d
        for (int m = 0; m < M_; ++m)
          for (int k = 1; k < 3; ++k) last = std::max(last, first(k, s, d, m));
        auto const* ar = find(allreduce_, static_cast<uint64_t>(s) * D_ + d);
        std::string const ins = "'ALLREDUCE s" + str(s) + "'";
        if (!ar) {
          add(d, last, "allreduce",
              "stage " + str(s) + " has " + str(static_cast<int>(view_.stage(s).devices.size())) +
                  " replicas but device " + str(d) + " never all-reduces its gradients",
              "add " + ins + " after line " + str(line_of(d, last)));
        } else if (ar->size() > 1) {
          add(d, (*ar)[1], "allreduce", ins + " appears twice on device " + str(d), "remove one");
        } else if (ar->front() < last) {
          add(d, ar->front(), "allreduce",
              ins + " comes before the stage's last backward (line " + str(line_of(d, last)) + ")",
              "move it after line " + str(line_of(d, last)));
        }
      }
    }
    for (int d = 0; d < D_; ++d) {
      auto it = step_.find(d);
      int const n = static_cast<int>(s_.devices[d].size());
      if (it == step_.end()) {
        add(d, -1, "step", "device " + str(d) + " has no STEP", "end device " + str(d) + "'s block with 'STEP'");
      } else if (it->second.size() > 1) {
        add(d, it->second[0], "step",
            "STEP appears twice on device " + str(d) + " (lines " + str(line_of(d, it->second[0])) + " and " +
                str(line_of(d, it->second[1])) + ")",
            "keep only the last one");
      } else if (it->second.front() != n - 1) {
        add(d, it->second.front(), "step", "STEP must be the last instruction of device " + str(d),
            "move it to the end of the block");
      }
    }
  }

  void check_deadlock() {
    auto result = run_dataflow(view_, s_);
    if (result.blocked.empty()) return;
    std::string const count = str(static_cast<int>(result.blocked.size()));
    for (auto const& b : result.blocked)
      add(b.device, b.index, "deadlock",
          quoted(s_.devices[b.device][b.index]) + " never runs (one of " + count + " blocked): it waits for " +
              b.waits_for,
          "order each device's instructions so that what they wait for can happen first (or build the schedule with "
          "'graphpipe schedule --policy graph-1f1b')");
  }

  void check_memory() {
    auto const mem = account_memory(view_, s_);
    for (int d = 0; d < D_; ++d) {
      int64_t const limit = opt_.memory_limit_bytes < 0 ? partition::memory_of(plan_, d) : opt_.memory_limit_bytes;
      if (limit <= 0 || mem[d].peak_bytes <= limit) continue;
      int const at = first_over_limit(view_, s_, d, limit);
      std::string held;
      for (int s : view_.stages_on(d))
        held += (held.empty() ? "" : ", ") + str(mem[d].peak_in_flight[s]) + " micro-batches of stage " + str(s) +
                (view_.stage(s).recompute ? " (inputs only: it recomputes)" : "");
      add(d, at, "memory",
          "device " + str(d) + " goes over its memory limit " + format_bytes(limit) + ": peak " +
              format_bytes(mem[d].peak_bytes) + " (weights and optimizer " + format_bytes(mem[d].static_bytes) +
              ", activations of at most " + held + ")",
          "keep fewer micro-batches in flight (policy 1f1b or graph-1f1b instead of gpipe), recompute activations in "
          "more stages (a plan stage's \"recompute\": true), or partition onto more devices");
    }
  }

  partition::Plan const& plan_;
  PlanView const& view_;
  Schedule const& s_;
  CheckOptions opt_;
  int D_, M_;
  std::vector<Violation> v_;
  std::unordered_map<uint64_t, std::vector<int>> compute_, sends_, recvs_, allreduce_;
  std::unordered_map<int, std::vector<int>> step_;
};

}  // namespace

std::string Violation::to_string() const {
  std::string out;
  if (device >= 0) out += "device " + std::to_string(device);
  if (line > 0) out += std::string(out.empty() ? "" : ", ") + "line " + std::to_string(line);
  out += std::string(out.empty() ? "" : ": ") + "[" + rule + "] " + message;
  if (!fix.empty()) out += "; fix: " + fix;
  return out;
}

std::vector<Violation> validate_schedule(partition::Plan const& plan, Schedule const& schedule,
                                         CheckOptions const& options) {
  auto view = PlanView::make(plan);
  if (!view.is_ok()) return {{-1, 0, "header", "the plan is not usable: " + view.status().message(), ""}};
  std::vector<Violation> v;
  if (schedule.num_stages != view->num_stages())
    v.push_back({-1, 0, "header",
                 "the schedule was built for " + std::to_string(schedule.num_stages) + " stages but the plan has " +
                     std::to_string(view->num_stages()),
                 "rebuild it from this plan with 'graphpipe schedule'"});
  if (schedule.num_micro_batches < 1)
    v.push_back({-1, 0, "header", "the schedule has no micro-batches", "set 'micro-batches' in the header"});
  if (schedule.num_devices() != view->num_devices())
    v.push_back({-1, 0, "header",
                 "the schedule has " + std::to_string(schedule.num_devices()) + " device blocks but the plan uses " +
                     std::to_string(view->num_devices()) + " devices",
                 "one 'device <n>:' block per plan device"});
  if (!v.empty()) return v;
  return Checker(plan, *view, schedule, options).run();
}

Status check_schedule(partition::Plan const& plan, Schedule const& schedule, CheckOptions const& options) {
  auto const v = validate_schedule(plan, schedule, options);
  if (v.empty()) return Status::ok();
  std::string msg = std::to_string(v.size()) + " problem" + (v.size() == 1 ? "" : "s") + " in the schedule:";
  for (size_t i = 0; i < v.size() && i < 20; ++i) msg += "\n  " + v[i].to_string();
  if (v.size() > 20) msg += "\n  ... and " + std::to_string(v.size() - 20) + " more";
  return invalid_argument(msg);
}

}  // namespace gp::schedule
