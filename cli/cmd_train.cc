#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "exec/cpu_backend.h"
#include "exec/data.h"
#include "exec/train_config.h"
#include "exec/trainer.h"
#include "graph/onnx_export.h"
#include "graph/onnx_import.h"
#include "models/zoo.h"

namespace gp::cli {

namespace {

struct TrainArgs {
  std::string config;
  int devices = 1;
  std::string export_onnx;
  int64_t steps = -1;
};

// The ONNX file the run trains: the configured path, or the zoo model written to a temporary file
// (export rewrites that file's initializers).
Result<std::string> model_file(exec::ModelConfig const& m, uint64_t seed, std::string& temp) {
  if (!m.path.empty()) return m.path;
  ASSIGN_OR_RETURN(models::Size size, models::parse_size(m.size));
  RETURN_IF_ERROR(models::find_model(m.zoo).status());
  temp = (std::filesystem::temp_directory_path() /
          ("graphpipe_train_" + m.zoo + "_" + std::to_string(::getpid()) + ".onnx"))
             .string();
  models::ExportOptions options;
  options.build.seed = seed;
  RETURN_IF_ERROR(models::export_model(m.zoo, size, temp, options));
  return temp;
}

Status run_train(TrainArgs const& args) {
  ASSIGN_OR_RETURN(exec::TrainConfig config, exec::load_train_config(args.config));
  if (args.devices < 1) return invalid_argument("--devices must be >= 1");
  if (args.devices > 1)
    return unsupported("--devices " + std::to_string(args.devices) +
                       ": the pipeline runtime is not implemented yet; train on one device with --devices 1");
  if (args.steps >= 0) config.steps = args.steps;
  if (!args.export_onnx.empty()) config.export_path = args.export_onnx;

  std::string temp;
  auto path = model_file(config.model, config.seed, temp);
  struct Cleanup {
    std::string& path;
    ~Cleanup() {
      if (!path.empty()) std::filesystem::remove(path);
    }
  } cleanup{temp};
  if (!path.is_ok()) return path.status();
  ASSIGN_OR_RETURN(graph::OpGraph graph, graph::load_onnx(*path));

  exec::CpuBackend backend;
  ASSIGN_OR_RETURN(auto data, exec::make_data_source(config.data, graph, config.loss, config.seed));
  std::string const data_desc = data->describe();
  ASSIGN_OR_RETURN(auto trainer, exec::Trainer::create(config, graph, backend, std::move(data)));
  if (config.checkpoint.resume && !config.checkpoint.path.empty() &&
      std::filesystem::exists(config.checkpoint.path)) {
    RETURN_IF_ERROR(trainer->load_checkpoint(config.checkpoint.path));
    spdlog::info("resumed from {} at step {}", config.checkpoint.path, trainer->steps_done());
  }
  spdlog::info("model {}: {}", config.model.path.empty() ? config.model.zoo + " (" + config.model.size + ")"
                                                         : config.model.path,
               exec::describe(trainer->executor().plan(), graph));
  spdlog::info("training on {}: {} steps, batch {} in {} micro-batches, {} lr {}, loss {}, data {}", backend.name(),
               config.steps, config.batch, config.micro_batches, exec::optimizer_kind_name(config.optimizer.kind),
               config.optimizer.lr, exec::loss_kind_name(config.loss), data_desc);
  RETURN_IF_ERROR(trainer->run(&std::cerr));
  spdlog::info("done: {} steps, final loss {:.4f}, peak saved activations {:.2f} MiB per step", trainer->steps_done(),
               trainer->last_loss(), static_cast<double>(trainer->executor().peak_saved_bytes()) / (1 << 20));
  if (!config.checkpoint.path.empty()) spdlog::info("checkpoint: {}", config.checkpoint.path);
  if (!config.export_path.empty()) {
    std::map<std::string, graph::TensorData> values;
    for (auto const& [name, t] : trainer->trained_tensors()) {
      graph::TensorData d;
      d.dtype = t.dtype();
      d.dims = t.shape();
      d.bytes.resize(t.nbytes());
      std::memcpy(d.bytes.data(), t.raw(), t.nbytes());
      values.emplace(name, std::move(d));
    }
    RETURN_IF_ERROR(graph::export_trained_onnx(*path, values, config.export_path));
    spdlog::info("trained model written to {}", config.export_path);
  }
  return Status::ok();
}

}  // namespace

void add_train_command(CLI::App& root, CommandList& commands) {
  auto args = std::make_shared<TrainArgs>();
  auto* app = root.add_subcommand("train", "Train a model on one device (CPU) from a YAML config");
  app->add_option("--config", args->config, "Training config (YAML)")->required()->check(CLI::ExistingFile);
  app->add_option("--devices", args->devices, "Number of devices (only 1 for now)")->default_val(1);
  app->add_option("--export-onnx", args->export_onnx, "Write the trained model here (overrides 'export')");
  app->add_option("--steps", args->steps, "Number of steps (overrides 'steps')");
  app->footer(R"(Example:
  graphpipe train --config examples/train_mlp.yaml --export-onnx mlp.trained.onnx

Config keys: model (path or {zoo, size}), loss (cross_entropy|mse), optimizer (sgd|adam|adamw), lr,
momentum, weight_decay, beta1, beta2, eps, batch, micro_batches, steps, data (synthetic or
{kind: npy, inputs, labels} or {kind: synthetic, samples}), seed, log_interval,
checkpoint {path, every, resume}, export.)");
  commands.push_back({app, [args] { return run_train(*args); }});
}

}  // namespace gp::cli
