#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "exec/comm/communicator.h"
#include "exec/session/registry.h"
#include "exec/session/training.h"
#include "exec/train_config.h"

namespace gp::cli {

namespace {

struct TrainArgs {
  std::string config;
  int devices = 0;  // 0: 1, or the plan's devices, or the MPI ranks
  std::string export_onnx;
  std::string export_weights;  // fp32 | bf16 | fp16 (overrides 'export_weights')
  int64_t steps = -1;
  std::string launcher = "threads";
  std::string backend = "cpu";
  std::string trace;
  std::string fault;
  double timeout_s = 0;
};

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1 << 20));
  return b;
}

// The first Ctrl-C asks every worker to stop; another one more than 2 s later ends the process at
// once (repeats within 2 s are the same signal sent to the whole process group, as timeout does).
std::atomic<int64_t> g_first_interrupt_ns{0};
void on_interrupt(int) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t const ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
  int64_t expected = 0;
  if (g_first_interrupt_ns.compare_exchange_strong(expected, ns)) {
    exec::request_stop();
  } else if (ns - expected > int64_t{2000000000}) {
    _exit(130);
  }
}

Status train(session::TrainingSession& s, TrainArgs const& args) {
  Status const run = s.run();
  if (!run) {
    if (s.has_stuck_workers()) {
      std::cerr << "graphpipe: error: " << run.message() << '\n';
      std::_Exit(1);  // a worker is stuck in compute: its thread cannot be joined
    }
    return run;
  }
  exec::TrainConfig const& config = s.config();
  double const last = s.losses().empty() ? 0.0 : s.losses().back();
  if (s.pipeline()) {
    if (s.is_lead())
      spdlog::info(
          "done: {} steps, final loss {:.4f}; measured {:.1f} samples/s, predicted {:.1f} (simulated "
          "schedule, {} costs)",
          s.steps_done(), last, s.samples_per_s(), s.plan()->simulation.samples_per_s, s.plan()->cost_name);
    for (auto const& m : s.measurements())
      spdlog::info("  device {}: busy {:.0f}%, peak memory {} measured, {} predicted", m.device, 100 * m.busy_fraction,
                   mib(double(m.peak_bytes)), mib(double(m.predicted_peak_bytes)));
    if (!args.trace.empty()) RETURN_IF_ERROR(s.write_trace(args.trace));
  } else {
    spdlog::info(
        "done: {} steps, final loss {:.4f}; measured {:.1f} samples/s after the first step; peak saved "
        "activations {:.2f} MiB per step",
        s.steps_done(), last, s.samples_per_s(), static_cast<double>(s.peak_saved_bytes()) / (1 << 20));
    if (auto const p = s.phase_times(); p && p->steps > 0) {
      double const ms = 1e3 / static_cast<double>(p->steps);
      spdlog::info(
          "host time per step after the first: data {:.2f} ms, forward + loss {:.2f} ms, backward {:.2f} ms, update "
          "{:.2f} ms",
          p->data * ms, p->forward_loss * ms, p->backward * ms, p->update * ms);
    }
    if (std::string const graphs = s.cuda_graphs_summary(); !graphs.empty()) spdlog::info("{}", graphs);
  }
  if (!config.checkpoint.path.empty() && s.is_lead()) spdlog::info("checkpoint: {}", config.checkpoint.path);
  if (!config.export_path.empty()) RETURN_IF_ERROR(s.export_onnx(config.export_path));
  return Status::ok();
}

Status run_train(TrainArgs const& args) {
  ASSIGN_OR_RETURN(exec::TrainConfig config, exec::load_train_config(args.config));
  if (args.steps >= 0) config.steps = args.steps;
  if (!args.export_onnx.empty()) config.export_path = args.export_onnx;
  if (!args.export_weights.empty()) {
    auto weights = graph::parse_precision(args.export_weights);
    if (!weights.is_ok()) return invalid_argument("--export-weights: " + weights.status().message());
    config.export_weights = *weights;
  }
  ASSIGN_OR_RETURN(std::optional<graph::Precision> const precision, precision_flag());
  if (precision) config.precision = *precision;  // --precision overrides the config's 'precision
  session::TrainOptions options;
  options.devices = args.devices;
  options.launcher = args.launcher;
  options.backend = args.backend;
  options.timeout_s = args.timeout_s;
  options.fault = args.fault;
  options.progress = &std::cerr;
  ASSIGN_OR_RETURN(options.import, import_options());
  ASSIGN_OR_RETURN(std::unique_ptr<session::TrainingSession> s,
                   session::TrainingSession::create(std::move(config), std::move(options)));
  if (!args.trace.empty() && !s->pipeline())
    return invalid_argument("--trace records a pipeline's workers: train on --devices 2 or more, or drop --trace");
  if (s->pipeline()) {  // workers stop at the next instruction; one device stops at once (the default)
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
  }
  return train(*s, args);
}

}  // namespace

