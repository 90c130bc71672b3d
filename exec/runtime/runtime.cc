#include "exec/runtime/runtime.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "core/hash.h"
#include "exec/comm/in_process.h"
#include "exec/data.h"
#include "exec/runtime/threads.h"
#include "schedule/memory.h"
#include "schedule/schedule_text.h"
#include "schedule/validate.h"

namespace gp::exec {

namespace {

// Parameters and BatchNorm statistics of one stage, by name (the order every rank agrees on).
std::vector<std::pair<std::string, graph::TensorId>> stage_state(RuntimePlan const& rp, int s) {
  graph::OpGraph const& graph = rp.graph();
  std::map<std::string, graph::TensorId> out;
  for (graph::TensorId t : rp.autodiff(s).weights) out.emplace(graph.tensor(t).name, t);
  for (graph::TensorId t : running_stat_tensors(graph, rp.stage_ops(s))) out.emplace(graph.tensor(t).name, t);
  return {out.begin(), out.end()};
}

// Pins the calling thread to `count` of the cores this process may use, starting at the `first`.
void pin_to_cores(int first, int count) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cores.push_back(c);
  if (cores.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int k = first; k < first + count; ++k) CPU_SET(cores[k % cores.size()], &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

uint64_t run_fingerprint(partition::Plan const& plan, schedule::Schedule const& schedule, TrainConfig const& config) {
  partition::Plan p = plan;
  p.search_time_s = 0;  // the one field that differs between ranks that planned alike
  uint64_t h = fnv1a(partition::plan_to_json(p));
  h = fnv1a(schedule::print_schedule(schedule), h);
  h = fnv1a(std::to_string(config.batch) + "/" + std::to_string(config.micro_batches) + "/" +
                std::to_string(config.seed) + "/" + loss_kind_name(config.loss) + "/" +
                optimizer_kind_name(config.optimizer.kind) + "/" + std::to_string(config.optimizer.lr),
            h);
  return h;
}

Runtime::~Runtime() = default;

Status Runtime::prepare(TrainConfig const& config, graph::OpGraph const& graph, partition::Plan const& plan,
                        schedule::Schedule const& schedule, RuntimeOptions const& options) {
  config_ = config;
  graph_ = &graph;
  plan_ = plan;
  schedule_ = schedule;
  options_ = options;
  if (schedule_.num_stages != static_cast<int>(plan_.stages.size()) || schedule_.num_devices() != plan_.num_devices)
    return invalid_argument("the schedule is for " + std::to_string(schedule_.num_stages) + " stages on " +
                            std::to_string(schedule_.num_devices()) + " devices but the plan has " +
                            std::to_string(plan_.stages.size()) + " stages on " + std::to_string(plan_.num_devices) +
                            ": the schedule was built for another plan (rebuild it with graphpipe schedule)");
  schedule::CheckOptions check;
  check.memory_limit_bytes = 0;  // memory is enforced while running, per device
  RETURN_IF_ERROR(schedule::check_schedule(plan_, schedule_, check).with_context("the schedule does not fit the plan"));
  if (config_.batch != plan_.batch)
    return invalid_argument("the config's batch is " + std::to_string(config_.batch) + " but the plan was made for " +
                            std::to_string(plan_.batch) + " (partition with --batch " + std::to_string(config_.batch) +
                            ", or set batch: " + std::to_string(plan_.batch) + ")");
  if (config_.micro_batches != schedule_.num_micro_batches ||
      plan_.micro_batch * schedule_.num_micro_batches != config_.batch)
    return invalid_argument("the config asks for " + std::to_string(config_.micro_batches) +
                            " micro-batches but the plan/schedule run " + std::to_string(schedule_.num_micro_batches) +
                            " of " + std::to_string(plan_.micro_batch) +
                            " samples (set micro_batches: " + std::to_string(schedule_.num_micro_batches) +
                            ", or replan with --micro-batch " + std::to_string(config_.micro_batch_size()) + ")");
  ASSIGN_OR_RETURN(RuntimePlan rp, RuntimePlan::make(graph, plan_));
  rplan_ = std::make_unique<RuntimePlan>(std::move(rp));
  ASSIGN_OR_RETURN(schedule::PlanView view, schedule::PlanView::make(plan_));
  for (auto const& m : schedule::account_memory(view, schedule_)) predicted_peak_.push_back(m.peak_bytes);
  return Status::ok();
}

Status Runtime::build_worker(int device, Communicator& comm) {
  memory_.push_back(std::make_unique<CountingAllocator>());
  if (!options_.make_backend)
    return invalid_argument(
        "RuntimeOptions::make_backend is empty: the runtime needs each device's backend "
        "(the session layer's make_backend, or exec::cpu_backend_factory())");
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, options_.make_backend(device));
  backends_.push_back(std::move(backend));
  if (!backends_.back()) return internal_error("no backend for device " + std::to_string(device));
  bool const on_gpu = backends_.back()->device().kind != DeviceKind::kCpu;
  if (hub_ && on_gpu) {
    Backend* const b = backends_.back().get();
    hub_->set_device_allocator(device, &b->allocator());
    // Replicas' gradients are summed on the GPU (the first replica's), not in host memory.
    hub_->set_device_adder(device, {[b](Tensor& dst, Tensor const& src) { return b->add_into(dst, src); },
                                    [b] {
                                      HostFence const done = b->fence(Backend::StreamKind::kCompute);
                                      return done ? done() : Status::ok();
                                    }});
  }
  device_memory_.push_back(on_gpu ? &backends_.back()->allocator() : memory_.back().get());
  ScopedThreadAllocator scoped(*memory_.back());
  ASSIGN_OR_RETURN(auto data, make_data_source(config_.data, *graph_, config_.loss, config_.seed));
  ASSIGN_OR_RETURN(auto worker, Worker::create(*rplan_, schedule_, device, config_, *backends_.back(), comm,
                                               std::move(data), options_.worker, *device_memory_.back()));
  workers_.push_back(std::move(worker));
  return Status::ok();
}

Result<std::unique_ptr<Runtime>> Runtime::create_threads(TrainConfig const& config, graph::OpGraph const& graph,
                                                         partition::Plan const& plan,
                                                         schedule::Schedule const& schedule,
                                                         RuntimeOptions const& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  RETURN_IF_ERROR(rt->prepare(config, graph, plan, schedule, options));
  rt->hub_ = std::make_unique<InProcessHub>(plan.num_devices);
  for (int d = 0; d < plan.num_devices; ++d) {
    rt->endpoints_.push_back(rt->hub_->endpoint(d));
    RETURN_IF_ERROR(rt->build_worker(d, *rt->endpoints_.back()));
  }
  return rt;
}

Result<std::unique_ptr<Runtime>> Runtime::create_rank(TrainConfig const& config, graph::OpGraph const& graph,
                                                      partition::Plan const& plan, schedule::Schedule const& schedule,
                                                      Communicator& comm, RuntimeOptions const& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  RETURN_IF_ERROR(rt->prepare(config, graph, plan, schedule, options));
  if (comm.num_devices() != plan.num_devices)
    return invalid_argument("the plan has " + std::to_string(plan.num_devices) + " devices but " +
                            std::to_string(comm.num_devices()) + " ranks were started: run mpirun -np " +
                            std::to_string(plan.num_devices));
  rt->rank_comm_ = &comm;
  RETURN_IF_ERROR(rt->build_worker(comm.device(), comm));
  return rt;
}

Status Runtime::run(int64_t steps, std::ostream* progress) {
  int64_t const n = steps >= 0 ? steps : std::max<int64_t>(0, config_.steps - step_);
  if (n == 0) return Status::ok();
  timed_s_ = 0;
  timed_steps_ = 0;
  for (Allocator* m : device_memory_) m->reset_peak();
  return hub_ ? run_threads(n, progress) : run_rank(n, progress);
}

void Runtime::after_step(int64_t step, double loss, std::ostream* progress) {
  losses_.push_back(loss);
  step_ = step + 1;
  if (progress && (step_ % std::max<int64_t>(1, config_.log_interval) == 0 || step_ == config_.steps)) {
    char line[200];
    std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  %.1f samples/s", static_cast<long long>(step_),
                  static_cast<long long>(config_.steps), loss, samples_per_s());
    *progress << line << (workers_.empty() ? std::string() : loss_scale_note(workers_.front()->loss_scaler()))
              << std::endl;
  }
}

Status Runtime::run_threads(int64_t steps, std::ostream* progress) {
  int const n = static_cast<int>(workers_.size());
  int const cores = available_cores();
  int const budget = options_.threads_per_worker > 0 ? options_.threads_per_worker : std::max(1, cores / n);
  bool const pin = options_.pin_cores && budget * n <= cores;
  // What the workers report into, on the heap: a worker stuck in compute is detached below and may
  // still finish after this function has returned (the CLI then exits at once, but not before).
  struct Shared {
    std::vector<Status> status;
    std::mutex mu;
    std::condition_variable cv;
    int finished = 0;
  };
  auto const shared = std::make_shared<Shared>();
  shared->status.resize(n);
  int64_t const first = step_;
  auto const origin = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([this, shared, w, steps, first, origin, budget, pin, progress] {
      auto& [status, mu, cv, finished] = *shared;
      ScopedThreadAllocator scoped(*memory_[w]);
      set_thread_budget(budget);
      if (pin) pin_to_cores(w * budget, budget);
      auto last = Clock::now();
      for (int64_t k = 0; k < steps; ++k) {
        workers_[w]->clear_intervals();
        Status s = workers_[w]->run_step(first + k, origin);
        if (!s.is_ok()) {
          std::lock_guard lock(mu);
          status[w] = s;
          break;
        }
        if (w == 0) {
          auto const now = Clock::now();
          if (k > 0 || steps == 1) {
            timed_s_ += std::chrono::duration<double>(now - last).count();
            ++timed_steps_;
          }
          last = now;
          after_step(first + k, workers_[0]->step_loss(), progress);
        }
      }
      std::lock_guard lock(mu);
      ++finished;
      cv.notify_all();
    });
  }
  // Wait for every worker; after an abort, a worker stuck in compute gets the timeout as grace.
  std::optional<Clock::time_point> aborted_at;
  {
    std::unique_lock lock(shared->mu);
    while (shared->finished < n) {
      shared->cv.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_requested() && !endpoints_[0]->aborted()) endpoints_[0]->abort(aborted_error(kInterrupted));
      if (!aborted_at && endpoints_[0]->aborted()) {
        aborted_at = Clock::now();
        stall_snapshot_ = stall_report();  // where everyone was when the first error happened
      }
      if (aborted_at && Clock::now() - *aborted_at > std::chrono::duration<double>(options_.worker.timeout_s + 1)) {
        stuck_ = true;
        break;
      }
    }
  }
  if (stuck_) {
    for (auto& t : threads) t.detach();
    std::vector<Status> status;
    {
      std::lock_guard lock(shared->mu);
      status = shared->status;
    }
    return first_cause(status);
  }
  for (auto& t : threads) t.join();
  return first_cause(shared->status);
}

