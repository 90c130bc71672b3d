// Mixed precision on the CUDA backend (graph/precision.h, exec/cuda/low_precision.h): bf16 and fp16
// kernels for every op the policy runs in 16 bits, a training step of small models against the
// CPU's float32 within each format's tolerance, and fp16 training with dynamic loss scaling.
// Host tests run everywhere; GPU tests report SKIPPED without a usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "exec/cpu/cpu_backend.h"
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/cuda_check.h"
#include "exec/data.h"
#include "exec/trainer.h"
#include "graph/precision.h"
#include "models/zoo.h"
#include "tests/cuda/batchnorm_kernels.h"
#include "tests/exec/mixed_precision_models.h"
#include "tests/exec/tiny_models.h"
#include "tests/test_data.h"

namespace gp::exec {
namespace {

using graph::Precision;
using testing::graph_in;
using testing::one_step;
using testing::rel_l2;

struct Format {
  Precision precision;
  double unit;  // unit roundoff: 2^-8 (bfloat16's 8 significant bits), 2^-11 (half's 11)
};
constexpr Format kFormats[] = {{Precision::kBFloat16, 1.0 / 256}, {Precision::kFloat16, 1.0 / 2048}};
// As on the CPU (tests/exec/test_mixed_precision.cc): up to 16 roundings on the deepest gradient,
// about 4 units in quadrature; the bound is 8 units of the format.
constexpr double kUnits = 8;

std::vector<graph::OnnxModelBuilder> small_models() {
  std::vector<graph::OnnxModelBuilder> m;  // move-only builders: no initializer list
  m.push_back(testing::tiny_resnet_block(false));
  m.push_back(testing::tiny_resnet_block(true));
  m.push_back(testing::tiny_attention());
  m.push_back(testing::tiny_conv_stack());
  m.push_back(testing::tiny_gpt_block());
  return m;
}

// Without a GPU: every op of the small models and of the zoo transformer, Inception and MMT, rewritten for
// bf16 and fp16, has a CUDA kernel (the table and each entry's check are host code), and the
// rewrite did put ops in 16 bits.
TEST(CudaMixedPrecision, EveryOpOfTheModelsRewrittenForBf16AndFp16HasACudaKernel) {
  std::vector<graph::OpGraph> fp32;
  for (auto const& m : small_models()) fp32.push_back(graph_in(m, Precision::kFloat32));
  for (char const* zoo : {"transformer", "inception", "mmt"}) {
    auto g = models::build_graph(zoo, models::Size::kTiny, 1);
    ASSERT_TRUE(g.is_ok()) << zoo << ": " << g.status().message();
    fp32.push_back(std::move(g).value());
  }
  for (graph::OpGraph const& g : fp32) {
    for (graph::Op const& op : g.ops()) ASSERT_TRUE(CudaBackend::supports_op(op, g).is_ok()) << op.name;
    for (Format const f : kFormats) {
      auto low = graph::apply_precision(g, f.precision);
      ASSERT_TRUE(low.is_ok()) << low.status().message();
      int sixteen = 0;
      for (graph::Op const& op : low->ops()) {
        Status const s = CudaBackend::supports_op(op, *low);
        EXPECT_TRUE(s.is_ok()) << graph::precision_name(f.precision) << ": " << s.message();
        if (!op.outputs.empty() && graph::dtype_size(low->tensor(op.outputs[0]).dtype) == 2) ++sixteen;
      }
      EXPECT_GT(sixteen, 2) << graph::precision_name(f.precision);
    }
  }
}

// The same for every model a current PyTorch exported for the fixture tests (HF BERT, GPT-2,
// RoBERTa, Llama, Qwen2, ViT, Swin, ConvNeXt, ... through both exporters), rewritten for bf16 and
// fp16: the CUDA table runs every op, and the CPU's every op of the bf16 rewrite.
TEST(CudaMixedPrecision, EveryTorchFixtureRewrittenForBf16AndFp16HasACudaKernelForEveryOp) {
  namespace fs = std::filesystem;
  fs::path const fixtures = gp::testing::test_data_dir() / "torch2";
  ASSERT_TRUE(fs::is_directory(fixtures)) << fixtures << " is missing (GP_TEST_DATA names the test data folder)";
  CpuBackend const cpu;
  int models = 0;
  for (auto const& entry : fs::directory_iterator(fixtures)) {
    fs::path const model = entry.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    auto const g = graph::load_onnx(model.string());
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    ++models;
    for (Format const f : kFormats) {
      SCOPED_TRACE(entry.path().filename().string() + " " + graph::precision_name(f.precision));
      auto low = graph::apply_precision(*g, f.precision);
      ASSERT_TRUE(low.is_ok()) << low.status().message();
      for (graph::Op const& op : low->ops()) {
        Status const s = CudaBackend::supports_op(op, *low);
        EXPECT_TRUE(s.is_ok()) << s.message();
        if (f.precision != graph::Precision::kBFloat16) continue;
        Status const c = cpu.supports(op, *low);
        EXPECT_TRUE(c.is_ok()) << c.message();
      }
    }
  }
  EXPECT_GE(models, 30);
}

class CudaMixedPrecisionGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("NVIDIA_TF32_OVERRIDE", "0", 1);  // the float32 parts are float32
    if (Status s = cuda::device_available(); !s) GTEST_SKIP() << s.message();
    auto b = CudaBackend::create(0);
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    gpu_ = std::move(b).value();
  }
  std::unique_ptr<CudaBackend> gpu_;
};

