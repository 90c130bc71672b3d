#include "exec/train_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace gp::exec {

char const* loss_kind_name(LossKind kind) {
  switch (kind) {
    case LossKind::kCrossEntropy:
      return "cross_entropy";
    case LossKind::kMse:
      return "mse";
  }
  return "?";
}

char const* optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

namespace {

std::string join(std::vector<std::string> const& items) {
  std::string out;
  for (auto const& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Status check_keys(YAML::Node const& map, std::vector<std::string> const& valid, std::string const& where) {
  for (auto const& kv : map) {
    auto const key = kv.first.as<std::string>();
    if (std::find(valid.begin(), valid.end(), key) == valid.end())
      return invalid_argument(where + ": unknown key '" + key + "' (valid keys: " + join(valid) + ")");
  }
  return Status::ok();
}

template <typename T>
Status read_scalar(YAML::Node const& node, std::string const& key, std::string const& where, T& out) {
  if (!node.IsScalar()) return invalid_argument(where + ": '" + key + "' must be a scalar");
  try {
    out = node.as<T>();
  } catch (YAML::Exception const&) {
    return invalid_argument(where + ": '" + key + "' has an invalid value '" + node.Scalar() + "'");
  }
  return Status::ok();
}

std::string resolve(std::string const& path, std::string const& base_dir) {
  if (path.empty() || base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

Status parse_model(YAML::Node const& node, std::string const& where, std::string const& base_dir, ModelConfig& m) {
  if (node.IsScalar()) {
    m.path = resolve(node.as<std::string>(), base_dir);
    return Status::ok();
  }
  if (!node.IsMap()) return invalid_argument(where + ": 'model' must be a path or a map {path | zoo, size}");
  RETURN_IF_ERROR(check_keys(node, {"path", "zoo", "size"}, where + ": model"));
  if (node["path"]) RETURN_IF_ERROR(read_scalar(node["path"], "model.path", where, m.path));
  if (node["zoo"]) RETURN_IF_ERROR(read_scalar(node["zoo"], "model.zoo", where, m.zoo));
  if (node["size"]) RETURN_IF_ERROR(read_scalar(node["size"], "model.size", where, m.size));
  m.path = resolve(m.path, base_dir);
  if (m.path.empty() == m.zoo.empty())
    return invalid_argument(where + ": 'model' needs exactly one of 'path' (an ONNX file) or 'zoo' (a zoo name)");
  return Status::ok();
}

Status parse_data(YAML::Node const& node, std::string const& where, std::string const& base_dir, DataConfig& d) {
  if (node.IsScalar()) {
    if (node.Scalar() != "synthetic")
      return invalid_argument(where + ": 'data' must be 'synthetic' or a map {kind, samples, inputs, labels}");
    d.kind = DataConfig::Kind::kSynthetic;
    return Status::ok();
  }
  if (!node.IsMap()) return invalid_argument(where + ": 'data' must be 'synthetic' or a map");
  RETURN_IF_ERROR(check_keys(node, {"kind", "samples", "inputs", "labels"}, where + ": data"));
  std::string kind = node["inputs"] ? "npy" : "synthetic";
  if (node["kind"]) RETURN_IF_ERROR(read_scalar(node["kind"], "data.kind", where, kind));
  if (kind == "synthetic") {
    d.kind = DataConfig::Kind::kSynthetic;
    if (node["samples"]) RETURN_IF_ERROR(read_scalar(node["samples"], "data.samples", where, d.samples));
    if (d.samples < 0) return invalid_argument(where + ": 'data.samples' must be >= 0");
    if (node["inputs"] || node["labels"])
      return invalid_argument(where + ": synthetic data takes no 'inputs'/'labels' (use kind: npy)");
    return Status::ok();
  }
  if (kind != "npy") return invalid_argument(where + ": 'data.kind' must be 'synthetic' or 'npy', not '" + kind + "'");
  d.kind = DataConfig::Kind::kNpy;
  auto const inputs = node["inputs"];
  if (!inputs) return invalid_argument(where + ": npy data needs 'inputs' (a .npy file or a list of them)");
  if (inputs.IsScalar()) {
    d.inputs.push_back(resolve(inputs.as<std::string>(), base_dir));
  } else if (inputs.IsSequence()) {
    for (auto const& item : inputs) d.inputs.push_back(resolve(item.as<std::string>(), base_dir));
  } else {
    return invalid_argument(where + ": 'data.inputs' must be a path or a list of paths");
  }
  if (!node["labels"]) return invalid_argument(where + ": npy data needs 'labels' (a .npy file)");
  RETURN_IF_ERROR(read_scalar(node["labels"], "data.labels", where, d.labels));
  d.labels = resolve(d.labels, base_dir);
  return Status::ok();
}

// A name pattern or a list of them.
Status parse_patterns(YAML::Node const& node, std::string const& key, std::string const& where,
                      std::vector<std::string>& out) {
  auto add = [&](YAML::Node const& item) -> Status {
    if (!item.IsScalar() || item.Scalar().empty())
      return invalid_argument(where + ": '" + key + "' must be a name pattern or a list of them (e.g. [\"*.mask\"])");
    out.push_back(item.Scalar());
    return Status::ok();
  };
  if (node.IsSequence()) {
    for (auto const& item : node) RETURN_IF_ERROR(add(item));
    return Status::ok();
  }
  return add(node);
}

// `loss_scale: dynamic | none` or {init, growth_factor, backoff_factor, growth_interval}.
Status parse_loss_scale(YAML::Node const& node, std::string const& where, LossScaleConfig& c) {
  std::string const what =
      "'loss_scale' must be dynamic, none or a map {init, growth_factor, backoff_factor, growth_interval}";
  c.configured = true;
  if (node.IsScalar()) {
    std::string const v = node.Scalar();
    if (v != "dynamic" && v != "none") return invalid_argument(where + ": " + what + ", got '" + v + "'");
    c.dynamic = v == "dynamic";
    return Status::ok();
  }
  if (!node.IsMap()) return invalid_argument(where + ": " + what);
  RETURN_IF_ERROR(
      check_keys(node, {"init", "growth_factor", "backoff_factor", "growth_interval"}, where + ": loss_scale"));
  c.dynamic = true;
  if (node["init"]) RETURN_IF_ERROR(read_scalar(node["init"], "loss_scale.init", where, c.init));
  if (node["growth_factor"])
    RETURN_IF_ERROR(read_scalar(node["growth_factor"], "loss_scale.growth_factor", where, c.growth_factor));
  if (node["backoff_factor"])
    RETURN_IF_ERROR(read_scalar(node["backoff_factor"], "loss_scale.backoff_factor", where, c.backoff_factor));
  if (node["growth_interval"])
    RETURN_IF_ERROR(read_scalar(node["growth_interval"], "loss_scale.growth_interval", where, c.growth_interval));
  if (!(c.init > 0) || !std::isfinite(c.init) || !(c.growth_factor >= 1) || !std::isfinite(c.growth_factor) ||
      !(c.backoff_factor > 0 && c.backoff_factor < 1) || c.growth_interval < 1)
    return invalid_argument(where +
                            ": 'loss_scale' needs init > 0, growth_factor >= 1, 0 < backoff_factor < 1 and "
                            "growth_interval >= 1");
  return Status::ok();
}

Status parse_checkpoint(YAML::Node const& node, std::string const& where, std::string const& base_dir,
                        CheckpointConfig& c) {
  if (node.IsScalar()) {
    c.path = resolve(node.as<std::string>(), base_dir);
    return Status::ok();
  }
  if (!node.IsMap()) return invalid_argument(where + ": 'checkpoint' must be a path or a map {path, every, resume}");
  RETURN_IF_ERROR(check_keys(node, {"path", "every", "resume"}, where + ": checkpoint"));
  if (!node["path"]) return invalid_argument(where + ": 'checkpoint' needs a 'path'");
  RETURN_IF_ERROR(read_scalar(node["path"], "checkpoint.path", where, c.path));
  c.path = resolve(c.path, base_dir);
  if (node["every"]) RETURN_IF_ERROR(read_scalar(node["every"], "checkpoint.every", where, c.every));
  if (node["resume"]) RETURN_IF_ERROR(read_scalar(node["resume"], "checkpoint.resume", where, c.resume));
  if (c.every < 0) return invalid_argument(where + ": 'checkpoint.every' must be >= 0");
  return Status::ok();
}

}  // namespace

namespace {

Result<TrainConfig> parse_train_config_unchecked(std::string const& yaml_text, std::string const& source,
                                                 std::string const& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (YAML::Exception const& e) {
    return parse_error(source + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) return parse_error(source + ": a training config must be a YAML map (model: ..., steps: ...)");
  std::vector<std::string> const keys = {
      "model",       "loss",         "optimizer",    "lr",         "momentum",      "weight_decay",
      "beta1",       "beta2",        "eps",          "batch",      "micro_batches", "steps",
      "data",        "seed",         "log_interval", "checkpoint", "export",        "pipeline",
      "trainable",   "frozen",       "tf32",         "precision",  "loss_scale",    "export_weights",
      "cuda_graphs", "deterministic"};
  RETURN_IF_ERROR(check_keys(root, keys, source));

  TrainConfig c;
  if (!root["model"]) return invalid_argument(source + ": missing 'model' (an ONNX path or {zoo: NAME, size: tiny})");
  RETURN_IF_ERROR(parse_model(root["model"], source, base_dir, c.model));

  if (root["loss"]) {
    std::string loss;
    RETURN_IF_ERROR(read_scalar(root["loss"], "loss", source, loss));
    if (loss == "cross_entropy")
      c.loss = LossKind::kCrossEntropy;
    else if (loss == "mse")
      c.loss = LossKind::kMse;
    else
      return invalid_argument(source + ": 'loss' must be cross_entropy or mse, not '" + loss + "'");
  }
  if (root["optimizer"]) {
    std::string opt;
    RETURN_IF_ERROR(read_scalar(root["optimizer"], "optimizer", source, opt));
    if (opt == "sgd")
      c.optimizer.kind = OptimizerKind::kSgd;
    else if (opt == "adam")
      c.optimizer.kind = OptimizerKind::kAdam;
    else if (opt == "adamw")
      c.optimizer.kind = OptimizerKind::kAdamW;
    else
      return invalid_argument(source + ": 'optimizer' must be sgd, adam or adamw, not '" + opt + "'");
  }
  struct FloatKey {
    char const* key;
    float* out;
  };
  for (auto [key, out] : {FloatKey{"lr", &c.optimizer.lr}, FloatKey{"momentum", &c.optimizer.momentum},
                          FloatKey{"weight_decay", &c.optimizer.weight_decay}, FloatKey{"beta1", &c.optimizer.beta1},
                          FloatKey{"beta2", &c.optimizer.beta2}, FloatKey{"eps", &c.optimizer.eps}})
    if (root[key]) RETURN_IF_ERROR(read_scalar(root[key], key, source, *out));
  struct IntKey {
    char const* key;
    int64_t* out;
  };
  for (auto [key, out] : {IntKey{"batch", &c.batch}, IntKey{"micro_batches", &c.micro_batches},
                          IntKey{"steps", &c.steps}, IntKey{"log_interval", &c.log_interval}})
    if (root[key]) RETURN_IF_ERROR(read_scalar(root[key], key, source, *out));
  if (root["seed"]) RETURN_IF_ERROR(read_scalar(root["seed"], "seed", source, c.seed));
  if (root["tf32"]) RETURN_IF_ERROR(read_scalar(root["tf32"], "tf32", source, c.tf32));
  if (root["deterministic"])
    RETURN_IF_ERROR(read_scalar(root["deterministic"], "deterministic", source, c.deterministic));
  if (root["cuda_graphs"]) RETURN_IF_ERROR(read_scalar(root["cuda_graphs"], "cuda_graphs", source, c.cuda_graphs));
  if (root["loss_scale"]) RETURN_IF_ERROR(parse_loss_scale(root["loss_scale"], source, c.loss_scale));
  if (root["precision"]) {
    std::string text;
    RETURN_IF_ERROR(read_scalar(root["precision"], "precision", source, text));
    auto precision = graph::parse_precision(text);
    if (!precision.is_ok()) return invalid_argument(source + ": " + precision.status().message());
    c.precision = *precision;
  }
  if (root["data"]) RETURN_IF_ERROR(parse_data(root["data"], source, base_dir, c.data));
  if (root["checkpoint"]) RETURN_IF_ERROR(parse_checkpoint(root["checkpoint"], source, base_dir, c.checkpoint));
  if (auto p = root["pipeline"]) {
    if (!p.IsMap())
      return invalid_argument(source + ": 'pipeline' must be a map {planner, plan, policy, schedule, ...}");
    RETURN_IF_ERROR(check_keys(
        p, {"planner", "plan", "policy", "schedule", "memory", "timeout", "threads_per_worker", "cost", "replication"},
        source + ": pipeline"));
    PipelineConfig& q = c.pipeline;
    if (p["planner"]) RETURN_IF_ERROR(read_scalar(p["planner"], "pipeline.planner", source, q.planner));
    if (p["plan"]) {
      RETURN_IF_ERROR(read_scalar(p["plan"], "pipeline.plan", source, q.plan));
      q.plan = resolve(q.plan, base_dir);
    }
    if (p["policy"]) RETURN_IF_ERROR(read_scalar(p["policy"], "pipeline.policy", source, q.policy));
    if (p["schedule"]) {
      RETURN_IF_ERROR(read_scalar(p["schedule"], "pipeline.schedule", source, q.schedule));
      q.schedule = resolve(q.schedule, base_dir);
    }
    if (p["memory"]) RETURN_IF_ERROR(read_scalar(p["memory"], "pipeline.memory", source, q.memory));
    if (p["timeout"]) RETURN_IF_ERROR(read_scalar(p["timeout"], "pipeline.timeout", source, q.timeout_s));
    if (p["cost"]) {
      RETURN_IF_ERROR(read_scalar(p["cost"], "pipeline.cost", source, q.cost));
      if (q.cost != "profile" && q.cost != "analytic") q.cost = resolve(q.cost, base_dir);
    }
    if (p["replication"]) RETURN_IF_ERROR(read_scalar(p["replication"], "pipeline.replication", source, q.replication));
    if (p["threads_per_worker"])
      RETURN_IF_ERROR(
          read_scalar(p["threads_per_worker"], "pipeline.threads_per_worker", source, q.threads_per_worker));
    if (q.timeout_s <= 0) return invalid_argument(source + ": 'pipeline.timeout' must be > 0 seconds");
    if (q.threads_per_worker < 0) return invalid_argument(source + ": 'pipeline.threads_per_worker' must be >= 0");
  }
  if (root["trainable"]) RETURN_IF_ERROR(parse_patterns(root["trainable"], "trainable", source, c.trainable));
  if (root["frozen"]) RETURN_IF_ERROR(parse_patterns(root["frozen"], "frozen", source, c.frozen));
  if (root["export"]) {
    RETURN_IF_ERROR(read_scalar(root["export"], "export", source, c.export_path));
    c.export_path = resolve(c.export_path, base_dir);
  }
  if (root["export_weights"]) {
    std::string text;
    RETURN_IF_ERROR(read_scalar(root["export_weights"], "export_weights", source, text));
    auto weights = graph::parse_precision(text);
    if (!weights.is_ok()) return invalid_argument(source + ": 'export_weights': " + weights.status().message());
    c.export_weights = *weights;
  }

  if (c.optimizer.lr <= 0) return invalid_argument(source + ": 'lr' must be > 0");
  if (c.optimizer.momentum < 0 || c.optimizer.momentum >= 1)
    return invalid_argument(source + ": 'momentum' must be in [0, 1)");
  if (c.optimizer.weight_decay < 0) return invalid_argument(source + ": 'weight_decay' must be >= 0");
  if (c.batch < 1) return invalid_argument(source + ": 'batch' must be >= 1");
  if (c.micro_batches < 1) return invalid_argument(source + ": 'micro_batches' must be >= 1");
  if (c.batch % c.micro_batches != 0)
    return invalid_argument(source + ": 'batch' (" + std::to_string(c.batch) +
                            ") must be divisible by 'micro_batches' (" + std::to_string(c.micro_batches) + ")");
  if (c.steps < 0) return invalid_argument(source + ": 'steps' must be >= 0");
  if (c.log_interval < 1) return invalid_argument(source + ": 'log_interval' must be >= 1");
  return c;
}

}  // namespace

Result<TrainConfig> parse_train_config(std::string const& yaml_text, std::string const& source,
                                       std::string const& base_dir) {
  try {  // yaml-cpp throws where a node is not what a key expects (a map used as a key, ...)
    return parse_train_config_unchecked(yaml_text, source, base_dir);
  } catch (YAML::Exception const& e) {
    return parse_error(source + ": malformed YAML: " + e.what());
  }
}

Result<TrainConfig> load_train_config(std::string const& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open training config '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto const dir = std::filesystem::path(path).parent_path().string();
  return parse_train_config(ss.str(), path, dir);
}

}  // namespace gp::exec
