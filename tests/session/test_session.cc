// The training session is the flow the CLI, compare --train, the benches and the Python package
// share: these tests pin what it must give (the single-device Trainer's result bit for bit on one
// device, the single-device result on a pipeline, checkpoints that resume to the same weights, an
// export that holds the trained weights) and that planning charges what it prices.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "exec/session/model_file.h"
#include "exec/session/planning.h"
#include "exec/session/registry.h"
#include "exec/session/training.h"
#include "graph/onnx_import.h"
#include "graph/precision.h"
#include "kernels/bf16.h"
#include "partition/planner.h"
#include "tests/graph/causal_attention_model.h"
#include "tests/runtime/runtime_fixtures.h"

namespace gp::session {
namespace {

using exec::testing::config_for;
using exec::testing::expect_close;
using exec::testing::train_single;

exec::TrainConfig zoo_config(std::string const& zoo, int64_t steps = 3) {
  exec::TrainConfig c = config_for(models::Task::kClassification, 8, 2, steps);
  c.model.zoo = zoo;
  c.model.size = "tiny";
  c.pipeline.cost = "analytic";
  c.pipeline.planner = "balanced";
  c.pipeline.memory = "1GiB";
  return c;
}

std::string temp_path(std::string const& name) {
  return (std::filesystem::temp_directory_path() / ("gp_session_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::unique_ptr<TrainingSession> make(exec::TrainConfig c, int devices) {
  TrainOptions o;
  o.devices = devices;
  auto s = TrainingSession::create(std::move(c), o);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

std::map<std::string, exec::Tensor> trained(TrainingSession& s) {
  auto t = s.trained_tensors();
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? *t : std::map<std::string, exec::Tensor>{};
}

TEST(TrainingSession, OneDeviceIsTheTrainerBitForBit) {
  exec::TrainConfig const c = zoo_config("mlp");
  auto s = make(c, 1);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->pipeline());
  ASSERT_TRUE(s->run().is_ok());
  std::vector<double> losses;
  auto const want = train_single(s->graph(), c, &losses);
  EXPECT_EQ(s->losses(), losses);
  EXPECT_EQ(expect_close(trained(*s), want, 0, 0, "one-device session"), 0.0);
  ASSERT_EQ(s->measurements().size(), 1u);
  EXPECT_GT(s->measurements()[0].peak_bytes, 0);
}

TEST(TrainingSession, APipelineTrainsTheSameModelAsOneDevice) {
  exec::TrainConfig const c = zoo_config("inception");
  auto s = make(c, 2);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->pipeline());
  ASSERT_NE(s->plan(), nullptr);
  EXPECT_EQ(s->plan()->plan.num_devices, 2);
  ASSERT_TRUE(s->run().is_ok());
  EXPECT_EQ(s->steps_done(), c.steps);
  auto const want = train_single(s->graph(), c);
  expect_close(trained(*s), want, 1e-4, 1e-6, "2-device session");
  EXPECT_EQ(s->measurements().size(), 2u);
}

TEST(TrainingSession, AGivenPlanIsTrainedAsGiven) {
  exec::TrainConfig const c = zoo_config("mlp", 2);
  auto graph = std::make_shared<graph::OpGraph const>(*models::build_graph("mlp", models::Size::kTiny, c.seed));
  auto plan = exec::testing::make_plan(graph, "pipedream", 2, c, false);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  TrainOptions o;
  o.plan = *plan;
  auto s = TrainingSession::create(c, o);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ((*s)->devices(), 2);
  EXPECT_EQ((*s)->plan()->plan.planner, plan->planner);
  EXPECT_EQ((*s)->plan()->cost_name, "the given plan's");
  ASSERT_TRUE((*s)->run().is_ok());
}

TEST(TrainingSession, ACheckpointResumesToTheSameWeights) {
  for (int devices : {1, 2}) {
    SCOPED_TRACE(devices);
    exec::TrainConfig c = zoo_config("mlp", 4);
    auto straight = make(c, devices);
    ASSERT_TRUE(straight && straight->run().is_ok());
    std::string const ck = temp_path("resume_" + std::to_string(devices) + ".gpck");
    c.checkpoint.path = ck;
    c.checkpoint.resume = true;
    {
      auto first = make(c, devices);
      ASSERT_TRUE(first && first->run(2).is_ok());  // stops after 2 of 4 steps, checkpoint written
      EXPECT_EQ(first->steps_done(), 2);
    }
    ASSERT_TRUE(std::filesystem::exists(ck));
    auto resumed = make(c, devices);
    ASSERT_TRUE(resumed);
    EXPECT_EQ(resumed->steps_done(), 2);
    ASSERT_TRUE(resumed->run().is_ok());
    EXPECT_EQ(resumed->steps_done(), 4);
    EXPECT_EQ(expect_close(trained(*resumed), trained(*straight), 0, 0, "resumed"), 0.0);
    std::filesystem::remove(ck);
  }
}

TEST(TrainingSession, TheExportHoldsTheTrainedWeights) {
  exec::TrainConfig const c = zoo_config("mlp", 2);
  auto s = make(c, 1);
  ASSERT_TRUE(s && s->run().is_ok());
  std::string const out = temp_path("export.onnx");
  ASSERT_TRUE(s->export_onnx(out).is_ok());
  auto back = graph::load_onnx(out);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  auto const weights = trained(*s);
  int checked = 0;
  for (auto const& [name, t] : weights) {
    auto id = back->find_tensor(name);
    ASSERT_TRUE(id.has_value()) << name;
    auto const& data = back->tensor(*id).data;
    ASSERT_TRUE(data) << name;
    ASSERT_EQ(data->bytes.size(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(data->bytes.data(), t.raw(), t.nbytes()), 0) << name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
  std::filesystem::remove(out);
}

// An export of 16-bit weights (`--export-weights bf16|fp16`) stores each weight that only low ops
// read (Conv, Gemm, MatMul) rounded to nearest even, as "<name>.bf16" behind a Cast to float32 that
// gives its consumers "<name>" again; every other weight (LayerNorm's) stays its float32 master.
TEST(TrainingSession, AnExportOf16BitWeightsStoresTheLowOpsWeightsRounded) {
  exec::TrainConfig c = zoo_config("transformer", 2);
  c.precision = graph::Precision::kBFloat16;
  auto s = make(c, 1);
  ASSERT_TRUE(s && s->run().is_ok());
  auto const weights = trained(*s);
  std::set<std::string> const low = low_precision_weights(s->graph(), weights);
  ASSERT_FALSE(low.empty());
  ASSERT_LT(low.size(), weights.size()) << "LayerNorm's weights are read by float32 ops";
  std::string const out32 = temp_path("export32.onnx");
  ASSERT_TRUE(s->export_onnx(out32, graph::Precision::kFloat32).is_ok());
  for (graph::Precision p : {graph::Precision::kBFloat16, graph::Precision::kFloat16}) {
    SCOPED_TRACE(graph::precision_name(p));
    std::string const out = temp_path(std::string("export_") + graph::precision_name(p) + ".onnx");
    ASSERT_TRUE(s->export_onnx(out, p).is_ok());
    auto back = graph::load_onnx(out);
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    for (auto const& [name, t] : weights) {
      if (!low.count(name)) {
        auto const id = back->find_tensor(name);
        ASSERT_TRUE(id && back->tensor(*id).data) << name;
        EXPECT_EQ(std::memcmp(back->tensor(*id).data->bytes.data(), t.raw(), t.nbytes()), 0) << name;
        continue;
      }
      EXPECT_NE(graph::amp_rule(back->op(back->tensor(*back->find_tensor(name)).consumers.at(0)).kind()).policy,
                graph::AmpPolicy::kFloat32)
          << name << " is not read by its low op any more";
      auto const id = back->find_tensor(name + "." + graph::precision_name(p));
      ASSERT_TRUE(id && back->tensor(*id).data) << name << " is not stored in 16 bits";
      auto const& data = *back->tensor(*id).data;
      ASSERT_EQ(data.dtype, graph::low_dtype(p)) << name;
      ASSERT_EQ(data.bytes.size(), static_cast<std::size_t>(t.numel()) * 2) << name;
      auto const* bits = reinterpret_cast<uint16_t const*>(data.bytes.data());
      float const* master = t.data<float>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < t.numel(); ++i) {
        uint16_t const want =
            p == graph::Precision::kBFloat16 ? kernels::float_to_bf16(master[i]) : kernels::float_to_half(master[i]);
        wrong += bits[i] != want;
      }
      EXPECT_EQ(wrong, 0) << name << " is not its master rounded to nearest even";
    }
    EXPECT_LT(std::filesystem::file_size(out), std::filesystem::file_size(out32) * 7 / 10);
    std::filesystem::remove(out);
  }
  std::filesystem::remove(out32);
}

TEST(TrainingSession, BadRequestsFailBeforeAnythingTrains) {
  exec::TrainConfig c = zoo_config("mlp");
  TrainOptions o;
  o.backend = "tpu";
  EXPECT_EQ(TrainingSession::create(c, o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.launcher = "slurm";
  EXPECT_EQ(TrainingSession::create(c, o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.devices = 3;
  c.pipeline.plan = "";
  auto plan = exec::testing::make_plan(
      std::make_shared<graph::OpGraph const>(*models::build_graph("mlp", models::Size::kTiny, c.seed)), "balanced", 2,
      c, false);
  ASSERT_TRUE(plan.is_ok());
  o.plan = *plan;
  auto s = TrainingSession::create(c, o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("the plan is for 2 devices, not 3"), std::string::npos) << s.status().message();
  c.model.zoo = "no-such-model";
  EXPECT_FALSE(TrainingSession::create(c, {}).is_ok());
}

TEST(Planning, StagesCarryTheUpdateTheProblemPrices) {
  ProblemSpec spec;
  spec.graph = std::make_shared<graph::OpGraph const>(*models::build_graph("inception", models::Size::kTiny, 1));
  spec.devices = 2;
  spec.memory = "1GiB";
  spec.batch = 8;
  spec.micro_batch = 4;
  spec.update_seconds_per_weight_byte = 1e-9;
  auto p = build_problem(spec);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  for (char const* planner : {"gpp", "pipedream", "balanced"}) {
    auto plan = partition::plan_with(planner, *p);
    ASSERT_TRUE(plan.is_ok()) << planner << ": " << plan.status().message();
    for (auto const& s : plan->stages)
      EXPECT_DOUBLE_EQ(s.update_s, static_cast<double>(s.weight_bytes) * 1e-9) << planner;
  }
}

// The profile of a training run is calibrated with as many executors at once as will share one
// device: CPU workers share the cores; GPU workers share a GPU when there are more of them than
// GPUs (two workers on one H200 measured 1,515 samples/s where one executor's calibration
// predicted 2,447); MPI ranks each have a GPU of their own.
TEST(Planning, CalibrationConcurrencyCountsTheWorkersSharingADevice) {
  EXPECT_EQ(calibration_concurrency("cpu", 2, false, 1, 2, 0), 2);
  EXPECT_EQ(calibration_concurrency("cpu", 1, false, 2, 2, 0), 1);
  EXPECT_EQ(calibration_concurrency("cpu", 4, true, 1, 2, 0), 2);  // ranks of one node share its cores
  EXPECT_EQ(calibration_concurrency("cuda", 2, false, 1, 2, 1), 2);
  EXPECT_EQ(calibration_concurrency("cuda", 3, false, 1, 16, 2), 2);  // GPU 0 runs workers 0 and 2
  EXPECT_EQ(calibration_concurrency("cuda", 4, false, 4, 16, 4), 1);
  EXPECT_EQ(calibration_concurrency("cuda", 8, false, 2, 16, 1), 8);
  EXPECT_EQ(calibration_concurrency("cuda", 2, true, 1, 16, 1), 1);  // NCCL: one rank per GPU
  EXPECT_EQ(calibration_concurrency("cuda", 2, false, 1, 2, 0), 2);  // no GPU found: counted as one
}

TEST(Planning, ProblemSpecErrorsNameTheFix) {
  ProblemSpec spec;
  EXPECT_NE(build_problem(spec).status().message().find("give a model.onnx"), std::string::npos);
  spec.graph = std::make_shared<graph::OpGraph const>(*models::build_graph("mlp", models::Size::kTiny, 1));
  EXPECT_NE(build_problem(spec).status().message().find("--devices"), std::string::npos);
  spec.devices = 2;
  spec.batch = 10;
  spec.micro_batch = 4;
  EXPECT_NE(build_problem(spec).status().message().find("not divisible"), std::string::npos);
}

TEST(ModelFile, AZooModelIsReadInMemoryAndLoadsLikeItsFile) {
  exec::ModelConfig m;
  m.zoo = "mlp";
  auto file = read_model(m, 3);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_TRUE(file->path.empty());
  EXPECT_NE(file->hash, 0u);
  auto g = load_graph(*file, {});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto want = models::build_graph("mlp", models::Size::kTiny, 3);
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(g->num_ops(), want->num_ops());
  EXPECT_EQ(g->param_bytes(), want->param_bytes());
  EXPECT_EQ(read_model_file("/no/such/model.onnx").status().code(), StatusCode::kNotFound);
}

TEST(Registry, BackendsAreNamedAndCheckedBeforeUse) {
  EXPECT_TRUE(check_backend_name("cpu").is_ok());
  EXPECT_FALSE(check_backend_name("tpu").is_ok());
  auto cpu = make_backend("cpu", 0);
  ASSERT_TRUE(cpu.is_ok());
  auto g = models::build_graph("mlp", models::Size::kTiny, 1);
  ASSERT_TRUE(g.is_ok());
  EXPECT_TRUE(check_graph_supported("cpu", *g).is_ok());
  EXPECT_FALSE(cpu_op_types().empty());
}

// Every op is checked, not the first of each type: whether a backend runs an op depends on its
// dtypes and attributes. A Cast the CPU refuses (to float16) after one it runs (to int64) is named,
// with how many more of its type are refused.
TEST(Registry, EveryOpIsCheckedNotOnlyTheFirstOfItsType) {
  graph::OpGraph g;
  graph::TensorInfo x;
  x.name = "x";
  x.shape.dims = {graph::kBatch, 4};
  graph::TensorId const xt = g.add_tensor(x);
  g.mark_input(xt);
  auto cast = [&](std::string const& name, graph::DType to, int onnx_to) {
    graph::TensorInfo out;
    out.name = name + ".out";
    out.dtype = to;
    out.shape.dims = {graph::kBatch, 4};
    graph::TensorId const t = g.add_tensor(out);
    g.mark_output(t);
    graph::Op op;
    op.name = name;
    op.type = "Cast";
    op.typed = graph::CastAttrs{onnx_to};
    op.inputs = {xt};
    op.outputs = {t};
    g.add_op(op);
  };
  cast("ids", graph::DType::kInt64, 7);
  cast("half", graph::DType::kFloat16, 10);
  cast("half2", graph::DType::kFloat16, 10);
  cast("half3", graph::DType::kFloat16, 10);
  ASSERT_TRUE(g.finalize().is_ok());
  Status const s = check_graph_supported("cpu", g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("'half'"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("'half2'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(and 2 more Cast nodes)"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("'ids'"), std::string::npos) << s.message();
}

// The config's trainable/frozen patterns reach the importer through the session.
TEST(TrainingSession, ConfigPatternsDecideWhatTrains) {
  std::string const path = temp_path("causal.onnx");
  ASSERT_TRUE(gp::testing::causal_attention().save(path).is_ok());
  exec::TrainConfig c = zoo_config("mlp");
  c.model.zoo.clear();
  c.model.path = path;
  c.frozen = {"head.*"};
  auto s = make(c, 1);
  ASSERT_TRUE(s);
  std::vector<std::string> weights;
  for (graph::TensorId t : s->graph().weights()) weights.push_back(s->graph().tensor(t).name);
  EXPECT_EQ(weights, (std::vector<std::string>{"attn.wq", "attn.wk", "attn.wv"}));
  ASSERT_TRUE(s->run().is_ok());
  for (double l : s->losses()) EXPECT_TRUE(std::isfinite(l)) << l;
  EXPECT_EQ(trained(*s).count("head.w"), 0u);

  c.frozen = {"decoder.*"};
  auto bad = TrainingSession::create(c, TrainOptions{});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("frozen pattern 'decoder.*' matches no initializer"), std::string::npos)
      << bad.status().message();
  std::filesystem::remove(path);
}

// A pipeline trains the -inf mask model with finite losses, and a NaN in its forward is named.
TEST(TrainingSession, PipelineKeepsTheMaskOutOfTrainingAndNamesANaN) {
  std::string const path = temp_path("causal2.onnx");
  ASSERT_TRUE(gp::testing::causal_attention().save(path).is_ok());
  exec::TrainConfig c = zoo_config("mlp");
  c.model.zoo.clear();
  c.model.path = path;
  auto s = make(c, 2);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->pipeline());
  Status const ran = s->run();
  ASSERT_TRUE(ran.is_ok()) << ran.message();
  ASSERT_EQ(s->losses().size(), 3u);
  for (double l : s->losses()) EXPECT_TRUE(std::isfinite(l)) << l;

  ASSERT_TRUE(gp::testing::causal_attention({.mask_first_row = true}).save(path).is_ok());
  auto nan = make(c, 2);
  ASSERT_TRUE(nan);
  Status const failed = nan->run();
  ASSERT_FALSE(failed.is_ok());
  std::string const msg = failed.message();
  EXPECT_NE(msg.find("loss is NaN at step 1"), std::string::npos) << msg;
  // Softmax's NaN: seen on the loss stage as its own activation, or as an input from the stage before.
  bool const named = msg.find("the first non-finite tensor is activation '") != std::string::npos ||
                     msg.find("on another stage") != std::string::npos;
  EXPECT_TRUE(named) << msg;
  EXPECT_EQ(msg.find("add_mask"), std::string::npos) << msg;
  std::filesystem::remove(path);
}

// A measured profile is cached per model file and per graph it imports to: the same file with
// --no-fusion (or after an importer change) is another graph, with other ops, and gets its own
// profile instead of the other's.
TEST(Planning, TheProfileCacheKeepsOneProfilePerImportedGraph) {
  auto const dir = std::filesystem::path(temp_path("profile_cache"));
  std::filesystem::create_directories(dir);
  char const* old = std::getenv("GP_CACHE_DIR");
  std::string const saved = old ? old : "";
  ::setenv("GP_CACHE_DIR", dir.c_str(), 1);
  exec::TrainConfig c = zoo_config("transformer", 1);
  c.pipeline.cost = "profile";
  auto model = read_model(c.model, c.seed);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  TrainingPlanContext two;
  two.devices = 2;
  for (bool fuse : {true, false, true}) {
    graph::ImportOptions o;
    o.fuse = fuse;
    auto g = load_graph(*model, o);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    auto plan = plan_training(c, *model, std::make_shared<graph::OpGraph const>(std::move(g).value()), two);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  }
  int profiles = 0;
  for (auto const& e : std::filesystem::directory_iterator(dir))
    profiles += e.path().string().find(".profile.json") != std::string::npos;
  EXPECT_EQ(profiles, 2);  // fused and apart; the third run reads the first's
  if (old)
    ::setenv("GP_CACHE_DIR", saved.c_str(), 1);
  else
    ::unsetenv("GP_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gp::session
