#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "exec/checkpoint.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/trainer.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec {
namespace {

std::string temp_path(std::string const& name) {
  return (std::filesystem::temp_directory_path() / ("gp_ckpt_" + std::to_string(::getpid()) + "_" + name)).string();
}

TrainConfig config(OptimizerKind kind) {
  TrainConfig c;
  c.batch = 8;
  c.micro_batches = 2;
  c.steps = 6;
  c.seed = 9;
  c.optimizer.kind = kind;
  c.optimizer.lr = kind == OptimizerKind::kSgd ? 0.05f : 2e-3f;
  c.optimizer.momentum = 0.9f;
  c.data.samples = 24;
  return c;
}

std::unique_ptr<Trainer> make_trainer(graph::OpGraph const& g, Backend& be, TrainConfig const& c) {
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  EXPECT_TRUE(data.is_ok());
  auto t = Trainer::create(c, g, be, std::move(data).value());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

TEST(Checkpoint, ResumeGivesTheSameWeightsAsAnUninterruptedRun) {
  auto g = testing::tiny_cnn().to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  CpuBackend be;
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    auto const path = temp_path("resume.gpck");
    auto full = make_trainer(*g, be, config(kind));
    ASSERT_TRUE(full->run(nullptr).is_ok());

    auto first = make_trainer(*g, be, config(kind));
    ASSERT_TRUE(first->run(nullptr, 3).is_ok());
    ASSERT_TRUE(first->save_checkpoint(path).is_ok());
    auto resumed = make_trainer(*g, be, config(kind));  // fresh weights, then the checkpoint
    ASSERT_TRUE(resumed->load_checkpoint(path).is_ok());
    EXPECT_EQ(resumed->steps_done(), 3);
    ASSERT_TRUE(resumed->run(nullptr).is_ok());
    for (auto const& [n, t] : full->trained_tensors())
      EXPECT_EQ(t.to_vector(), resumed->trained_tensors().at(n).to_vector()) << n;
    std::filesystem::remove(path);
  }
}

TEST(Checkpoint, RoundTripsEveryField) {
  CheckpointState s;
  s.step = 17;
  s.seed = 123456789012345ull;
  s.optimizer = "adam";
  s.optimizer_steps = 16;
  s.weights.emplace("w", Tensor::from_floats({2, 2}, {1, 2, 3, 4}));
  s.optimizer_state.emplace("w#m", Tensor::from_floats({2, 2}, {0.5f, 0, 0, -1}));
  auto const path = temp_path("rt.gpck");
  ASSERT_TRUE(save_checkpoint(path, s).is_ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  auto back = load_checkpoint(path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->step, 17);
  EXPECT_EQ(back->seed, s.seed);
  EXPECT_EQ(back->optimizer, "adam");
  EXPECT_EQ(back->optimizer_steps, 16);
  EXPECT_EQ(back->weights.at("w").to_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(back->optimizer_state.at("w#m").to_vector(), (std::vector<float>{0.5f, 0, 0, -1}));
  std::filesystem::remove(path);
}

TEST(Checkpoint, CorruptOrTruncatedFilesAreClearErrors) {
  CheckpointState s;
  s.optimizer = "sgd";
  s.weights.emplace("w", Tensor::from_floats({64}, std::vector<float>(64, 1.f)));
  auto const path = temp_path("bad.gpck");
  ASSERT_TRUE(save_checkpoint(path, s).is_ok());
  auto const size = std::filesystem::file_size(path);
  {  // flip one byte in the tensor data
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 20));
    f.put('\x7f');
  }
  auto r = load_checkpoint(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("corrupt"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos) << r.status().message();
  ASSERT_TRUE(save_checkpoint(path, s).is_ok());
  std::filesystem::resize_file(path, size / 2);
  r = load_checkpoint(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos) << r.status().message();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "not a checkpoint at all, just text";
  }
  r = load_checkpoint(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not a graphpipe checkpoint"), std::string::npos);
  EXPECT_EQ(load_checkpoint(temp_path("missing.gpck")).status().code(), StatusCode::kNotFound);
  std::filesystem::remove(path);
}

TEST(Checkpoint, MismatchedModelOrOptimizerIsRejected) {
  auto mlp = testing::tiny_mlp().to_graph();
  auto cnn = testing::tiny_cnn().to_graph();
  ASSERT_TRUE(mlp.is_ok() && cnn.is_ok());
  CpuBackend be;
  auto const path = temp_path("mismatch.gpck");
  auto a = make_trainer(*mlp, be, config(OptimizerKind::kSgd));
  ASSERT_TRUE(a->run(nullptr, 1).is_ok());
  ASSERT_TRUE(a->save_checkpoint(path).is_ok());
  auto other_model = make_trainer(*cnn, be, config(OptimizerKind::kSgd));
  Status s = other_model->load_checkpoint(path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("does not match the model"), std::string::npos) << s.message();
  auto other_opt = make_trainer(*mlp, be, config(OptimizerKind::kAdam));
  s = other_opt->load_checkpoint(path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("optimizer 'sgd'"), std::string::npos) << s.message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gp::exec
