#include "partition/plan.h"
#include "core/file_io.h"
#include "core/json_checked.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace gp::partition {

using nlohmann::json;

namespace {

json stage_to_json(PlanStage const& s) {
  return json{{"id", s.id},
              {"nodes", s.nodes},
              {"devices", s.devices},
              {"replicas", s.replicas},
              {"depth", s.depth},
              {"fwd_s", s.fwd_s},
              {"bwd_input_s", s.bwd_input_s},
              {"bwd_weight_s", s.bwd_weight_s},
              {"comm_s", s.comm_s},
              {"allreduce_s", s.allreduce_s},
              {"update_s", s.update_s},
              {"time_s", s.time_s},
              {"weight_bytes", s.weight_bytes},
              {"optimizer_bytes", s.optimizer_bytes},
              {"activation_bytes_per_micro_batch", s.activation_bytes_per_micro_batch},
              {"in_flight", s.in_flight},
              {"recompute", s.recompute},
              {"stash_bytes_per_micro_batch", s.stash_bytes_per_micro_batch},
              {"peak_memory_bytes", s.peak_memory_bytes}};
}

json edge_to_json(PlanEdge const& e) {
  return json{{"src", e.src},
              {"dst", e.dst},
              {"tensors", e.tensors},
              {"bytes_per_micro_batch", e.bytes_per_micro_batch},
              {"transfer_s", e.transfer_s}};
}

json tied_to_json(PlanTiedWeight const& t) {
  return json{{"name", t.name}, {"bytes", t.bytes}, {"stages", t.stages}, {"allreduce_s", t.allreduce_s}};
}

// Reads j[key] into out; a missing key or a wrong type names the key and where it is.
template <typename T>
Status get(json const& j, char const* key, T& out, std::string const& where) {
  auto it = j.find(key);
  if (it == j.end()) return parse_error("plan JSON: " + where + " has no '" + key + "'");
  if (!json_fits<T>(*it))
    return parse_error("plan JSON: " + where + "'s '" + key +
                       "' has the wrong type or is out of range: " + it->dump().substr(0, 60));
  try {
    out = it->template get<T>();
  } catch (json::exception const& e) {
    return parse_error("plan JSON: " + where + "'s '" + key + "' has the wrong type (" + e.what() + ")");
  }
  return Status::ok();
}

Status stage_from_json(json const& j, PlanStage& s, std::string const& where) {
  if (!j.is_object()) return parse_error("plan JSON: " + where + " must be an object");
  RETURN_IF_ERROR(get(j, "id", s.id, where));
  RETURN_IF_ERROR(get(j, "nodes", s.nodes, where));
  RETURN_IF_ERROR(get(j, "devices", s.devices, where));
  RETURN_IF_ERROR(get(j, "replicas", s.replicas, where));
  RETURN_IF_ERROR(get(j, "depth", s.depth, where));
  RETURN_IF_ERROR(get(j, "fwd_s", s.fwd_s, where));
  RETURN_IF_ERROR(get(j, "bwd_input_s", s.bwd_input_s, where));
  RETURN_IF_ERROR(get(j, "bwd_weight_s", s.bwd_weight_s, where));
  RETURN_IF_ERROR(get(j, "comm_s", s.comm_s, where));
  RETURN_IF_ERROR(get(j, "allreduce_s", s.allreduce_s, where));
  if (j.contains("update_s")) RETURN_IF_ERROR(get(j, "update_s", s.update_s, where));  // optional (newer plans)
  RETURN_IF_ERROR(get(j, "time_s", s.time_s, where));
  RETURN_IF_ERROR(get(j, "weight_bytes", s.weight_bytes, where));
  RETURN_IF_ERROR(get(j, "optimizer_bytes", s.optimizer_bytes, where));
  RETURN_IF_ERROR(get(j, "activation_bytes_per_micro_batch", s.activation_bytes_per_micro_batch, where));
  RETURN_IF_ERROR(get(j, "in_flight", s.in_flight, where));
  // Optional (plans written before recomputation existed keep every activation).
  if (j.contains("recompute")) RETURN_IF_ERROR(get(j, "recompute", s.recompute, where));
  if (j.contains("stash_bytes_per_micro_batch"))
    RETURN_IF_ERROR(get(j, "stash_bytes_per_micro_batch", s.stash_bytes_per_micro_batch, where));
  RETURN_IF_ERROR(get(j, "peak_memory_bytes", s.peak_memory_bytes, where));
  return Status::ok();
}

Status edge_from_json(json const& j, PlanEdge& e, std::string const& where) {
  if (!j.is_object()) return parse_error("plan JSON: " + where + " must be an object");
  RETURN_IF_ERROR(get(j, "src", e.src, where));
  RETURN_IF_ERROR(get(j, "dst", e.dst, where));
  RETURN_IF_ERROR(get(j, "tensors", e.tensors, where));
  RETURN_IF_ERROR(get(j, "bytes_per_micro_batch", e.bytes_per_micro_batch, where));
  RETURN_IF_ERROR(get(j, "transfer_s", e.transfer_s, where));
  return Status::ok();
}

Status tied_from_json(json const& j, PlanTiedWeight& t, std::string const& where) {
  if (!j.is_object()) return parse_error("plan JSON: " + where + " must be an object");
  RETURN_IF_ERROR(get(j, "name", t.name, where));
  RETURN_IF_ERROR(get(j, "bytes", t.bytes, where));
  RETURN_IF_ERROR(get(j, "stages", t.stages, where));
  RETURN_IF_ERROR(get(j, "allreduce_s", t.allreduce_s, where));
  return Status::ok();
}

}  // namespace

