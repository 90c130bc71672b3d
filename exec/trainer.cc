#include "exec/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "exec/non_finite.h"
#include "exec/prefetch.h"

namespace gp::exec {

namespace {

// Dropout and the random ops draw new numbers every step: captured, they read their seed from
// device memory (OpCall::rng_seed_slot).
bool draws_random_numbers(graph::Op const& op) {
  switch (op.kind()) {
    case graph::ops::OpKind::kDropout:
    case graph::ops::OpKind::kRandomUniformLike:
    case graph::ops::OpKind::kRandomNormalLike:
    case graph::ops::OpKind::kBernoulli:
      return true;
    default:
      return false;
  }
}

std::string format_seconds(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  return buf;
}

}  // namespace

Trainer::Trainer(TrainConfig config, graph::OpGraph const& graph, std::unique_ptr<DataSource> data,
                 std::unique_ptr<StageRunner> runner)
    : config_(std::move(config)),
      graph_(graph),
      data_(std::move(data)),
      runner_(std::move(runner)),
      scaler_(config_.loss_scale) {}

Result<std::unique_ptr<Trainer>> Trainer::create(TrainConfig const& config, graph::OpGraph const& graph,
                                                 Backend& backend, std::unique_ptr<DataSource> data) {
  if (config.batch % config.micro_batches != 0)
    return invalid_argument("batch " + std::to_string(config.batch) + " is not divisible by micro_batches " +
                            std::to_string(config.micro_batches));
  ASSIGN_OR_RETURN(LabelSpec spec, label_spec(graph, config.loss));
  if (config.cuda_graphs) RETURN_IF_ERROR(check_capturable(backend));
  ASSIGN_OR_RETURN(auto runner, StageRunner::create(graph, backend, {}, config.optimizer));
  if (runner->executor().parameters().empty())
    return invalid_argument("the model has no trainable weights (float initializers feeding its operators)");
  // On a device, each batch is made ahead on a thread while the device runs the one before, in
  // host memory the device copies from directly (exec/prefetch.h): the host's data phase leaves
  // the step's critical path. On the CPU the cores are the compute's: batches are made in line.
  if (backend.device().kind != DeviceKind::kCpu)
    data = std::make_unique<PrefetchingSource>(std::move(data), backend.pinned_host_allocator());
  std::unique_ptr<Trainer> t(new Trainer(config, graph, std::move(data), std::move(runner)));
  t->graphs_on_ = config.cuda_graphs;
  if (config.cuda_graphs) {
    // What a captured step reads from device memory because it changes between steps: the seeds
    // of the ops that draw random numbers, and a dynamic loss scale.
    for (graph::Op const& op : graph.ops()) t->device_seeds_ = t->device_seeds_ || draws_random_numbers(op);
    t->device_scale_ = t->scaler_.enabled();
  }
  t->rows_per_sample_ =
      std::accumulate(spec.label_dims.begin(), spec.label_dims.end(), int64_t{1}, std::multiplies<>());
  return t;
}

Status Trainer::step() {
  int64_t const mbs = config_.micro_batch_size();
  int64_t const first = step_ * config_.batch;
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point& t) {  // seconds since t, and t moves to now
    auto const now = Clock::now();
    double const s = std::chrono::duration<double>(now - t).count();
    t = now;
    return s;
  };
  auto t = Clock::now();
  RETURN_IF_ERROR(runner_->executor().zero_grads());
  Backend& backend = runner_->executor().backend();
  // Nothing is read back per micro-batch: the losses stay on the device, and the index checks a
  // device would read after each op are queued (Backend::defer_checks), until the one read below.
  DeferChecks const deferring(backend, true);
  if (!losses_slots_ || losses_slots_->slots() != config_.micro_batches)
    losses_slots_ = backend.step_losses(static_cast<int>(config_.micro_batches));
  Backend::StepLosses& losses = *losses_slots_;
  losses.written.assign(losses.written.size(), false);
  RETURN_IF_ERROR(write_step_values());
  bool const overlap = backend.overlaps_copies();
  for (int64_t m = 0; m < config_.micro_batches; ++m) {
    phases_.backward += since(t);  // zeroing the gradients, or the previous micro-batch's backward
    Batch batch;
    TensorMap inputs;
    Tensor labels;
    int buffer = -1;
    if (overlap) {
      ASSIGN_OR_RETURN(Staged staged, take(first + m * mbs, mbs));
      batch = std::move(staged.host);
      inputs = std::move(staged.inputs);
      labels = std::move(staged.labels);
      buffer = staged.buffer;
    } else {
      ASSIGN_OR_RETURN(batch, data_->batch(first + m * mbs, mbs));
      ASSIGN_OR_RETURN(inputs, device_inputs(batch));
      ASSIGN_OR_RETURN(labels, backend.to_device(batch.labels));
    }
    phases_.data += since(t);
    double forward_s = 0;
    RETURN_IF_ERROR(run_micro_batch(m, buffer, inputs, labels, losses, &forward_s));
    double const both = since(t);
    phases_.forward_loss += forward_s;
    phases_.backward += both - forward_s;
    if (overlap) {
      // The buffer is free once the compute stream passes this backward (a first layer may keep
      // its input for it); the next micro-batch's copy runs meanwhile, the next step's first after
      // the last one's.
      release(buffer);
      if (m + 1 < config_.micro_batches) {
        RETURN_IF_ERROR(stage(first + (m + 1) * mbs, mbs));
      } else if (step_ + 1 < config_.steps) {
        RETURN_IF_ERROR(stage(first + config_.batch, mbs));
      }
    }
  }
  // The step's one read (it waits for the backward): the deferred checks, then every loss. A
  // non-finite one stops training before the update, named as before by rerunning its forward.
  RETURN_IF_ERROR(backend.deferred_checks().with_context("step " + std::to_string(step_ + 1)));
  auto values = backend.read_losses(losses);
  if (!values.is_ok()) return values.status().with_context("step " + std::to_string(step_ + 1));
  phases_.backward += since(t);
  double loss = 0;
  for (int64_t m = 0; m < config_.micro_batches; ++m) {
    double const l = (*values)[static_cast<std::size_t>(m)];
    if (!std::isfinite(l)) return non_finite_loss(m, l);
    loss += l;
  }
  if (!std::isfinite(loss))
    return numerical_error("loss is " + std::string(std::isnan(loss) ? "NaN" : "Inf") + " at step " +
                           std::to_string(step_ + 1) + ": training stopped before that update (lower 'lr' " +
                           "or check the data)");
  if (scaler_.enabled()) {
    // A gradient that overflowed under the scale skips the step and halves the scale.
    ASSIGN_OR_RETURN(bool const finite, runner_->finite_gradients());
    double const scale = scaler_.scale();
    if (scaler_.update(!finite)) {
      RETURN_IF_ERROR(runner_->unscale_gradients(scale));
      RETURN_IF_ERROR(runner_->update());
    }
  } else {
    RETURN_IF_ERROR(runner_->update());
  }
  phases_.update += since(t);
  ++phases_.steps;
  ++step_;
  ++steps_run_;
  losses_.push_back(loss);
  return Status::ok();
}