Status Runtime::run_rank(int64_t steps, std::ostream* progress) {
  ScopedThreadAllocator scoped(*memory_[0]);
  int const budget = options_.threads_per_worker > 0 ? options_.threads_per_worker : rank_thread_budget();
  set_thread_budget(budget);
  RETURN_IF_ERROR(rank_comm_->barrier(-1, deadline_after(options_.worker.timeout_s)));
  auto const origin = Clock::now();
  auto last = origin;
  int64_t const first = step_;
  for (int64_t k = 0; k < steps; ++k) {
    workers_[0]->clear_intervals();
    Status s = workers_[0]->run_step(first + k, origin);
    if (!s.is_ok()) return first_cause({s});
    auto const now = Clock::now();
    if (k > 0 || steps == 1) {
      timed_s_ += std::chrono::duration<double>(now - last).count();
      ++timed_steps_;
    }
    last = now;
    after_step(first + k, workers_[0]->step_loss(), rank_comm_->device() == 0 ? progress : nullptr);
  }
  return Status::ok();
}

Status Runtime::first_cause(std::vector<Status> const& statuses) const {
  Communicator const& comm = hub_ ? *endpoints_[0] : *rank_comm_;
  std::optional<Status> cause = comm.aborted();
  Status s = Status::ok();
  if (cause && cause->code() != StatusCode::kAborted)
    s = *cause;
  else
    for (Status const& st : statuses)
      if (!st.is_ok() && (s.is_ok() || s.code() == StatusCode::kAborted)) s = st;
  if (s.is_ok()) return s;
  if (s.code() == StatusCode::kTimeout && hub_)
    return Status(s.code(), s.message() + "; " + (stall_snapshot_.empty() ? stall_report() : stall_snapshot_));
  return s;
}

