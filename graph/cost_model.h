// Per-operator costs for the planners (../shared/GRAPHPIPE.md, "Terms"): forward, input-grad and
// weight-grad time of an op for a number of samples on a device; the bytes of its weights,
// optimizer state and saved activations; the transfer time of bytes over a link.
//
// Two models:
//  - AnalyticCostModel, a roofline: t = overhead + max(FLOPs / (peak * efficiency),
//    bytes moved / memory bandwidth), divided by the device's relative speed. Bytes moved are the
//    op's inputs and outputs (weights once, activations per sample); backward moves twice the
//    forward bytes. The weight bytes and the per-kernel overhead make time sub-linear in the
//    micro-batch size, as measured kernels are.
//  - MeasuredCostModel, from a profile JSON (written by `graphpipe profile`, format below):
//    per-op times at profiled sample counts, interpolated linearly between them, extrapolated
//    proportionally above the largest, flat below the smallest; ops missing from the profile fall
//    back to a given model (missing_ops() lists them).
//
// Profile JSON, version 1:
//   {"format": "graphpipe-profile", "version": 1, "model": "mmt", "device": "cpu, 2 threads",
//    "ops": [{"name": "MatMul_3", "type": "MatMul", "samples": [1, 2, 4, 8],
//             "fwd_s": [...], "bwd_input_s": [...], "bwd_weight_s": [...]}, ...]}
// `samples` ascending and positive; the three time lists have the same length, seconds per call.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::graph {

// What a cost model needs to know of a device (partition::Device carries these numbers).
struct DeviceSpec {
  double peak_flops = 15.7e12;      // FLOP/s at speed 1
  double memory_bandwidth = 900e9;  // bytes/s
  double speed = 1.0;               // relative speed; times are divided by it
};

struct OpTime {
  double fwd_s = 0;
  double bwd_input_s = 0;
  double bwd_weight_s = 0;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  virtual OpTime op_time(OpGraph const& graph, OpId op, int64_t samples, DeviceSpec const& device) const = 0;

  // Memory, the same for every model (from the importer's accounting).
  static int64_t weight_bytes(OpGraph const& graph, OpId op) { return graph.op(op).param_bytes; }
  static int64_t optimizer_bytes(OpGraph const& graph, OpId op, double per_weight_byte) {
    return static_cast<int64_t>(per_weight_byte * static_cast<double>(weight_bytes(graph, op)));
  }
  static int64_t activation_bytes_per_sample(OpGraph const& graph, OpId op) {
    return graph.op(op).activation_bytes_per_sample;
  }
  static double transfer_time(double bytes, double bandwidth, double latency) {
    return bytes <= 0 ? 0.0 : latency + bytes / bandwidth;
  }
};

struct AnalyticOptions {
  double efficiency = 0.6;        // fraction of peak FLOP/s reached by large kernels
  double fwd_overhead_s = 5e-6;   // per op and forward (kernel launch and setup)
  double bwd_overhead_s = 10e-6;  // per op and backward
};

class AnalyticCostModel : public CostModel {
 public:
  explicit AnalyticCostModel(AnalyticOptions options = {}) : options_(options) {}
  std::string name() const override { return "analytic"; }
  OpTime op_time(OpGraph const& graph, OpId op, int64_t samples, DeviceSpec const& device) const override;

 private:
  AnalyticOptions options_;
};

struct OpProfile {
  std::string name, type;
  std::vector<int64_t> samples;
  std::vector<double> fwd_s, bwd_input_s, bwd_weight_s;
};

// What the per-op times miss, measured by running the whole executor (forward and backward of the
// graph, as training runs it, with as many copies at once as workers will share the machine):
// allocation, liveness bookkeeping, gradient accumulation, cold caches, memory-bandwidth
// contention. The cost model multiplies an op's time by the scale at the nearest sample count.
struct Calibration {
  std::vector<int64_t> samples;
  std::vector<double> fwd_scale, bwd_scale;  // executor time / sum of the ops' times
  int concurrency = 1;                       // executors run at once while measuring
};

struct MeasuredProfile {
  static constexpr int kFormatVersion = 1;
  int version = kFormatVersion;
  std::string model, device;
  int threads = 0;  // compute threads the ops ran with (0: not recorded)
  std::vector<OpProfile> ops;
  Calibration calibration;  // optional (empty samples: none)
};

std::string profile_to_json(MeasuredProfile const& profile);
Result<MeasuredProfile> profile_from_json(std::string const& text);                  // checks version and lists
Status write_profile_file(MeasuredProfile const& profile, std::string const& path);  // atomic
Result<MeasuredProfile> read_profile_file(std::string const& path);

class MeasuredCostModel : public CostModel {
 public:
  // `fallback` prices ops the profile lacks; null means such ops cost 0 (see missing_ops()).
  MeasuredCostModel(MeasuredProfile profile, std::shared_ptr<CostModel const> fallback);
  std::string name() const override { return "measured"; }
  OpTime op_time(OpGraph const& graph, OpId op, int64_t samples, DeviceSpec const& device) const override;
  std::vector<std::string> missing_ops(OpGraph const& graph) const;  // op names without a profile

 private:
  MeasuredProfile profile_;
  std::map<std::string, std::size_t> by_name_;
  std::shared_ptr<CostModel const> fallback_;
};

}  // namespace gp::graph
