// What the builders, the validator and the simulator need to know about a Plan, precomputed:
// the stage graph's adjacency and depths, where each stage runs, and how tensors move between
// replica groups.
//
// Replica routing rule: a stage with r replicas splits every micro-batch into r equal slices, one
// per replica (data parallel inside the stage). Along an edge from a stage with r replicas to one
// with r' replicas the micro-batch is cut into k = max(r, r') pieces; piece i goes from producer
// replica (i mod r) to consumer replica (i mod r'), carries 1/k of the edge's bytes and takes
// transfer_s / k. The gradient of a piece goes back along the same pair. The (edge, micro-batch,
// source device, destination device) of a piece is unique; a piece whose two replicas share a
// device is local and needs no SEND/RECV.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "partition/plan.h"

namespace gp::schedule {

struct Piece {
  int edge = 0;
  int src_stage = 0, dst_stage = 0;
  int src_device = 0, dst_device = 0;
  double seconds = 0;  // one direction, one micro-batch piece
  bool local() const { return src_device == dst_device; }
};

// Weights that several stages read (partition::PlanTiedWeight), grouped by the devices holding a
// copy (every device of those stages): at STEP each group is one all-reduce over its devices,
// the groups in order of their first weight, so that every device meets its groups in one order.
struct TiedGroup {
  std::vector<int> devices;  // increasing
  std::vector<int> members;  // indices into the list grouped (ascending)
  double allreduce_s = 0;    // the members' all-reduce times, summed
};
// `stages[i]`: the stages reading weight i; `seconds[i]` (optional, else 0): its all-reduce time.
std::vector<TiedGroup> group_tied_weights(partition::Plan const& plan, std::vector<std::vector<int>> const& stages,
                                          std::vector<double> const& seconds = {});

class PlanView {
 public:
  // Checks what the schedule code relies on (ids, edges, acyclicity, devices per stage).
  static Result<PlanView> make(partition::Plan const& plan);

  partition::Plan const& plan() const { return *plan_; }
  int num_stages() const { return static_cast<int>(plan_->stages.size()); }
  int num_devices() const { return num_devices_; }
  partition::PlanStage const& stage(int s) const { return plan_->stages[s]; }
  std::vector<int> const& in_edges(int s) const { return in_edges_[s]; }
  std::vector<int> const& out_edges(int s) const { return out_edges_[s]; }
  std::vector<Piece> const& pieces(int edge) const { return pieces_[edge]; }
  int depth(int s) const { return depth_[s]; }  // longest path to a sink, counting s
  int max_depth() const { return max_depth_; }
  std::vector<int> const& stages_on(int device) const { return stages_on_[device]; }  // ascending ids
  bool runs_on(int stage, int device) const;
  bool is_chain() const { return chain_; }
  int branching_stage() const { return branching_stage_; }  // a stage with >1 in- or out-edges, or -1
  // Static memory of a device: weights + optimizer state of all its stages.
  int64_t static_bytes(int device) const;
  // Duration of B of stage s: the input part, plus the weight part unless W runs apart (`split`),
  // plus a forward when the stage recomputes its activations.
  double backward_s(int s, bool split) const;
  // Bytes stage s holds for one micro-batch between its F and its backward: the saved activations,
  // or with recompute only the stage inputs (the backward then needs the activations on top).
  int64_t held_bytes(int s) const;
  // The plan's tied weights, grouped (group_tied_weights), and the groups device d is in, in order.
  std::vector<TiedGroup> const& tied_groups() const { return tied_groups_; }
  std::vector<int> const& tied_groups_of(int device) const { return tied_groups_of_[device]; }

 private:
  partition::Plan const* plan_ = nullptr;
  int num_devices_ = 0;
  std::vector<std::vector<int>> in_edges_, out_edges_, stages_on_;
  std::vector<std::vector<Piece>> pieces_;
  std::vector<int> depth_;
  std::vector<TiedGroup> tied_groups_;
  std::vector<std::vector<int>> tied_groups_of_;
  int max_depth_ = 0;
  bool chain_ = true;
  int branching_stage_ = -1;
};

}  // namespace gp::schedule
