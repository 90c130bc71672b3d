// A partitioning plan: the stage graph, its devices and micro-batching, and the costs the planner
// predicted. Plain data; JSON form is versioned (kPlanFormatVersion). The scheduler and the
// simulator read everything they need from here, so `graphpipe simulate plan.json` needs no model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gp::partition {

inline constexpr int kPlanFormatVersion = 1;

struct PlanStage {
  int id = 0;
  std::vector<std::string> nodes;  // operator (or profile layer) names, in topological order
  std::vector<int> devices;        // device ids; devices.size() == replicas
  int replicas = 1;
  int depth = 1;  // longest path (in stages) to a sink, counting this stage
  // Costs per micro-batch on one replica (b / replicas samples), seconds:
  double fwd_s = 0;
  double bwd_input_s = 0;
  double bwd_weight_s = 0;
  double comm_s = 0;       // send+receive of boundary tensors
  double allreduce_s = 0;  // per step
  double update_s = 0;     // per step: the optimizer update of the stage's weights (0: not priced)
  double time_s = 0;       // T_s as in ../shared/GRAPHPIPE.md
  // Memory per device, bytes:
  int64_t weight_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activation_bytes_per_micro_batch = 0;  // saved activations of ONE micro-batch
  int64_t in_flight = 1;                         // micro-batches held (depth under 1F1B)
  // Activation recomputation (PipeDream-2BW's choice per stage): the stage keeps only its input
  // tensors for each micro-batch in flight (stash_bytes_per_micro_batch each) and reruns its
  // forward just before that micro-batch's backward, so backward costs fwd_s more and at most one
  // micro-batch's full activations are live at a time.
  bool recompute = false;
  int64_t stash_bytes_per_micro_batch = 0;  // the stage's input bytes of one micro-batch (set either way)
  // weights + optimizer + in_flight * activations, or with recompute
  // weights + optimizer + in_flight * stash + activations
  int64_t peak_memory_bytes = 0;
};

struct PlanEdge {
  int src = 0;  // stage ids
  int dst = 0;
  std::vector<std::string> tensors;   // tensor names crossing (or "nodeA->nodeB" for profiles)
  int64_t bytes_per_micro_batch = 0;  // forward activations (the gradient going back is the same size)
  double transfer_s = 0;              // one direction, one micro-batch
};

// A weight that several stages read (partition::SharedWeight): each of them trains a copy, and at
// STEP the devices of those stages (every replica: each copy takes the update) all-reduce the
// copies' gradients, before any update.
struct PlanTiedWeight {
  std::string name;
  int64_t bytes = 0;
  std::vector<int> stages;  // increasing, at least two
  double allreduce_s = 0;   // per step, over the devices of `stages`
};

struct Plan {
  int version = kPlanFormatVersion;
  std::string model;
  std::string planner;                 // "gpp", "pipedream", "piper", "balanced"
  int num_devices = 0;                 // devices in the cluster
  int64_t device_memory_bytes = 0;     // per device (the smallest, if heterogeneous)
  std::vector<int64_t> device_memory;  // per device id when the cluster is heterogeneous; empty: all the above
  int64_t batch = 0;                   // B
  int64_t micro_batch = 0;             // b
  int64_t num_micro_batches = 0;       // m = B / b
  std::vector<PlanStage> stages;       // ids 0..n-1, topological order of the stage graph
  std::vector<PlanEdge> edges;
  std::vector<PlanTiedWeight> tied_weights;  // empty: none (or a plan written before they were priced)
  int depth = 0;                             // D = max stage depth
  double tau_s = 0;                          // the bound on stage time per sample the search settled on
  double time_per_sample_s = 0;              // max_s T_s / b
  double step_time_s = 0;                    // (m + D - 1) * max_s T_s + the tied weights' all-reduces
  double samples_per_s = 0;                  // B / step_time_s
  double search_time_s = 0;
  int64_t states_explored = 0;
  std::string notes;  // planner remarks, e.g. "linearised: more than 50000 downsets"
};

// The memory of device `d`: device_memory[d] when the plan lists them, else device_memory_bytes.
int64_t memory_of(Plan const& plan, int d);
// The memory a stage must fit: the smallest memory_of among its devices.
int64_t stage_memory_limit(Plan const& plan, PlanStage const& stage);

std::string plan_to_json(Plan const& plan);                         // pretty-printed
Result<Plan> plan_from_json(std::string const& text);               // checks version and consistency
Status write_plan_file(Plan const& plan, std::string const& path);  // atomic (temp + rename)
Result<Plan> read_plan_file(std::string const& path);
// Sets every stage's update_s to its weight bytes times `seconds_per_weight_byte` (the optimizer
// update the simulator then prices at STEP).
void price_updates(Plan& plan, double seconds_per_weight_byte);
// Consistency: ids, every edge between existing stages, acyclic, depths, replicas == devices.size().
Status validate_plan(Plan const& plan);

}  // namespace gp::partition
