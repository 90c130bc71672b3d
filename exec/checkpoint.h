// Training checkpoints: the full state (weights, optimizer moments and step count, training step,
// seed) in one file, written atomically (temporary file, fsync, rename, fsync of the folder) so a
// crash leaves either the old or the new checkpoint. Corrupt or truncated files are detected by a
// checksum over everything before it.
//
// Format (version 1): "GPCKPT\x01\n", u64 header length, header JSON (tensor table with offsets),
// raw tensor bytes, u64 FNV-1a checksum of all preceding bytes. Little-endian.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "exec/tensor.h"
#include "core/status.h"

namespace gp::exec {

// Dynamic loss scaling's state (exec/loss_scale.h); scale 0: the run did not scale.
struct LossScaleState {
  double scale = 0;
  int64_t good_steps = 0;
  int64_t skipped_steps = 0;
};

struct CheckpointState {
  int64_t step = 0;             // training steps completed
  uint64_t seed = 0;            // the run's seed: data and dropout are pure functions of (seed, step)
  std::string optimizer;        // optimizer kind name
  int64_t optimizer_steps = 0;  // the optimizer's own step count (Adam bias correction)
  LossScaleState loss_scale;    // absent from files of runs without scaling
  std::map<std::string, Tensor> weights;
  std::map<std::string, Tensor> optimizer_state;
};

Status save_checkpoint(std::string const& path, CheckpointState const& state);
Result<CheckpointState> load_checkpoint(std::string const& path);
// The same from the file's bytes (`path` names it in errors); sizes are checked before allocation.
Result<CheckpointState> parse_checkpoint(std::string_view bytes, std::string const& path);

// Checks that a checkpoint fits these parameters (same names, shapes, dtypes); the error names the
// first difference.
Status check_checkpoint_matches(CheckpointState const& state, std::map<std::string, Tensor> const& params,
                                std::string const& path);

}  // namespace gp::exec