std::string Runtime::stall_report() const {
  std::string out = "where each device was:";
  auto const boxes = hub_ ? hub_->mailboxes() : std::vector<std::vector<MessageKey>>{};
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    int const d = workers_[w]->device();
    int const i = workers_[w]->current();
    out += " d" + std::to_string(d) + " ";
    if (i < 0)
      out += "between steps";
    else {
      auto const& in = schedule_.devices[d][i];
      out += "at line " + std::to_string(in.line) + " (" + schedule::to_string(in) + ")";
    }
    if (d < static_cast<int>(boxes.size()) && !boxes[d].empty())
      out += " with " + std::to_string(boxes[d].size()) + " unreceived messages";
    out += ";";
  }
  out.pop_back();
  return out;
}

double Runtime::samples_per_s() const {
  return timed_steps_ > 0 && timed_s_ > 0 ? static_cast<double>(timed_steps_ * config_.batch) / timed_s_ : 0.0;
}

std::vector<DeviceMeasurement> Runtime::measurements() const {
  std::vector<DeviceMeasurement> out;
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    DeviceMeasurement m;
    m.device = workers_[w]->device();
    auto const& iv = workers_[w]->intervals();
    if (!iv.empty()) {
      double busy = 0;
      for (auto const& i : iv)
        if (i.stream == schedule::Stream::kCompute) busy += i.end_s - i.start_s;
      double const wall = iv.back().end_s - iv.front().start_s;
      m.busy_fraction = wall > 0 ? busy / wall : 0;
    }
    m.peak_bytes = device_memory_[w]->peak_bytes();
    m.predicted_peak_bytes = predicted_peak_[m.device];
    out.push_back(m);
  }
  return out;
}

