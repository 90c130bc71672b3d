// The planner options shared by `graphpipe partition` and `graphpipe compare`: model or PipeDream
// profile, cluster, batch and cost model flags, turned into a partition::Problem.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "graph/op_graph.h"
#include "core/status.h"
#include "partition/planner.h"
#include "partition/problem.h"

namespace gp::cli {

struct PartitionFlags {
  std::string model;    // ONNX file
  std::string profile;  // PipeDream graph.txt instead of ONNX
  int64_t profile_batch = 1;
  int devices = 0;
  std::string memory = "16GiB";
  std::string cluster;    // YAML
  std::string bandwidth;  // overrides the intra-node link
  int64_t batch = 64;
  int64_t micro_batch = 0;  // 0: try the powers of two dividing the batch
  std::string cost = "analytic";
  bool no_replication = false;
  bool no_communication = false;
  std::string recompute = "auto";   // auto: stages recompute activations where they would not fit; never
  std::string rank = "simulation";  // gpp: judge the best candidates by simulation, or by the formula
  int64_t max_downsets = 50000;
  double time_limit_s = 0;
  std::string chain_objective = "step";
};

void add_partition_flags(CLI::App& app, PartitionFlags& flags);
Result<partition::Problem> build_problem(PartitionFlags const& flags);
partition::PlannerOptions planner_options(PartitionFlags const& flags);  // progress on stderr

std::string format_bytes(double bytes);  // "15.20 GiB"
std::string format_seconds(double s);    // "12.3 ms"

}  // namespace gp::cli
