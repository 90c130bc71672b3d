// Small plans built inline for the schedule tests.
#pragma once

#include <vector>

#include "partition/plan.h"

namespace gp::schedule::testing {

struct StageCost {
  double fwd = 1, bwd_input = 1, bwd_weight = 1;
  int64_t act = 100, weight = 1000;
};

partition::PlanStage make_stage(int id, std::vector<int> devices, StageCost c = {});
void add_edge(partition::Plan& plan, int src, int dst, double transfer_s = 0, int64_t bytes = 10);
void finish(partition::Plan& plan, int micro_batches);  // depths, num_devices, batch

// p stages in a chain, stage k on device k.
partition::Plan chain(int p, int m, StageCost c = {}, double transfer_s = 0);
// in -> {branch a, branch b} -> join, one device each (the stage graph of a two-branch model).
partition::Plan two_branch(int m, StageCost c = {});
// The same four stages as a chain: in -> a -> b -> join.
partition::Plan two_branch_as_chain(int m, StageCost c = {});
// A chain of 2p stages, stage k on device k mod p (the interleaved placement).
partition::Plan looping_chain(int p, int m);
// 0 -> 1 (replicated on 2 devices) -> 2, with a skip edge 0 -> 2 and transfers.
partition::Plan replicated_with_skip(int m);
// 0 (2 replicas) -> {1, 2 (2 replicas)} -> 3: branches and replica routing together.
partition::Plan replicated_diamond(int m);

}  // namespace gp::schedule::testing