schedule::Timeline Runtime::timeline() const {
  schedule::Timeline t;
  t.num_devices = plan_.num_devices;
  double start = 1e300;
  for (auto const& w : workers_)
    for (auto const& iv : w->intervals()) start = std::min(start, iv.start_s);
  for (auto const& w : workers_)
    for (auto iv : w->intervals()) {
      iv.start_s -= start;
      iv.end_s -= start;
      t.intervals.push_back(std::move(iv));
    }
  return t;
}

Status Runtime::gather_stages(int gather, std::map<std::string, Tensor>& out,
                              std::function<std::vector<std::pair<std::string, TensorMeta>>(int)> const& names_of) {
  int const me = rank_comm_->device();
  double const timeout = options_.worker.timeout_s;
  int const n = rplan_->num_stages();
  for (int s = 0; s < n; ++s) {
    int const owner = plan_.stages[s].devices[0];
    if (owner == 0) continue;
    MessageKey key{-1, -1000 - (gather * n + s), false, 0, owner, 0};
    auto const names = names_of(s);
    if (me == owner) {
      std::vector<Tensor> tensors;
      for (auto const& [name, meta] : names) {
        auto it = out.find(name);
        if (it == out.end()) return internal_error("stage " + std::to_string(s) + " has no '" + name + "'");
        tensors.push_back(it->second);
      }
      RETURN_IF_ERROR(rank_comm_->send(key, std::move(tensors)));
    } else if (me == 0) {
      std::vector<TensorMeta> metas;
      for (auto const& [name, meta] : names) metas.push_back(meta);
      ASSIGN_OR_RETURN(auto tensors, rank_comm_->recv(key, metas, deadline_after(timeout)));
      for (std::size_t i = 0; i < names.size(); ++i) out.emplace(names[i].first, std::move(tensors[i]));
    }
  }
  return rank_comm_->flush(deadline_after(timeout));
}

namespace {
std::vector<std::pair<std::string, TensorMeta>> state_metas(RuntimePlan const& rp, int s) {
  std::vector<std::pair<std::string, TensorMeta>> out;
  for (auto const& [name, t] : stage_state(rp, s))
    out.push_back({name, {rp.graph().tensor(t).dtype, rp.graph().tensor(t).data->dims}});
  return out;
}
}  // namespace

Result<std::map<std::string, Tensor>> Runtime::trained_tensors() {
  std::map<std::string, Tensor> out;
  for (auto& w : workers_)
    for (auto& [s, runner] : w->runners())
      if (plan_.stages[s].devices[0] == w->device()) {
        for (auto const& [name, t] : runner->executor().parameters()) out.emplace(name, t.clone_to(cpu_allocator()));
        for (auto const& [name, t] : runner->executor().buffers()) out.emplace(name, t.clone_to(cpu_allocator()));
      }
  if (hub_) return out;
  // Ranks: device 0 collects every other stage's state from its replica 0.
  RETURN_IF_ERROR(gather_stages(0, out, [&](int s) { return state_metas(*rplan_, s); }));
  return out;
}

std::vector<std::string> Runtime::moment_suffixes() const {
  if (config_.optimizer.kind != OptimizerKind::kSgd) return {"#m", "#v"};
  if (config_.optimizer.momentum != 0.f) return {"#momentum"};
  return {};
}

