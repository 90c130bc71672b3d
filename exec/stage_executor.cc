#include "exec/stage_executor.h"
#include "core/hash.h"

#include <cstring>
#include <set>
#include <unordered_set>

#include "exec/seeds.h"
#include "graph/ops/common.h"
#include "graph/ops/registry.h"

namespace gp::exec {

namespace {
bool weight_grads_come_with_b(graph::Op const& op) { return op.def && op.def->weight_grads_in_b; }
std::vector<std::size_t> const& state_inputs(graph::Op const& op) {
  static std::vector<std::size_t> const none;
  return op.def ? op.def->state_inputs : none;
}
}  // namespace

std::vector<graph::TensorId> running_stat_tensors(graph::OpGraph const& graph, std::vector<graph::OpId> const& ops) {
  std::vector<graph::TensorId> out;
  auto visit = [&](graph::Op const& op) {
    for (std::size_t i : state_inputs(op))
      if (i < op.inputs.size() && op.inputs[i] != graph::kNoTensor && graph.tensor(op.inputs[i]).data)
        out.push_back(op.inputs[i]);
  };
  if (ops.empty())
    for (graph::Op const& op : graph.ops()) visit(op);
  else
    for (graph::OpId id : ops) visit(graph.op(id));
  return out;
}

StageExecutor::StageExecutor(graph::OpGraph const& graph, Backend& backend, AutodiffPlan plan)
    : graph_(graph), backend_(backend), plan_(std::move(plan)) {}

Result<std::unique_ptr<StageExecutor>> StageExecutor::create(graph::OpGraph const& graph, Backend& backend,
                                                             std::vector<graph::OpId> const& ops) {
  ASSIGN_OR_RETURN(AutodiffPlan plan, plan_autodiff(graph, ops));
  // Every op's kernel is found once, here: the calls below carry it (OpCall::kernel).
  std::vector<ResolvedKernel> kernels(graph.ops().size());
  for (graph::OpId id : plan.forward_order) {
    ASSIGN_OR_RETURN(kernels[id], backend.resolve(graph.op(id), graph));
  }
  std::unique_ptr<StageExecutor> ex(new StageExecutor(graph, backend, std::move(plan)));
  ex->kernels_ = std::move(kernels);
  ex->static_values_.resize(graph.tensors().size());
  for (graph::OpId id : ex->plan_.forward_order) {
    for (graph::TensorId t : graph.op(id).inputs) {
      if (t == graph::kNoTensor || ex->static_values_[t].defined()) continue;
      auto const& info = graph.tensor(t);
      if (info.role != graph::TensorRole::kWeight && info.role != graph::TensorRole::kConstant) continue;
      if (!info.data)
        return invalid_argument("weight '" + info.name +
                                "' has no values (the model was loaded without weights): training needs them");
      // The model's values arrive in host memory (the edge): one copy onto the device.
      ASSIGN_OR_RETURN(ex->static_values_[t], backend.to_device(Tensor::from_data(*info.data)));
    }
  }
  for (graph::TensorId t : ex->plan_.weights) ex->params_.emplace(graph.tensor(t).name, ex->static_values_[t]);
  for (graph::TensorId t : running_stat_tensors(graph, ex->plan_.forward_order))
    if (ex->static_values_[t].defined()) ex->buffers_.emplace(graph.tensor(t).name, ex->static_values_[t]);
  RETURN_IF_ERROR(ex->zero_grads());
  return ex;
}

Status StageExecutor::zero_grads() {
  for (auto const& [name, w] : params_) {
    auto it = grads_.find(name);
    if (it == grads_.end())
      grads_.emplace(name, backend_.zeros(w.shape(), w.dtype()));
    else
      RETURN_IF_ERROR(backend_.fill(it->second, 0.f).with_context("zeroing the gradient of '" + name + "'"));
  }
  return Status::ok();
}

Status StageExecutor::set_parameter(std::string const& name, Tensor const& value) {
  auto it = params_.find(name);
  if (it == params_.end()) it = buffers_.find(name);
  if (it == buffers_.end()) return not_found("no trainable parameter or buffer named '" + name + "' in this stage");
  if (it->second.shape() != value.shape() || it->second.dtype() != value.dtype())
    return invalid_argument("parameter '" + name + "' has shape " + it->second.shape_string() + ", the value has " +
                            value.shape_string());
  return backend_.copy(value, it->second);
}

Status StageExecutor::forward(int64_t mb, TensorMap const& inputs, TensorMap& outputs, bool training, uint64_t rng_seed,
                              uint64_t const* rng_seed_slot) {
  if (training && micro_batches_.count(mb))
    return internal_error("micro-batch " + std::to_string(mb) + " is already in flight on this stage");
  MicroBatch state;
  state.rng_seed = rng_seed;
  state.rng_seed_slot = rng_seed_slot;
  TensorMap values;
  for (graph::TensorId t : plan_.stage_inputs) {
    auto it = inputs.find(t);
    if (it == inputs.end() || !it->second.defined())
      return invalid_argument("forward: missing stage input '" + graph_.tensor(t).name + "'");
    values.emplace(t, it->second);
    if (state.batch == 0) state.batch = graph::ops::batch_of(graph_.tensor(t).shape.dims, it->second.shape());
  }
  bool const stash = training && recompute_;
  if (stash) {
    state.stash = values;
    state.stashed = true;
  }
  RETURN_IF_ERROR(
      run_forward(std::move(values), state, training, /*keep_saved=*/!stash, /*update_stats=*/training, &outputs));
  if (training) {
    micro_batches_.emplace(mb, std::move(state));
    note_saved();
  }
  return Status::ok();
}

Status StageExecutor::run_forward(TensorMap values, MicroBatch& state, bool training, bool keep_saved,
                                  bool update_stats, TensorMap* outputs, AfterOp const* after_op) {
  std::vector<Tensor> args, outs;
  Saved scratch;
  for (int pos = 0; pos < static_cast<int>(plan_.forward_order.size()); ++pos) {
    graph::OpId const id = plan_.forward_order[pos];
    auto const& op = graph_.op(id);
    args.assign(op.inputs.size(), Tensor());
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      graph::TensorId t = op.inputs[i];
      if (t == graph::kNoTensor) continue;
      if (static_values_[t].defined()) {
        args[i] = static_values_[t];
        continue;
      }
      auto it = values.find(t);
      if (it == values.end()) return internal_error("forward: tensor '" + graph_.tensor(t).name + "' is not computed");
      args[i] = it->second;
    }
    outs.assign(op.outputs.size(), Tensor());
    OpCall const call = op_call(id, state, training);
    // Without keep_saved the op still gets a Saved to fill (so it runs exactly as it would for
    // backward), which is dropped right after.
    Saved* saved = nullptr;
    if (training && plan_.runs_backward[id]) saved = keep_saved ? &state.saved[id] : &scratch;
    RETURN_IF_ERROR(backend_.forward(call, args, outs, saved));
    RETURN_IF_ERROR(check_output_dtypes(op, outs));
    scratch = Saved{};
    if (after_op && (*after_op)(op, outs)) return Status::ok();
    if (update_stats) RETURN_IF_ERROR(update_running_stats(op, outs));
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      graph::TensorId t = op.outputs[k];
      if (t == graph::kNoTensor) continue;
      // Outputs nobody reads (BatchNorm's running statistics) are not kept.
      if (plan_.last_forward_use[t] < 0 && !plan_.is_stage_output(t)) continue;
      values[t] = std::move(outs[k]);
    }
    for (graph::TensorId t : op.inputs)
      if (t != graph::kNoTensor && plan_.last_forward_use[t] == pos && !plan_.is_stage_output(t)) values.erase(t);
  }
  if (outputs)
    for (graph::TensorId t : plan_.stage_outputs) (*outputs)[t] = values.at(t);
  return Status::ok();
}

