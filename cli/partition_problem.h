// The planner flags shared by `graphpipe partition` and `graphpipe compare`: model or PipeDream
// profile, cluster, batch and cost model flags, turned into a partition::Problem by the session layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "graph/op_graph.h"
#include "core/status.h"
#include "partition/planner.h"
#include "partition/problem.h"
#include "exec/session/planning.h"

namespace gp::cli {

// The session's ProblemSpec plus the planner's search settings.
struct PartitionFlags : session::ProblemSpec {
  session::SearchSpec search;
};

void add_partition_flags(CLI::App& app, PartitionFlags& flags);
Result<partition::Problem> build_problem(PartitionFlags const& flags);           // the model loaded with --max-memory
Result<partition::PlannerOptions> planner_options(PartitionFlags const& flags);  // progress on stderr

std::string format_bytes(double bytes);  // "15.20 GiB"
std::string format_seconds(double s);    // "12.3 ms"

}  // namespace gp::cli
