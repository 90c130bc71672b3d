#include "graph/cost_model.h"

#include <cmath>
#include "core/file_io.h"
#include "core/json_checked.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace gp::graph {

namespace {

double bytes_moved(OpGraph const& graph, Op const& op, int64_t samples) {
  double bytes = 0;
  for (TensorId t : op.inputs) {
    if (t != kNoTensor) bytes += static_cast<double>(graph.tensor(t).bytes(samples));
  }
  for (TensorId t : op.outputs) {
    if (t != kNoTensor) bytes += static_cast<double>(graph.tensor(t).bytes(samples));
  }
  return bytes;
}

}  // namespace

OpTime AnalyticCostModel::op_time(OpGraph const& graph, OpId id, int64_t samples, DeviceSpec const& device) const {
  Op const& op = graph.op(id);
  double const s = static_cast<double>(samples);
  double const flops_rate = device.peak_flops * options_.efficiency;
  double const bytes = bytes_moved(graph, op, samples);
  double const fwd_compute = op.fwd_flops_per_sample * s / flops_rate;
  double const fwd_memory = bytes / device.memory_bandwidth;
  OpTime t;
  t.fwd_s = (options_.fwd_overhead_s + std::max(fwd_compute, fwd_memory)) / device.speed;
  double const bwd_flops = op.bwd_flops_per_sample * s;
  if (bwd_flops <= 0 && op.bwd_flops_per_sample <= 0 && bytes <= 0) return t;
  double const bwd_total =
      options_.bwd_overhead_s + std::max(bwd_flops / flops_rate, 2.0 * bytes / device.memory_bandwidth);
  // Split by FLOPs between the input-gradient and the weight-gradient parts.
  double const weight_share =
      op.bwd_flops_per_sample > 0 ? op.bwd_weight_flops_per_sample / op.bwd_flops_per_sample : 0.0;
  t.bwd_weight_s = bwd_total * weight_share / device.speed;
  t.bwd_input_s = bwd_total * (1.0 - weight_share) / device.speed;
  return t;
}

// ---- profile JSON ----

using nlohmann::json;

std::string profile_to_json(MeasuredProfile const& profile) {
  json ops = json::array();
  for (OpProfile const& op : profile.ops) {
    ops.push_back(json{{"name", op.name},
                       {"type", op.type},
                       {"samples", op.samples},
                       {"fwd_s", op.fwd_s},
                       {"bwd_input_s", op.bwd_input_s},
                       {"bwd_weight_s", op.bwd_weight_s}});
  }
  json j{{"format", "graphpipe-profile"}, {"version", profile.version}, {"model", profile.model},
         {"device", profile.device},      {"threads", profile.threads}, {"ops", ops}};
  if (!profile.calibration.samples.empty())
    j["calibration"] = json{{"samples", profile.calibration.samples},
                            {"fwd_scale", profile.calibration.fwd_scale},
                            {"bwd_scale", profile.calibration.bwd_scale},
                            {"concurrency", profile.calibration.concurrency}};
  return j.dump(1) + "\n";
}

