#include "exec/runtime/worker.h"

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "exec/non_finite.h"
#include "exec/seeds.h"
#include "schedule/dataflow.h"

namespace gp::exec {

using schedule::Instruction;
using schedule::Op;

Result<FaultInjection> parse_fault(std::string const& text) {
  FaultInjection f;
  auto const a = text.find(':'), b = text.find(':', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos)
    return invalid_argument("--inject-fault '" + text + "': expected DEVICE:LINE:KIND, e.g. 1:7:throw");
  try {
    f.device = std::stoi(text.substr(0, a));
    f.line = std::stoi(text.substr(a + 1, b - a - 1));
  } catch (std::exception const&) {
    return invalid_argument("--inject-fault '" + text + "': DEVICE and LINE must be integers");
  }
  std::string const kind = text.substr(b + 1);
  if (kind == "throw")
    f.kind = FaultInjection::Kind::kThrow;
  else if (kind == "nan")
    f.kind = FaultInjection::Kind::kNaN;
  else if (kind == "header")
    f.kind = FaultInjection::Kind::kHeader;
  else if (kind == "exit")
    f.kind = FaultInjection::Kind::kExit;
  else if (kind == "stall")
    f.kind = FaultInjection::Kind::kStall;
  else if (kind == "overflow")
    f.kind = FaultInjection::Kind::kOverflow;
  else
    return invalid_argument("--inject-fault '" + text + "': KIND must be throw, nan, header, exit, stall or overflow");
  return f;
}

Worker::Worker(RuntimePlan const& plan, schedule::Schedule const& schedule, int device, TrainConfig const& config,
               Backend& backend, Communicator& comm, std::unique_ptr<DataSource> data, WorkerOptions const& options,
               Allocator const& memory)
    : plan_(plan),
      schedule_(schedule),
      device_(device),
      config_(config),
      backend_(backend),
      comm_(comm),
      data_(std::move(data)),
      options_(options),
      memory_(memory),
      deferred_reads_(backend.defers_host_reads()),
      scaler_(config.loss_scale) {}

Result<std::unique_ptr<Worker>> Worker::create(RuntimePlan const& plan, schedule::Schedule const& schedule, int device,
                                               TrainConfig const& config, Backend& backend, Communicator& comm,
                                               std::unique_ptr<DataSource> data, WorkerOptions const& options,
                                               Allocator const& memory) {
  std::unique_ptr<Worker> w(
      new Worker(plan, schedule, device, config, backend, comm, std::move(data), options, memory));
  graph::OpGraph const& graph = plan.graph();
  for (int s : plan.view().stages_on(device)) {
    ASSIGN_OR_RETURN(auto runner, StageRunner::create(graph, backend, plan.stage_ops(s), config.optimizer));
    runner->executor().set_recompute(plan.view().stage(s).recompute);
    w->runners_.emplace(s, std::move(runner));
    bool reads_data = s == plan.loss_stage();
    for (graph::TensorId t : plan.autodiff(s).stage_inputs)
      reads_data = reads_data || graph.tensor(t).producer == graph::kNoOp;
    if (reads_data) ++w->data_users_;
  }
  auto const split = schedule::split_backward(plan.view(), schedule);
  w->split_.resize(plan.num_stages());
  for (int s = 0; s < plan.num_stages(); ++s) w->split_[s] = split[s][device];
  ASSIGN_OR_RETURN(LabelSpec spec, label_spec(graph, config.loss));
  w->rows_per_sample_ =
      std::accumulate(spec.label_dims.begin(), spec.label_dims.end(), int64_t{1}, std::multiplies<>());
  return w;
}

MessageKey Worker::key_of(Instruction const& in, int64_t step) const {
  MessageKey k;
  k.step = step;
  k.edge = in.edge;
  k.gradient = in.gradient;
  k.micro_batch = in.micro_batch;
  k.src = in.op == Op::kSend ? device_ : in.peer;
  k.dst = in.op == Op::kSend ? in.peer : device_;
  return k;
}

Status Worker::run_step(int64_t step, Clock::time_point origin) {
  auto const& list = schedule_.devices[device_];
  // The ops' index checks wait for STEP with the losses (a device reads them in one go there).
  DeferChecks const deferring(backend_, deferred_reads_);
  loss_sum_ = 0;
  loss_reduced_ = false;
  loss_lines_.clear();
  injected_nan_.clear();
  if (deferred_reads_ && runners_.count(plan_.loss_stage()) > 0)
    step_losses_ = backend_.step_losses(static_cast<int>(config_.micro_batches));
  for (auto& [s, runner] : runners_) RETURN_IF_ERROR(runner->executor().zero_grads());
  // Every receive of the step is announced first, so no sender waits for a late receiver.
  for (Instruction const& in : list) {
    if (in.op != Op::kRecv) continue;
    Status s = post(in, step);
    if (!s.is_ok()) {
      s = s.with_context("device " + std::to_string(device_) + ", line " + std::to_string(in.line));
      comm_.abort(s);
      return s;
    }
  }
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    Instruction const& in = list[i];
    current_.store(i);
    auto const start = Clock::now();
    if (stop_requested()) {
      Status const stop = aborted_error(kInterrupted);
      comm_.abort(stop);
      return stop;
    }
    Status s;
    try {
      if (options_.fault.device == device_ && options_.fault.line == in.line) {
        switch (options_.fault.kind) {
          case FaultInjection::Kind::kThrow:
            throw std::runtime_error("injected fault");
          case FaultInjection::Kind::kExit:
            std::raise(SIGKILL);  // a killed process, as the OOM killer does
            break;
          case FaultInjection::Kind::kStall:
            std::this_thread::sleep_for(std::chrono::duration<double>(options_.timeout_s * 3));
            break;
          default:
            break;
        }
      }
      s = execute(in, step);
      if (s.is_ok() && options_.fault.kind == FaultInjection::Kind::kOverflow && options_.fault.device == device_ &&
          options_.fault.line == in.line && !overflow_injected_ && runners_.count(in.stage) > 0) {
        overflow_injected_ = true;
        for (auto& [name, grad] : runners_.at(in.stage)->executor().gradients()) {
          Tensor g = grad;
          if (s.is_ok()) s = backend_.scale(g, std::numeric_limits<double>::infinity());
        }
      }
    } catch (std::exception const& e) {
      s = internal_error(std::string("exception: ") + e.what());
    }
    if (s.is_ok() && options_.memory_limit_bytes > 0 && memory_.bytes_in_use() > options_.memory_limit_bytes)
      s = infeasible("holds " + std::to_string(memory_.bytes_in_use() >> 10) + " KiB, over its memory limit of " +
                     std::to_string(options_.memory_limit_bytes >> 10) +
                     " KiB (raise 'memory' in the config, or plan with more devices or smaller "
                     "micro-batches)");
    auto const end = Clock::now();
    schedule::Interval iv;
    iv.device = device_;
    iv.stream = schedule::stream_of(in.op);
    iv.op = in.op;
    iv.stage = in.stage;
    iv.micro_batch = in.micro_batch;
    iv.start_s = std::chrono::duration<double>(start - origin).count();
    iv.end_s = std::chrono::duration<double>(end - origin).count();
    iv.label = schedule::to_string(in);
    intervals_.push_back(std::move(iv));
    if (!s.is_ok()) {
      if (s.code() == StatusCode::kAborted) return s;
      Status cause = s.with_context("device " + std::to_string(device_) + ", line " + std::to_string(in.line) + " (" +
                                    schedule::to_string(in) + "), step " + std::to_string(step + 1));
      comm_.abort(cause);
      return cause;
    }
  }
  current_.store(-1);
  Status s = finish_step(step);
  if (!s.is_ok() && s.code() != StatusCode::kAborted) {
    s = s.with_context("device " + std::to_string(device_) + ", end of step " + std::to_string(step + 1));
    comm_.abort(s);
  }
  return s;
}