Status Trainer::micro_batch(int64_t m, TensorMap const& inputs, Tensor const& labels, Backend::StepLosses& losses,
                            double* forward_s) {
  auto const t0 = std::chrono::steady_clock::now();
  Backend& backend = runner_->executor().backend();
  graph::TensorId const out_id = graph_.outputs()[0];
  TensorMap outputs, input_grads;
  RETURN_IF_ERROR(
      runner_->executor().forward(m, inputs, outputs, true, micro_batch_seed(config_.seed, step_, m), seed_slot(m)));
  Tensor grad;
  if (Status const s = backend.loss_into(config_.loss, outputs.at(out_id), labels, config_.batch * rows_per_sample_,
                                         grad, losses, static_cast<int>(m));
      !s.is_ok()) {
    runner_->executor().discard(m);
    return s.with_context("step " + std::to_string(step_ + 1));
  }
  if (device_scale_) {
    RETURN_IF_ERROR(backend.scale_by(grad, scale_.device));  // read as it runs: a replay's is this step's
  } else if (scaler_.enabled()) {
    RETURN_IF_ERROR(backend.scale(grad, scaler_.scale()));
  }
  if (forward_s) *forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return runner_->executor().backward(m, {{out_id, grad}}, input_grads);
}

Status Trainer::run_micro_batch(int64_t m, int buffer, TensorMap const& inputs, Tensor const& labels,
                                Backend::StepLosses& losses, double* forward_s) {
  // The first step builds plans, caches and gradients: captured from the second on.
  if (!graphs_on_ || steps_run_ == 0 || buffer < 0) return micro_batch(m, inputs, labels, losses, forward_s);
  auto it = graphs_.find({m, buffer});
  if (it == graphs_.end()) {
    if (Status const captured = capture(m, buffer, inputs, labels, losses); !captured.is_ok()) {
      // Nothing of it ran: the micro-batch runs as it always has, and so does the rest of the run.
      graphs_on_ = false;
      graphs_stopped_ = captured.message();
      graphs_.clear();
      return micro_batch(m, inputs, labels, losses, forward_s);
    }
    it = graphs_.find({m, buffer});
  }
  RETURN_IF_ERROR(runner_->executor().backend().replay(*it->second));
  // What the captured loss call noted on the host, again for this replay.
  losses.written[static_cast<std::size_t>(m)] = true;
  ++graph_replays_;
  return Status::ok();
}

