// A plan stage marked `recompute` trains to the same weights as without: the worker's executor for
// that stage keeps only its inputs and reruns its forward (same Dropout seeds, BatchNorm statistics
// updated once) before each backward. Same schedule, same summation order: bitwise equal.
#include <gtest/gtest-spi.h>

#include "tests/exec/tiny_models.h"
#include "tests/runtime/runtime_fixtures.h"

namespace gp::exec {
namespace {

using testing::config_for;
using testing::expect_close;

struct Trained {
  std::map<std::string, Tensor> tensors;
  std::vector<DeviceMeasurement> measured;
};

Trained train(graph::OpGraph const& g, TrainConfig const& c, partition::Plan const& plan, schedule::Policy policy) {
  Trained out;
  auto sched = schedule::build_schedule(plan, policy, {static_cast<int>(c.micro_batches), 0});
  EXPECT_TRUE(sched.is_ok()) << sched.status().message();
  if (!sched.is_ok()) return out;
  RuntimeOptions o;
  o.make_backend = cpu_backend_factory();
  o.worker.timeout_s = 30;
  o.threads_per_worker = 1;
  auto rt = Runtime::create_threads(c, g, plan, *sched, o);
  EXPECT_TRUE(rt.is_ok()) << rt.status().message();
  if (!rt.is_ok()) return out;
  Status s = (*rt)->run(-1, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  auto t = (*rt)->trained_tensors();
  EXPECT_TRUE(t.is_ok());
  if (t.is_ok())
    for (auto const& [n, x] : *t) out.tensors.emplace(n, x.clone());
  out.measured = (*rt)->measurements();
  return out;
}

struct Model {
  std::string name;
  std::shared_ptr<graph::OpGraph const> graph;
  models::Task task = models::Task::kClassification;
};

std::vector<Model> models_under_test() {
  std::vector<Model> out;
  for (std::string name : {"mlp", "transformer", "inception"}) {
    auto built = models::build_graph(name, models::Size::kTiny, 1);
    EXPECT_TRUE(built.is_ok()) << name << ": " << built.status().message();
    if (!built.is_ok()) continue;
    auto info = models::find_model(name);
    out.push_back({name, std::make_shared<graph::OpGraph const>(std::move(built).value()), info->task});
  }
  auto dropout = testing::tiny_dropout_mlp().to_graph();
  EXPECT_TRUE(dropout.is_ok()) << dropout.status().message();
  if (dropout.is_ok())
    out.push_back({"dropout_mlp", std::make_shared<graph::OpGraph const>(std::move(dropout).value()),
                   models::Task::kClassification});
  return out;
}

TEST(RuntimeRecompute, SameWeightsAsKeepingActivations) {
  int runs = 0;
  for (auto const& m : models_under_test()) {
    TrainConfig const c = config_for(m.task, 16, 4, 3);
    auto const single = testing::train_single(*m.graph, c);
    auto plan = testing::make_plan(m.graph, "balanced", 2, c, false);
    ASSERT_TRUE(plan.is_ok()) << m.name << ": " << plan.status().message();
    ASSERT_EQ(plan->stages.size(), 2u) << m.name;
    for (schedule::Policy policy : {schedule::Policy::k1F1B, schedule::Policy::kZeroBubble}) {
      std::string const what = m.name + " " + schedule::policy_name(policy);
      plan->stages[0].recompute = plan->stages[1].recompute = false;
      Trained const keep = train(*m.graph, c, *plan, policy);
      ASSERT_FALSE(keep.tensors.empty()) << what;
      for (int s = 0; s < 2; ++s) {
        plan->stages[0].recompute = s == 0;
        plan->stages[1].recompute = s == 1;
        Trained const rc = train(*m.graph, c, *plan, policy);
        std::string const label = what + ", stage " + std::to_string(s) + " recomputes";
        expect_close(rc.tensors, keep.tensors, 0, 0, label);  // bitwise
        expect_close(rc.tensors, single, 1e-4, 1e-6, label + " vs one device");
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 16);
}

// Stage 0 holds two micro-batches under 1F1B: with recompute its device's measured peak drops
// (it keeps inputs, not activations).
TEST(RuntimeRecompute, TheRecomputingDeviceHoldsLess) {
  auto built = models::build_graph("transformer", models::Size::kTiny, 1);
  ASSERT_TRUE(built.is_ok());
  auto g = std::make_shared<graph::OpGraph const>(std::move(built).value());
  TrainConfig const c = config_for(models::Task::kClassification, 16, 4, 2);
  auto plan = testing::make_plan(g, "balanced", 2, c, false);
  ASSERT_TRUE(plan.is_ok());
  Trained const keep = train(*g, c, *plan, schedule::Policy::k1F1B);
  plan->stages[0].recompute = true;
  Trained const rc = train(*g, c, *plan, schedule::Policy::k1F1B);
  ASSERT_EQ(keep.measured.size(), 2u);
  ASSERT_EQ(rc.measured.size(), 2u);
  EXPECT_LT(rc.measured[0].peak_bytes, keep.measured[0].peak_bytes);
  std::cout << "device 0 peak: " << keep.measured[0].peak_bytes << " B keeping activations, "
            << rc.measured[0].peak_bytes << " B recomputing" << std::endl;
}

// The bitwise comparison can fail: another learning rate is caught.
TEST(RuntimeRecompute, TheComparisonCatchesADifferentRun) {
  auto built = models::build_graph("mlp", models::Size::kTiny, 1);
  ASSERT_TRUE(built.is_ok());
  auto g = std::make_shared<graph::OpGraph const>(std::move(built).value());
  TrainConfig c = config_for(models::Task::kClassification, 16, 4, 2);
  auto plan = testing::make_plan(g, "balanced", 2, c, false);
  ASSERT_TRUE(plan.is_ok());
  Trained const keep = train(*g, c, *plan, schedule::Policy::k1F1B);
  plan->stages[1].recompute = true;
  c.optimizer.lr *= 1.001f;
  Trained const rc = train(*g, c, *plan, schedule::Policy::k1F1B);
  EXPECT_NONFATAL_FAILURE(expect_close(rc.tensors, keep.tensors, 0, 0, "lr x1.001"), "single device");
}

}  // namespace
}  // namespace gp::exec