Result<MeasuredProfile> profile_from_json(std::string const& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (json::exception const& e) {
    return parse_error(std::string("profile JSON: not valid JSON (") + e.what() + ")");
  }
  MeasuredProfile profile;
  try {
    if (!j.is_object() || j.value("format", std::string()) != "graphpipe-profile")
      return parse_error("profile JSON: not a graphpipe profile (\"format\": \"graphpipe-profile\" is missing)");
    profile.version = json_get<int>(j.at("version"));
    if (profile.version != MeasuredProfile::kFormatVersion)
      return parse_error("profile JSON: version " + std::to_string(profile.version) + " is not supported (expected " +
                         std::to_string(MeasuredProfile::kFormatVersion) + "); re-run 'graphpipe profile'");
    profile.model = j.value("model", std::string());
    profile.device = j.value("device", std::string());
    profile.threads = json_value<int>(j, "threads", 0);
    if (j.contains("calibration")) {
      json const& c = j.at("calibration");
      Calibration& cal = profile.calibration;
      cal.samples = json_get<std::vector<int64_t>>(c.at("samples"));
      cal.fwd_scale = json_get<std::vector<double>>(c.at("fwd_scale"));
      cal.bwd_scale = json_get<std::vector<double>>(c.at("bwd_scale"));
      cal.concurrency = json_value<int>(c, "concurrency", 1);
      if (cal.fwd_scale.size() != cal.samples.size() || cal.bwd_scale.size() != cal.samples.size())
        return parse_error("profile JSON: calibration needs one fwd_scale and bwd_scale per sample count");
      for (std::size_t k = 0; k < cal.samples.size(); ++k)
        if (!(cal.fwd_scale[k] > 0) || !(cal.bwd_scale[k] > 0))
          return parse_error("profile JSON: calibration scales must be positive");
    }
    json const& ops = j.at("ops");
    if (!ops.is_array()) return parse_error("profile JSON: 'ops' must be an array");
    for (std::size_t i = 0; i < ops.size(); ++i) {
      std::string const where = "profile JSON: ops[" + std::to_string(i) + "]";
      OpProfile op;
      op.name = ops[i].at("name").get<std::string>();
      op.type = ops[i].value("type", std::string());
      op.samples = json_get<std::vector<int64_t>>(ops[i].at("samples"));
      op.fwd_s = json_get<std::vector<double>>(ops[i].at("fwd_s"));
      op.bwd_input_s = json_get<std::vector<double>>(ops[i].at("bwd_input_s"));
      op.bwd_weight_s = json_get<std::vector<double>>(ops[i].at("bwd_weight_s"));
      std::size_t const n = op.samples.size();
      if (n == 0) return parse_error(where + " ('" + op.name + "') has no samples");
      if (op.fwd_s.size() != n || op.bwd_input_s.size() != n || op.bwd_weight_s.size() != n)
        return parse_error(where + " ('" + op.name +
                           "'): fwd_s, bwd_input_s and bwd_weight_s need one value per sample count");
      for (std::size_t k = 0; k < n; ++k) {
        if (op.samples[k] <= 0 || (k > 0 && op.samples[k] <= op.samples[k - 1]))
          return parse_error(where + " ('" + op.name + "'): samples must be positive and ascending");
        if (op.fwd_s[k] < 0 || op.bwd_input_s[k] < 0 || op.bwd_weight_s[k] < 0)
          return parse_error(where + " ('" + op.name + "'): negative time");
      }
      profile.ops.push_back(std::move(op));
    }
  } catch (json::exception const& e) {
    return parse_error(std::string("profile JSON: ") + e.what());
  } catch (std::range_error const& e) {
    return parse_error(std::string("profile JSON: ") + e.what());
  }
  return profile;
}

Status write_profile_file(MeasuredProfile const& profile, std::string const& path) {
  return write_file_atomic(path, profile_to_json(profile), "profile");
}

Result<MeasuredProfile> read_profile_file(std::string const& path) {
  ASSIGN_OR_RETURN(std::string text, read_whole_file(path, "profile"));
  auto profile = profile_from_json(text);
  if (!profile) return profile.status().with_context(path);
  return profile;
}

// ---- measured model ----

MeasuredCostModel::MeasuredCostModel(MeasuredProfile profile, std::shared_ptr<CostModel const> fallback)
    : profile_(std::move(profile)), fallback_(std::move(fallback)) {
  for (std::size_t i = 0; i < profile_.ops.size(); ++i) by_name_.emplace(profile_.ops[i].name, i);
}

namespace {

// Piecewise linear in the sample count; proportional beyond the last point; flat before the first.
double interpolate(std::vector<int64_t> const& xs, std::vector<double> const& ys, int64_t x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back() * static_cast<double>(x) / static_cast<double>(xs.back());
  auto hi = std::lower_bound(xs.begin(), xs.end(), x);
  std::size_t const k = hi - xs.begin();
  if (xs[k] == x) return ys[k];
  double const f = static_cast<double>(x - xs[k - 1]) / static_cast<double>(xs[k] - xs[k - 1]);
  return ys[k - 1] + f * (ys[k] - ys[k - 1]);
}

}  // namespace

OpTime MeasuredCostModel::op_time(OpGraph const& graph, OpId id, int64_t samples, DeviceSpec const& device) const {
  auto it = by_name_.find(graph.op(id).name);
  if (it == by_name_.end()) return fallback_ ? fallback_->op_time(graph, id, samples, device) : OpTime{};
  OpProfile const& p = profile_.ops[it->second];
  double fs = 1, bs = 1;
  if (auto const& cal = profile_.calibration; !cal.samples.empty()) {
    // The nearest measured sample count (ratio distance).
    std::size_t best = 0;
    for (std::size_t k = 1; k < cal.samples.size(); ++k)
      if (std::abs(std::log(double(cal.samples[k]) / double(samples))) <
          std::abs(std::log(double(cal.samples[best]) / double(samples))))
        best = k;
    fs = cal.fwd_scale[best];
    bs = cal.bwd_scale[best];
  }
  return {fs * interpolate(p.samples, p.fwd_s, samples) / device.speed,
          bs * interpolate(p.samples, p.bwd_input_s, samples) / device.speed,
          bs * interpolate(p.samples, p.bwd_weight_s, samples) / device.speed};
}

std::vector<std::string> MeasuredCostModel::missing_ops(OpGraph const& graph) const {
  std::vector<std::string> missing;
  for (Op const& op : graph.ops()) {
    if (!by_name_.count(op.name)) missing.push_back(op.name);
  }
  return missing;
}

}  // namespace gp::graph
