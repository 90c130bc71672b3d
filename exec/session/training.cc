#include "exec/session/training.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "core/units.h"
#include "exec/autodiff.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/data.h"
#include "exec/optimizer.h"
#include "exec/runtime/worker.h"
#include "exec/session/registry.h"
#include "partition/cluster.h"
#include "schedule/plan_view.h"
#include "schedule/schedule_text.h"
#include "schedule/trace.h"

namespace gp::session {

TrainingSession::~TrainingSession() = default;

Result<std::unique_ptr<TrainingSession>> TrainingSession::create(exec::TrainConfig config, TrainOptions options) {
  RETURN_IF_ERROR(check_backend_name(options.backend));
  if (options.devices < 0) return invalid_argument("--devices must be >= 1");
  if (options.launcher != "threads" && options.launcher != "mpi")
    return invalid_argument("--launcher " + options.launcher + ": must be threads or mpi");
  std::unique_ptr<TrainingSession> s(new TrainingSession());
  s->config_ = std::move(config);
  s->backend_name_ = options.backend;
  s->mpi_ = options.launcher == "mpi";
  s->progress_ = options.progress;
  Status const started = s->start(options);
  if (!started) return s->on_rank_error(started);
  return s;
}

Status TrainingSession::on_rank_error(Status s) {
  if (s.is_ok() || !mpi_ || ranks_ <= 1 || s.code() == StatusCode::kAborted) return s;
  if (comm_) comm_->abort(s);
  return s.with_context("rank " + std::to_string(rank_));
}

Status TrainingSession::start(TrainOptions const& options) {
  if (mpi_) {
    ASSIGN_OR_RETURN(RankInfo const me, start_mpi());
    rank_ = me.rank;
    ranks_ = me.ranks;
  }
  bool const pipeline = options.devices > 1 || mpi_ || !config_.pipeline.plan.empty() || options.plan;
  if (config_.cuda_graphs && pipeline)
    return unsupported(
        "cuda_graphs: true trains on one device for now (a pipeline's workers run their stages without graphs): "
        "remove cuda_graphs, or train with --devices 1");
  if (config_.precision == graph::Precision::kFloat16) {
    if (backend_name_ == "cpu")
      return unsupported(
          "precision fp16 runs on CUDA only (oneDNN 2.6 has no float16 convolution or matrix product on this CPU): "
          "use --precision bf16 on the CPU, or --backend cuda");
    if (!config_.loss_scale.configured) config_.loss_scale.dynamic = true;  // fp16 needs it (GradScaler's default)
  }
  if (config_.precision == graph::Precision::kBFloat16 && backend_name_ == "cpu" &&
      exec::cpu_bf16() == exec::CpuBf16::kEmulated && is_lead())
    spdlog::warn(
        "bf16 on this CPU is emulated (oneDNN 2.6 has bf16 primitives only with AVX512): Conv, Gemm, MatMul, ReLU and "
        "pooling compute in float32 between bf16 roundings, the values native bf16 gives, no faster than fp32");
  // The config's trainable/frozen patterns decide what the importer trains.
  graph::ImportOptions import = options.import;
  import.precision = config_.precision;
  import.trainable.insert(import.trainable.end(), config_.trainable.begin(), config_.trainable.end());
  import.frozen.insert(import.frozen.end(), config_.frozen.begin(), config_.frozen.end());
  bool const patterns = !config_.trainable.empty() || !config_.frozen.empty();
  if (options.model && options.graph && !patterns) {
    model_ = *options.model;
    graph_ = options.graph;
    if (graph::graph_precision(*graph_) != config_.precision) {
      if (graph::graph_precision(*graph_) != graph::Precision::kFloat32)
        return invalid_argument(
            "the model was loaded in " + std::string(graph::precision_name(graph::graph_precision(*graph_))) +
            " but the config asks for " + graph::precision_name(config_.precision) + ": load it in float32");
      ASSIGN_OR_RETURN(graph::OpGraph rewritten, graph::apply_precision(*graph_, config_.precision));
      graph_ = std::make_shared<graph::OpGraph const>(std::move(rewritten));
    }
  } else {
    if (options.model) {
      model_ = *options.model;
    } else {
      ASSIGN_OR_RETURN(model_, read_model(config_.model, config_.seed));
    }
    ASSIGN_OR_RETURN(graph::OpGraph loaded, load_graph(model_, import));
    graph_ = std::make_shared<graph::OpGraph const>(std::move(loaded));
  }
  RETURN_IF_ERROR(check_weights_loaded(*graph_, model_.name));
  std::vector<std::string> warnings;
  for (auto const& c : graph_->weight_choices())
    if (!c.warning.empty()) warnings.push_back(c.warning);
  if (!warnings.empty())
    spdlog::warn("{}: {}{}", model_.name, warnings.front(),
                 warnings.size() > 1 ? " (and " + std::to_string(warnings.size() - 1) +
                                           " more such weights: `graphpipe inspect` lists them)"
                                     : std::string());
  // Weights, gradients, optimizer state and one micro-batch's activations: what one device holding
  // the whole model needs. A pipeline splits it, so there the schedule's per-device limit decides.
  double const need =
      static_cast<double>(graph_->param_bytes()) * (2 + exec::state_bytes_per_weight_byte(config_.optimizer)) +
      static_cast<double>(graph_->activation_bytes_per_sample()) * static_cast<double>(config_.micro_batch_size());
  if (options.import.max_memory_bytes > 0 && !pipeline && need > static_cast<double>(options.import.max_memory_bytes))
    return infeasible("training " + model_.name + " at micro-batch " + std::to_string(config_.micro_batch_size()) +
                      " needs about " + format_bytes(static_cast<int64_t>(need)) + ", more than the memory limit of " +
                      format_bytes(options.import.max_memory_bytes) +
                      " (--max-memory, by default the machine's available memory): lower batch or micro_batches, "
                      "or train a pipeline over more devices");
  if (backend_name_ != "cpu") {
    RETURN_IF_ERROR(check_graph_supported(backend_name_, *graph_));
    std::string why;
    if (gpu_count(&why) == 0) return unsupported(why);  // before any profiling or planning
    if (!pipeline) {
      ASSIGN_OR_RETURN(std::vector<int64_t> const gpus, gpu_memory_bytes());
      RETURN_IF_ERROR(check_device_memory(backend_name_, gpus, static_cast<int64_t>(need), nullptr, 0));
    }
  }
  RETURN_IF_ERROR(pipeline ? start_pipeline(options) : start_single(options));
  return resume();
}

Status TrainingSession::start_single(TrainOptions const&) {
  memory_ = std::make_unique<exec::CountingAllocator>();
  exec::ScopedThreadAllocator scoped(*memory_);
  ASSIGN_OR_RETURN(backend_, make_backend(backend_name_, 0, backend_settings(config_)));
  ASSIGN_OR_RETURN(auto data, exec::make_data_source(config_.data, *graph_, config_.loss, config_.seed));
  std::string const data_desc = data->describe();
  ASSIGN_OR_RETURN(trainer_, exec::Trainer::create(config_, *graph_, *backend_, std::move(data)));
  spdlog::info("model {}: {}", model_.name, exec::describe(trainer_->executor().plan(), *graph_));
  spdlog::info("training on {}: {} steps, batch {} in {} micro-batches, {} lr {}, loss {}, data {}", backend_->name(),
               config_.steps, config_.batch, config_.micro_batches, exec::optimizer_kind_name(config_.optimizer.kind),
               config_.optimizer.lr, exec::loss_kind_name(config_.loss), data_desc);
  return Status::ok();
}

Status TrainingSession::start_pipeline(TrainOptions const& options) {
  exec::RuntimeOptions ro;
  ro.worker.timeout_s = options.timeout_s > 0 ? options.timeout_s : config_.pipeline.timeout_s;
  ro.threads_per_worker = static_cast<int>(config_.pipeline.threads_per_worker);
  if (!options.fault.empty()) {
    ASSIGN_OR_RETURN(ro.worker.fault, exec::parse_fault(options.fault));
  }
  ASSIGN_OR_RETURN(int64_t memory, partition::parse_bytes(config_.pipeline.memory));
  ro.worker.memory_limit_bytes = memory;

  devices_ = options.devices;
  if (devices_ == 0 && options.plan) devices_ = options.plan->num_devices;
  if (mpi_ && devices_ == 0) devices_ = ranks_;
  if (mpi_ && devices_ != ranks_)
    return invalid_argument("--devices " + std::to_string(devices_) + " but mpirun started " + std::to_string(ranks_) +
                            " ranks: one rank per device (mpirun -np " + std::to_string(devices_) + ")");
  if (devices_ == 0) devices_ = 2;

  TrainingPlanContext context;
  context.devices = devices_;
  context.backend = backend_name_;
  context.mpi = mpi_;
  context.ordered_transport = mpi_ && backend_name_ == "cuda";
  context.timeout_s = config_.pipeline.timeout_s;
  context.plan = options.plan;
  ASSIGN_OR_RETURN(TrainingPlan planned, plan_training(config_, model_, graph_, context));
  planned_ = std::move(planned);
  partition::Plan const& plan = planned_->plan;
  schedule::Schedule const& sched = planned_->schedule;
  if (is_lead()) {
    std::string recompute;
    for (auto const& stage : plan.stages)
      if (stage.recompute) recompute += (recompute.empty() ? "; recompute: s" : ",s") + std::to_string(stage.id);
    spdlog::info("plan: {} stages on {} devices ({}), micro-batch {} x {}; schedule: {}{}", plan.stages.size(),
                 plan.num_devices, plan.planner, plan.micro_batch, plan.num_micro_batches, sched.policy, recompute);
    if (!plan.tied_weights.empty()) {
      std::vector<std::vector<int>> stages;
      double bytes = 0;
      for (auto const& t : plan.tied_weights) stages.push_back(t.stages), bytes += static_cast<double>(t.bytes);
      std::string groups;
      for (auto const& g : schedule::group_tied_weights(plan, stages)) {
        std::string list;
        for (int d : g.devices) list += (list.empty() ? "" : ",") + std::to_string(d);
        groups += (groups.empty() ? "{" : ", {") + list + "}";
      }
      spdlog::info("tied weights: {} ({}) read by several stages, a copy in each, summed at STEP over devices {}",
                   plan.tied_weights.size(), format_bytes(static_cast<int64_t>(bytes)), groups);
    }
  }
  if (backend_name_ != "cpu" && !mpi_) {
    // The plan and pipeline.memory against the GPUs the workers will run on, before anything is
    // allocated (MPI ranks: each rank's GPU is chosen by the NCCL bootstrap).
    ASSIGN_OR_RETURN(std::vector<int64_t> const gpu_memory, gpu_memory_bytes());
    RETURN_IF_ERROR(check_device_memory(backend_name_, gpu_memory, 0, &plan, memory));
    // Worker threads on the GPUs of this machine, round robin (several workers may share one).
    std::string why;
    int const gpus = gpu_count(&why);
    if (gpus == 0) return unsupported(why);
    if (is_lead() && gpus < devices_)
      spdlog::warn("{} workers share {} GPUs (worker d runs on GPU d mod {})", devices_, gpus, gpus);
    std::string const name = backend_name_;
    BackendSettings const settings{config_.tf32};
    ro.make_backend = [name, gpus, settings](int device) { return make_backend(name, device % gpus, settings); };
  } else if (!mpi_) {
    ro.make_backend = [](int) { return make_backend("cpu", 0); };
  }
  if (mpi_) {
    std::vector<std::vector<int>> tied_groups;
    if (backend_name_ == "cuda") {  // NCCL makes its groups' communicators up front
      ASSIGN_OR_RETURN(exec::RuntimePlan const routing, exec::RuntimePlan::make(*graph_, plan));
      for (auto const& g : routing.tied_groups()) tied_groups.push_back(g.devices);
    }
    ASSIGN_OR_RETURN(comm_,
                     make_rank_communicator(backend_name_, plan, sched, exec::run_fingerprint(plan, sched, config_), ro,
                                            backend_settings(config_), tied_groups));
    if (!ro.make_backend) ro.make_backend = [](int) { return make_backend("cpu", 0); };
    ASSIGN_OR_RETURN(runtime_, exec::Runtime::create_rank(config_, *graph_, plan, sched, *comm_, ro));
  } else {
    ASSIGN_OR_RETURN(runtime_, exec::Runtime::create_threads(config_, *graph_, plan, sched, ro));
  }
  if (is_lead())
    spdlog::info("training on {} {}: {} steps, batch {} in {} micro-batches, {} lr {}, loss {}", devices_,
                 mpi_ ? "MPI ranks" : "worker threads", config_.steps, config_.batch, config_.micro_batches,
                 exec::optimizer_kind_name(config_.optimizer.kind), config_.optimizer.lr,
                 exec::loss_kind_name(config_.loss));
  return Status::ok();
}

Status TrainingSession::resume() {
  exec::CheckpointConfig const& ck = config_.checkpoint;
  bool const found = ck.resume && !ck.path.empty() && std::filesystem::exists(ck.path);
  if (mpi_ && ranks_ > 1) {
    // Every rank reads the checkpoint itself: all of them must see it, or none.
    ASSIGN_OR_RETURN(std::vector<uint64_t> seen,
                     allgather_from_ranks(found ? 1 : 0, config_.pipeline.timeout_s, "the checkpoint check"));
    uint64_t n = 0;
    for (uint64_t v : seen) n += v;
    if (n > 0 && n < static_cast<uint64_t>(ranks_))
      return invalid_argument("checkpoint '" + ck.path + "' exists on " + std::to_string(int(n)) + " of " +
                              std::to_string(ranks_) +
                              " ranks: put it where every rank reads it (a shared folder), or remove it");
  }
  if (!found) return Status::ok();
  ASSIGN_OR_RETURN(exec::CheckpointState state, exec::load_checkpoint(ck.path));
  if (runtime_) {
    RETURN_IF_ERROR(runtime_->restore(state, ck.path));
  } else {
    exec::ScopedThreadAllocator scoped(*memory_);
    RETURN_IF_ERROR(trainer_->restore(state, ck.path));
  }
  if (is_lead()) spdlog::info("resumed from {} at step {}", ck.path, steps_done());
  return Status::ok();
}

Status TrainingSession::save_checkpoint() {
  exec::CheckpointState state;
  if (runtime_) {
    ASSIGN_OR_RETURN(state, runtime_->checkpoint_state());  // collective under MPI
  } else {
    state = trainer_->checkpoint_state();
  }
  if (is_lead()) RETURN_IF_ERROR(exec::save_checkpoint(config_.checkpoint.path, state));
  return Status::ok();
}

Status TrainingSession::run_steps(int64_t steps) {
  std::ostream* progress = is_lead() ? progress_ : nullptr;
  if (runtime_) return runtime_->run(steps, progress);
  exec::ScopedThreadAllocator scoped(*memory_);
  return trainer_->run(progress, steps);
}

Status TrainingSession::run(int64_t steps, bool checkpoint_at_stop) {
  int64_t const target = steps >= 0 ? std::min(config_.steps, steps_done() + steps) : config_.steps;
  bool const checkpoints = !config_.checkpoint.path.empty();
  int64_t const every = config_.checkpoint.every;
  while (steps_done() < target) {
    // Up to the next multiple of checkpoint.every (a checkpoint there), or to the target.
    int64_t const next = checkpoints && every > 0 ? std::min(target, (steps_done() / every + 1) * every) : target;
    Status s = run_steps(next - steps_done());
    if (!s) return on_rank_error(s);
    if (checkpoints && every > 0 && steps_done() % every == 0 && steps_done() < target) {
      s = save_checkpoint();
      if (!s) return on_rank_error(s);
    }
  }
  if (checkpoints && (checkpoint_at_stop || steps_done() == config_.steps || (every > 0 && steps_done() % every == 0)))
    return on_rank_error(save_checkpoint());
  return Status::ok();
}

Status TrainingSession::checkpoint() {
  if (config_.checkpoint.path.empty()) return Status::ok();
  return on_rank_error(save_checkpoint());
}

int64_t TrainingSession::steps_done() const { return runtime_ ? runtime_->steps_done() : trainer_->steps_done(); }

std::vector<double> const& TrainingSession::losses() const {
  return runtime_ ? runtime_->losses() : trainer_->losses();
}

double TrainingSession::samples_per_s() const {
  return runtime_ ? runtime_->samples_per_s() : trainer_->samples_per_s();
}

std::vector<exec::DeviceMeasurement> TrainingSession::measurements() const {
  if (runtime_) return runtime_->measurements();
  exec::DeviceMeasurement m;
  m.busy_fraction = 1;
  m.peak_bytes = memory_->peak_bytes();
  return {m};
}

std::string TrainingSession::cuda_graphs_summary() const { return trainer_ ? trainer_->cuda_graphs_summary() : ""; }

std::optional<exec::Trainer::PhaseTimes> TrainingSession::phase_times() const {
  if (!trainer_) return std::nullopt;
  return trainer_->phase_times();
}

int64_t TrainingSession::peak_saved_bytes() const { return trainer_ ? trainer_->executor().peak_saved_bytes() : 0; }

Result<std::map<std::string, exec::Tensor>> TrainingSession::trained_tensors() {
  if (runtime_) return runtime_->trained_tensors();
  // Copies in the process's memory: they outlive the session and its allocator.
  std::map<std::string, exec::Tensor> out;
  for (auto const& [name, t] : trainer_->trained_tensors())
    out.emplace(name, t.clone_to(exec::process_cpu_allocator()));
  return out;
}

Status TrainingSession::export_onnx(std::string const& path, std::optional<graph::Precision> weights) {
  graph::Precision const w = weights.value_or(config_.export_weights);
  auto tensors = trained_tensors();  // collective under MPI
  if (!tensors) return on_rank_error(tensors.status());
  if (!is_lead()) return Status::ok();
  std::set<std::string> const narrow =
      w == graph::Precision::kFloat32 ? std::set<std::string>{} : low_precision_weights(*graph_, *tensors);
  RETURN_IF_ERROR(export_trained(model_, *tensors, path, narrow, graph::low_dtype(w)));
  if (narrow.empty()) {
    spdlog::info("trained model written to {}", path);
  } else {
    spdlog::info("trained model written to {} ({} of {} weights stored in {})", path, narrow.size(), tensors->size(),
                 graph::precision_name(w));
  }
  return Status::ok();
}

Status TrainingSession::write_trace(std::string const& path) {
  if (!runtime_) return invalid_argument("--trace records a pipeline's workers: train on --devices 2 or more");
  std::string const file = path + (mpi_ && ranks_ > 1 ? ".rank" + std::to_string(rank_) : "");
  RETURN_IF_ERROR(
      schedule::write_text_file(schedule::timeline_to_chrome_trace(runtime_->timeline(), "measured"), file));
  if (is_lead())
    spdlog::info("measured timeline of the last step: {}{}", path, mpi_ && ranks_ > 1 ? ".rankN (one per rank)" : "");
  return Status::ok();
}

std::string TrainingSession::describe() const {
  if (runtime_) return std::to_string(devices_) + (mpi_ ? " MPI ranks" : " worker threads") + " on " + backend_name_;
  return backend_->name();
}

}  // namespace gp::session
