// cuDNN execution plans kept on disk across runs. Building a shape's plans (heuristics, then
// compiling the engine) cost the first training step 2-11 s on the GPUs of issue 23, every run;
// a plan serialized once (cudnn-frontend's Graph::serialize) loads in its place on the next run
// (Graph::deserialize), and one that does not load is built again and stored over.
//
// One file per graph key, named by a hash of the key and the environment it was built in (GPU
// model and compute capability, cuDNN and cudnn-frontend versions, NVIDIA_TF32_OVERRIDE): a file
// starts with its whole key, so another key's file (a hash collision, a renamed file) is a miss,
// as is a file that cannot be read. Files are written atomically (core/file_io.h): a crash or two
// processes storing the same plan leave one whole file. Host-only (no CUDA header): the GPU side
// is exec/cuda/cudnn_graphs.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gp::exec::cuda {

class PlanDiskCache {
 public:
  // The folder from the environment variable GP_CUDNN_PLAN_CACHE: a folder; unset, empty or
  // "on" for $GP_CACHE_DIR/cudnn-plans, else $HOME/.cache/graphpipe/cudnn-plans (none without
  // either); "off": none (no cache). On by default since an H200 ran it (2026-12-04: 202 plans of
  // Inception stored, then loaded, a 3-step run 10.6 s -> 1.9 s of wall time, the same final loss with
  // deterministic engines; CudaGpu.CudnnPlansStoredOnDiskLoadInsteadOfBeingBuiltAndComputeTheSame).
  static std::string folder_from_environment();

  // `folder` empty: disabled (load misses, store does nothing). `environment`: what the plans
  // depend on besides their key (one line).
  PlanDiskCache(std::string folder, std::string environment);

  bool enabled() const { return !folder_.empty(); }
  std::string const& folder() const { return folder_; }
  // The blob stored for `key` in this environment, or nullopt.
  std::optional<std::vector<uint8_t>> load(std::string const& key) const;
  // Writes the blob for `key` (creating the folder); an error names the file and the cause.
  Status store(std::string const& key, std::vector<uint8_t> const& blob) const;
  std::string path_for(std::string const& key) const;

 private:
  std::string header(std::string const& key) const;
  std::string folder_, environment_;
};

}  // namespace gp::exec::cuda
