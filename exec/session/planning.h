// Planning in memory: the partitioning problem from a model (a file, or a graph already loaded)
// and a cluster, with the cost model as an object (the analytic roofline, a profile measured here,
// or a profile file the user gives); and, for training, the plan, schedule and simulation of a run,
// with links and the optimizer's update priced before the planner searches. Under MPI, rank 0
// measures and every rank plans from its numbers, so all ranks make the same plan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/session/model_file.h"
#include "exec/train_config.h"
#include "graph/cost_model.h"
#include "graph/onnx_import.h"
#include "graph/op_graph.h"
#include "partition/plan.h"
#include "partition/planner.h"
#include "partition/problem.h"
#include "schedule/instruction.h"
#include "schedule/simulator.h"

namespace gp::session {

// What `graphpipe partition` and `graphpipe compare` plan: a model (a file, or a graph already in
// memory) or a PipeDream profile, a cluster, a batch and a cost model.
struct ProblemSpec {
  std::string model;                            // ONNX file (unless `graph` is given)
  std::shared_ptr<graph::OpGraph const> graph;  // a model already loaded (its file is not read again)
  graph::ImportOptions import;                  // how `model` is loaded (weights are never loaded)
  std::string profile;                          // PipeDream graph.txt instead of ONNX
  int64_t profile_batch = 1;
  int devices = 0;
  std::string memory = "16GiB";
  std::string cluster;               // YAML
  std::string bandwidth;             // overrides the intra-node link ("100GB/s")
  double bandwidth_bytes_per_s = 0;  // the same as a number (a measured one); 0: none
  double link_latency_s = -1;        // the intra-node link's latency (a measured one); < 0: the cluster's
  int64_t batch = 64;
  int64_t micro_batch = 0;                         // 0: the powers of two dividing the batch
  std::string cost = "analytic";                   // "analytic" or a profile JSON file
  std::optional<graph::MeasuredProfile> measured;  // a profile in memory (overrides `cost`)
  bool no_replication = false;
  bool no_communication = false;
  std::string recompute = "auto";  // auto | never
  double optimizer_bytes_per_weight_byte = 3.0;
  double update_seconds_per_weight_byte = 0;
};
Result<partition::Problem> build_problem(ProblemSpec const& spec);

// How the planners search (`partition`/`compare`'s --rank, --max-downsets, --time-limit,
// --chain-objective and --gpp-max-nodes, and the Python package's keywords of the same names).
struct SearchSpec {
  std::string rank = "simulation";  // gpp: judge its best candidates by simulation, or by the formula
  int64_t max_downsets = 50000;
  double time_limit_s = 0;
  std::string chain_objective = "step";                           // what pipedream/piper minimise: step | bottleneck
  int gpp_max_nodes = partition::PlannerOptions{}.gpp_max_nodes;  // gpp: plan larger graphs on groups; 0: never
};
// The planner options of `search` (an unknown rank or objective is an error naming the choices).
// `progress`, when given, is told at most one line every half second.
Result<partition::PlannerOptions> planner_options(SearchSpec const& search,
                                                  std::function<void(std::string const&)> progress = {});

// `graphpipe compare`: every planner on one problem. A planner that finds no plan keeps its error.
inline constexpr char const* kPlanners[] = {"gpp", "pipedream", "piper", "balanced"};
struct PlannerResult {
  std::string planner;
  std::optional<partition::Plan> plan;
  std::string error;  // when there is no plan
};
// With `simulated` (gpp ranks its candidates by simulation), the other planners' samples/s are
// judged the same way, by simulating the best schedule of their plan, so that ratios compare
// simulated throughput with simulated throughput. `on_planner` is told each planner as it starts.
std::vector<PlannerResult> compare_planners(partition::Problem const& problem, partition::PlannerOptions const& options,
                                            bool simulated,
                                            std::function<void(std::string const&)> const& on_planner = {});

// `graphpipe profile`: per-op forward/backward times of `graph` on `backend` at each micro-batch
// size (ascending, distinct), each op timed `repeats` times (the minimum kept), under `threads`
// compute threads (0: this thread's budget), calibrated against the whole executor with
// `concurrent` executors at once (0: as many workers as share the machine; one on a GPU).
struct ProfileRequest {
  std::string backend = "cpu";
  std::vector<int64_t> batch_sizes = {1, 2, 4, 8};
  int repeats = 3;
  int threads = 0;
  int concurrent = 0;
  bool tf32 = false;                     // cuda: TF32 matrix products (the training config's `tf32`)
  std::function<void(int64_t)> on_size;  // progress: told each size as it starts
};
Result<graph::MeasuredProfile> profile_model(graph::OpGraph const& graph, ProfileRequest const& request);

// $GP_CACHE_DIR, or ~/.cache/graphpipe, created if needed.
Result<std::string> cache_dir();

// Where a training run's plan comes from and how it is priced.
struct TrainingPlanContext {
  int devices = 1;
  std::string backend = "cpu";
  bool mpi = false;                     // one rank per device: rank 0 measures, every rank plans alike
  bool ordered_transport = false;       // NCCL: auto picks among schedules it can run
  double timeout_s = 60;                // ranks agreeing
  std::optional<partition::Plan> plan;  // a plan made elsewhere (instead of config.pipeline.plan or planning)
};
struct TrainingPlan {
  partition::Plan plan;
  schedule::Schedule schedule;
  schedule::Simulation simulation;
  std::string cost_name;  // how the plan was priced, for the report ("measured, 1 thread per worker, ...")
};
// The plan (the context's, config.pipeline.plan, or planned here by config.pipeline.planner with
// config.pipeline.cost), the schedule (config.pipeline.schedule or built by its policy) and their
// simulation. `graph` is the model being trained (the planner never reloads it).
Result<TrainingPlan> plan_training(exec::TrainConfig const& config, ModelFile const& model,
                                   std::shared_ptr<graph::OpGraph const> const& graph,
                                   TrainingPlanContext const& context);

// The optimizer's update in seconds per weight byte, measured on `backend` under `threads` compute
// threads (one worker's budget): what the planners price STEP at.
Result<double> measure_update_rate(std::string const& backend, exec::OptimizerConfig const& optimizer, int threads);

// Compute threads of one worker of a run over `devices` (config's threads_per_worker, the rank's
// cores under MPI, or this process's cores shared by its workers).
int worker_threads(exec::TrainConfig const& config, int devices, bool mpi);

// How many executors a training run's profile is calibrated with at once: as many as will share
// one device's compute. On the CPU, workers (or the MPI ranks of a node) share its cores: cores /
// threads per worker. On GPUs, worker threads are placed round robin and share a GPU when there
// are more workers than GPUs: ceil(devices / gpus), each calibration executor on its own backend
// (stream), as the workers are; an MPI rank has its GPU to itself (the NCCL bootstrap refuses two
// ranks on one).
int calibration_concurrency(std::string const& backend, int devices, bool mpi, int threads, int cores, int gpus);

}  // namespace gp::session