Status Worker::execute(Instruction const& in, int64_t step) {
  switch (in.op) {
    case Op::kForward:
      return forward(in.stage, in.micro_batch, step, in.line);
    case Op::kBackward:
      return backward(in.stage, in.micro_batch, split_[in.stage]);
    case Op::kWeight:
      return runners_.at(in.stage)->executor().backward_weight(in.micro_batch);
    case Op::kSend:
      return send(in, step, in.line);
    case Op::kRecv:
      return recv(in, step);
    case Op::kAllReduce: {
      std::vector<Tensor> grads = runners_.at(in.stage)->gradient_list();
      return comm_.all_reduce_sum({step, in.stage}, plan_.view().stage(in.stage).devices, grads,
                                  deadline_after(options_.timeout_s));
    }
    case Op::kStep: {
      RETURN_IF_ERROR(comm_.flush(deadline_after(options_.timeout_s)));
      if (deferred_reads_) RETURN_IF_ERROR(read_step_losses(step));
      RETURN_IF_ERROR(sum_tied_gradients(step));
      if (scaler_.enabled()) {
        // Every device's verdict, reduced over all of them: all skip together or none does.
        bool finite = true;
        for (auto& [s, runner] : runners_) {
          ASSIGN_OR_RETURN(bool const f, runner->finite_gradients());
          finite = finite && f;
        }
        ASSIGN_OR_RETURN(double const found, sum_over_devices({step, kFoundInfStage}, finite ? 0.0 : 1.0));
        double const scale = scaler_.scale();
        if (!scaler_.update(found > 0)) return Status::ok();  // skipped everywhere
        for (auto& [s, runner] : runners_) RETURN_IF_ERROR(runner->unscale_gradients(scale));
      }
      for (auto& [s, runner] : runners_) RETURN_IF_ERROR(runner->update().with_context("stage " + std::to_string(s)));
      return Status::ok();
    }
  }
  return internal_error("unknown instruction");
}