Status StageExecutor::rebuild_saved(MicroBatch& state) {
  if (!state.stashed) return Status::ok();
  state.saved.clear();
  RETURN_IF_ERROR(
      run_forward(state.stash, state, /*training=*/true, /*keep_saved=*/true, /*update_stats=*/false, nullptr)
          .with_context("recomputing the forward before backward"));
  state.stash.clear();  // what backward needs of the inputs, Saved now holds
  state.stashed = false;
  note_saved();
  return Status::ok();
}

Status StageExecutor::backward(int64_t mb, TensorMap const& output_grads, TensorMap& input_grads) {
  auto it = micro_batches_.find(mb);
  if (it == micro_batches_.end())
    return internal_error("backward: micro-batch " + std::to_string(mb) + " has no forward in flight");
  Status s = rebuild_saved(it->second);
  if (s.is_ok()) s = run_b(mb, it->second, output_grads, input_grads, /*split=*/false);
  micro_batches_.erase(it);
  return s;
}

Status StageExecutor::backward_input(int64_t mb, TensorMap const& output_grads, TensorMap& input_grads) {
  auto it = micro_batches_.find(mb);
  if (it == micro_batches_.end())
    return internal_error("backward_input: micro-batch " + std::to_string(mb) + " has no forward in flight");
  if (it->second.b_done) return internal_error("backward_input: micro-batch " + std::to_string(mb) + " ran B twice");
  Status s = rebuild_saved(it->second);
  if (s.is_ok()) s = run_b(mb, it->second, output_grads, input_grads, /*split=*/true);
  if (!s.is_ok())
    micro_batches_.erase(it);
  else
    it->second.b_done = true;
  return s;
}

