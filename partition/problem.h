// What every planner takes: a costed DAG of nodes (ONNX operators, or profiled layers from a
// PipeDream graph.txt), a cluster, a batch, and ONE shared stage-cost function, so that GPP, the
// sequential baselines, brute force, the scheduler and the simulator all agree on the cost of a plan
// (../shared/GRAPHPIPE.md, "Cost of a plan").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "partition/cluster.h"
#include "partition/plan.h"

namespace gp::partition {

// Time of one node for a given number of samples on one device (seconds).
struct NodeTime {
  double fwd_s = 0;
  double bwd_input_s = 0;   // input-gradient part of backward
  double bwd_weight_s = 0;  // weight-gradient part of backward (0 where not split)
  double bwd_s() const { return bwd_input_s + bwd_weight_s; }
  double total_s() const { return fwd_s + bwd_input_s + bwd_weight_s; }
};

struct Node {
  std::string name;                         // op name or profile layer name ("node4")
  std::string kind;                         // op type or layer description
  int64_t weight_bytes = 0;                 // trainable parameters
  int64_t activation_bytes_per_sample = 0;  // saved for backward, per sample
};

// A trainable weight that several nodes read (a tied embedding and output projection; Llama's
// rotary tables exported as initializers every layer reads). Its bytes count in the weight_bytes
// of its first reader only; a stage that reads it without holding that reader trains a copy
// (stage_sums adds the copy's bytes), and the copies' gradients are summed once per step over the
// devices of every stage that holds one (Plan::tied_weights).
struct SharedWeight {
  std::string name;
  int64_t bytes = 0;
  std::vector<int> readers;  // node ids, increasing, at least two; readers[0] counts the bytes
};

struct Edge {
  int src = 0;
  int dst = 0;
  int64_t bytes_per_sample = 0;      // activation bytes sent forward (and gradient bytes sent back)
  std::vector<std::string> tensors;  // tensor names carried (empty for profiles)
};

// Node times as a function of the per-replica micro-batch size. Implementations: the analytic
// roofline and measured-profile cost models over an OpGraph, PipeDream profiles, tables in tests.
class NodeTimer {
 public:
  virtual ~NodeTimer() = default;
  virtual NodeTime time(int node, int64_t samples, Device const& device) const = 0;
};

struct Problem {
  // Larger graphs are refused by finalize(). At 50,000 operators GPP on groups
  // (PlannerOptions::gpp_max_nodes) answers bench_scale's chain in under 1 s, while PipeDream's
  // antichain search runs past a minute.
  static constexpr int kMaxNodes = 50'000;
  std::string model;
  std::vector<Node> nodes;  // indexed by node id; ids are a topological order
  std::vector<Edge> edges;  // a DAG over node ids
  std::vector<SharedWeight> shared_weights;
  std::shared_ptr<NodeTimer const> timer;
  Cluster cluster;
  int64_t batch = 1;                             // global (mini-)batch B
  std::vector<int64_t> micro_batch_candidates;   // b; each divides batch; empty = powers of two dividing B
  double optimizer_bytes_per_weight_byte = 3.0;  // Adam: gradient + 2 moments (weights x4 in all)
  // The optimizer's update per step, per weight byte (measured on the backend that trains; 0: not
  // priced). Plans carry it as each stage's update_s, so ranking by simulation charges STEP.
  double update_seconds_per_weight_byte = 0;
  bool allow_replication = true;    // data-parallel stages
  bool count_communication = true;  // transfer + all-reduce times in T_s
  // Activation recomputation per stage (PlanStage::recompute): a stage whose activations do not
  // fit may keep only its inputs per micro-batch in flight and rerun its forward before backward
  // (one more forward per micro-batch). GPP and assemble_plan choose it where the stage would not
  // fit otherwise; off by default so that plans and brute-force references stay without it.
  bool allow_recompute = false;