Status Worker::sum_tied_gradients(int64_t step) {
  auto const& tied = plan_.tied_weights();
  if (tied.empty()) return Status::ok();
  // The accumulators of a tied weight's copies on this device (stage order); `contributing`: only
  // those of a stage's first device (its replicas hold the same replica-summed gradient).
  auto copies = [&](RuntimePlan::TiedWeight const& t, bool contributing) -> Result<std::vector<Tensor>> {
    std::vector<Tensor> out;
    for (int s : t.stages) {
      auto runner = runners_.find(s);
      if (runner == runners_.end()) continue;
      if (contributing && plan_.view().stage(s).devices.at(0) != device_) continue;
      auto const& grads = runner->second->executor().gradients();
      auto g = grads.find(t.name);
      if (g == grads.end())
        return internal_error("stage " + std::to_string(s) + " holds no gradient of its tied weight '" + t.name + "'");
      out.push_back(g->second);  // shares the accumulator's storage
    }
    return out;
  };
  // One all-reduce per group of holders this device is in, in the groups' order (the same on every
  // device), summed in device order; a device holding only replicas other than a stage's first
  // adds zeros.
  auto const& groups = plan_.tied_groups();
  for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
    schedule::TiedGroup const& group = groups[g];
    if (!std::binary_search(group.devices.begin(), group.devices.end(), device_)) continue;
    std::vector<Tensor> sums;
    for (int k : group.members) {
      Tensor sum = backend_.zeros(tied[k].dims, DType::kFloat32);
      ASSIGN_OR_RETURN(std::vector<Tensor> const mine, copies(tied[k], true));
      for (Tensor const& t : mine) RETURN_IF_ERROR(backend_.add_into(sum, t));
      sums.push_back(std::move(sum));
    }
    RETURN_IF_ERROR(
        comm_.all_reduce_sum({step, kTiedWeightsStage, g}, group.devices, sums, deadline_after(options_.timeout_s)));
    for (std::size_t i = 0; i < group.members.size(); ++i) {
      ASSIGN_OR_RETURN(std::vector<Tensor> every_copy, copies(tied[group.members[i]], false));
      for (Tensor& t : every_copy) RETURN_IF_ERROR(backend_.copy(sums[i], t));
    }
  }
  return Status::ok();
}

Result<Batch const*> Worker::micro_batch_data(int64_t step, int mb) {
  auto it = data_cache_.find(mb);
  if (it == data_cache_.end()) {
    int64_t const b = plan_.micro_batch();
    ASSIGN_OR_RETURN(Batch batch, data_->batch(step * config_.batch + mb * b, b));
    it = data_cache_.emplace(mb, std::make_pair(std::move(batch), data_users_)).first;
  }
  return &it->second.first;
}

void Worker::release_data(int mb) {
  auto it = data_cache_.find(mb);
  if (it != data_cache_.end() && --it->second.second <= 0) data_cache_.erase(it);
}