Status Trainer::capture(int64_t m, int buffer, TensorMap const& inputs, Tensor const& labels,
                        Backend::StepLosses& losses) {
  Backend& backend = runner_->executor().backend();
  RETURN_IF_ERROR(backend.begin_capture());
  Status const recorded = micro_batch(m, inputs, labels, losses, nullptr);
  if (!recorded.is_ok()) runner_->executor().discard(m);
  auto work = backend.end_capture();  // ends the capture whatever happened in it
  if (!recorded.is_ok()) return recorded.with_context("capturing micro-batch " + std::to_string(m));
  if (!work.is_ok()) return work.status().with_context("capturing micro-batch " + std::to_string(m));
  graphs_.emplace(std::make_pair(m, buffer), std::move(*work));
  return Status::ok();
}

Status Trainer::write_step_values() {
  Backend& backend = runner_->executor().backend();
  auto make = [&](DeviceValues& v, int64_t n, DType dtype) {
    if (v.device.defined()) return;
    Allocator* pinned = backend.pinned_host_allocator();
    v.host = pinned ? Tensor({n}, dtype, *pinned) : Tensor({n}, dtype);
    v.device = backend.empty({n}, dtype);
  };
  // The last step's copies ran before its first micro-batch (the step's loss read waited for
  // them), so the host slots are free to rewrite.
  if (device_seeds_) {
    make(seeds_, config_.micro_batches, DType::kInt64);
    for (int64_t m = 0; m < config_.micro_batches; ++m)
      reinterpret_cast<uint64_t*>(seeds_.host.data<int64_t>())[m] = micro_batch_seed(config_.seed, step_, m);
    RETURN_IF_ERROR(backend.copy(seeds_.host, seeds_.device));
  }
  if (device_scale_) {
    make(scale_, 1, DType::kFloat32);
    scale_.host.data<float>()[0] = static_cast<float>(scaler_.scale());
    RETURN_IF_ERROR(backend.copy(scale_.host, scale_.device));
  }
  return Status::ok();
}

uint64_t const* Trainer::seed_slot(int64_t m) const {
  if (!seeds_.device.defined()) return nullptr;  // made by write_step_values where device_seeds_
  return reinterpret_cast<uint64_t const*>(seeds_.device.data<int64_t>()) + m;
}

Status Trainer::check_capturable(Backend const& backend) {
  if (!backend.captures_work())
    return invalid_argument("cuda_graphs: true needs a backend that captures work (--backend cuda), not '" +
                            backend.name() + "': remove cuda_graphs or train on a GPU");
  return Status::ok();
}

std::string Trainer::cuda_graphs_summary() const {
  if (!config_.cuda_graphs) return "";
  if (!graphs_stopped_.empty())
    return "cuda graphs: off after a capture failed (training went on without them): " + graphs_stopped_;
  return "cuda graphs: " + std::to_string(graphs_.size()) + " micro-batch graph(s) captured, replayed " +
         std::to_string(graph_replays_) + " time(s)";
}

Trainer::~Trainer() { drop_staged(); }