int64_t memory_of(Plan const& plan, int d) {
  if (d >= 0 && d < static_cast<int>(plan.device_memory.size())) return plan.device_memory[d];
  return plan.device_memory_bytes;
}

int64_t stage_memory_limit(Plan const& plan, PlanStage const& stage) {
  int64_t limit = plan.device_memory_bytes;
  if (!stage.devices.empty()) limit = memory_of(plan, stage.devices.front());
  for (int d : stage.devices) limit = std::min(limit, memory_of(plan, d));
  return limit;
}

std::string plan_to_json(Plan const& plan) {
  json stages = json::array();
  for (auto const& s : plan.stages) stages.push_back(stage_to_json(s));
  json edges = json::array();
  for (auto const& e : plan.edges) edges.push_back(edge_to_json(e));
  json tied = json::array();
  for (auto const& t : plan.tied_weights) tied.push_back(tied_to_json(t));
  json j{{"format", "graphpipe-plan"},
         {"version", plan.version},
         {"model", plan.model},
         {"planner", plan.planner},
         {"num_devices", plan.num_devices},
         {"device_memory_bytes", plan.device_memory_bytes},
         {"device_memory", plan.device_memory},
         {"batch", plan.batch},
         {"micro_batch", plan.micro_batch},
         {"num_micro_batches", plan.num_micro_batches},
         {"depth", plan.depth},
         {"tau_s", plan.tau_s},
         {"time_per_sample_s", plan.time_per_sample_s},
         {"step_time_s", plan.step_time_s},
         {"samples_per_s", plan.samples_per_s},
         {"search_time_s", plan.search_time_s},
         {"states_explored", plan.states_explored},
         {"notes", plan.notes},
         {"stages", stages},
         {"edges", edges},
         {"tied_weights", tied}};
  return j.dump(2) + "\n";
}

