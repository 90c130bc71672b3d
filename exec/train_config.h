// The training configuration (`graphpipe train --config train.yaml`): parsed from YAML, validated,
// with every relative path resolved against the config file's folder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/train_kinds.h"
#include "graph/precision.h"

namespace gp::exec {

struct ModelConfig {
  std::string path;           // an ONNX file, or
  std::string zoo;            // a zoo model name (graphpipe models list)
  std::string size = "tiny";  // its size
};

struct ArrayRef;  // exec/npy.h

struct DataConfig {
  // kArrays: arrays in memory (the Python package's `data=`), checked and sampled as .npy files are;
  // `inputs` and `labels` then only name them in errors. Not expressible in YAML.
  enum class Kind : uint8_t { kSynthetic, kNpy, kArrays };
  Kind kind = Kind::kSynthetic;
  int64_t samples = 0;              // synthetic: dataset size (cycled); 0 = a fresh sample every time
  std::vector<std::string> inputs;  // npy: one file per graph input, in graph-input order
  std::string labels;               // npy: labels (int64 class ids, or float32 targets for mse)
  std::vector<std::shared_ptr<ArrayRef const>> input_arrays;  // kArrays: one per graph input
  std::shared_ptr<ArrayRef const> label_array;                // kArrays
};

struct CheckpointConfig {
  std::string path;     // empty: no checkpoints
  int64_t every = 0;    // steps between checkpoints (0: only at the end)
  bool resume = false;  // resume from `path` when it exists
};

// Multi-device training (graphpipe train --devices N): how the plan and schedule are made, and the
// runtime's limits. Ignored on one device.
struct PipelineConfig {
  std::string planner = "gpp";   // gpp | pipedream | piper | balanced (when no 'plan')
  std::string plan;              // a plan JSON instead of planning
  std::string policy = "auto";   // schedule policy (when no 'schedule')
  std::string schedule;          // a schedule text file instead of building one
  std::string memory = "16GiB";  // per device: the planner's limit and the runtime's
  // The planner's cost model: "profile" (measured here under each worker's thread budget, cached
  // per model and budget; threads only), "analytic", or a profile JSON from graphpipe profile.
  std::string cost = "profile";
  bool replication = true;         // the planner may make data-parallel stages
  double timeout_s = 60;           // every blocking wait of a worker
  int64_t threads_per_worker = 0;  // 0: cores / workers
};

// `loss_scale: dynamic` (PyTorch GradScaler's defaults) or a map of these fields; absent or
// `none`: no scaling. exec/loss_scale.h has the rules.
struct LossScaleConfig {
  bool dynamic = false;
  // Set when the config has a loss_scale key; without one, fp16 training scales dynamically
  // (GradScaler's defaults) and fp32/bf16 do not.
  bool configured = false;
  double init = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

struct TrainConfig {
  ModelConfig model;
  LossKind loss = LossKind::kCrossEntropy;
  OptimizerConfig optimizer;
  int64_t batch = 32;
  int64_t micro_batches = 1;
  int64_t steps = 100;
  DataConfig data;
  uint64_t seed = 0;
  int64_t log_interval = 10;
  CheckpointConfig checkpoint;
  std::string export_path;  // write the trained ONNX model here at the end (optional)
  // `export_weights: bf16 | fp16` stores the weights of the ops the precision policy runs low
  // (Conv, Gemm, MatMul) in that format behind a Cast to float32; fp32 (the default): every
  // weight as the float32 master (session::low_precision_weights).
  graph::Precision export_weights = graph::Precision::kFloat32;
  PipelineConfig pipeline;
  // Initializer name patterns (glob `*`, `?`) overriding the importer's choice of what trains
  // (graph::ImportOptions::trainable / frozen): frozen wins; trainable forces float initializers.
  std::vector<std::string> trainable;
  std::vector<std::string> frozen;
  // TF32 tensor cores for float32 matrix products on a GPU (`tf32: true`; PyTorch's
  // torch.backends.cuda.matmul.allow_tf32). Off by default, as in PyTorch; the CPU has no TF32.
  bool tf32 = false;
  // cuDNN engines without atomics on a GPU (`deterministic: true`; PyTorch's
  // torch.backends.cudnn.deterministic), so that two runs compute the same bits: on an H200 two
  // runs of the zoo's Inception differed in the fourth digit after 3 steps without it. Off by
  // default (it cost ResNet-18 fp32 13% there); the environment's GP_CUDNN_DETERMINISTIC=1 turns
  // it on too. The CPU backend is deterministic either way.
  bool deterministic = false;
  // CUDA graphs (`cuda_graphs: true`; one device, --backend cuda): from the second step on, each
  // micro-batch's forward, loss and backward is captured once and replayed as one launch
  // (exec/trainer.h). Off by default.
  bool cuda_graphs = false;
  // Automatic mixed precision (`precision: fp32 | bf16 | fp16`; graph/precision.h): float32
  // master weights and optimizer state, matmuls and convolutions in 16 bits. fp16 runs on CUDA
  // only and scales the loss dynamically unless the config has a `loss_scale` key.
  graph::Precision precision = graph::Precision::kFloat32;
  LossScaleConfig loss_scale;

  int64_t micro_batch_size() const { return batch / micro_batches; }
};

// `source` names the text in errors; relative paths are resolved against `base_dir`.
Result<TrainConfig> parse_train_config(std::string const& yaml_text, std::string const& source,
                                       std::string const& base_dir);
Result<TrainConfig> load_train_config(std::string const& path);

}  // namespace gp::exec
