#include "schedule/compute_order.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <unordered_map>

namespace gp::schedule {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

class Greedy {
 public:
  Greedy(PlanView const& view, OrderRequest const& req)
      : view_(view), req_(req), D_(view.num_devices()), M_(req.micro_batches) {
    free_.assign(D_, 0.0);
    forwards_left_.assign(D_, 0);
    for (int d = 0; d < D_; ++d)
      for (auto const& seq : req.sequences[d])
        for (auto const& op : seq) forwards_left_[d] += op.op == Op::kForward;
    pos_.resize(D_);
    pending_.assign(view.num_stages(), std::vector<std::deque<int>>(D_));
    for (int d = 0; d < D_; ++d) {
      pos_[d].assign(req.sequences[d].size(), 0);
      for (auto const& seq : req.sequences[d])
        remaining_ += static_cast<int64_t>(seq.size()) * (req.defer_weight ? 2 : 1);
    }
    // Only B ops spawn a W; F ops counted twice above are corrected here.
    if (req.defer_weight) {
      int64_t forwards = 0;
      for (auto const& dev : req.sequences)
        for (auto const& seq : dev)
          for (auto const& op : seq) forwards += op.op == Op::kForward;
      remaining_ -= forwards;
    }
    orders_.resize(D_);
  }

  Result<std::vector<std::vector<ComputeOp>>> run() {
    while (remaining_ > 0) {
      int best_d = -1;
      double best_t = kNever;
      Choice best_c;
      for (int d = 0; d < D_; ++d) {
        Choice c = decide(d);
        if (c.time < best_t) best_t = c.time, best_d = d, best_c = c;
      }
      if (best_d < 0)
        return internal_error(
            "the policy's compute order cannot run on this plan (a dependency cycle between devices)");
      commit(best_d, best_c);
    }
    return std::move(orders_);
  }

 private:
  struct Choice {
    double time = kNever;  // when the op starts
    ComputeOp op;
    int seq = -1;  // the sequence it heads, or -1 for a queued W
  };

  uint64_t key(int s, int d, int kind, int m) const {
    return ((static_cast<uint64_t>(s) * 3 + kind) * D_ + d) * M_ + m;
  }
  std::optional<double> end(int s, int d, int kind, int m) const {
    auto it = end_.find(key(s, d, kind, m));
    if (it == end_.end()) return std::nullopt;
    return it->second;
  }

  std::optional<double> ready(int d, ComputeOp const& op) const {
    double t = 0;
    auto need = [&](std::optional<double> x, double delay) {
      if (!x) return false;
      t = std::max(t, *x + delay);
      return true;
    };
    if (op.op == Op::kForward) {
      for (int e : view_.in_edges(op.stage))
        for (auto const& p : view_.pieces(e))
          if (p.dst_device == d && !need(end(p.src_stage, p.src_device, 0, op.micro_batch), p.local() ? 0 : p.seconds))
            return std::nullopt;
    } else if (op.op == Op::kBackward) {
      if (!need(end(op.stage, d, 0, op.micro_batch), 0)) return std::nullopt;
      for (int e : view_.out_edges(op.stage))
        for (auto const& p : view_.pieces(e))
          if (p.src_device == d && !need(end(p.dst_stage, p.dst_device, 1, op.micro_batch), p.local() ? 0 : p.seconds))
            return std::nullopt;
    } else {
      if (!need(end(op.stage, d, 1, op.micro_batch), 0)) return std::nullopt;
    }
    return t;
  }

  double duration(ComputeOp const& op) const {
    auto const& st = view_.stage(op.stage);
    if (op.op == Op::kForward) return st.fwd_s;
    if (op.op == Op::kWeight) return st.bwd_weight_s;
    return view_.backward_s(op.stage, req_.defer_weight);
  }

  // B before F; older micro-batch first; for B the later stage (its gradient unblocks the earlier).
  static bool better(ComputeOp const& a, ComputeOp const& b) {
    if (a.op != b.op) return a.op == Op::kBackward;
    if (a.micro_batch != b.micro_batch) return a.micro_batch < b.micro_batch;
    return a.op == Op::kBackward ? a.stage > b.stage : a.stage < b.stage;
  }

