#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/trainer.h"
#include "graph/onnx_export.h"
#include "graph/onnx_import.h"
#include "models/zoo.h"
#include "tests/exec/device_like_backend.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec {
namespace {

using testing::DeviceLikeBackend;

TrainConfig base_config() {
  TrainConfig c;
  c.batch = 8;
  c.micro_batches = 1;
  c.steps = 4;
  c.seed = 3;
  c.optimizer.lr = 0.05f;
  c.optimizer.momentum = 0.9f;
  c.optimizer.weight_decay = 1e-3f;
  c.data.samples = 32;
  return c;
}

std::unique_ptr<Trainer> make_trainer(graph::OpGraph const& g, Backend& be, TrainConfig const& c) {
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  auto t = Trainer::create(c, g, be, std::move(data).value());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

void expect_close(std::map<std::string, Tensor> const& a, std::map<std::string, Tensor> const& b, double rtol,
                  double atol) {
  ASSERT_EQ(a.size(), b.size());
  for (auto const& [n, t] : a) {
    auto x = t.to_vector(), y = b.at(n).to_vector();
    ASSERT_EQ(x.size(), y.size()) << n;
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(x[i], y[i], atol + rtol * std::abs(y[i])) << n << "[" << i << "]";
  }
}

// On a device the trainer makes each batch ahead on a thread in the backend's pinned memory and
// hands it to the device from there; the batches, and so the training, are the CPU trainer's.
TEST(Trainer, OnADeviceBatchesComeFromPinnedMemoryAndTrainAsOnTheCpu) {
  auto g = testing::tiny_mlp(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  TrainConfig c = base_config();
  c.micro_batches = 2;
  c.steps = 5;
  CpuBackend cpu;
  auto want = make_trainer(*g, cpu, c);
  ASSERT_TRUE(want->run(nullptr).is_ok());
  DeviceLikeBackend device;
  {
    auto got = make_trainer(*g, device, c);
    ASSERT_TRUE(got->run(nullptr).is_ok());
    EXPECT_EQ(got->losses(), want->losses()) << "prefetching changed the data";
    expect_close(got->trained_tensors(), want->trained_tensors(), 0, 0);
  }
  // Every micro-batch's inputs and labels were copied out of pinned memory (2 tensors x 2
  // micro-batches x 5 steps), and nothing made there outlives the trainer.
  EXPECT_EQ(device.pinned_copies, 2 * 2 * 5);
  EXPECT_GT(device.pinned.peak_bytes(), 0);
  EXPECT_EQ(device.pinned.bytes_in_use(), 0);
  // The losses were read once a step (not once a micro-batch), with the deferred op checks.
  EXPECT_EQ(device.loss_reads.load(), 5);
  EXPECT_EQ(device.deferred_check_reads.load(), 5);
  EXPECT_FALSE(device.deferring_checks) << "the step left the checks deferred";
}

// Whether a device would run log[a] before log[b]: on one stream when a comes first; across
// streams when an event recorded on a's stream after it is waited for on b's stream before b.
bool runs_before(std::vector<DeviceLikeBackend::StreamOp> const& log, std::size_t a, std::size_t b) {
  using Kind = DeviceLikeBackend::StreamOp::Kind;
  if (log[a].stream == log[b].stream) return a < b;
  for (std::size_t r = a + 1; r < b; ++r) {
    if (log[r].kind != Kind::kRecord || log[r].stream != log[a].stream) continue;
    for (std::size_t w = r + 1; w < b; ++w)
      if (log[w].kind == Kind::kWait && log[w].stream == log[b].stream && log[w].event == log[r].event) return true;
  }
  return false;
}

// On a device that overlaps copies, each micro-batch's inputs and labels are copied on the copy
// stream into one of two buffers while the micro-batch before computes. Ordered by events only (no host
// wait): a copy into a buffer runs after every compute-stream read of it queued before, and each
// read after the copy that filled it. The training is the in-line copies' to the bit.
TEST(Trainer, InputsCopiedBesideComputeAreOrderedByEventsAndTrainTheSame) {
  auto g = testing::tiny_mlp(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  TrainConfig c = base_config();
  c.micro_batches = 3;
  c.batch = 12;
  c.steps = 4;
  DeviceLikeBackend in_line;
  in_line.copy_stream = false;
  auto want = make_trainer(*g, in_line, c);
  ASSERT_TRUE(want->run(nullptr).is_ok());

  using Op = DeviceLikeBackend::StreamOp;
  std::vector<Op> log;
  DeviceLikeBackend device;
  device.stream_log = &log;
  {
    auto got = make_trainer(*g, device, c);
    ASSERT_TRUE(got->run(nullptr).is_ok());
    EXPECT_EQ(got->losses(), want->losses());
    expect_close(got->trained_tensors(), want->trained_tensors(), 0, 0);
  }
  device.stream_log = nullptr;
  std::set<void const*> buffers;
  int copies = 0;
  for (Op const& op : log)
    if (op.kind == Op::Kind::kCopy && op.stream == Backend::StreamKind::kCopy) {
      buffers.insert(op.ptr);
      ++copies;
    }
  EXPECT_EQ(copies, 2 * 3 * 4) << "one input and its labels, each micro-batch of each step, none past the last";
  EXPECT_EQ(buffers.size(), 4u) << "two buffers of each, alternating";
  int reads = 0;
  for (std::size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind != Op::Kind::kRead || !buffers.count(log[i].ptr)) continue;
    // The read comes after the copy that filled the buffer... (a read of the address before its
    // first copy is of memory the allocator handed out before the buffer took it)
    std::size_t filled = log.size();
    for (std::size_t j = i; j-- > 0;)
      if (log[j].kind == Op::Kind::kCopy && log[j].ptr == log[i].ptr) {
        filled = j;
        break;
      }
    if (filled == log.size()) continue;
    ++reads;
    EXPECT_TRUE(runs_before(log, filled, i)) << "read " << i << " may run before copy " << filled;
    // ...and before the copy that next overwrites it.
    for (std::size_t j = i + 1; j < log.size(); ++j)
      if (log[j].kind == Op::Kind::kCopy && log[j].ptr == log[i].ptr) {
        EXPECT_TRUE(runs_before(log, i, j)) << "copy " << j << " may overwrite the buffer before read " << i;
        break;
      }
  }
  EXPECT_GE(reads, copies) << "every staged input is read";
}

// CUDA graphs on a device-like backend that captures as a GPU does (the calls are recorded and
// leave no trace; a replay reruns them on the same tensors, a Dropout or random op reading its seed
// slot): training equals eager training bit for bit. With 1 and 3 micro-batches the input buffers
// alternate between steps, so each (micro-batch, buffer) gets its graph; every micro-batch after
// the first step is a replay. A graph that replayed stale inputs, labels or seeds (Dropout, the
// random ops), or a loss slot not marked written, fails here.
// One run trained eagerly and with CUDA graphs, each on its own device-like backend (`device`
// captures as a GPU does; `fail_capture`: every capture fails with it); both runs must succeed and
// give the same losses and weights, bit for bit.
struct EagerAndCaptured {
  DeviceLikeBackend eager_backend, device;
  std::unique_ptr<Trainer> eager, captured;
};
std::unique_ptr<EagerAndCaptured> eager_and_captured(graph::OpGraph const& g, TrainConfig c,
                                                     Status fail_capture = Status::ok()) {
  auto r = std::make_unique<EagerAndCaptured>();
  c.cuda_graphs = false;
  r->eager = make_trainer(g, r->eager_backend, c);
  EXPECT_TRUE(r->eager->run(nullptr).is_ok());
  EXPECT_EQ(r->eager->cuda_graphs_summary(), "");
  c.cuda_graphs = true;
  r->device.capture = true;
  r->device.fail_capture = std::move(fail_capture);
  r->captured = make_trainer(g, r->device, c);
  Status const ran = r->captured->run(nullptr);
  EXPECT_TRUE(ran.is_ok()) << ran.message();
  EXPECT_EQ(r->captured->losses(), r->eager->losses());
  expect_close(r->captured->trained_tensors(), r->eager->trained_tensors(), 0, 0);
  return r;
}

TEST(Trainer, CapturedMicroBatchesReplayedTrainAsEagerOnes) {
  for (auto make : {&testing::tiny_mlp, &testing::tiny_cnn, &testing::tiny_dropout_mlp, &testing::tiny_noisy_mlp}) {
    auto g = make(1).to_graph();
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    for (int64_t mbs : {1, 2, 3}) {
      SCOPED_TRACE("micro-batches " + std::to_string(mbs));
      TrainConfig c = base_config();
      c.micro_batches = mbs;
      c.batch = 4 * mbs;
      c.steps = 5;
      auto const run = eager_and_captured(*g, c);
      Trainer const* got = run->captured.get();
      std::size_t const graphs = mbs == 2 ? 2 : 2 * static_cast<std::size_t>(mbs);
      EXPECT_EQ(got->graphs_captured(), graphs);
      EXPECT_EQ(run->device.captures, static_cast<int>(graphs));
      EXPECT_EQ(got->graph_replays(), (c.steps - 1) * mbs);
      EXPECT_EQ(run->device.replays, (c.steps - 1) * mbs);
      EXPECT_EQ(got->cuda_graphs_summary(), "cuda graphs: " + std::to_string(graphs) +
                                                " micro-batch graph(s) captured, replayed " +
                                                std::to_string((c.steps - 1) * mbs) + " time(s)");
    }
  }
}

// A capture the backend refuses: the micro-batch runs as it always has, and so does the rest of
// the run (nothing of the refused capture ran), and the summary says why.
TEST(Trainer, AFailedCaptureFallsBackToTheSameTraining) {
  auto g = testing::tiny_cnn(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  TrainConfig c = base_config();
  c.micro_batches = 2;
  c.steps = 4;
  auto const run = eager_and_captured(*g, c, unsupported("an operation in it waits for the device"));
  EXPECT_EQ(run->captured->graphs_captured(), 0u);
  EXPECT_EQ(run->device.replays, 0);
  EXPECT_EQ(run->captured->cuda_graphs_summary(),
            "cuda graphs: off after a capture failed (training went on without them): capturing micro-batch 0: an "
            "operation in it waits for the device");
}

// A dynamic loss scale changes between steps (an overflow halves it and skips the step, clean
// steps grow it); a replay reads the step's scale from device memory (Backend::scale_by), so
// captured training follows the same scales and skips as eager training. A scale captured as a
// constant would keep the second step's, and keep overflowing.
TEST(Trainer, CapturedMicroBatchesFollowADynamicLossScale) {
  auto g = testing::tiny_cnn(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  for (double init : {0x1p128, 1024.0}) {
    SCOPED_TRACE("initial scale " + std::to_string(init));
    TrainConfig c = base_config();
    c.micro_batches = 2;
    c.batch = 8;
    c.steps = 12;
    c.loss_scale.dynamic = true;
    c.loss_scale.init = init;
    c.loss_scale.growth_interval = 2;
    auto const run = eager_and_captured(*g, c);
    Trainer const *want = run->eager.get(), *got = run->captured.get();
    EXPECT_GE(want->loss_scaler().skipped_steps(), init > 1e30 ? 2 : 0) << "overflows while captured";
    EXPECT_EQ(got->loss_scaler().skipped_steps(), want->loss_scaler().skipped_steps());
    EXPECT_EQ(got->loss_scaler().scale(), want->loss_scaler().scale());
    EXPECT_EQ(got->graphs_captured(), 2u);
    EXPECT_EQ(got->graph_replays(), (c.steps - 1) * c.micro_batches);
  }
}

TEST(Trainer, CudaGraphsNeedABackendThatCaptures) {
  auto g = testing::tiny_mlp(1).to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  TrainConfig c = base_config();
  c.cuda_graphs = true;
  CpuBackend cpu;
  Status const on_cpu = Trainer::check_capturable(cpu);
  EXPECT_EQ(on_cpu.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_cpu.message().find("--backend cuda"), std::string::npos) << on_cpu.message();
  auto data = make_data_source(c.data, *g, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok());
  EXPECT_EQ(Trainer::create(c, *g, cpu, std::move(data).value()).status().message(), on_cpu.message());

  DeviceLikeBackend device;
  device.capture = true;
  EXPECT_TRUE(Trainer::check_capturable(device).is_ok());
}

// A label out of range in the second micro-batch, read at the step's end on a device: the same
// error as the CPU's, which finds it at once.
TEST(Trainer, ABadLabelReadAtTheStepsEndIsTheCpusError) {
  DeviceLikeBackend device;
  Backend::StepLosses losses = device.step_losses(2);
  Tensor const out = Tensor::from_floats({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  Tensor labels({2}, DType::kInt64);
  labels.data<int64_t>()[0] = 1;
  labels.data<int64_t>()[1] = 2;
  Tensor grad;
  ASSERT_TRUE(device.loss_into(LossKind::kCrossEntropy, out, labels, 4, grad, losses, 0).is_ok());
  // A device finds the bad label when it reads: mark slot 1 as its kernels would (row 1, and the
  // label there, 7, noted beside it).
  Tensor bad_labels({2}, DType::kInt64);
  bad_labels.data<int64_t>()[0] = 0;
  bad_labels.data<int64_t>()[1] = 7;
  losses.values.data<double>()[1] = 0;
  losses.bad.data<int64_t>()[2] = 1;
  losses.bad.data<int64_t>()[3] = 7;
  losses.classes[1] = 3;
  losses.written[1] = true;
  auto read = device.read_losses(losses);
  ASSERT_FALSE(read.is_ok());
  EXPECT_EQ(read.status().message(), "label 7 (row 1) is outside [0, 3) for a model with 3 classes");
  CpuBackend cpu;
  Backend::StepLosses one = cpu.step_losses(1);
  Status const at_once = cpu.loss_into(LossKind::kCrossEntropy, out, bad_labels, 4, grad, one, 0);
  EXPECT_EQ(at_once.message(), read.status().message());
  // Slots never written read as NaN, written ones as written.
  losses.written[1] = false;
  auto partial = device.read_losses(losses);
  ASSERT_TRUE(partial.is_ok()) << partial.status().message();
  EXPECT_TRUE(std::isfinite((*partial)[0]));
  EXPECT_TRUE(std::isnan((*partial)[1]));
}

// Synchronous semantics: N micro-batches accumulate to exactly one big-batch step.
TEST(Trainer, MicroBatchAccumulationEqualsOneBigBatch) {
  for (auto make : {&testing::tiny_mlp, &testing::tiny_attention}) {
    auto g = make(1).to_graph();
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    CpuBackend be;
    for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
      TrainConfig c = base_config();
      c.optimizer.kind = kind;
      c.optimizer.lr = kind == OptimizerKind::kSgd ? 0.05f : 1e-3f;
      auto big = make_trainer(*g, be, c);
      c.micro_batches = 4;
      auto small = make_trainer(*g, be, c);
      ASSERT_TRUE(big->run(nullptr).is_ok());
      ASSERT_TRUE(small->run(nullptr).is_ok());
      expect_close(small->executor().parameters(), big->executor().parameters(), 1e-5, 1e-6);
      for (std::size_t i = 0; i < big->losses().size(); ++i)
        EXPECT_NEAR(small->losses()[i], big->losses()[i], 1e-5 * std::abs(big->losses()[i]));
    }
  }
}

// Running in two pieces equals one run (BatchNorm running statistics included).
TEST(Trainer, RunningInPiecesEqualsOneRun) {
  auto g = testing::tiny_cnn().to_graph();
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  CpuBackend be;
  TrainConfig c = base_config();
  auto a = make_trainer(*g, be, c);
  auto b = make_trainer(*g, be, c);
  ASSERT_TRUE(a->run(nullptr).is_ok());
  ASSERT_TRUE(b->run(nullptr, 2).is_ok());
  ASSERT_TRUE(b->run(nullptr).is_ok());
  expect_close(a->trained_tensors(), b->trained_tensors(), 0, 0);
}

TEST(Trainer, NanLossStopsWithTheStepNumber) {
  auto g = testing::tiny_mlp().to_graph();
  ASSERT_TRUE(g.is_ok());
  CpuBackend be;
  TrainConfig c = base_config();
  c.steps = 50;
  c.optimizer.lr = 1e30f;
  c.optimizer.momentum = 0;
  auto t = make_trainer(*g, be, c);
  Status s = t->run(nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kNumerical);
  std::string const msg = s.message();
  EXPECT_NE(msg.find("at step " + std::to_string(t->steps_done() + 1)), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("NaN") != std::string::npos || msg.find("Inf") != std::string::npos) << msg;
}

TEST(Trainer, ProgressLineShowsStepLossThroughputAndEta) {
  auto g = testing::tiny_mlp().to_graph();
  ASSERT_TRUE(g.is_ok());
  CpuBackend be;
  TrainConfig c = base_config();
  c.log_interval = 2;
  auto t = make_trainer(*g, be, c);
  std::ostringstream os;
  ASSERT_TRUE(t->run(&os).is_ok());
  std::string const out = os.str();
  EXPECT_NE(out.find("step 2/4"), std::string::npos) << out;
  EXPECT_NE(out.find("step 4/4"), std::string::npos) << out;
  EXPECT_NE(out.find("loss "), std::string::npos);
  EXPECT_NE(out.find("samples/s"), std::string::npos);
  EXPECT_NE(out.find("ETA"), std::string::npos);
}

// From the second step on, the progress line's samples/s and ETA leave the first step out: here its
// first op forward waits 400 ms (as a GPU's first step builds its cuDNN plans), and the lines after
// it show the later steps' rate, not one dragged down by the first.
TEST(Trainer, ProgressAfterTheFirstStepLeavesTheFirstStepsTimeOut) {
  auto g = testing::tiny_mlp().to_graph();
  ASSERT_TRUE(g.is_ok());
  DeviceLikeBackend be;
  bool waited = false;
  be.on_forward = [&] {
    if (std::exchange(waited, true)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  };
  TrainConfig c = base_config();
  c.steps = 6;
  c.log_interval = 1;
  auto t = make_trainer(*g, be, c);
  std::ostringstream os;
  ASSERT_TRUE(t->run(&os).is_ok());
  std::istringstream lines(os.str());
  std::string line;
  std::vector<double> rates, etas;
  while (std::getline(lines, line)) {
    double rate = 0, eta = 0;
    long long step = 0, steps = 0;
    float loss = 0;
    if (std::sscanf(line.c_str(), "step %lld/%lld  loss %f  %lf samples/s  elapsed %*s  ETA %lfs", &step, &steps, &loss,
                    &rate, &eta) == 5) {
      rates.push_back(rate);
      etas.push_back(eta);
    }
  }
  ASSERT_EQ(rates.size(), 6u) << os.str();
  // Step 1: 8 samples in over 0.4 s. With it counted, step 2 would show at most 16 / 0.4 = 40
  // samples/s and an ETA over 0.8 s (0.2 s for each of the 4 steps left); without it, any later
  // step under 178 ms (a tiny MLP's take a few) passes both.
  EXPECT_LE(rates[0], 20.0) << os.str();
  EXPECT_GT(rates[1], 45.0) << os.str();
  EXPECT_LT(etas[1], 0.75) << os.str();
  EXPECT_GT(t->samples_per_s(), 45.0);
}

// Every zoo model at tiny size: a few dozen steps on a small fixed synthetic set, loss falls.
TEST(Trainer, LossFallsForEveryZooModel) {
  for (auto const& info : models::model_list()) {
    SCOPED_TRACE(info.name);
    auto g = models::build_graph(info.name, models::Size::kTiny, 0);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    CpuBackend be;
    TrainConfig c;
    c.loss = info.task == models::Task::kRegression ? LossKind::kMse : LossKind::kCrossEntropy;
    c.optimizer.kind = OptimizerKind::kAdam;
    c.optimizer.lr = 3e-3f;
    c.batch = 4;
    c.micro_batches = 2;
    c.steps = 20;
    c.seed = 1;
    c.data.samples = 8;
    auto data = make_data_source(c.data, *g, c.loss, c.seed);
    ASSERT_TRUE(data.is_ok()) << data.status().message();
    auto t = Trainer::create(c, *g, be, std::move(data).value());
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    ASSERT_TRUE((*t)->run(nullptr).is_ok());
    auto const& l = (*t)->losses();
    double const first = (l[0] + l[1]) / 2, last = (l[l.size() - 1] + l[l.size() - 2]) / 2;
    EXPECT_LT(last, 0.8 * first) << "loss " << first << " -> " << last;
  }
}

TEST(Trainer, ExportedOnnxLoadsWithTheTrainedValues) {
  auto const dir = std::filesystem::temp_directory_path() / ("gp_export_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string const src = (dir / "cnn.onnx").string(), out = (dir / "cnn.trained.onnx").string();
  ASSERT_TRUE(testing::tiny_cnn().save(src).is_ok());
  auto g = graph::load_onnx(src);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  CpuBackend be;
  auto t = make_trainer(*g, be, base_config());
  ASSERT_TRUE(t->run(nullptr).is_ok());
  std::map<std::string, graph::TensorData> values;
  for (auto const& [name, v] : t->trained_tensors()) {
    graph::TensorData d;
    d.dims = v.shape();
    d.bytes.resize(v.nbytes());
    std::memcpy(d.bytes.data(), v.raw(), v.nbytes());
    values.emplace(name, std::move(d));
  }
  ASSERT_TRUE(graph::export_trained_onnx(src, values, out).is_ok());
  auto back = graph::load_onnx(out);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  for (auto const& [name, v] : t->trained_tensors()) {
    auto id = back->find_tensor(name);
    ASSERT_TRUE(id.has_value()) << name;
    auto const& data = back->tensor(*id).data;
    ASSERT_TRUE(data) << name;
    ASSERT_EQ(data->bytes.size(), v.nbytes());
    EXPECT_EQ(std::memcmp(data->bytes.data(), v.raw(), v.nbytes()), 0) << name << " is not the trained value";
    // Weights and the BatchNorm running statistics alike.
    auto orig = g->tensor(*g->find_tensor(name)).data;
    EXPECT_NE(std::memcmp(orig->bytes.data(), v.raw(), v.nbytes()), 0) << name << " did not change in training";
  }
  EXPECT_EQ(t->executor().buffers().size(), 2u) << "bn.mean and bn.var are exported";
  // A value for a tensor the model does not have, or of the wrong shape, is refused.
  auto bad = values;
  bad.emplace("no_such_weight", values.begin()->second);
  EXPECT_FALSE(graph::export_trained_onnx(src, bad, out).is_ok());
  bad = values;
  bad.begin()->second.dims.push_back(1);
  EXPECT_FALSE(graph::export_trained_onnx(src, bad, out).is_ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gp::exec