Result<CheckpointState> Runtime::checkpoint_state() {
  CheckpointState s;
  s.step = step_;
  s.seed = config_.seed;
  s.optimizer = optimizer_kind_name(config_.optimizer.kind);
  s.optimizer_steps = 0;
  std::map<std::string, Tensor> weights, moments;
  for (auto const& w : workers_)
    for (auto& [st, runner] : w->runners()) {
      s.optimizer_steps = runner->optimizer().step_count();
      if (plan_.stages[st].devices[0] != w->device()) continue;
      for (auto const& [name, t] : runner->executor().parameters()) weights.emplace(name, t.clone_to(cpu_allocator()));
      for (auto const& [name, t] : runner->executor().buffers()) weights.emplace(name, t.clone_to(cpu_allocator()));
      for (auto const& [name, t] : runner->optimizer().state()) moments.emplace(name, t.clone_to(cpu_allocator()));
    }
  if (!hub_) {
    // Ranks: device 0 gathers the other stages' weights and optimizer moments (the moments exist
    // once the optimizer has stepped: every rank's optimizers step together).
    RETURN_IF_ERROR(gather_stages(0, weights, [&](int st) { return state_metas(*rplan_, st); }));
    auto const suffixes = s.optimizer_steps > 0 ? moment_suffixes() : std::vector<std::string>{};
    RETURN_IF_ERROR(gather_stages(1, moments, [&](int st) {
      std::vector<std::pair<std::string, TensorMeta>> out;
      for (graph::TensorId t : rplan_->autodiff(st).weights)
        for (auto const& suffix : suffixes)
          out.push_back({graph_->tensor(t).name + suffix, {DType::kFloat32, graph_->tensor(t).data->dims}});
      std::sort(out.begin(), out.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
      return out;
    }));
  }
  s.weights = std::move(weights);
  s.optimizer_state = std::move(moments);
  if (!workers_.empty()) s.loss_scale = loss_scale_state(workers_.front()->loss_scaler());  // identical everywhere
  return s;
}

Status Runtime::restore(CheckpointState const& state, std::string const& source) {
  // The whole model's names and shapes, from the graph (a rank holds only its own stages).
  std::map<std::string, Tensor> model;
  for (int s = 0; s < rplan_->num_stages(); ++s)
    for (auto const& [name, meta] : state_metas(*rplan_, s)) {
      auto it = state.weights.find(name);
      if (it == state.weights.end())
        return invalid_argument("checkpoint '" + source + "' does not match the model: it has no parameter '" + name +
                                "' (was it written for another model?)");
      if (it->second.shape() != meta.shape || it->second.dtype() != meta.dtype)
        return invalid_argument("checkpoint '" + source + "' does not match the model: parameter '" + name + "' is " +
                                it->second.shape_string() + " in the checkpoint, " + meta.to_string() +
                                " in the model");
      model.emplace(name, it->second);
    }
  RETURN_IF_ERROR(check_checkpoint_matches(state, model, source));
  if (state.optimizer != optimizer_kind_name(config_.optimizer.kind))
    return invalid_argument("checkpoint '" + source + "' was written with optimizer '" + state.optimizer +
                            "' but the config uses '" + optimizer_kind_name(config_.optimizer.kind) + "'");
  if (state.seed != config_.seed)
    return invalid_argument("checkpoint '" + source + "' was written with seed " + std::to_string(state.seed) +
                            " but the config has seed " + std::to_string(config_.seed) +
                            ": resuming would not reproduce the run");
  for (std::size_t w = 0; w < workers_.size(); ++w)
    for (auto& [st, runner] : workers_[w]->runners()) {
      ScopedThreadAllocator scoped(*memory_[w]);
      std::set<std::string> names;
      for (auto const& [name, t] : runner->executor().parameters()) names.insert(name);
      for (auto const& [name, t] : runner->executor().buffers()) names.insert(name);
      for (auto const& name : names) RETURN_IF_ERROR(runner->executor().set_parameter(name, state.weights.at(name)));
      std::map<std::string, Tensor> moments;
      for (auto const& [name, t] : state.optimizer_state)
        if (names.count(name.substr(0, name.find('#'))))
          moments.emplace(name, t.clone_to(runner->executor().backend().allocator()));
      runner->optimizer().load_state(std::move(moments), state.optimizer_steps);
    }
  for (auto& w : workers_) restore_loss_scale(w->loss_scaler(), state.loss_scale);
  step_ = state.step;
  return Status::ok();
}

}  // namespace gp::exec