// One training step (output, input and weight gradients) of each small model in bf16 and in fp16 on
// the GPU against float32 on the CPU: every value within 8 units of the format, and not float32's
// bits (the step did run in 16 bits).
TEST_F(CudaMixedPrecisionGpu, AStepMatchesCpuFloat32WithinTheFormatsTolerance) {
  CpuBackend cpu;
  for (auto const& model : small_models()) {
    auto const want = one_step(graph_in(model, Precision::kFloat32), cpu);
    for (Format const f : kFormats) {
      SCOPED_TRACE(model.name() + " " + graph::precision_name(f.precision));
      auto const got = one_step(graph_in(model, f.precision), *gpu_);
      ASSERT_EQ(got.size(), want.size());
      double const worst = testing::expect_within(got, want, kUnits * f.unit);
      ASSERT_TRUE(got.count("output"));
      EXPECT_GT(rel_l2(got.at("output"), want.at("output")), 0.0);  // the step did run in 16 bits
      std::printf("%s %s: worst relative L2 difference to CPU float32 %.2e (%.1f units)\n", model.name().c_str(),
                  graph::precision_name(f.precision), worst, worst / f.unit);
    }
  }
}

// A 16-bit BatchNorm on cuDNN's 16-bit graphs (the default, in the step test above), on our
// kernels (chosen), and where cuDNN refuses the shape (forced: our kernels) all match.
TEST_F(CudaMixedPrecisionGpu, A16BitBatchNormOnOurKernelsMatches) {
  CpuBackend cpu;
  graph::OnnxModelBuilder const model = testing::tiny_resnet_block(true, 8);
  auto const want = one_step(graph_in(model, Precision::kFloat32), cpu);
  for (bool chosen : {true, false}) {
    SCOPED_TRACE(chosen ? "our kernels" : "cuDNN refusing: our kernels");
    testing::BatchNormKernelsFor const use(chosen ? cuda::BatchNormKernels::kOurs : cuda::BatchNormKernels::kCudnn,
                                           !chosen);
    auto const got = one_step(graph_in(model, Precision::kBFloat16), *gpu_);
    ASSERT_EQ(got.size(), want.size());
    testing::expect_within(got, want, kUnits * kFormats[0].unit);
  }
}

// fp16 with dynamic loss scaling on the GPU: a first scale far past half's range overflows the
// gradients, those steps are skipped and the scale halves until it fits; then the model learns.
TEST_F(CudaMixedPrecisionGpu, Fp16TrainingWithLossScalingSkipsOverflowsAndLearns) {
  auto built = models::build_graph("mlp", models::Size::kTiny, 1);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  auto low = graph::apply_precision(*built, Precision::kFloat16);
  ASSERT_TRUE(low.is_ok()) << low.status().message();
  TrainConfig c;
  c.batch = 16;
  c.micro_batches = 2;
  c.steps = 40;
  c.seed = 1;
  c.optimizer.lr = 0.05f;
  c.data.samples = 64;
  c.loss_scale.dynamic = true;
  c.loss_scale.init = std::ldexp(1.0, 40);
  c.loss_scale.growth_interval = 1000;
  auto data = make_data_source(c.data, *low, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  auto t = Trainer::create(c, *low, *gpu_, std::move(data).value());
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  Status const s = (*t)->run(nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  LossScaler const& scaler = (*t)->loss_scaler();
  EXPECT_GE(scaler.skipped_steps(), 1);
  EXPECT_LT(scaler.skipped_steps(), 30);
  EXPECT_LE(scaler.scale(), std::ldexp(1.0, 39));
  auto const& losses = (*t)->losses();
  ASSERT_EQ(losses.size(), 40u);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), losses.front());
  std::printf("fp16 mlp: %lld steps skipped, scale %.0f, loss %.4f -> %.4f\n",
              static_cast<long long>(scaler.skipped_steps()), scaler.scale(), losses.front(), losses.back());
}

}  // namespace
}  // namespace gp::exec
