// Dynamic loss scaling (exec/loss_scale.h) on one device: GradScaler's rules; a power-of-two scale
// trains bitwise as no scale (scaling and unscaling by 2^k are exact when nothing overflows); an
// overflow skips the step, leaves the weights alone and backs the scale off; the state survives a
// checkpoint.
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/loss_scale.h"
#include "exec/trainer.h"
#include "models/zoo.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec {
namespace {

TEST(LossScaler, FollowsGradScalersRules) {
  LossScaleConfig c;
  c.dynamic = true;
  c.init = 8;
  c.growth_interval = 2;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 8);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 8);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 16);  // two clean steps: grows
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 8);  // an overflow: skipped, backed off, the count restarts
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 8);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(loss_scale_note(s), "  scale 8 (1 step skipped)");
  LossScaler off;
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.scale(), 1);
  EXPECT_FALSE(off.update(true));
  EXPECT_EQ(loss_scale_note(off), "");
}

TrainConfig scaled_config(double init, int64_t interval, int64_t steps) {
  TrainConfig c;
  c.batch = 8;
  c.micro_batches = 2;
  c.steps = steps;
  c.seed = 3;
  c.optimizer.lr = 0.05f;
  c.optimizer.momentum = 0.9f;
  c.data.samples = 32;
  c.loss_scale.dynamic = init > 0;
  c.loss_scale.init = init;
  c.loss_scale.growth_interval = interval;
  return c;
}

std::unique_ptr<Trainer> trained(graph::OpGraph const& g, Backend& be, TrainConfig const& c) {
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  EXPECT_TRUE(data.is_ok());
  auto t = Trainer::create(c, g, be, std::move(data).value());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_TRUE((*t)->run(nullptr).is_ok());
  return std::move(t).value();
}

TEST(LossScaling, APowerOfTwoScaleTrainsBitwiseAsNoScale) {
  auto cnn = testing::tiny_cnn().to_graph();
  ASSERT_TRUE(cnn.is_ok());
  auto tr = models::build_graph("transformer", models::Size::kTiny, 1);
  ASSERT_TRUE(tr.is_ok());
  for (graph::OpGraph const* g : {&*cnn, &*tr}) {
    CpuBackend be;
    auto plain = trained(*g, be, scaled_config(0, 1, 6));
    auto scaled = trained(*g, be, scaled_config(1024, 2, 6));  // 1024, 2048, 4096 over the run
    EXPECT_EQ(scaled->loss_scaler().scale(), 8192);
    EXPECT_EQ(scaled->loss_scaler().skipped_steps(), 0);
    EXPECT_EQ(scaled->losses(), plain->losses());
    auto const a = scaled->trained_tensors(), b = plain->trained_tensors();
    ASSERT_EQ(a.size(), b.size());
    for (auto const& [name, t] : a) EXPECT_EQ(t.to_vector(), b.at(name).to_vector()) << g->name() << " " << name;
  }
}

TEST(LossScaling, AnOverflowSkipsTheStepAndBacksTheScaleOff) {
  auto g = testing::tiny_cnn().to_graph();
  ASSERT_TRUE(g.is_ok());
  CpuBackend be;
  // A scale past float32's range (2^128): the scaled loss gradient is inf, every weight gradient
  // inf or NaN, so the step is skipped and the scale halves.
  auto one = trained(*g, be, scaled_config(0x1p128, 2000, 1));
  EXPECT_EQ(one->loss_scaler().skipped_steps(), 1);
  EXPECT_EQ(one->loss_scaler().scale(), 0x1p127);
  auto none = trained(*g, be, scaled_config(0, 1, 0));
  ASSERT_FALSE(one->executor().parameters().empty());
  for (auto const& [name, t] : one->executor().parameters())  // BatchNorm's statistics do move (the forward ran)
    EXPECT_EQ(t.to_vector(), none->executor().parameters().at(name).to_vector()) << name << " changed when skipped";
  // Training goes on: the scale comes down until the gradients fit, then the loss falls.
  auto run = trained(*g, be, scaled_config(0x1p128, 2000, 40));
  int64_t const skipped = run->loss_scaler().skipped_steps();
  EXPECT_GE(skipped, 1);
  EXPECT_LT(skipped, 30);
  EXPECT_EQ(run->loss_scaler().scale(), std::ldexp(1.0, 128 - static_cast<int>(skipped)));
  auto const& losses = run->losses();
  EXPECT_LT(losses.back(), losses.front());
  // Its state goes into checkpoints and comes back.
  std::string const path = (std::filesystem::temp_directory_path() / "gp_loss_scale.ckpt").string();
  ASSERT_TRUE(run->save_checkpoint(path).is_ok());
  TrainConfig const c = scaled_config(0x1p128, 2000, 40);
  auto data = make_data_source(c.data, *g, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok());
  auto resumed = Trainer::create(c, *g, be, std::move(data).value());
  ASSERT_TRUE(resumed.is_ok());
  ASSERT_TRUE((*resumed)->load_checkpoint(path).is_ok());
  EXPECT_EQ((*resumed)->loss_scaler().scale(), run->loss_scaler().scale());
  EXPECT_EQ((*resumed)->loss_scaler().skipped_steps(), skipped);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gp::exec