Result<Tensor> Worker::take_chunks(Tensor const& t, int axis, int64_t chunk_extent, std::vector<int> const& positions) {
  bool whole = static_cast<int64_t>(positions.size()) * chunk_extent == t.dim(axis);
  for (std::size_t i = 0; whole && i < positions.size(); ++i) whole = positions[i] == static_cast<int>(i);
  if (whole) return t;  // all of it, in order: no copy
  std::vector<int64_t> shape = t.shape();
  shape[axis] = chunk_extent * static_cast<int64_t>(positions.size());
  Tensor out = backend_.empty(shape, t.dtype());
  std::vector<int> dst(positions.size());
  std::iota(dst.begin(), dst.end(), 0);
  RETURN_IF_ERROR(backend_.copy_chunks(t, positions, out, dst, axis, chunk_extent));
  return out;
}

Status Worker::put_chunks(Tensor const& piece, int axis, int64_t chunk_extent, std::vector<int> const& positions,
                          Tensor& dst) {
  std::vector<int> src(positions.size());
  std::iota(src.begin(), src.end(), 0);
  return backend_.copy_chunks(piece, src, dst, positions, axis, chunk_extent);
}

Result<Tensor> Worker::on_device(Tensor const& host) { return backend_.to_device(host); }

Result<Tensor> Worker::piece_of(int e, bool gradient, Tensor const& t, graph::TensorId id, int producer, int consumer,
                                std::vector<int> const& chunks) {
  if (!plan_.batched(id)) {
    if (gradient && !plan_.unbatched_gradient_goes(e, producer, consumer))
      return backend_.zeros(plan_.graph().tensor(id).shape.dims, plan_.graph().tensor(id).dtype);
    return t;
  }
  auto const& edge = plan_.plan().edges[e];
  int const replicas = plan_.replicas(gradient ? edge.dst : edge.src);  // the sender's
  int const axis = plan_.graph().tensor(id).shape.batch_axis();
  int64_t const chunk_extent = t.dim(axis) / (plan_.chunks() / replicas);
  return take_chunks(t, axis, chunk_extent, RuntimePlan::positions(chunks, replicas));
}

std::vector<TensorMeta> Worker::piece_metas(int edge, bool gradient, int n_chunks) const {
  std::vector<TensorMeta> out;
  auto const& ids = gradient ? plan_.edge_grad_tensors(edge) : plan_.edge_tensors(edge);
  for (graph::TensorId t : ids) out.push_back({plan_.graph().tensor(t).dtype, plan_.piece_shape(t, n_chunks)});
  return out;
}

int Worker::pieces_out(int stage, bool gradient) const {
  int n = 0;
  auto const& edges = gradient ? plan_.view().in_edges(stage) : plan_.view().out_edges(stage);
  for (int e : edges) {
    for (auto const& piece : plan_.view().pieces(e))
      if ((gradient ? piece.dst_device : piece.src_device) == device_) ++n;
  }
  return n;
}