Status Trainer::stage(int64_t first, int64_t count) {
  drop_staged();
  Backend& backend = runner_->executor().backend();
  Staged s;
  s.first = first, s.count = count;
  ASSIGN_OR_RETURN(s.host, data_->batch(first, count));
  s.buffer = next_buffer_;
  next_buffer_ ^= 1;
  TensorMap& buffer = buffers_[s.buffer];
  bool fresh = false;
  for (std::size_t k = 0; k < graph_.inputs().size(); ++k) {
    Tensor const& host = s.host.inputs.at(k);
    Tensor& dev = buffer[graph_.inputs()[k]];
    if (!dev.defined() || dev.shape() != host.shape() || dev.dtype() != host.dtype()) {
      dev = backend.empty(host.shape(), host.dtype());
      fresh = true;
    }
  }
  Tensor& labels = label_buffers_[s.buffer];
  if (s.host.labels.defined() &&
      (!labels.defined() || labels.shape() != s.host.labels.shape() || labels.dtype() != s.host.labels.dtype())) {
    labels = backend.empty(s.host.labels.shape(), s.host.labels.dtype());
    fresh = true;
  }
  // The copy stream writes the buffer only after the compute stream's last use of it: the event
  // release() recorded then. A new buffer (its memory may have served the compute stream before)
  // or one whose micro-batch never released it (its step failed) waits for everything queued.
  std::optional<Backend::Event>& free = buffer_free_[s.buffer];
  if (fresh || !free) {
    if (free) RETURN_IF_ERROR(backend.wait(Backend::StreamKind::kCopy, *free));
    free = backend.record(Backend::StreamKind::kCompute);
  }
  RETURN_IF_ERROR(backend.wait(Backend::StreamKind::kCopy, *free));
  free.reset();
  for (std::size_t k = 0; k < graph_.inputs().size(); ++k) {
    graph::TensorId const id = graph_.inputs()[k];
    RETURN_IF_ERROR(backend.copy_on(Backend::StreamKind::kCopy, s.host.inputs.at(k), buffer.at(id)));
    s.inputs.emplace(id, buffer.at(id));
  }
  if (s.host.labels.defined()) {
    RETURN_IF_ERROR(backend.copy_on(Backend::StreamKind::kCopy, s.host.labels, labels));
    s.labels = labels;
  }
  s.copied = backend.record(Backend::StreamKind::kCopy);
  staged_ = std::move(s);
  return Status::ok();
}

Result<Trainer::Staged> Trainer::take(int64_t first, int64_t count) {
  if (!staged_ || staged_->first != first || staged_->count != count) RETURN_IF_ERROR(stage(first, count));
  Staged s = std::move(*staged_);
  staged_.reset();
  // The compute stream reads the buffer after the copies; the host batch may go once this is queued.
  RETURN_IF_ERROR(runner_->executor().backend().wait(Backend::StreamKind::kCompute, s.copied));
  return s;
}

void Trainer::release(int buffer) {
  Backend& backend = runner_->executor().backend();
  std::optional<Backend::Event>& free = buffer_free_[buffer];
  if (free) (void)backend.wait(Backend::StreamKind::kCopy, *free);  // an event is waited for once
  free = backend.record(Backend::StreamKind::kCompute);
}

void Trainer::drop_staged() {
  if (!staged_) return;
  // Its copies may still be running: the compute stream, whose allocator frees the buffers and
  // reuses the host batch's pinned memory, waits for them.
  (void)runner_->executor().backend().wait(Backend::StreamKind::kCompute, staged_->copied);
  release(staged_->buffer);
  staged_.reset();
}

// A batch's inputs on the device.
Result<TensorMap> Trainer::device_inputs(Batch const& batch) {
  Backend& backend = runner_->executor().backend();
  TensorMap inputs;
  for (std::size_t k = 0; k < graph_.inputs().size(); ++k) {  // data arrive in host memory (the edge)
    ASSIGN_OR_RETURN(Tensor input, backend.to_device(batch.inputs.at(k)));
    inputs.emplace(graph_.inputs()[k], std::move(input));
  }
  return inputs;
}

// The error for micro-batch m's non-finite loss: the weights are as the forward saw them (no update
// yet), so its forward is rerun on the same data and seed to name the first non-finite tensor.
Status Trainer::non_finite_loss(int64_t m, double value) {
  int64_t const mbs = config_.micro_batch_size();
  ASSIGN_OR_RETURN(Batch const batch, data_->batch(step_ * config_.batch + m * mbs, mbs));
  ASSIGN_OR_RETURN(TensorMap const inputs, device_inputs(batch));
  std::string const where = config_.micro_batches > 1 ? ", micro-batch " + std::to_string(m) : "";
  return numerical_error(
      "loss is " + std::string(std::isnan(value) ? "NaN" : "Inf") + " at step " + std::to_string(step_ + 1) + where +
      ": " + explain_non_finite(runner_->executor(), &inputs, micro_batch_seed(config_.seed, step_, m), step_) +
      " (training stopped before that update)");
}