Status StageExecutor::backward_weight(int64_t mb) {
  auto it = micro_batches_.find(mb);
  if (it == micro_batches_.end() || !it->second.b_done)
    return internal_error("backward_weight: micro-batch " + std::to_string(mb) + " has no finished B pass");
  MicroBatch& state = it->second;
  Status s;
  for (graph::OpId id : plan_.backward_order) {
    if (auto c = state.w_computed.find(id); c != state.w_computed.end()) {
      auto const& op = graph_.op(id);
      for (std::size_t i = 0; i < op.inputs.size() && i < c->second.size(); ++i)
        if (c->second[i].defined() && s.is_ok())
          s = backend_.add_into(grads_.at(graph_.tensor(op.inputs[i]).name), c->second[i]);
      if (!s.is_ok()) break;
      continue;
    }
    auto g = state.w_grad_outputs.find(id);
    if (g == state.w_grad_outputs.end()) continue;
    s = run_w(id, state, g->second);
    if (!s.is_ok()) break;
  }
  micro_batches_.erase(it);
  return s;
}

Status StageExecutor::check_output_dtypes(graph::Op const& op, std::vector<Tensor> const& outs) const {
  for (std::size_t k = 0; k < op.outputs.size() && k < outs.size(); ++k) {
    if (op.outputs[k] == graph::kNoTensor || !outs[k].defined()) continue;
    graph::TensorInfo const& t = graph_.tensor(op.outputs[k]);
    if (outs[k].dtype() != t.dtype)
      return internal_error(op.type + " '" + op.name + "' wrote its output '" + t.name + "' as " +
                            std::string(graph::dtype_name(outs[k].dtype())) + " where the graph has " +
                            graph::dtype_name(t.dtype) + " (its kernel and the graph disagree: a bug to report)");
  }
  return Status::ok();
}

// An op with state (OpDef::state_inputs: training BatchNorm returns its updated running statistics
// as outputs 1 and 2) replaces the stored values, as torch's module buffers do, so export and
// checkpoints carry them.
Status StageExecutor::update_running_stats(graph::Op const& op, std::vector<Tensor> const& outs) {
  std::vector<std::size_t> const& state = state_inputs(op);
  for (std::size_t k = 1; k <= state.size(); ++k) {
    if (k >= outs.size() || !outs[k].defined() || op.inputs.size() <= state[k - 1]) continue;
    graph::TensorId const t = op.inputs[state[k - 1]];
    if (t == graph::kNoTensor || !static_values_[t].defined() || static_values_[t].nbytes() != outs[k].nbytes())
      continue;
    RETURN_IF_ERROR(backend_.copy(outs[k], static_values_[t]).with_context(op.name + "'s running statistics"));
  }
  return Status::ok();
}

void StageExecutor::discard(int64_t mb) { micro_batches_.erase(mb); }

OpCall StageExecutor::op_call(graph::OpId id, MicroBatch const& state, bool training) const {
  return OpCall{.op = graph_.op(id),
                .graph = graph_,
                .training = training,
                .rng_seed = op_seed(state.rng_seed, id),
                .batch = state.batch,
                .kernel = kernels_[id],
                .rng_seed_slot = state.rng_seed_slot,
                .rng_salt = op_seed_salt(id)};
}

std::vector<Tensor> StageExecutor::weight_grad_slots(graph::Op const& op) const {
  std::vector<Tensor> wgrads(op.inputs.size());
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    graph::TensorId t = op.inputs[i];
    if (t != graph::kNoTensor && plan_.trainable[t]) wgrads[i] = grads_.at(graph_.tensor(t).name);
  }
  return wgrads;
}

Status StageExecutor::run_w(graph::OpId id, MicroBatch& state, std::vector<Tensor> const& grad_outputs) {
  auto const& op = graph_.op(id);
  std::vector<Tensor> wgrads = weight_grad_slots(op);
  OpCall const call = op_call(id, state, true);
  RETURN_IF_ERROR(backend_.backward_weight(call, state.saved.at(id), grad_outputs, wgrads));
  state.saved.erase(id);
  return Status::ok();
}