Result<std::vector<Tensor>> Worker::gather_edge(int e, int mb, bool gradient) {
  // Activations flow src -> dst and arrive at the consumer; gradients flow back and arrive at the
  // producer. "from" is the sending stage, "to" this device's stage.
  auto const& edge = plan_.plan().edges[e];
  int const from = gradient ? edge.dst : edge.src, to = gradient ? edge.src : edge.dst;
  auto const& ids = gradient ? plan_.edge_grad_tensors(e) : plan_.edge_tensors(e);
  auto& store = gradient ? input_grads_ : outputs_;
  int const r_to = plan_.replicas(to);
  int const mine = plan_.replica_of(to, device_);
  graph::OpGraph const& graph = plan_.graph();
  std::vector<Tensor> assembled(ids.size());
  std::vector<bool> summed(ids.size(), false);
  for (auto const& piece : plan_.view().pieces(e)) {
    if ((gradient ? piece.src_device : piece.dst_device) != device_) continue;
    int const sender = gradient ? piece.dst_device : piece.src_device;
    int const theirs = plan_.replica_of(from, sender);
    int const producer = gradient ? mine : theirs, consumer = gradient ? theirs : mine;
    std::vector<int> const chunks = plan_.piece_chunks(e, producer, consumer);
    std::vector<Tensor> parts;
    if (piece.local()) {  // a co-located stage: straight from its store, no message
      auto it = store.find({from, mb});
      if (it == store.end())
        return internal_error("stage " + std::to_string(from) + " has not run " + (gradient ? "B" : "F") + " m" +
                              std::to_string(mb) + " on this device before stage " + std::to_string(to) + " needs it");
      for (graph::TensorId t : ids) {
        auto found = it->second.tensors.find(t);
        if (found == it->second.tensors.end())
          return internal_error("stage " + std::to_string(from) + " kept no '" + graph.tensor(t).name + "'");
        ASSIGN_OR_RETURN(Tensor part, piece_of(e, gradient, found->second, t, producer, consumer, chunks));
        parts.push_back(std::move(part));
      }
      if (--it->second.pending <= 0) store.erase(it);
    } else {
      auto it = received_.find({e, mb, sender, gradient});
      if (it == received_.end())
        return internal_error(std::string("no RECV ") + (gradient ? "g" : "e") + std::to_string(e) + " m" +
                              std::to_string(mb) + " <-d" + std::to_string(sender) + " ran before this " +
                              (gradient ? "B" : "F"));
      parts = std::move(it->second.tensors);
      received_.erase(it);
    }
    // Place the piece's chunks in this replica's tensor (or take it whole). An unbatched gradient
    // is the sum of the consumer replicas' parts (RuntimePlan::unbatched_gradient_goes).
    for (std::size_t k = 0; k < ids.size(); ++k) {
      graph::TensorId const t = ids[k];
      if (gradient && !plan_.batched(t) && assembled[k].defined()) {
        if (!summed[k]) {  // the first part may be a consumer's stored tensor: add into a copy
          ASSIGN_OR_RETURN(assembled[k], backend_.clone(assembled[k]));
          summed[k] = true;
        }
        RETURN_IF_ERROR(backend_.add_into(assembled[k], parts[k]));
        continue;
      }
      if (!plan_.batched(t) || static_cast<int>(chunks.size()) == plan_.chunks() / r_to) {
        assembled[k] = std::move(parts[k]);
        continue;
      }
      if (!assembled[k].defined()) assembled[k] = backend_.empty(plan_.replica_shape(t, r_to), graph.tensor(t).dtype);
      int const axis = graph.tensor(t).shape.batch_axis();
      int64_t const chunk_extent = parts[k].dim(axis) / static_cast<int64_t>(chunks.size());
      RETURN_IF_ERROR(put_chunks(parts[k], axis, chunk_extent, RuntimePlan::positions(chunks, r_to), assembled[k]));
    }
  }
  return assembled;
}