void add_train_command(CLI::App& root, CommandList& commands) {
  auto args = std::make_shared<TrainArgs>();
  auto* app = root.add_subcommand("train", "Train a model from a YAML config: one device, or a pipeline of N workers");
  app->add_option("--config", args->config, "Training config (YAML)")->required()->check(CLI::ExistingFile);
  app->add_option("--devices", args->devices,
                  "Devices (pipeline workers): 1 trains on one device; N > 1 partitions, schedules and trains on N "
                  "worker threads (default: 1, or the MPI ranks)");
  app->add_option("--launcher", args->launcher,
                  "threads (workers in this process) or mpi (one rank per device, "
                  "under mpirun)")
      ->default_val("threads");
  app->add_option("--backend", args->backend, session::kBackendHelp)->default_val("cpu");
  app->add_option("--trace", args->trace, "Write the measured timeline of the last step (Chrome trace JSON)");
  app->add_option("--timeout", args->timeout_s,
                  "Seconds any worker waits before the run fails (overrides "
                  "pipeline.timeout)");
  app->add_option("--inject-fault", args->fault,
                  "Testing: DEVICE:LINE:KIND (throw|nan|header|exit|stall|overflow) at a "
                  "schedule line")
      ->group("");
  app->add_option("--export-onnx", args->export_onnx, "Write the trained model here (overrides 'export')");
  app->add_option("--export-weights", args->export_weights,
                  "fp32 (default): the exported weights are the float32 masters; bf16 or fp16: the weights of "
                  "Conv, Gemm and MatMul are stored in that format behind a Cast to float32 (overrides "
                  "'export_weights')");
  app->add_option("--steps", args->steps, "Number of steps (overrides 'steps')");
  app->footer(R"(Example:
  graphpipe train --config examples/train_mlp.yaml --export-onnx mlp.trained.onnx
  graphpipe train --config examples/train_mmt_pipeline.yaml --devices 2 --trace measured.json
  mpirun -np 2 graphpipe train --config examples/train_mmt_pipeline.yaml --launcher mpi
  graphpipe train --config examples/train_mmt_pipeline.yaml --devices 2 --backend cuda
  mpirun -np 8 graphpipe train --config train.yaml --launcher mpi --backend cuda   # one rank per GPU

Config keys: model (path or {zoo, size}), loss (cross_entropy|mse), optimizer (sgd|adam|adamw), lr,
momentum, weight_decay, beta1, beta2, eps, batch, micro_batches, steps, data (synthetic or
{kind: npy, inputs, labels} or {kind: synthetic, samples}), seed, log_interval,
checkpoint {path, every, resume}, export, pipeline {planner, plan, policy, schedule, memory, cost
(profile|analytic|profile.json), replication, timeout, threads_per_worker} (see
examples/train_mmt_pipeline.yaml), trainable / frozen (initializer name patterns with * and ?,
e.g. frozen: ["*.mask"]; `graphpipe inspect MODEL --weights` shows what trains and why), tf32 (true:
TF32 tensor cores for float32 matrix products on a GPU, as PyTorch's matmul.allow_tf32; default false),
deterministic (true: cuDNN engines without atomics on a GPU, so that two runs compute the same bits, as
PyTorch's cudnn.deterministic; default false; GP_CUDNN_DETERMINISTIC=1 does the same),
cuda_graphs (true: on one GPU, each micro-batch's forward, loss and backward is captured as a CUDA graph
from the second step and replayed as one launch; not with pipelines; default false),
precision (fp32|bf16|fp16), loss_scale (dynamic, none or {init, growth_factor, backoff_factor,
growth_interval}), export_weights (fp32|bf16|fp16).)");
  commands.push_back({app, [args] { return run_train(*args); }});
}

}  // namespace gp::cli
