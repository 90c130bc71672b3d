// PipeDream's profiled layer graph (graph.txt of msr-fiddle/pipedream) as a Problem.
//
// Times in the file are milliseconds for the batch the profile was taken at (`profile_batch`
// samples); activation and parameter sizes are bytes, activations for that batch. We model the
// time of s samples as linear: t(s) = t_profile * s / profile_batch on a device of speed 1 (divided
// by the device's speed), so with profile_batch = 1 one "sample" is one profiled batch. The Input
// node's forward time (data loading) is taken as zero; a list of activation sizes
// ("[a; b; c]", gnmt) is summed. Layers get ids in a topological order (Kahn, smallest node number
// first); the node's activation_size is both its saved activation and the bytes of each out-edge.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "partition/problem.h"

namespace gp::partition {

struct PipeDreamProfileOptions {
  int64_t profile_batch = 1;  // samples the profile's times and activation sizes are for
};

// Fills model, nodes, edges and timer; the caller sets cluster, batch and flags, then finalize().
Result<Problem> read_pipedream_profile(std::string const& path, PipeDreamProfileOptions const& options = {});
Result<Problem> parse_pipedream_profile(std::string const& text, std::string const& model,
                                        PipeDreamProfileOptions const& options = {});

}  // namespace gp::partition