Status Worker::forward(int stage, int mb, int64_t step, int line) {
  StageRunner& runner = *runners_.at(stage);
  graph::OpGraph const& graph = plan_.graph();
  AutodiffPlan const& ad = plan_.autodiff(stage);
  int const r = plan_.replicas(stage), j = plan_.replica_of(stage, device_);
  std::vector<int> my_chunks;
  for (int c = j; c < plan_.chunks(); c += r) my_chunks.push_back(c);

  TensorMap inputs;
  bool used_data = false;
  // Data arrive in host memory (the edge): this replica's rows, copied to the device.
  auto data_slice = [&](Tensor const& full, int axis) -> Result<Tensor> {
    ASSIGN_OR_RETURN(Tensor on, on_device(full));
    return take_chunks(on, axis, full.dim(axis) / plan_.chunks(), my_chunks);
  };
  for (graph::TensorId t : ad.stage_inputs) {
    auto const& info = graph.tensor(t);
    if (info.producer != graph::kNoOp) continue;
    ASSIGN_OR_RETURN(Batch const* batch, micro_batch_data(step, mb));
    used_data = true;
    auto const pos = std::find(graph.inputs().begin(), graph.inputs().end(), t) - graph.inputs().begin();
    Tensor const& full = batch->inputs.at(pos);
    if (info.shape.has_batch()) {
      ASSIGN_OR_RETURN(inputs[t], data_slice(full, info.shape.batch_axis()));
    } else {
      ASSIGN_OR_RETURN(inputs[t], on_device(full));
    }
  }
  // Pieces from every producer, in edge order.
  for (int e : plan_.view().in_edges(stage)) {
    ASSIGN_OR_RETURN(std::vector<Tensor> tensors, gather_edge(e, mb, /*gradient=*/false));
    auto const& ids = plan_.edge_tensors(e);
    for (std::size_t k = 0; k < ids.size(); ++k) inputs[ids[k]] = std::move(tensors[k]);
  }

  TensorMap outputs;
  RETURN_IF_ERROR(runner.executor().forward(mb, inputs, outputs, true, micro_batch_seed(config_.seed, step, mb)));
  // The loss stage keeps its inputs until the loss is known: a non-finite one reruns the forward.
  if (stage != plan_.loss_stage()) inputs.clear();
  if (stage == plan_.loss_stage()) {
    ASSIGN_OR_RETURN(Batch const* batch, micro_batch_data(step, mb));
    used_data = true;
    graph::TensorId const out = graph.outputs()[0];
    ASSIGN_OR_RETURN(Tensor const labels, data_slice(batch->labels, 0));
    Tensor grad;
    bool const inject_nan = options_.fault.kind == FaultInjection::Kind::kNaN && options_.fault.device == device_ &&
                            options_.fault.line == line;
    Backend::StepLosses one;
    if (!deferred_reads_) one = backend_.step_losses(1);
    Backend::StepLosses& into = deferred_reads_ ? step_losses_ : one;
    Status const computed = backend_.loss_into(config_.loss, outputs.at(out), labels, config_.batch * rows_per_sample_,
                                               grad, into, deferred_reads_ ? mb : 0);
    if (!computed.is_ok()) {
      runner.executor().discard(mb);
      return computed;
    }
    if (deferred_reads_) {
      loss_lines_[mb] = line;
      if (inject_nan) injected_nan_.insert(mb);
    } else {
      auto read = backend_.read_losses(one);
      if (!read.is_ok()) {
        runner.executor().discard(mb);
        return read.status();
      }
      double const l = inject_nan ? std::nan("") : read->at(0);
      if (!std::isfinite(l)) {
        runner.executor().discard(mb);
        return numerical_error("loss is " + std::string(std::isnan(l) ? "NaN" : "Inf") + " at step " +
                               std::to_string(step + 1) + ", micro-batch " + std::to_string(mb) + ": " +
                               non_finite_cause(stage, &inputs, mb, step) + " (training stopped before that update)");
      }
      loss_sum_ += l;
    }
    inputs.clear();
    if (scaler_.enabled()) RETURN_IF_ERROR(backend_.scale(grad, scaler_.scale()));
    loss_grads_[{stage, mb}] = std::move(grad);
  }
  if (used_data) release_data(mb);
  int const pending = pieces_out(stage, false);
  if (pending > 0) outputs_[{stage, mb}] = Stored{std::move(outputs), pending};
  return Status::ok();
}

std::string Worker::non_finite_cause(int stage, TensorMap const* inputs, int mb, int64_t step) {
  for (auto& [s, runner] : runners_)
    if (s != stage && !runner->executor().first_non_finite_weight().empty())
      return explain_non_finite(runner->executor(), nullptr, 0, step) + " (stage " + std::to_string(s) + ")";
  return explain_non_finite(runners_.at(stage)->executor(), inputs, micro_batch_seed(config_.seed, step, mb), step);
}

Status Worker::backward(int stage, int mb, bool split) {
  StageRunner& runner = *runners_.at(stage);
  graph::OpGraph const& graph = plan_.graph();
  int const r = plan_.replicas(stage);

  TensorMap grads;
  std::map<graph::TensorId, bool> owned;
  auto add = [&](graph::TensorId t, Tensor g) -> Status {
    auto it = grads.find(t);
    if (it == grads.end()) {
      grads.emplace(t, std::move(g));
      return Status::ok();
    }
    if (!owned[t]) {  // the first may be a sender's or a consumer's tensor: add into a copy
      ASSIGN_OR_RETURN(it->second, backend_.clone(it->second));
      owned[t] = true;
    }
    return backend_.add_into(it->second, g);
  };
  if (auto it = loss_grads_.find({stage, mb}); it != loss_grads_.end()) {
    RETURN_IF_ERROR(add(graph.outputs()[0], std::move(it->second)));
    loss_grads_.erase(it);
  }
  for (int e : plan_.view().out_edges(stage)) {
    ASSIGN_OR_RETURN(std::vector<Tensor> tensors, gather_edge(e, mb, /*gradient=*/true));
    auto const& ids = plan_.edge_grad_tensors(e);
    for (std::size_t k = 0; k < ids.size(); ++k) RETURN_IF_ERROR(add(ids[k], std::move(tensors[k])));
  }

  TensorMap input_grads;
  if (split)
    RETURN_IF_ERROR(runner.executor().backward_input(mb, grads, input_grads));
  else
    RETURN_IF_ERROR(runner.executor().backward(mb, grads, input_grads));
  int const pending = pieces_out(stage, true);
  if (pending > 0) {
    // Every gradient the consumers' messages carry, zero where none flowed.
    for (int e : plan_.view().in_edges(stage))
      for (graph::TensorId t : plan_.edge_grad_tensors(e))
        if (!input_grads.count(t)) input_grads[t] = backend_.zeros(plan_.replica_shape(t, r), graph.tensor(t).dtype);
    input_grads_[{stage, mb}] = Stored{std::move(input_grads), pending};
  }
  return Status::ok();
}

