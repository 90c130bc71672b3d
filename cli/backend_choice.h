// --backend: the device kind a command computes on (cpu, the default, or cuda). The CUDA backend
// exists only in builds with GP_HAVE_CUDA; asking for it elsewhere, or on a machine without a
// usable GPU, is a clear error before anything runs.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "exec/backend.h"
#include "graph/op_graph.h"

namespace gp::cli {

inline constexpr char const* kBackendHelp = "cpu (oneDNN, default) or cuda (NVIDIA GPUs: cuDNN, cuBLASLt, NCCL)";

// Ok for "cpu" and "cuda"; kInvalidArgument otherwise, naming both.
Status check_backend_name(std::string const& name);
// Every op of `graph` is in the backend's kernel table (the CUDA table is static: no GPU needed),
// else kUnsupported naming each op type missing and why.
Status check_graph_supported(std::string const& backend, graph::OpGraph const& graph);
// Usable GPUs here (0 without the CUDA backend or without a GPU); `why` gets the reason for 0.
int gpu_count(std::string* why = nullptr);
// The backend of device `index` (for cuda: GPU `index`).
Result<std::unique_ptr<exec::Backend>> make_backend(std::string const& name, int index);

}  // namespace gp::cli
