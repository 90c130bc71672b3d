#include <gtest/gtest.h>

#include "exec/train_config.h"

namespace gp::exec {
namespace {

TEST(TrainConfig, ParsesEveryKey) {
  auto c = parse_train_config(R"(
model: {zoo: mlp, size: tiny}
loss: mse
optimizer: adamw
lr: 0.005
momentum: 0.5
weight_decay: 0.01
beta1: 0.8
beta2: 0.99
eps: 1.0e-6
batch: 16
micro_batches: 4
steps: 7
data: {kind: synthetic, samples: 64}
seed: 42
log_interval: 2
checkpoint: {path: ckpt/run.gpck, every: 3, resume: true}
export: out.onnx
tf32: true
cuda_graphs: true
deterministic: true
)",
                              "t.yaml", "/base");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->model.zoo, "mlp");
  EXPECT_EQ(c->loss, LossKind::kMse);
  EXPECT_EQ(c->optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_FLOAT_EQ(c->optimizer.lr, 0.005f);
  EXPECT_FLOAT_EQ(c->optimizer.beta1, 0.8f);
  EXPECT_EQ(c->batch, 16);
  EXPECT_EQ(c->micro_batch_size(), 4);
  EXPECT_EQ(c->steps, 7);
  EXPECT_EQ(c->data.samples, 64);
  EXPECT_EQ(c->seed, 42u);
  EXPECT_EQ(c->checkpoint.path, "/base/ckpt/run.gpck");
  EXPECT_EQ(c->checkpoint.every, 3);
  EXPECT_TRUE(c->checkpoint.resume);
  EXPECT_EQ(c->export_path, "/base/out.onnx");
  EXPECT_TRUE(c->tf32);
  EXPECT_FALSE(parse_train_config("model: m.onnx\n", "t.yaml", "")->tf32);  // off unless asked, as in PyTorch
  EXPECT_TRUE(c->cuda_graphs);
  EXPECT_FALSE(parse_train_config("model: m.onnx\n", "t.yaml", "")->cuda_graphs);
  EXPECT_TRUE(c->deterministic);
  EXPECT_FALSE(parse_train_config("model: m.onnx\n", "t.yaml", "")->deterministic);  // opt-in, as in PyTorch
}

TEST(TrainConfig, PrecisionAndLossScale) {
  auto c = parse_train_config("model: m.onnx\nprecision: bf16\nloss_scale: dynamic\n", "t.yaml", "");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->precision, graph::Precision::kBFloat16);
  EXPECT_TRUE(c->loss_scale.dynamic);
  EXPECT_EQ(c->loss_scale.init, 65536.0);  // GradScaler's defaults
  EXPECT_EQ(c->loss_scale.growth_interval, 2000);
  c = parse_train_config("model: m.onnx\nloss_scale: {init: 1024, growth_interval: 10}\n", "t.yaml", "");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->precision, graph::Precision::kFloat32);
  EXPECT_TRUE(c->loss_scale.dynamic);
  EXPECT_EQ(c->loss_scale.init, 1024.0);
  EXPECT_EQ(c->loss_scale.growth_interval, 10);
  EXPECT_FALSE(parse_train_config("model: m.onnx\nloss_scale: none\n", "t.yaml", "")->loss_scale.dynamic);
  struct Bad {
    char const* yaml;
    char const* says;
  };
  for (Bad const& b :
       {Bad{"precision: half", "not one of fp32, bf16, fp16"},
        Bad{"loss_scale: sometimes", "must be dynamic, none or a map"}, Bad{"loss_scale: {init: -1}", "init > 0"},
        Bad{"loss_scale: {backoff_factor: 2}", "backoff"}, Bad{"loss_scale: {growth: 2}", "unknown key 'growth'"}}) {
    auto r = parse_train_config(std::string("model: m.onnx\n") + b.yaml + "\n", "t.yaml", "");
    ASSERT_FALSE(r.is_ok()) << b.yaml;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().message();
  }
}

TEST(TrainConfig, ModelPathAndNpyDataResolveAgainstTheConfigFolder) {
  auto c = parse_train_config("model: m.onnx\ndata: {inputs: [x.npy], labels: /abs/y.npy}\n", "t.yaml", "/cfg");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->model.path, "/cfg/m.onnx");
  EXPECT_EQ(c->data.kind, DataConfig::Kind::kNpy);
  ASSERT_EQ(c->data.inputs.size(), 1u);
  EXPECT_EQ(c->data.inputs[0], "/cfg/x.npy");
  EXPECT_EQ(c->data.labels, "/abs/y.npy");
}

TEST(TrainConfig, UnknownKeyIsNamedWithTheValidOnes) {
  auto c = parse_train_config("model: m.onnx\nlearning_rate: 0.1\n", "t.yaml", "");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  std::string const msg = c.status().message();
  EXPECT_NE(msg.find("unknown key 'learning_rate'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lr"), std::string::npos) << msg;
  EXPECT_NE(msg.find("micro_batches"), std::string::npos) << msg;
}

TEST(TrainConfig, UnknownNestedKeyIsNamed) {
  auto c = parse_train_config("model: m.onnx\ncheckpoint: {path: a, evry: 3}\n", "t.yaml", "");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("'evry'"), std::string::npos) << c.status().message();
}

TEST(TrainConfig, BadValuesAreClearErrors) {
  struct Case {
    char const* yaml;
    char const* needle;
  };
  for (auto [yaml, needle] :
       {Case{"steps: 3\n", "missing 'model'"}, Case{"model: m.onnx\nbatch: 10\nmicro_batches: 4\n", "divisible"},
        Case{"model: m.onnx\nloss: hinge\n", "'loss'"}, Case{"model: m.onnx\noptimizer: lamb\n", "'optimizer'"},
        Case{"model: m.onnx\nlr: fast\n", "'lr'"}, Case{"model: m.onnx\nlr: -1\n", "'lr'"},
        Case{"model: m.onnx\ntf32: sometimes\n", "'tf32' has an invalid value 'sometimes'"},
        Case{"model: m.onnx\ndeterministic: maybe\n", "'deterministic' has an invalid value 'maybe'"},
        Case{"model: m.onnx\ncuda_graphs: maybe\n", "'cuda_graphs' has an invalid value 'maybe'"},
        Case{"model: {zoo: mlp, path: a.onnx}\n", "exactly one"},
        Case{"model: m.onnx\ndata: {kind: npy}\n", "'inputs'"}, Case{"model: [unclosed\n", "invalid YAML"},
        Case{"- a\n- b\n", "YAML map"}}) {
    auto c = parse_train_config(yaml, "t.yaml", "");
    ASSERT_FALSE(c.is_ok()) << yaml;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << yaml << " -> " << c.status().message();
  }
}

TEST(TrainConfig, MissingFileIsNotFound) {
  auto c = load_train_config("/nonexistent/train.yaml");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

TEST(TrainConfig, TrainableAndFrozenPatterns) {
  auto c = parse_train_config("model: m.onnx\nfrozen: [\"*.mask\", bias_*]\ntrainable: head.w\n", "t.yaml", "");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->frozen, (std::vector<std::string>{"*.mask", "bias_*"}));
  EXPECT_EQ(c->trainable, (std::vector<std::string>{"head.w"}));
  auto bad = parse_train_config("model: m.onnx\nfrozen: {a: 1}\n", "t.yaml", "");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'frozen' must be a name pattern or a list of them"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace gp::exec