Status Worker::send(Instruction const& in, int64_t step, int line) {
  auto const& edge = plan_.plan().edges[in.edge];
  int const stage = in.gradient ? edge.dst : edge.src;
  int const peer_stage = in.gradient ? edge.src : edge.dst;
  auto& store = in.gradient ? input_grads_ : outputs_;
  auto it = store.find({stage, in.micro_batch});
  if (it == store.end())
    return internal_error("nothing to send: " + std::string(in.gradient ? "B" : "F") + " s" + std::to_string(stage) +
                          " m" + std::to_string(in.micro_batch) + " has not run on this device");
  int const mine = plan_.replica_of(stage, device_), theirs = plan_.replica_of(peer_stage, in.peer);
  if (theirs < 0)
    return internal_error("device " + std::to_string(in.peer) + " does not run stage " + std::to_string(peer_stage));
  int const producer = in.gradient ? theirs : mine, consumer = in.gradient ? mine : theirs;
  std::vector<int> const chunks = plan_.piece_chunks(in.edge, producer, consumer);
  std::vector<Tensor> tensors;
  for (graph::TensorId t : in.gradient ? plan_.edge_grad_tensors(in.edge) : plan_.edge_tensors(in.edge)) {
    ASSIGN_OR_RETURN(Tensor part,
                     piece_of(in.edge, in.gradient, it->second.tensors.at(t), t, producer, consumer, chunks));
    tensors.push_back(std::move(part));
  }
  // The communication stream sends once the compute that produced the piece is done.
  RETURN_IF_ERROR(backend_.wait(Backend::StreamKind::kCommunication, backend_.record(Backend::StreamKind::kCompute)));
  if (options_.fault.kind == FaultInjection::Kind::kHeader && options_.fault.device == device_ &&
      options_.fault.line == line && !tensors.empty())
    tensors[0] = backend_.zeros({tensors[0].numel() + 1}, tensors[0].dtype());
  if (--it->second.pending <= 0) store.erase(it);
  // With it the fence of that point: a receiver on another thread copies the tensors once the
  // kernels that wrote them are done (its own stream is not ordered after this device's).
  return comm_.send(key_of(in, step), std::move(tensors), backend_.fence(Backend::StreamKind::kCommunication));
}

// What a RECV expects: the header of its piece (the chunks both replicas hold).
Result<std::vector<TensorMeta>> Worker::expected_for(Instruction const& in) const {
  auto const& edge = plan_.plan().edges[in.edge];
  int const stage = in.gradient ? edge.dst : edge.src;  // the sender's stage
  int const peer_stage = in.gradient ? edge.src : edge.dst;
  int const theirs = plan_.replica_of(stage, in.peer), mine = plan_.replica_of(peer_stage, device_);
  if (theirs < 0)
    return internal_error("device " + std::to_string(in.peer) + " does not run stage " + std::to_string(stage));
  std::vector<int> const chunks =
      in.gradient ? plan_.piece_chunks(in.edge, mine, theirs) : plan_.piece_chunks(in.edge, theirs, mine);
  return piece_metas(in.edge, in.gradient, static_cast<int>(chunks.size()));
}

Status Worker::post(Instruction const& in, int64_t step) {
  ASSIGN_OR_RETURN(std::vector<TensorMeta> expected, expected_for(in));
  return comm_.post_recv(key_of(in, step), expected);
}