Status Trainer::run(std::ostream* progress, int64_t max_steps) {
  int64_t const target = max_steps >= 0 ? std::min(config_.steps, step_ + max_steps) : config_.steps;
  int64_t const start_step = step_;
  auto const t0 = std::chrono::steady_clock::now();
  auto t1 = t0;  // after the first step of this run
  while (step_ < target) {
    RETURN_IF_ERROR(step());
    auto const now = std::chrono::steady_clock::now();
    if (step_ == start_step + 1) {
      t1 = now;
      phases_ = {};
    }
    double const timed = std::chrono::duration<double>(now - t1).count();
    if (step_ > start_step + 1 && timed > 0)
      samples_per_s_ = static_cast<double>((step_ - start_step - 1) * config_.batch) / timed;
    if (progress && (step_ % config_.log_interval == 0 || step_ == target)) {
      double const elapsed = std::chrono::duration<double>(now - t0).count();
      double const done = static_cast<double>(step_ - start_step);
      // From the second step on, the rate and the ETA leave the first step out, as the run's
      // measured samples/s does: on a GPU it builds the cuDNN plans (3 to 13 s of a ResNet's first
      // step on an H200, against tens of milliseconds for each later one), and counting it made a
      // 3-step run print "5.0 samples/s, ETA 4.8s" where 1,593 samples/s and no time were left.
      double const per_step = step_ > start_step + 1 && timed > 0 ? timed / (done - 1) : elapsed / done;
      double const sps = static_cast<double>(config_.batch) / std::max(per_step, 1e-9);
      double const eta = per_step * static_cast<double>(target - step_);
      char line[200];
      std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  %.1f samples/s  elapsed %s  ETA %s",
                    static_cast<long long>(step_), static_cast<long long>(config_.steps), last_loss(), sps,
                    format_seconds(elapsed).c_str(), format_seconds(eta).c_str());
      *progress << line << loss_scale_note(scaler_) << std::endl;
    }
  }
  return Status::ok();
}

namespace {
// The tensor itself on the host, a host copy of a device tensor (checkpoints and export read bytes).
Tensor on_host(Tensor const& t) {
  return t.defined() && t.device().kind != DeviceKind::kCpu ? t.clone_to(process_cpu_allocator()) : t;
}
}  // namespace

std::map<std::string, Tensor> Trainer::trained_tensors() const {
  std::map<std::string, Tensor> out;
  for (auto const& [name, t] : runner_->executor().parameters()) out.emplace(name, on_host(t));
  for (auto const& [name, t] : runner_->executor().buffers()) out.emplace(name, on_host(t));
  return out;
}

CheckpointState Trainer::checkpoint_state() const {
  CheckpointState s;
  s.step = step_;
  s.seed = config_.seed;
  s.optimizer = optimizer_kind_name(config_.optimizer.kind);
  s.optimizer_steps = runner_->optimizer().step_count();
  s.loss_scale = loss_scale_state(scaler_);
  s.weights = trained_tensors();
  for (auto const& [name, t] : runner_->optimizer().state()) s.optimizer_state.emplace(name, on_host(t));
  return s;
}

Status Trainer::save_checkpoint(std::string const& path) const {
  return exec::save_checkpoint(path, checkpoint_state());
}

Status Trainer::restore(CheckpointState const& state, std::string const& source) {
  RETURN_IF_ERROR(check_checkpoint_matches(state, trained_tensors(), source));
  if (state.optimizer != optimizer_kind_name(config_.optimizer.kind))
    return invalid_argument("checkpoint '" + source + "' was written with optimizer '" + state.optimizer +
                            "' but the config uses '" + optimizer_kind_name(config_.optimizer.kind) + "'");
  if (state.seed != config_.seed)
    return invalid_argument("checkpoint '" + source + "' was written with seed " + std::to_string(state.seed) +
                            " but the config has seed " + std::to_string(config_.seed) +
                            ": resuming would not reproduce the run");
  for (auto const& [name, t] : state.weights) RETURN_IF_ERROR(runner_->executor().set_parameter(name, t));
  std::map<std::string, Tensor> moments;
  for (auto const& [name, t] : state.optimizer_state)
    moments.emplace(name, t.clone_to(runner_->executor().backend().allocator()));
  runner_->optimizer().load_state(std::move(moments), state.optimizer_steps);
  restore_loss_scale(scaler_, state.loss_scale);
  step_ = state.step;
  return Status::ok();
}

Status Trainer::load_checkpoint(std::string const& path) {
  ASSIGN_OR_RETURN(CheckpointState state, exec::load_checkpoint(path));
  return restore(state, path);
}

}  // namespace gp::exec
