#include "exec/runtime/routing.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace gp::exec {

Result<RuntimePlan> RuntimePlan::make(graph::OpGraph const& graph, partition::Plan const& plan) {
  ASSIGN_OR_RETURN(schedule::PlanView view, schedule::PlanView::make(plan));
  RuntimePlan rp;
  rp.view_ = std::move(view);
  rp.graph_ = &graph;
  rp.micro_batch_ = plan.micro_batch;
  if (plan.micro_batch <= 0) return invalid_argument("the plan has no micro-batch size");
  std::map<std::string, graph::OpId> by_name;
  for (graph::OpId id = 0; id < static_cast<graph::OpId>(graph.num_ops()); ++id) by_name.emplace(graph.op(id).name, id);
  int const n = rp.view_.num_stages();
  std::vector<int> stage_of(graph.num_ops(), -1);
  rp.stage_ops_.resize(n);
  for (int s = 0; s < n; ++s) {
    for (std::string const& name : plan.stages[s].nodes) {
      auto it = by_name.find(name);
      if (it == by_name.end())
        return invalid_argument("the plan's stage " + std::to_string(s) + " names operator '" + name +
                                "', which model '" + graph.name() +
                                "' does not have: the plan was made for another model, or with another --no-fusion "
                                "setting (partition this one, as it is loaded)");
      if (stage_of[it->second] >= 0)
        return invalid_argument("operator '" + name + "' is in stages " + std::to_string(stage_of[it->second]) +
                                " and " + std::to_string(s) + " of the plan");
      stage_of[it->second] = s;
    }
    rp.chunks_ = std::lcm(rp.chunks_, plan.stages[s].replicas);
  }
  for (graph::OpId id = 0; id < static_cast<graph::OpId>(graph.num_ops()); ++id)
    if (stage_of[id] < 0)
      return invalid_argument("operator '" + graph.op(id).name + "' of model '" + graph.name() +
                              "' is in no stage of the plan: the plan was made for another model, or with another "
                              "--no-fusion setting (partition this one, as it is loaded)");
  for (graph::OpId id : graph.topo_order()) rp.stage_ops_[stage_of[id]].push_back(id);
  for (int s = 0; s < n; ++s) {
    ASSIGN_OR_RETURN(AutodiffPlan ad, plan_autodiff(graph, rp.stage_ops_[s]));
    rp.autodiff_.push_back(std::move(ad));
  }
  if (graph.outputs().empty()) return invalid_argument("model '" + graph.name() + "' has no output for the loss");
  rp.loss_stage_ = stage_of[graph.tensor(graph.outputs()[0]).producer];

  // Edge tensors, and every stage input accounted for.
  std::map<std::pair<int, int>, int> edge_of;
  for (int e = 0; e < static_cast<int>(plan.edges.size()); ++e) edge_of[{plan.edges[e].src, plan.edges[e].dst}] = e;
  rp.edge_tensors_.assign(plan.edges.size(), {});
  rp.edge_grad_tensors_.assign(plan.edges.size(), {});
  for (int s = 0; s < n; ++s) {
    AutodiffPlan const& ad = rp.autodiff_[s];
    for (graph::TensorId t : ad.stage_inputs) {
      auto const& info = graph.tensor(t);
      if (info.producer == graph::kNoOp) continue;  // a graph input: fed from the data
      int const src = stage_of[info.producer];
      auto it = edge_of.find({src, s});
      if (it == edge_of.end())
        return invalid_argument("tensor '" + info.name + "' flows from stage " + std::to_string(src) + " to stage " +
                                std::to_string(s) + " but the plan has no edge between them (a damaged plan?)");
      rp.edge_tensors_[it->second].push_back(t);
      bool const wants_grad = std::find(ad.input_grads.begin(), ad.input_grads.end(), t) != ad.input_grads.end();
      if (wants_grad) {
        // A tensor without a batch dimension that needs a gradient (a weight reshaped or stacked
        // before its op, as TorchScript writes recurrent weights) travels whole, and its gradient
        // whole back: over replicas, see unbatched_gradient_goes().
        rp.edge_grad_tensors_[it->second].push_back(t);
      }
    }
  }
  // Weights several stages train (tied): a copy per stage, their gradients summed at STEP.
  std::map<graph::TensorId, std::vector<int>> users;
  for (int s = 0; s < n; ++s)
    for (graph::TensorId w : rp.autodiff_[s].weights) users[w].push_back(s);
  for (auto const& [w, stages] : users) {
    if (stages.size() < 2) continue;
    graph::TensorInfo const& info = graph.tensor(w);
    if (info.shape.has_batch())
      return invalid_argument("weight '" + info.name + "' has a batch dimension (a damaged graph?)");
    rp.tied_.push_back({info.name, info.shape.dims, stages});
  }
  std::vector<std::vector<int>> tied_stages;
  for (auto const& t : rp.tied_) tied_stages.push_back(t.stages);
  rp.tied_groups_ = schedule::group_tied_weights(plan, tied_stages);
  // Replica counts along each edge must divide one another, and batched tensors must split evenly.
  for (auto const& e : plan.edges) {
    int const r = plan.stages[e.src].replicas, r2 = plan.stages[e.dst].replicas;
    if (r % r2 != 0 && r2 % r != 0)
      return unsupported("stages " + std::to_string(e.src) + " (" + std::to_string(r) + " replicas) and " +
                         std::to_string(e.dst) + " (" + std::to_string(r2) +
                         " replicas) are connected but neither replica count divides the other: the runtime " +
                         "cannot route their pieces (replan, e.g. with --no-replication)");
  }
  if (rp.micro_batch_ % rp.chunks_ != 0)
    return unsupported("micro-batch " + std::to_string(rp.micro_batch_) + " does not split into " +
                       std::to_string(rp.chunks_) + " equal replica slices (least common multiple of the replica " +
                       "counts): choose a micro-batch size divisible by it");
  return rp;
}