Status Worker::recv(Instruction const& in, int64_t step) {
  ASSIGN_OR_RETURN(std::vector<TensorMeta> expected, expected_for(in));
  ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                   comm_.recv(key_of(in, step), expected, deadline_after(options_.timeout_s)));
  auto [it, fresh] =
      received_.emplace(std::make_tuple(in.edge, in.micro_batch, in.peer, in.gradient), Received{std::move(tensors)});
  if (!fresh) return internal_error("received the same piece twice");
  return Status::ok();
}

Status Worker::finish_step(int64_t step) {
  // The leak check: after STEP nothing may be left of this step.
  std::string leaks;
  auto note = [&](std::string const& what) { leaks += (leaks.empty() ? "" : ", ") + what; };
  for (auto const& [k, v] : outputs_)
    note("activations of s" + std::to_string(k.first) + " m" + std::to_string(k.second));
  for (auto const& [k, v] : input_grads_)
    note("input gradients of s" + std::to_string(k.first) + " m" + std::to_string(k.second));
  for (auto const& [k, v] : loss_grads_)
    note("loss gradient of s" + std::to_string(k.first) + " m" + std::to_string(k.second));
  for (auto const& [k, v] : received_) note("a received piece of edge " + std::to_string(std::get<0>(k)));
  for (auto const& [s, runner] : runners_)
    if (runner->executor().in_flight() > 0)
      note(std::to_string(runner->executor().in_flight()) + " micro-batches in flight on s" + std::to_string(s));
  for (MessageKey const& k : comm_.undelivered())
    if (k.step <= step) note("undelivered message " + k.to_string());
  if (!data_cache_.empty()) note("input data of " + std::to_string(data_cache_.size()) + " micro-batches");
  if (!leaks.empty()) {
    outputs_.clear();
    input_grads_.clear();
    loss_grads_.clear();
    received_.clear();
    data_cache_.clear();
    return internal_error("the schedule left data behind after STEP: " + leaks +
                          " (every F needs its B, every SEND its RECV)");
  }
  // The step's loss, summed over every device in device order (with deferred reads: at STEP).
  if (!loss_reduced_) {
    ASSIGN_OR_RETURN(step_loss_, sum_over_devices({step, kStepLossStage}, loss_sum_));
  }
  return Status::ok();
}

Status Worker::read_step_losses(int64_t step) {
  RETURN_IF_ERROR(backend_.deferred_checks());
  if (step_losses_.slots() > 0) {
    ASSIGN_OR_RETURN(std::vector<double> values, backend_.read_losses(step_losses_));
    for (int mb : injected_nan_) values.at(static_cast<std::size_t>(mb)) = std::nan("");
    injected_nan_.clear();
    for (auto const& [mb, line] : loss_lines_) {
      double const l = values.at(static_cast<std::size_t>(mb));
      if (!std::isfinite(l))
        return numerical_error(
            "loss is " + std::string(std::isnan(l) ? "NaN" : "Inf") + " at step " + std::to_string(step + 1) +
            ", micro-batch " + std::to_string(mb) + " (read at STEP; its forward was line " + std::to_string(line) +
            "): " + non_finite_cause(plan_.loss_stage(), nullptr, mb, step) +
            " (training stopped before that update on every device; CPU workers, which read each loss at once, "
            "also name the op that made it)");
      loss_sum_ += l;
    }
    loss_lines_.clear();
    step_losses_ = {};
  }
  // Before any device updates: a device that stopped above aborts this collective everywhere.
  ASSIGN_OR_RETURN(step_loss_, sum_over_devices({step, kStepLossStage}, loss_sum_));
  loss_reduced_ = true;
  return Status::ok();
}

Result<double> Worker::sum_over_devices(CollectiveKey const& key, double value) {
  std::vector<int> all(comm_.num_devices());
  std::iota(all.begin(), all.end(), 0);
  ASSIGN_OR_RETURN(Tensor on_this, on_device(Tensor::from_floats({1}, {static_cast<float>(value)})));
  std::vector<Tensor> sum{on_this};
  RETURN_IF_ERROR(comm_.all_reduce_sum(key, all, sum, deadline_after(options_.timeout_s)));
  return static_cast<double>(sum[0].to_vector()[0]);
}

}  // namespace gp::exec