  Choice decide(int d) const {
    double const now = free_[d];
    std::vector<Choice> forced, heads, fillers;
    std::vector<bool> blocked(view_.num_stages(), false);
    if (req_.defer_weight)
      for (int s : view_.stages_on(d)) {
        auto const& q = pending_[s][d];
        if (q.empty()) continue;
        ComputeOp w{Op::kWeight, s, q.front()};
        double const t = std::max(now, *end(s, d, 1, q.front()));
        if (static_cast<int>(q.size()) > req_.weight_cap[s]) {
          forced.push_back({t, w, -1});
          blocked[s] = true;
        } else {
          fillers.push_back({t, w, -1});
        }
      }
    auto const& seqs = req_.sequences[d];
    for (int i = 0; i < static_cast<int>(seqs.size()); ++i) {
      if (pos_[d][i] >= static_cast<int>(seqs[i].size())) continue;
      ComputeOp const& op = seqs[i][pos_[d][i]];
      if (blocked[op.stage]) continue;
      if (auto r = ready(d, op))
        heads.push_back({std::max(now, *r), op, i});
      else
        heads.push_back({kNever, op, i});
    }
    auto pick = [&](std::vector<Choice> const& cands, double by) {
      Choice best;
      bool have = false;
      for (auto const& c : cands)
        if (c.time <= by && (!have || better(c.op, best.op))) best = c, have = true;
      return best;
    };
    // Work ready now: forced W's first, then sequence heads, then W's that fill the gap.
    if (Choice c = pick(forced, now); c.time != kNever) return c;
    if (Choice c = pick(heads, now); c.time != kNever) return c;
    // Queued W's fill idle time; without fill_early only once the device's forwards are all done
    // (the cool-down), since earlier gaps may be short waits for a gradient that a W would delay.
    if (!req_.fill_early && forwards_left_[d] > 0) fillers.clear();
    if (Choice c = pick(fillers, now); c.time != kNever) return c;
    // Nothing ready now: the device waits for the earliest known input.
    double t = kNever;
    for (auto const* set : {&forced, &heads, &fillers})
      for (auto const& c : *set) t = std::min(t, c.time);
    if (t == kNever) return {};
    if (Choice c = pick(forced, t); c.time != kNever) return c;
    if (Choice c = pick(heads, t); c.time != kNever) return c;
    return pick(fillers, t);
  }

  void commit(int d, Choice const& c) {
    double const start = std::max(free_[d], c.time);
    double const finish = start + duration(c.op);
    free_[d] = finish;
    int const kind = c.op.op == Op::kForward ? 0 : c.op.op == Op::kBackward ? 1 : 2;
    end_[key(c.op.stage, d, kind, c.op.micro_batch)] = finish;
    orders_[d].push_back(c.op);
    if (c.op.op == Op::kForward) --forwards_left_[d];
    --remaining_;
    if (c.seq >= 0) ++pos_[d][c.seq];
    if (c.op.op == Op::kWeight) pending_[c.op.stage][d].pop_front();
    if (c.op.op == Op::kBackward && req_.defer_weight) pending_[c.op.stage][d].push_back(c.op.micro_batch);
  }

  PlanView const& view_;
  OrderRequest const& req_;
  int D_, M_;
  int64_t remaining_ = 0;
  std::vector<double> free_;
  std::vector<int> forwards_left_;
  std::vector<std::vector<int>> pos_;
  std::vector<std::vector<std::deque<int>>> pending_;
  std::unordered_map<uint64_t, double> end_;
  std::vector<std::vector<ComputeOp>> orders_;
};

}  // namespace

Result<std::vector<std::vector<ComputeOp>>> order_compute(PlanView const& view, OrderRequest const& request) {
  if (static_cast<int>(request.sequences.size()) != view.num_devices())
    return internal_error("order_compute: one list of sequences per device expected");
  return Greedy(view, request).run();
}

}  // namespace gp::schedule