bool RuntimePlan::unbatched_gradient_goes(int e, int p, int q) const { return p == q % replicas(plan().edges[e].src); }

int RuntimePlan::replica_of(int stage, int device) const {
  auto const& devs = view_.stage(stage).devices;
  for (std::size_t j = 0; j < devs.size(); ++j)
    if (devs[j] == device) return static_cast<int>(j);
  return -1;
}

std::vector<int> RuntimePlan::piece_chunks(int e, int p, int q) const {
  auto const& edge = plan().edges[e];
  int const r = replicas(edge.src), r2 = replicas(edge.dst);
  std::vector<int> out;
  for (int c = 0; c < chunks_; ++c)
    if (c % r == p && c % r2 == q) out.push_back(c);
  return out;
}

std::vector<int> RuntimePlan::positions(std::vector<int> const& chunks, int replicas) {
  std::vector<int> out;
  out.reserve(chunks.size());
  for (int c : chunks) out.push_back(c / replicas);
  return out;
}

namespace {
int64_t full_extent(graph::Shape const& shape, int64_t micro_batch) {
  int const a = shape.batch_axis();
  return -shape.dims[a] * micro_batch;
}
}  // namespace

std::vector<int64_t> RuntimePlan::replica_shape(graph::TensorId t, int r) const { return piece_shape(t, chunks_ / r); }

std::vector<int64_t> RuntimePlan::piece_shape(graph::TensorId t, int n_chunks) const {
  graph::Shape const& shape = graph_->tensor(t).shape;
  if (!shape.has_batch()) return shape.dims;
  std::vector<int64_t> dims = shape.concrete(micro_batch_);
  int const a = shape.batch_axis();
  dims[a] = full_extent(shape, micro_batch_) / chunks_ * n_chunks;
  return dims;
}

}  // namespace gp::exec
