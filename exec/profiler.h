// Measures per-operator forward, input-gradient and weight-gradient time on a backend at a few
// micro-batch sizes: the profile JSON that graph::MeasuredCostModel reads (graph/cost_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "graph/cost_model.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

struct ProfileOptions {
  std::vector<int64_t> samples = {1, 2, 4, 8};  // micro-batch sizes, ascending
  int repeats = 3;                              // timed calls per op and size (the minimum is kept)
  std::string model_name;
  std::function<void(int64_t samples)> on_size;  // progress callback (optional)
  // Calibrate against the whole executor (graph::Calibration) with this many executors at once,
  // each under the calling thread's thread budget; 0: no calibration.
  int calibrate_concurrency = 1;
  int calibrate_repeats = 3;
  std::function<void()> thread_setup;  // run first on each calibration thread (its thread budget)
  // When set, every calibration executor but the first runs on a backend of its own made by this
  // (as each worker thread has its own: on a GPU, its own stream), so that executors sharing one
  // GPU contend the way workers placed on it do. Unset: all of them share `backend` (the CPU's).
  std::function<Result<std::unique_ptr<Backend>>()> calibration_backend;
  int threads = 0;  // recorded in the profile (the calling thread's budget)
};

// Normal draws (mean 0, deviation 1) of `shape` in host memory, in `dtype`: float32, or bfloat16 or
// float16 (the float32 draws rounded); what the profiler feeds an op's float inputs and output
// gradients. (It gave float16 ops float32 gradients: `--precision fp16 profile --backend cuda`
// failed at the first Transpose of a GPT on the H200.)
Tensor random_normal(std::vector<int64_t> const& shape, std::mt19937& rng, DType dtype);

Result<graph::MeasuredProfile> profile_graph(graph::OpGraph const& graph, Backend& backend,
                                             ProfileOptions const& options);

}  // namespace gp::exec
