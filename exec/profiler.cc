#include "exec/profiler.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <limits>
#include <random>
#include <thread>

#include "exec/autodiff.h"
#include "exec/stage_executor.h"
#include "graph/ops/registry.h"
#include "kernels/bf16.h"

namespace gp::exec {

Tensor random_normal(std::vector<int64_t> const& shape, std::mt19937& rng, DType dtype) {
  Tensor t(shape);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  if (dtype != DType::kBFloat16 && dtype != DType::kFloat16) return t;
  Tensor low(shape, dtype);
  if (dtype == DType::kBFloat16) {
    kernels::float_to_bf16(t.data<float>(), t.numel(), low.data<uint16_t>());
  } else {
    kernels::float_to_half(t.data<float>(), t.numel(), low.data<uint16_t>());
  }
  return low;
}

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
Result<double> time_min(Backend& backend, int repeats, F&& f) {
  double best = std::numeric_limits<double>::infinity();
  RETURN_IF_ERROR(f());  // warm-up: primitive creation and caches
  for (int r = 0; r < repeats; ++r) {
    auto const t0 = Clock::now();
    RETURN_IF_ERROR(f());
    RETURN_IF_ERROR(backend.synchronize());
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

bool float_data(DType d) { return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16; }

// Mean forward and backward time of the whole graph in `StageExecutor`, with `copies` executors
// running at once on their own threads (what that many workers sharing the machine, or a GPU,
// see), each on its own backend where options.calibration_backend makes them. The executors start
// every pass together (a barrier before each forward and each backward), so that each pass is
// timed while the others run theirs: without it an executor that started late (its set-up, its
// warm-up) ran its timed passes partly alone, and two workers sharing an H200 were predicted 1.2 to
// 1.4x faster than they trained, the prediction moving by 25% from run to run.
Status executor_times(graph::OpGraph const& graph, Backend& profiled, int64_t n, ProfileOptions const& options,
                      double& fwd_s, double& bwd_s) {
  int const copies = std::max(1, options.calibrate_concurrency);
  std::vector<Status> status(copies);
  std::vector<double> fwd(copies), bwd(copies);
  std::vector<std::unique_ptr<Backend>> own(copies);
  for (int c = 1; c < copies && options.calibration_backend; ++c) {
    ASSIGN_OR_RETURN(own[c], options.calibration_backend());
  }
  std::barrier together(copies);
  auto one = [&](int c) {
    // Leaving (done, or failed at any point) drops this copy from every later pass's barrier, so
    // a failed executor never holds the others up.
    struct Leave {
      std::barrier<>& b;
      ~Leave() { b.arrive_and_drop(); }
    } const leave{together};
    if (options.thread_setup) options.thread_setup();
    Backend& backend = own[c] ? *own[c] : profiled;
    auto ex = StageExecutor::create(graph, backend);
    if (!ex.is_ok()) {
      status[c] = ex.status();
      return;
    }
    std::mt19937 rng(7 + c);
    TensorMap inputs;
    for (graph::TensorId t : graph.inputs()) {
      auto const& info = graph.tensor(t);
      auto const shape = info.shape.concrete(n);
      if (float_data(info.dtype)) {
        auto d = backend.to_device(random_normal(shape, rng, info.dtype));
        if (!d.is_ok()) {
          status[c] = d.status();
          return;
        }
        inputs[t] = std::move(d).value();
      } else {
        inputs[t] = backend.zeros(shape, info.dtype);
      }
    }
    Tensor output_grad;                                     // made once, outside the timed region (see below)
    for (int r = 0; r <= options.calibrate_repeats; ++r) {  // r == 0 warms up
      TensorMap outputs, input_grads;
      together.arrive_and_wait();
      auto const t0 = Clock::now();
      Status s = (*ex)->forward(r, inputs, outputs, true, static_cast<uint64_t>(r));
      // The forward's work must be done before its time is read: on a GPU the calls only enqueue,
      // and without this the forward's kernels were counted in the backward (a ResNet-18 profile
      // on an H100 said forward x0.35, backward x0.98).
      if (s.is_ok()) s = backend.synchronize();
      auto const t1 = Clock::now();
      // The output gradient is drawn on the host and copied once, before the backward's clock
      // starts: it used to be drawn inside it every repeat, which for a GPT's [16, 256, 8192]
      // logits (134 MB of normal draws) made a GPU profile's backward 25x the executor's.
      // The backward gets its own copy (it may work in place), made before the clock too.
      graph::TensorId const out = graph.outputs()[0];
      TensorMap grads;
      if (s.is_ok() && !output_grad.defined()) {
        auto g = backend.to_device(random_normal(outputs.at(out).shape(), rng, outputs.at(out).dtype()));
        s = g.status();
        if (s.is_ok()) output_grad = std::move(g).value();
      }
      if (s.is_ok()) {
        auto g = backend.clone(output_grad);
        s = g.status();
        if (s.is_ok()) grads[out] = std::move(g).value();
      }
      if (s.is_ok()) s = backend.synchronize();
      if (!s.is_ok()) {
        status[c] = s;
        return;
      }
      together.arrive_and_wait();
      auto const t1b = Clock::now();
      if (s.is_ok()) s = (*ex)->backward(r, grads, input_grads);
      if (s.is_ok()) s = backend.synchronize();
      auto const t2 = Clock::now();
      if (!s.is_ok()) {
        status[c] = s;
        return;
      }
      if (r > 0) {
        fwd[c] += std::chrono::duration<double>(t1 - t0).count() / options.calibrate_repeats;
        bwd[c] += std::chrono::duration<double>(t2 - t1b).count() / options.calibrate_repeats;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 1; c < copies; ++c) threads.emplace_back(one, c);
  one(0);  // the calling thread runs one copy itself (its thread pool is already warm)
  for (auto& t : threads) t.join();
  for (Status const& s : status) RETURN_IF_ERROR(s);
  fwd_s = bwd_s = 0;
  for (int c = 0; c < copies; ++c) {
    fwd_s += fwd[c] / copies;
    bwd_s += bwd[c] / copies;
  }
  return Status::ok();
}

}  // namespace

Result<graph::MeasuredProfile> profile_graph(graph::OpGraph const& graph, Backend& backend,
                                             ProfileOptions const& options) {
  if (options.samples.empty()) return invalid_argument("profile: no micro-batch sizes given");
  for (std::size_t i = 0; i < options.samples.size(); ++i)
    if (options.samples[i] < 1 || (i > 0 && options.samples[i] <= options.samples[i - 1]))
      return invalid_argument("profile: micro-batch sizes must be positive and ascending");
  if (options.repeats < 1) return invalid_argument("profile: repeats must be >= 1");
  ASSIGN_OR_RETURN(AutodiffPlan plan, plan_autodiff(graph));
  for (graph::OpId id : plan.forward_order) RETURN_IF_ERROR(backend.supports(graph.op(id), graph));

  std::vector<Tensor> statics(graph.tensors().size());
  for (auto const& t : graph.tensors())
    if ((t.role == graph::TensorRole::kWeight || t.role == graph::TensorRole::kConstant) && t.data) {
      ASSIGN_OR_RETURN(statics[t.id], backend.to_device(Tensor::from_data(*t.data)));
    }

  graph::MeasuredProfile profile;
  profile.model = options.model_name.empty() ? graph.name() : options.model_name;
  profile.device = backend.name() + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
  std::vector<graph::OpProfile> ops(plan.forward_order.size());
  for (std::size_t k = 0; k < ops.size(); ++k) {
    auto const& op = graph.op(plan.forward_order[k]);
    ops[k].name = op.name;
    ops[k].type = op.type;
  }
  std::mt19937 rng(1);
  for (int64_t n : options.samples) {
    if (options.on_size) options.on_size(n);
    std::vector<Tensor> values = statics;
    for (graph::TensorId t : graph.inputs()) {
      auto const& info = graph.tensor(t);
      auto const shape = info.shape.concrete(n);
      if (float_data(info.dtype)) {
        ASSIGN_OR_RETURN(values[t], backend.to_device(random_normal(shape, rng, info.dtype)));
      } else {
        values[t] = backend.zeros(shape, info.dtype);  // index 0 is valid for every table
      }
    }
    for (std::size_t k = 0; k < plan.forward_order.size(); ++k) {
      graph::OpId const id = plan.forward_order[k];
      auto const& op = graph.op(id);
      std::vector<Tensor> args(op.inputs.size()), outs;
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        if (op.inputs[i] != graph::kNoTensor) args[i] = values[op.inputs[i]];
      OpCall call{op, graph, true, 1, n};
      Saved saved;
      ASSIGN_OR_RETURN(double fwd, time_min(backend, options.repeats, [&] {
                         outs.clear();
                         saved = Saved{};
                         return backend.forward(call, args, outs, &saved);
                       }));
      for (std::size_t j = 0; j < op.outputs.size() && j < outs.size(); ++j)
        if (op.outputs[j] != graph::kNoTensor) values[op.outputs[j]] = outs[j];
      double bwd_in = 0, bwd_w = 0;
      if (plan.runs_backward[id]) {
        std::vector<Tensor> gout(op.outputs.size());
        for (std::size_t j = 0; j < op.outputs.size() && j < outs.size(); ++j) {
          if (op.outputs[j] != graph::kNoTensor && plan.requires_grad[op.outputs[j]] && outs[j].defined()) {
            ASSIGN_OR_RETURN(gout[j], backend.to_device(random_normal(outs[j].shape(), rng, outs[j].dtype())));
          }
        }
        std::vector<bool> needs(op.inputs.size(), false);
        bool any = false;
        for (std::size_t i = 0; i < op.inputs.size(); ++i) {
          graph::TensorId t = op.inputs[i];
          needs[i] = t != graph::kNoTensor && plan.requires_grad[t] && !plan.trainable[t];
          any = any || needs[i];
        }
        auto weight_slots = [&] {
          std::vector<Tensor> wg(op.inputs.size());
          for (std::size_t i = 0; i < op.inputs.size(); ++i)
            if (op.inputs[i] != graph::kNoTensor && plan.trainable[op.inputs[i]])
              wg[i] = backend.zeros(statics[op.inputs[i]].shape());
          return wg;
        };
        // An op whose weight gradients come with its input gradient (BatchNorm, LayerNorm: one call
        // computes all) runs one backward call in training, split schedule or not (StageExecutor):
        // that call is its B, and it has no W. Timing backward_input and backward_weight apart would
        // count the whole backward twice.
        bool const w_with_b = any && plan.has_weight_grad[id] && op.def && op.def->weight_grads_in_b;
        if (w_with_b) {
          std::vector<Tensor> gin, wg = weight_slots();
          ASSIGN_OR_RETURN(bwd_in, time_min(backend, options.repeats,
                                            [&] { return backend.backward(call, saved, gout, needs, gin, wg); }));
        } else {
          if (any) {
            std::vector<Tensor> gin;
            ASSIGN_OR_RETURN(bwd_in, time_min(backend, options.repeats,
                                              [&] { return backend.backward_input(call, saved, gout, needs, gin); }));
          }
          if (plan.has_weight_grad[id]) {
            std::vector<Tensor> wg = weight_slots();
            ASSIGN_OR_RETURN(bwd_w, time_min(backend, options.repeats,
                                             [&] { return backend.backward_weight(call, saved, gout, wg); }));
          }
        }
      }
      ops[k].samples.push_back(n);
      ops[k].fwd_s.push_back(fwd);
      ops[k].bwd_input_s.push_back(bwd_in);
      ops[k].bwd_weight_s.push_back(bwd_w);
    }
  }
  profile.ops = std::move(ops);
  profile.threads = options.threads;
  bool has_weights = !graph.outputs().empty();
  for (auto const& t : graph.tensors()) has_weights = has_weights && (t.role != graph::TensorRole::kWeight || t.data);
  if (options.calibrate_concurrency > 0 && has_weights) {
    graph::Calibration& cal = profile.calibration;
    cal.concurrency = options.calibrate_concurrency;
    for (std::size_t k = 0; k < options.samples.size(); ++k) {
      double sum_f = 0, sum_b = 0;
      for (auto const& op : profile.ops) {
        sum_f += op.fwd_s[k];
        sum_b += op.bwd_input_s[k] + op.bwd_weight_s[k];
      }
      double fwd = 0, bwd = 0;
      RETURN_IF_ERROR(executor_times(graph, backend, options.samples[k], options, fwd, bwd)
                          .with_context("calibrating the profile against the executor"));
      cal.samples.push_back(options.samples[k]);
      cal.fwd_scale.push_back(sum_f > 0 ? std::max(fwd / sum_f, 1e-3) : 1.0);
      cal.bwd_scale.push_back(sum_b > 0 ? std::max(bwd / sum_b, 1e-3) : 1.0);
    }
  }
  return profile;
}

}  // namespace gp::exec