  // Derived adjacency (filled by finalize()).
  std::vector<std::vector<int>> out_edges, in_edges;  // edge ids per node
  std::vector<std::vector<int>> shared_of;            // per node: the shared_weights it reads
  // Checks ids, acyclicity, topological ids and the shared weights' readers; fills adjacency and
  // shared_of; resets the time cache.
  Status finalize();

  // Stage times and memory are taken on the reference device: the slowest device, with the
  // smallest memory of the cluster (uniform clusters: any device).
  Device reference_device() const;
  int64_t device_memory() const;  // the smallest device memory (taken by finalize(), as it is asked per stage)
  // The candidate micro-batch sizes: micro_batch_candidates, or the powers of two dividing batch.
  std::vector<int64_t> micro_batch_sizes() const;
  // Per-node times for `samples` samples on the reference device, cached per (samples, device);
  // thread-safe; the reference stays valid for the Problem's lifetime.
  std::vector<NodeTime> const& node_times(int64_t samples) const;
  // The same on a given device (heterogeneous clusters price each stage on its own devices).
  std::vector<NodeTime> const& node_times(int64_t samples, Device const& device) const;
  // Link used between consecutive stages (the slowest link when the cluster spans nodes).
  Link const& pipeline_link() const;

  struct TimeCache;
  mutable std::shared_ptr<TimeCache> time_cache;  // created by finalize() / on first use
  int64_t smallest_memory = -1;                   // set by finalize(); -1: computed per call
};

// Cost of one stage under the shared model. `nodes` is the stage's node set (any order),
// `replicas` its data-parallel degree, `micro_batch` the whole stage's micro-batch size b (each
// replica runs b / replicas samples), `in_flight` the number of micro-batches whose activations it
// holds (its depth in the stage graph under stage-graph 1F1B), `num_micro_batches` m = B / b.
struct StageCost {
  double fwd_s = 0, bwd_input_s = 0, bwd_weight_s = 0;  // compute, per micro-batch per replica
  double comm_s = 0;                                    // send+receive of boundary tensors, per micro-batch per replica
  double allreduce_s = 0;                               // gradient all-reduce, per step (0 when replicas == 1)
  double time_s = 0;                                    // T_s = compute + comm + allreduce / m
  int64_t weight_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;  // per device
  int64_t memory_bytes() const { return weight_bytes + optimizer_bytes + activation_bytes; }
  bool fits = true;        // memory_bytes() <= device memory
  bool recompute = false;  // priced with recomputation: fwd_s counted twice in time_s, activations below
};

// With `recompute`, the stage holds in_flight micro-batches of its inputs and one micro-batch of
// its own activations, and its time counts the forward twice.
StageCost stage_cost(Problem const& p, std::vector<int> const& nodes, int replicas, int64_t micro_batch, int in_flight,
                     int64_t num_micro_batches, bool recompute = false);

// The additive parts of a stage, for planners that keep their own (prefix) sums and call
// stage_cost_from_sums instead of stage_cost. Boundary tensors are the distinct (producer node,
// tensors) groups with one end inside the stage; each is sent once forward and once backward.
struct StageSums {
  NodeTime time;                            // Σ node times at the per-replica sample count
  int64_t weight_bytes = 0;                 // Σ w(o), plus the copies of shared weights (see SharedWeight)
  int64_t activation_bytes_per_sample = 0;  // Σ a(o)
  int64_t boundary_bytes_per_sample = 0;    // Σ bytes per sample of the boundary tensors
  int boundary_tensors = 0;                 // how many boundary tensor groups (each pays the latency)
  int64_t input_bytes_per_sample = 0;       // Σ bytes per sample of the groups entering (what recompute keeps)
};
// Sums over `nodes` for `samples` samples per replica (no caching beyond node_times).
StageSums stage_sums(Problem const& p, std::vector<int> const& nodes, int64_t samples, Device const* device = nullptr);
// stage_cost on given devices of the cluster (replicas = devices.size()): node times of the slowest,
// fits against the smallest memory, all-reduce over the link they share.
StageCost stage_cost_on(Problem const& p, std::vector<int> const& nodes, std::vector<int> const& devices,
                        int64_t micro_batch, int in_flight, int64_t num_micro_batches, bool recompute = false);
// Samples each replica runs: ceil(micro_batch / replicas); 0 when replicas > micro_batch.
int64_t samples_per_replica(int64_t micro_batch, int replicas);
// How many micro-batches fit in `memory` on a device that also holds `fixed_bytes` once (weights,
// optimizer state, anything not per micro-batch) when each micro-batch holds `per_micro_batch`
// bytes: 0 when not even the fixed bytes fit, INT32_MAX when a micro-batch holds nothing. The one
// memory rule of the planners' in-flight counts: a stage fits at in-flight q when this is >= q.
int micro_batches_that_fit(int64_t memory, int64_t fixed_bytes, int64_t per_micro_batch);
// stage_cost from sums taken at samples_per_replica(micro_batch, replicas) samples.
StageCost stage_cost_from_sums(Problem const& p, StageSums const& sums, int replicas, int64_t micro_batch,
                               int in_flight, int64_t num_micro_batches, bool recompute = false);

}  // namespace gp::partition

