// How a plan's stage graph maps onto an operator graph at run time: the operators of each stage,
// the graph tensors on each plan edge, and how replicated stages slice a micro-batch.
//
// Replica slicing: the micro-batch is cut into L equal chunks along the batch axis (L: the least
// common multiple of the stages' replica counts); replica j of a stage with r replicas holds the
// chunks c with c mod r == j, in increasing c. A piece of an edge from a stage with r replicas to
// one with r' replicas carries the chunks both replicas hold, so when one count divides the other
// the pieces are exactly the (i mod r, i mod r') pairs of the schedule's replica routing
// (schedule/plan_view.h). Other counts are refused. With no replicas (L = 1) a piece is the whole
// tensor and nothing is copied.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/autodiff.h"
#include "exec/tensor.h"
#include "graph/op_graph.h"
#include "partition/plan.h"
#include "schedule/plan_view.h"

namespace gp::exec {

class RuntimePlan {
 public:
  // `micro_batch`: samples per micro-batch (the plan's b). The plan must outlive the result.
  static Result<RuntimePlan> make(graph::OpGraph const& graph, partition::Plan const& plan);

  schedule::PlanView const& view() const { return view_; }
  partition::Plan const& plan() const { return view_.plan(); }
  graph::OpGraph const& graph() const { return *graph_; }
  int num_stages() const { return view_.num_stages(); }
  int64_t micro_batch() const { return micro_batch_; }
  int chunks() const { return chunks_; }

  std::vector<graph::OpId> const& stage_ops(int s) const { return stage_ops_[s]; }
  AutodiffPlan const& autodiff(int s) const { return autodiff_[s]; }
  // Graph tensors produced in the edge's source stage and read in its destination, by id.
  std::vector<graph::TensorId> const& edge_tensors(int e) const { return edge_tensors_[e]; }
  // Those of them that get a gradient back (the destination stage's input gradients).
  std::vector<graph::TensorId> const& edge_grad_tensors(int e) const { return edge_grad_tensors_[e]; }
  int loss_stage() const { return loss_stage_; }  // holds the op producing graph.outputs()[0]
  int replica_of(int stage, int device) const;    // -1 when the stage does not run there
  int replicas(int stage) const { return view_.stage(stage).replicas; }

  // A trainable weight several stages read (tied: a language model's embedding and its output
  // projection; Llama's rotary tables, when named trainable). Each stage trains its own copy;
  // at STEP every device adds the gradients of the copies it holds (replica 0 of each stage: a
  // replicated stage's replicas hold the same sum), one all-reduce over the devices holding a copy
  // sums those, and every copy takes the sum and so the same update, as one device's single
  // weight would.
  struct TiedWeight {
    std::string name;
    std::vector<int64_t> dims;
    std::vector<int> stages;  // the stages reading it, increasing
  };
  std::vector<TiedWeight> const& tied_weights() const { return tied_; }
  // The tied weights grouped by the devices holding a copy (schedule::group_tied_weights, as the
  // simulator prices them): one all-reduce per group, in this order on every device.
  std::vector<schedule::TiedGroup> const& tied_groups() const { return tied_groups_; }

  // Chunks (global ids, increasing) that the piece from producer replica p to consumer replica q
  // of edge e carries.
  std::vector<int> piece_chunks(int e, int p, int q) const;
  // Whether consumer replica q's gradient of an unbatched tensor of edge e goes back to producer
  // replica p (the piece from p to q carries zeros otherwise). Each consumer replica computes a
  // partial gradient of the whole tensor from its rows; it goes to one producer replica,
  // q mod r (r: the producer's replicas, among those q receives from), and a producer replica
  // adds what its consumers send. Summed over the producer replicas, as their weight gradients
  // are at STEP, every consumer replica's part counts once.
  bool unbatched_gradient_goes(int e, int p, int q) const;
  // Positions of those chunks in a replica of a stage with r replicas.
  static std::vector<int> positions(std::vector<int> const& chunks, int replicas);

  // Shape of tensor t in one replica (of r) of the micro-batch, or the full shape when unbatched.
  std::vector<int64_t> replica_shape(graph::TensorId t, int replicas) const;
  // Shape of t in a piece of `n_chunks` chunks.
  std::vector<int64_t> piece_shape(graph::TensorId t, int n_chunks) const;
  bool batched(graph::TensorId t) const { return graph_->tensor(t).shape.has_batch(); }

 private:
  schedule::PlanView view_;
  graph::OpGraph const* graph_ = nullptr;
  int64_t micro_batch_ = 0;
  int chunks_ = 1;
  int loss_stage_ = -1;
  std::vector<std::vector<graph::OpId>> stage_ops_;
  std::vector<AutodiffPlan> autodiff_;
  std::vector<std::vector<graph::TensorId>> edge_tensors_, edge_grad_tensors_;
  std::vector<TiedWeight> tied_;
  std::vector<schedule::TiedGroup> tied_groups_;
};

}  // namespace gp::exec
