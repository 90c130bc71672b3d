// Faults never hang: an injected error on one worker stops every worker within the timeout, and
// the first cause comes back once, naming the device, the schedule line and the instruction.
#include <chrono>

#include "schedule/instruction.h"
#include "tests/exec/device_like_backend.h"
#include "tests/runtime/runtime_fixtures.h"

namespace gp::exec {
namespace {

using schedule::Op;

struct FaultCase {
  std::shared_ptr<graph::OpGraph const> graph;
  TrainConfig config;
  partition::Plan plan;
  schedule::Schedule schedule;
};

FaultCase make_setup(std::string const& model = "mmt") {
  FaultCase s;
  auto built = models::build_graph(model, models::Size::kTiny, 1);
  EXPECT_TRUE(built.is_ok());
  s.graph = std::make_shared<graph::OpGraph const>(std::move(built).value());
  s.config = testing::config_for(models::Task::kClassification, 16, 4, 3);
  auto plan = testing::make_plan(s.graph, "balanced", 3, s.config, false);
  EXPECT_TRUE(plan.is_ok());
  s.plan = *plan;
  auto sched = schedule::build_schedule(s.plan, schedule::Policy::kGraph1F1B, {4, 0});
  EXPECT_TRUE(sched.is_ok()) << sched.status().message();
  s.schedule = *sched;
  return s;
}

int line_of(schedule::Schedule const& sched, int device, Op op, int nth = 0) {
  for (auto const& in : sched.devices[device])
    if (in.op == op && nth-- == 0) return in.line;
  return -1;
}

Status run_with(FaultCase const& s, FaultInjection fault, int64_t memory_limit = 0, double timeout = 5,
                double* seconds = nullptr) {
  RuntimeOptions o;
  o.make_backend = cpu_backend_factory();
  o.worker.timeout_s = timeout;
  o.worker.fault = fault;
  o.worker.memory_limit_bytes = memory_limit;
  o.threads_per_worker = 1;
  auto rt = Runtime::create_threads(s.config, *s.graph, s.plan, s.schedule, o);
  if (!rt.is_ok()) return rt.status();
  auto const t0 = std::chrono::steady_clock::now();
  Status st = (*rt)->run(-1, nullptr);
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE((*rt)->has_stuck_workers());
  return st;
}

TEST(RuntimeFaults, AWorkerThatThrowsStopsEveryone) {
  FaultCase const s = make_setup();
  int const line = line_of(s.schedule, 1, Op::kBackward);
  double secs = 0;
  Status st = run_with(s, {1, line, FaultInjection::Kind::kThrow}, 0, 5, &secs);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("device 1, line " + std::to_string(line) + " (B s1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("injected fault"), std::string::npos);
  EXPECT_EQ(st.message().find("another device failed"), std::string::npos) << "a secondary error was reported";
  EXPECT_LT(secs, 5.0);
}

TEST(RuntimeFaults, NaNLoss) {
  FaultCase const s = make_setup();
  int const last = static_cast<int>(s.plan.stages.size()) - 1;
  int const device = s.plan.stages[last].devices[0];
  int const line = line_of(s.schedule, device, Op::kForward, 1);
  Status st = run_with(s, {device, line, FaultInjection::Kind::kNaN});
  ASSERT_EQ(st.code(), StatusCode::kNumerical) << st.message();
  EXPECT_NE(st.message().find("loss is NaN at step 1, micro-batch 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("device " + std::to_string(device) + ", line " + std::to_string(line)),
            std::string::npos);
}

// On device workers the losses are read at STEP: a NaN there names its micro-batch and forward line,
// and no device updates (the step's loss is summed over the devices before any update).
TEST(RuntimeFaults, ANaNLossReadAtStepStopsEveryDeviceBeforeItsUpdate) {
  FaultCase const s = make_setup();
  int const last = static_cast<int>(s.plan.stages.size()) - 1;
  int const device = s.plan.stages[last].devices[0];
  int const line = line_of(s.schedule, device, Op::kForward, 1);
  RuntimeOptions o;
  o.make_backend = [](int) -> Result<std::unique_ptr<Backend>> {
    return std::unique_ptr<Backend>(std::make_unique<testing::DeviceLikeBackend>());
  };
  o.worker.timeout_s = 5;
  o.worker.fault = {device, line, FaultInjection::Kind::kNaN};
  o.threads_per_worker = 1;
  auto rt = Runtime::create_threads(s.config, *s.graph, s.plan, s.schedule, o);
  ASSERT_TRUE(rt.is_ok()) << rt.status().message();
  auto before = (*rt)->trained_tensors();
  ASSERT_TRUE(before.is_ok());
  std::map<std::string, std::vector<float>> initial;
  for (auto const& [n, x] : *before) initial[n] = x.to_vector();
  Status const st = (*rt)->run(-1, nullptr);
  ASSERT_EQ(st.code(), StatusCode::kNumerical) << st.message();
  EXPECT_NE(st.message().find("loss is NaN at step 1, micro-batch 1 (read at STEP; its forward was line " +
                              std::to_string(line) + ")"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("device " + std::to_string(device) + ", line " +
                              std::to_string(line_of(s.schedule, device, Op::kStep)) + " (STEP"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE((*rt)->has_stuck_workers());
  auto after = (*rt)->trained_tensors();
  ASSERT_TRUE(after.is_ok()) << after.status().message();
  for (auto const& [n, x] : *after) EXPECT_EQ(x.to_vector(), initial.at(n)) << n << " was updated";
}

TEST(RuntimeFaults, MemoryOverTheDeviceLimit) {
  FaultCase const s = make_setup();
  Status st = run_with(s, {}, 64 << 10);
  ASSERT_EQ(st.code(), StatusCode::kInfeasible) << st.message();
  EXPECT_NE(st.message().find("over its memory limit of 64 KiB"), std::string::npos) << st.message();
}

TEST(RuntimeFaults, WrongTensorHeader) {
  FaultCase const s = make_setup();
  int const line = line_of(s.schedule, 0, Op::kSend);
  Status st = run_with(s, {0, line, FaultInjection::Kind::kHeader});
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("from d0 but d1 expects"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("device 1"), std::string::npos) << st.message();
}

// A worker that stops answering: its peers time out, the stall report says where each device was.
TEST(RuntimeFaults, AStalledPeerTimesOutWithAReport) {
  FaultCase const s = make_setup();
  int const line = line_of(s.schedule, 0, Op::kSend, 1);
  RuntimeOptions o;
  o.make_backend = cpu_backend_factory();
  o.worker.timeout_s = 0.5;
  o.worker.fault = {0, line, FaultInjection::Kind::kStall};  // sleeps 3 x timeout in compute
  o.threads_per_worker = 1;
  auto rt = Runtime::create_threads(s.config, *s.graph, s.plan, s.schedule, o);
  ASSERT_TRUE(rt.is_ok());
  Status st = (*rt)->run(-1, nullptr);
  ASSERT_EQ(st.code(), StatusCode::kTimeout) << st.message();
  EXPECT_NE(st.message().find("where each device was: d0 at line " + std::to_string(line)), std::string::npos)
      << st.message();
}

TEST(RuntimeFaults, BadCombinationsAreRefusedBeforeTraining) {
  FaultCase const s = make_setup();
  RuntimeOptions o;
  o.make_backend = cpu_backend_factory();
  TrainConfig c = s.config;
  c.micro_batches = 2;
  auto r = Runtime::create_threads(c, *s.graph, s.plan, s.schedule, o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("set micro_batches: 4"), std::string::npos) << r.status().message();

  c = s.config;
  c.batch = 32;
  r = Runtime::create_threads(c, *s.graph, s.plan, s.schedule, o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("partition with --batch 32"), std::string::npos) << r.status().message();

  FaultCase const other = make_setup("dlrm");
  r = Runtime::create_threads(s.config, *other.graph, s.plan, s.schedule, o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("made for another model"), std::string::npos) << r.status().message();

  auto two = testing::make_plan(s.graph, "balanced", 2, s.config, false);
  ASSERT_TRUE(two.is_ok());
  r = Runtime::create_threads(s.config, *s.graph, *two, s.schedule, o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("built for another plan"), std::string::npos) << r.status().message();

  // Fewer micro-batches than 1F1B's warm-up on 3 stages needs still train correctly (gpipe-like),
  // but a schedule missing a micro-batch's backward is refused by the validator first.
  schedule::Schedule broken = s.schedule;
  auto& list = broken.devices[2];
  for (auto it = list.begin(); it != list.end(); ++it)
    if (it->op == Op::kBackward) {
      list.erase(it);
      break;
    }
  r = Runtime::create_threads(s.config, *s.graph, s.plan, broken, o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("the schedule does not fit the plan"), std::string::npos) << r.status().message();
}

// Loss scaling across a pipeline: a gradient made non-finite on one device (what an fp16 overflow
// does) skips the step on every device, halves the scale everywhere, and training goes on; with
// no overflow a power-of-two scale trains as no scale.
TEST(RuntimeFaults, AnInjectedOverflowSkipsTheStepOnEveryDevice) {
  FaultCase s = make_setup();
  s.config.loss_scale.dynamic = true;
  s.config.loss_scale.init = 1024;
  s.config.loss_scale.growth_interval = 1000;
  auto run = [&](int64_t steps, bool inject) {
    RuntimeOptions o;
    o.make_backend = cpu_backend_factory();
    o.worker.timeout_s = 20;
    o.threads_per_worker = 1;
    if (inject) o.worker.fault = {1, line_of(s.schedule, 1, Op::kBackward), FaultInjection::Kind::kOverflow};
    TrainConfig c = s.config;
    c.steps = steps;
    auto rt = Runtime::create_threads(c, *s.graph, s.plan, s.schedule, o);
    EXPECT_TRUE(rt.is_ok()) << rt.status().message();
    Status const st = (*rt)->run(-1, nullptr);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return std::move(rt).value();
  };
  std::map<std::string, std::vector<float>> initial;  // the initializers' values
  for (auto const& t : s.graph->tensors())
    if (t.role == graph::TensorRole::kWeight && t.data) initial[t.name] = Tensor::from_data(*t.data).to_vector();
  // One step with the overflow on device 1: every stage on every device keeps its weights.
  auto one = run(1, true);
  EXPECT_EQ(one->loss_scaler()->skipped_steps(), 1);
  EXPECT_EQ(one->loss_scaler()->scale(), 512);
  auto const after = one->trained_tensors();
  ASSERT_TRUE(after.is_ok());
  for (auto const& [name, t] : *after) {
    if (initial.count(name)) {
      EXPECT_EQ(t.to_vector(), initial.at(name)) << name << " changed in a skipped step";
    }
  }
  // Three steps: the first skipped everywhere, the others train.
  auto three = run(3, true);
  EXPECT_EQ(three->loss_scaler()->skipped_steps(), 1);
  EXPECT_EQ(three->loss_scaler()->scale(), 512);
  auto const trained = three->trained_tensors();
  ASSERT_TRUE(trained.is_ok());
  int changed = 0;
  for (auto const& [name, t] : *trained) changed += initial.count(name) && t.to_vector() != initial.at(name);
  EXPECT_GT(changed, 5);
  // Without the overflow the scaled pipeline trains as an unscaled one device (powers of two).
  TrainConfig plain = s.config;
  plain.loss_scale = {};
  auto const want = testing::train_single(*s.graph, plain);
  auto const got = run(3, false)->trained_tensors();
  ASSERT_TRUE(got.is_ok());
  testing::expect_close(*got, want, 1e-4, 1e-6, "scaled pipeline");
}

}  // namespace
}  // namespace gp::exec
