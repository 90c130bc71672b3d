#include "schedule/emit.h"

namespace gp::schedule {

Schedule emit_schedule(PlanView const& view, int micro_batches, std::string const& policy,
                       std::vector<std::vector<ComputeOp>> const& orders) {
  Schedule s;
  s.policy = policy;
  s.model = view.plan().model;
  s.num_stages = view.num_stages();
  s.num_micro_batches = micro_batches;
  s.devices.resize(view.num_devices());
  for (int d = 0; d < view.num_devices(); ++d) {
    auto const& order = orders[d];
    auto& out = s.devices[d];
    // Index of each stage's last backward-side op on this device (where its gradients are final).
    std::vector<int> last(view.num_stages(), -1);
    for (int i = 0; i < static_cast<int>(order.size()); ++i)
      if (order[i].op != Op::kForward) last[order[i].stage] = i;
    auto transfer = [&](Op op, bool grad, int edge, int m, int peer) {
      out.push_back(Instruction{op, -1, m, edge, grad, peer, 0});
    };
    for (int i = 0; i < static_cast<int>(order.size()); ++i) {
      auto const& c = order[i];
      int const st = c.stage, m = c.micro_batch;
      if (c.op == Op::kForward) {
        for (int e : view.in_edges(st))
          for (auto const& p : view.pieces(e))
            if (p.dst_device == d && !p.local()) transfer(Op::kRecv, false, e, m, p.src_device);
        out.push_back(Instruction{Op::kForward, st, m, -1, false, -1, 0});
        for (int e : view.out_edges(st))
          for (auto const& p : view.pieces(e))
            if (p.src_device == d && !p.local()) transfer(Op::kSend, false, e, m, p.dst_device);
      } else if (c.op == Op::kBackward) {
        for (int e : view.out_edges(st))
          for (auto const& p : view.pieces(e))
            if (p.src_device == d && !p.local()) transfer(Op::kRecv, true, e, m, p.dst_device);
        out.push_back(Instruction{Op::kBackward, st, m, -1, false, -1, 0});
        for (int e : view.in_edges(st))
          for (auto const& p : view.pieces(e))
            if (p.dst_device == d && !p.local()) transfer(Op::kSend, true, e, m, p.src_device);
      } else {
        out.push_back(Instruction{Op::kWeight, st, m, -1, false, -1, 0});
      }
      if (i == last[st] && view.stage(st).devices.size() > 1)
        out.push_back(Instruction{Op::kAllReduce, st, -1, -1, false, -1, 0});
    }
    out.push_back(Instruction{Op::kStep, -1, -1, -1, false, -1, 0});
  }
  number_lines(s);
  return s;
}

}  // namespace gp::schedule