Result<Plan> plan_from_json(std::string const& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (json::exception const& e) {
    return parse_error(std::string("plan JSON: not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) return parse_error("plan JSON: the top level must be an object");
  Plan plan;
  std::string const top = "the plan";
  RETURN_IF_ERROR(get(j, "version", plan.version, top));
  if (plan.version != kPlanFormatVersion)
    return parse_error("plan JSON: format version " + std::to_string(plan.version) +
                       " is not supported (this graphpipe reads version " + std::to_string(kPlanFormatVersion) +
                       "); re-run 'graphpipe partition'");
  RETURN_IF_ERROR(get(j, "model", plan.model, top));
  RETURN_IF_ERROR(get(j, "planner", plan.planner, top));
  RETURN_IF_ERROR(get(j, "num_devices", plan.num_devices, top));
  RETURN_IF_ERROR(get(j, "device_memory_bytes", plan.device_memory_bytes, top));
  if (j.contains("device_memory")) RETURN_IF_ERROR(get(j, "device_memory", plan.device_memory, top));  // optional
  RETURN_IF_ERROR(get(j, "batch", plan.batch, top));
  RETURN_IF_ERROR(get(j, "micro_batch", plan.micro_batch, top));
  RETURN_IF_ERROR(get(j, "num_micro_batches", plan.num_micro_batches, top));
  RETURN_IF_ERROR(get(j, "depth", plan.depth, top));
  RETURN_IF_ERROR(get(j, "tau_s", plan.tau_s, top));
  RETURN_IF_ERROR(get(j, "time_per_sample_s", plan.time_per_sample_s, top));
  RETURN_IF_ERROR(get(j, "step_time_s", plan.step_time_s, top));
  RETURN_IF_ERROR(get(j, "samples_per_s", plan.samples_per_s, top));
  RETURN_IF_ERROR(get(j, "search_time_s", plan.search_time_s, top));
  RETURN_IF_ERROR(get(j, "states_explored", plan.states_explored, top));
  if (j.contains("notes")) RETURN_IF_ERROR(get(j, "notes", plan.notes, top));
  auto stages = j.find("stages");
  if (stages == j.end() || !stages->is_array()) return parse_error("plan JSON: 'stages' must be an array");
  for (std::size_t i = 0; i < stages->size(); ++i) {
    PlanStage s;
    RETURN_IF_ERROR(stage_from_json((*stages)[i], s, "stages[" + std::to_string(i) + "]"));
    plan.stages.push_back(std::move(s));
  }
  auto edges = j.find("edges");
  if (edges == j.end() || !edges->is_array()) return parse_error("plan JSON: 'edges' must be an array");
  for (std::size_t i = 0; i < edges->size(); ++i) {
    PlanEdge e;
    RETURN_IF_ERROR(edge_from_json((*edges)[i], e, "edges[" + std::to_string(i) + "]"));
    plan.edges.push_back(std::move(e));
  }
  if (auto tied = j.find("tied_weights"); tied != j.end()) {  // optional (plans written before they were priced)
    if (!tied->is_array()) return parse_error("plan JSON: 'tied_weights' must be an array");
    for (std::size_t i = 0; i < tied->size(); ++i) {
      PlanTiedWeight t;
      RETURN_IF_ERROR(tied_from_json((*tied)[i], t, "tied_weights[" + std::to_string(i) + "]"));
      plan.tied_weights.push_back(std::move(t));
    }
  }
  RETURN_IF_ERROR(validate_plan(plan));
  return plan;
}

void price_updates(Plan& plan, double seconds_per_weight_byte) {
  for (PlanStage& s : plan.stages) s.update_s = static_cast<double>(s.weight_bytes) * seconds_per_weight_byte;
}

Status write_plan_file(Plan const& plan, std::string const& path) {
  return write_file_atomic(path, plan_to_json(plan), "plan file");
}

Result<Plan> read_plan_file(std::string const& path) {
  ASSIGN_OR_RETURN(std::string text, read_whole_file(path, "plan file"));
  auto plan = plan_from_json(text);
  if (!plan) return plan.status().with_context(path);
  return plan;
}

Status validate_plan(Plan const& plan) {
  if (plan.version != kPlanFormatVersion)
    return invalid_argument("plan: format version " + std::to_string(plan.version) + ", expected " +
                            std::to_string(kPlanFormatVersion));
  if (plan.stages.empty()) return invalid_argument("plan: no stages");
  if (plan.micro_batch <= 0)
    return invalid_argument("plan: micro_batch must be positive, got " + std::to_string(plan.micro_batch));
  if (plan.num_micro_batches <= 0 || plan.batch != plan.micro_batch * plan.num_micro_batches)
    return invalid_argument("plan: batch " + std::to_string(plan.batch) + " != micro_batch " +
                            std::to_string(plan.micro_batch) + " x num_micro_batches " +
                            std::to_string(plan.num_micro_batches));
  if (!plan.device_memory.empty() && static_cast<int>(plan.device_memory.size()) != plan.num_devices)
    return invalid_argument("plan: device_memory lists " + std::to_string(plan.device_memory.size()) +
                            " devices but num_devices is " + std::to_string(plan.num_devices));
  int const k = static_cast<int>(plan.stages.size());
  std::set<std::string> nodes;
  std::set<int> devices;
  for (int i = 0; i < k; ++i) {
    PlanStage const& s = plan.stages[i];
    std::string const name = "stage " + std::to_string(i);
    if (s.id != i)
      return invalid_argument("plan: stages[" + std::to_string(i) + "] has id " + std::to_string(s.id) +
                              "; ids must be 0..n-1 in order");
    if (s.nodes.empty()) return invalid_argument("plan: " + name + " has no nodes");
    for (auto const& n : s.nodes) {
      if (!nodes.insert(n).second)
        return invalid_argument("plan: node '" + n + "' is in more than one stage (again in " + name + ")");
    }
    if (s.replicas < 1 || s.replicas != static_cast<int>(s.devices.size()))
      return invalid_argument("plan: " + name + " has replicas " + std::to_string(s.replicas) + " but " +
                              std::to_string(s.devices.size()) + " devices");
    for (int d : s.devices) {
      if (d < 0 || (plan.num_devices > 0 && d >= plan.num_devices))
        return invalid_argument("plan: " + name + " uses device " + std::to_string(d) + " outside 0.." +
                                std::to_string(plan.num_devices - 1));
      if (!devices.insert(d).second)
        return invalid_argument("plan: device " + std::to_string(d) + " is used by two stages (again by " + name + ")");
    }
  }
  std::vector<std::set<int>> succ(k);
  for (std::size_t e = 0; e < plan.edges.size(); ++e) {
    PlanEdge const& edge = plan.edges[e];
    if (edge.src < 0 || edge.src >= k || edge.dst < 0 || edge.dst >= k)
      return invalid_argument("plan: edge " + std::to_string(e) + " (" + std::to_string(edge.src) + " -> " +
                              std::to_string(edge.dst) + ") names a stage that does not exist");
    if (edge.src >= edge.dst)
      return invalid_argument("plan: edge " + std::to_string(edge.src) + " -> " + std::to_string(edge.dst) +
                              " goes backwards; stage ids must be a topological order (no cycles)");
    if (!succ[edge.src].insert(edge.dst).second)
      return invalid_argument("plan: edge " + std::to_string(edge.src) + " -> " + std::to_string(edge.dst) +
                              " appears twice");
  }
  int depth = 0;
  std::vector<int> expect(k, 1);
  for (int i = k - 1; i >= 0; --i) {
    for (int t : succ[i]) expect[i] = std::max(expect[i], expect[t] + 1);
    if (plan.stages[i].depth != expect[i])
      return invalid_argument("plan: stage " + std::to_string(i) + " has depth " +
                              std::to_string(plan.stages[i].depth) + " but its longest path to a sink has " +
                              std::to_string(expect[i]) + " stages");
    depth = std::max(depth, expect[i]);
  }
  if (plan.depth != depth)
    return invalid_argument("plan: depth " + std::to_string(plan.depth) + " but the stage graph's depth is " +
                            std::to_string(depth));
  for (auto const& t : plan.tied_weights) {
    bool increasing = t.stages.size() >= 2;
    for (std::size_t i = 0; increasing && i < t.stages.size(); ++i)
      increasing = t.stages[i] >= 0 && t.stages[i] < k && (i == 0 || t.stages[i] > t.stages[i - 1]);
    if (!increasing || t.bytes < 0 || !(t.allreduce_s >= 0))
      return invalid_argument("plan: tied weight '" + t.name +
                              "' must list two or more existing stages, increasing, with bytes and allreduce_s >= 0");
  }
  return Status::ok();
}

}  // namespace gp::partition
