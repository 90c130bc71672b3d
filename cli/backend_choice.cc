#include "cli/backend_choice.h"

#include <set>

#include "exec/cpu/cpu_backend.h"
#ifdef GP_HAVE_CUDA
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/cuda_check.h"
#endif

namespace gp::cli {

namespace {
constexpr char const* kNoCudaBuild =
    "--backend cuda: this graphpipe was built without the CUDA backend (it needs the CUDA toolkit, cuDNN and NCCL "
    "under /usr/local/cuda and scripts/setup.sh; configure with -DGP_WITH_CUDA=ON to make that an error)";
}

Status check_backend_name(std::string const& name) {
  if (name == "cpu" || name == "cuda") return Status::ok();
  return invalid_argument("--backend " + name + ": must be cpu or cuda");
}

Status check_graph_supported(std::string const& backend, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(check_backend_name(backend));
  std::string missing;
  std::set<std::string> seen;
  for (graph::OpId id = 0; id < static_cast<graph::OpId>(graph.num_ops()); ++id) {
    graph::Op const& op = graph.op(id);
    if (!seen.insert(op.type).second) continue;
    Status s = Status::ok();
    if (backend == "cpu") {
      s = exec::CpuBackend().supports(op, graph);
    } else {
#ifdef GP_HAVE_CUDA
      s = exec::CudaBackend::supports_op(op, graph);
#else
      return unsupported(kNoCudaBuild);
#endif
    }
    if (!s) missing += (missing.empty() ? "" : "; ") + s.message();
  }
  if (missing.empty()) return Status::ok();
  return unsupported(graph.name() + " cannot run on the " + backend + " backend: " + missing +
                     (backend == "cuda" ? " (train it with --backend cpu)" : ""));
}

int gpu_count(std::string* why) {
#ifdef GP_HAVE_CUDA
  Status const s = exec::cuda::device_available();
  if (!s) {
    if (why) *why = s.message();
    return 0;
  }
  return exec::cuda::device_count();
#else
  if (why) *why = kNoCudaBuild;
  return 0;
#endif
}

Result<std::unique_ptr<exec::Backend>> make_backend(std::string const& name, int index) {
  RETURN_IF_ERROR(check_backend_name(name));
  if (name == "cpu") return std::unique_ptr<exec::Backend>(std::make_unique<exec::CpuBackend>());
#ifdef GP_HAVE_CUDA
  ASSIGN_OR_RETURN(auto backend, exec::CudaBackend::create(index));
  return std::unique_ptr<exec::Backend>(std::move(backend));
#else
  (void)index;
  return unsupported(kNoCudaBuild);
#endif
}

}  // namespace gp::cli