namespace gp::partition {

// One stage of a candidate plan: its nodes and data-parallel degree.
struct StageAssignment {
  std::vector<int> nodes;
  int replicas = 1;
  bool recompute = false;  // also set by assemble_plan where the stage fits only with it (allow_recompute)
  // The cluster's device ids (replicas of them), chosen by place_on_cluster for heterogeneous
  // clusters; empty: assemble_plan gives devices contiguously in stage order. When given, the stage
  // is priced on the slowest of them, against the smallest memory among them.
  std::vector<int> devices{};
};

// The shape of the stage graph a planner builds.
enum class StageGraphShape {
  kGraph,  // stages connected by their data edges (GPP): depth = longest path in the stage graph
  kChain,  // a sequential pipeline: stages run in the given order, each after the one before it, so
           // stage i of k holds k - i micro-batches and the depth is k, whatever the data edges
           // (PipeDream, Piper, GPipe, DeepSpeed run every stage of a chain this way)
};

// Builds a complete Plan from stages: stage graph edges from the problem's edges, topological stage
// ids, depths, per-stage costs and memory via stage_cost (in-flight = depth), devices assigned
// contiguously in stage order, step time (m + D - 1) * max T_s, samples/s. kGraph takes stages in
// any order; kChain in pipeline order, and adds an ordering edge (no tensors, 0 bytes) between
// consecutive stages that share no data edge. Fails if a node is in no stage or two, if the stage
// graph has a cycle (kChain: a data edge runs backwards in the order), or if the stages need more
// devices than the cluster has. Memory overflow does not fail here: check stage.peak_memory_bytes.
Result<Plan> assemble_plan(Problem const& p, std::vector<StageAssignment> stages, int64_t micro_batch,
                           std::string planner, StageGraphShape shape = StageGraphShape::kGraph);

// Heterogeneous clusters (EdgePipe-like). A planner plans on a uniform stand-in of the cluster;
// place_on_cluster then puts each stage of that plan on real devices and prices it there.
// `units`: with false, a stage of r replicas takes r real devices (heaviest stages on the fastest
// devices first); with true, the plan was made for one stand-in device per speed unit (a device
// twice the slowest counts as 2), and a stage of r replicas takes r / c devices of a class of
// speed c (or one faster device). kInfeasible naming the stage when the devices run out or a
// stage does not fit its devices' memory.
Result<Plan> place_on_cluster(Problem const& p, Plan const& plan, bool units);
// The uniform stand-in: `count` copies of the slowest device with the smallest memory.
Problem uniform_stand_in(Problem const& p, int count);
// Speed units of the cluster: sum over devices of floor(speed / slowest speed).
int speed_units(Cluster const& c);

}  // namespace gp::partition