Status StageExecutor::run_b(int64_t mb, MicroBatch& state, TensorMap const& output_grads, TensorMap& input_grads,
                            bool split) {
  (void)mb;
  TensorMap grads;
  std::unordered_set<graph::TensorId> owned;  // gradients we may add into (not the caller's tensors)
  for (graph::TensorId t : plan_.stage_outputs) {
    auto it = output_grads.find(t);
    if (it != output_grads.end() && it->second.defined() && plan_.requires_grad[t]) grads.emplace(t, it->second);
  }
  auto add_grad = [&](graph::TensorId t, Tensor g) -> Status {
    auto it = grads.find(t);
    if (it == grads.end()) {
      grads.emplace(t, std::move(g));  // may alias another tensor (views): cloned before adding into it
      return Status::ok();
    }
    if (!owned.count(t)) {
      ASSIGN_OR_RETURN(it->second, backend_.clone(it->second));
      owned.insert(t);
    }
    return backend_.add_into(it->second, g);
  };
  std::vector<Tensor> gout, gin;
  std::vector<bool> needs;
  for (graph::OpId id : plan_.backward_order) {
    auto const& op = graph_.op(id);
    gout.assign(op.outputs.size(), Tensor());
    bool any_out = false;
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      auto it = op.outputs[k] == graph::kNoTensor ? grads.end() : grads.find(op.outputs[k]);
      if (it != grads.end()) {
        gout[k] = it->second;
        any_out = true;
      }
    }
    auto saved = state.saved.find(id);
    if (saved == state.saved.end()) return internal_error("backward: no saved state for op '" + op.name + "'");
    if (!any_out) {
      state.saved.erase(saved);
      continue;
    }
    needs.assign(op.inputs.size(), false);
    bool any_in = false;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      graph::TensorId t = op.inputs[i];
      needs[i] = t != graph::kNoTensor && plan_.requires_grad[t] && !plan_.trainable[t];
      any_in = any_in || needs[i];
    }
    OpCall const call = op_call(id, state, true);
    // One call for B and W where nothing is split, or where W comes with B anyway (then kept for W).
    bool const early_w = split && weight_grads_come_with_b(op);
    bool const both = (!split || early_w) && any_in && plan_.has_weight_grad[id];
    if (any_in) {
      gin.assign(op.inputs.size(), Tensor());
      if (both) {
        std::vector<Tensor> wgrads = weight_grad_slots(op);
        if (early_w)
          for (Tensor& w : wgrads)
            if (w.defined()) w = backend_.zeros(w.shape(), w.dtype());
        RETURN_IF_ERROR(backend_.backward(call, saved->second, gout, needs, gin, wgrads));
        if (early_w) state.w_computed.emplace(id, std::move(wgrads));
      } else {
        RETURN_IF_ERROR(backend_.backward_input(call, saved->second, gout, needs, gin));
      }
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        if (needs[i] && gin[i].defined()) RETURN_IF_ERROR(add_grad(op.inputs[i], std::move(gin[i])));
    }
    if (plan_.has_weight_grad[id] && !both) {
      if (split)
        state.w_grad_outputs.emplace(id, gout);
      else
        RETURN_IF_ERROR(run_w(id, state, gout));
    } else {
      state.saved.erase(saved);
    }
    for (graph::TensorId t : op.outputs)
      if (t != graph::kNoTensor) grads.erase(t);
  }
  for (graph::TensorId t : plan_.input_grads) {
    auto it = grads.find(t);
    if (it != grads.end()) input_grads[t] = it->second;
  }
  return Status::ok();
}

int64_t StageExecutor::saved_bytes(int64_t mb) const {
  auto it = micro_batches_.find(mb);
  if (it == micro_batches_.end()) return 0;
  // Weights and constants that ops keep a handle on are not activation memory.
  std::set<void const*> seen;
  for (Tensor const& t : static_values_)
    if (t.defined()) seen.insert(t.raw());
  int64_t total = 0;
  for (auto const& [t, value] : it->second.stash)
    if (value.defined() && seen.insert(value.raw()).second) total += static_cast<int64_t>(value.nbytes());
  for (auto const& [id, saved] : it->second.saved)
    for (Tensor const& t : saved.tensors)
      if (t.defined() && seen.insert(t.raw()).second) total += static_cast<int64_t>(t.nbytes());
  return total;
}

int64_t StageExecutor::saved_bytes() const {
  int64_t total = 0;
  for (auto const& [mb, state] : micro_batches_) total += saved_bytes(mb);
  return total;
}

void StageExecutor::note_saved() { peak_saved_bytes_ = std::max(peak_saved_bytes_, saved_bytes()); }

}  // namespace gp::exec
