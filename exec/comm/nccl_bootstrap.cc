#include "exec/comm/nccl_bootstrap.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "exec/comm/nccl_communicator.h"
#include "exec/comm/nccl_check.h"
#include "exec/cuda/cuda_check.h"

namespace gp::exec {

namespace nccl_bootstrap {

namespace {

// A non-blocking communicator may answer ncclInProgress: the call goes on in the background.
#define GP_NCCL_ASYNC(expr)                                                                \
  do {                                                                                     \
    ncclResult_t const gp_nccl_rc_ = (expr);                                               \
    if (gp_nccl_rc_ != ncclSuccess && gp_nccl_rc_ != ncclInProgress)                       \
      return with_last_error(nccl_error(gp_nccl_rc_, #expr, __FILE__, __LINE__), nullptr); \
  } while (0)

Status wait_mpi(MPI_Request& r, Deadline deadline, std::string const& what) {
  for (int spins = 0;; ++spins) {
    int done = 0;
    GP_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (done) return Status::ok();
    if (stop_requested()) return aborted_error(kInterrupted);
    if (Clock::now() > deadline) return timeout_error(what + " did not complete before the deadline");
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status local_gpu(MPI_Comm world, int* device) {
  MPI_Comm node;
  GP_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  RETURN_IF_ERROR(cuda::device_available());  // before anything touches NCCL
  int const n = cuda::device_count();
  if (local >= n)
    return invalid_argument("local rank " + std::to_string(local) + " needs GPU " + std::to_string(local) +
                            " but this node has " + std::to_string(n) +
                            " (start at most one rank per GPU: mpirun -np <GPUs per node>; one GPU as two NCCL ranks "
                            "is unsupported)");
  GP_CUDA_CHECK(cudaSetDevice(local));
  *device = local;
  return Status::ok();
}

}  // namespace

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

Status with_last_error(Status s, ncclComm_t comm) {
  char const* last = ncclGetLastError(comm);
  if (last && *last) return Status(s.code(), s.message() + " (NCCL: " + last + ")");
  return s;
}

Status wait_comm(ncclComm_t comm, Deadline deadline, std::string const& what) {
  for (int spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t const rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return with_last_error(nccl_error(rc, "ncclCommGetAsyncError", __FILE__, __LINE__), comm);
    if (state == ncclSuccess) return Status::ok();
    if (state != ncclInProgress) return with_last_error(nccl_error(state, what.c_str(), __FILE__, __LINE__), comm);
    if (stop_requested()) return aborted_error(kInterrupted);
    if (Clock::now() > deadline) return timeout_error(what + " did not complete before the deadline");
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status agree(MPI_Comm comm, Status const& mine, double timeout_s, std::string const& phase) {
  constexpr int kText = 480;
  struct Outcome {
    int32_t code;
    char text[kText];
  } out{};
  out.code = static_cast<int32_t>(mine.code());
  std::memcpy(out.text, mine.message().data(), std::min<std::size_t>(mine.message().size(), kText - 1));
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<Outcome> all(static_cast<std::size_t>(size));
  MPI_Request r;
  GP_MPI(MPI_Iallgather(&out, sizeof out, MPI_BYTE, all.data(), sizeof out, MPI_BYTE, comm, &r));
  Status const s = wait_mpi(r, deadline_after(timeout_s), "agreeing on " + phase + " over MPI");
  if (!s.is_ok()) return mine.is_ok() ? s : mine;
  if (!mine.is_ok()) return mine;
  for (int i = 0; i < size; ++i)
    if (all[i].code != static_cast<int32_t>(StatusCode::kOk))
      return Status(static_cast<StatusCode>(all[i].code), "rank " + std::to_string(i) + " failed " + phase + ": " +
                                                              std::string(all[i].text, strnlen(all[i].text, kText)));
  return Status::ok();
}

Status create_id(int rank, ncclUniqueId* id) {
  if (rank == 0) GP_NCCL_CHECK(ncclGetUniqueId(id));
  return Status::ok();
}

Status share_id(MPI_Comm mpi, ncclUniqueId* id, double timeout_s) {
  Deadline const deadline = deadline_after(timeout_s);
  MPI_Request r;
  GP_MPI(MPI_Ibcast(id, sizeof *id, MPI_BYTE, 0, mpi, &r));
  RETURN_IF_ERROR(wait_mpi(r, deadline, "broadcasting the NCCL id"));
  GP_MPI(MPI_Ibarrier(mpi, &r));
  return wait_mpi(r, deadline, "the barrier after the NCCL id");
}

Status init_world(ncclComm_t* world, int size, ncclUniqueId const& id, int rank, double timeout_s) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t const rc = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  *world = comm;
  if (rc != ncclSuccess && rc != ncclInProgress)
    return with_last_error(nccl_error(rc, "ncclCommInitRankConfig", __FILE__, __LINE__), comm);
  if (!*world) return internal_error("ncclCommInitRankConfig returned no communicator");
  return wait_comm(*world, deadline_after(timeout_s), "ncclCommInitRankConfig");
}

bool is_world(std::vector<int> const& g, int size) {
  if (static_cast<int>(g.size()) != size) return false;
  for (int i = 0; i < size; ++i)
    if (g[i] != i) return false;
  return true;
}

Status split_groups(ncclComm_t world, int rank, int size, std::vector<std::vector<int>> const& groups, double timeout_s,
                    std::map<std::vector<int>, ncclComm_t>* split, std::vector<ncclComm_t>* order) {
  std::vector<std::vector<int>> todo;
  for (auto const& g : groups)
    if (g.size() > 1 && !is_world(g, size) && std::find(todo.begin(), todo.end(), g) == todo.end()) todo.push_back(g);
  while (!todo.empty()) {
    std::vector<std::vector<int>> round, rest;
    std::set<int> used;
    for (auto const& g : todo) {
      bool const free = std::none_of(g.begin(), g.end(), [&](int d) { return used.count(d); });
      (free ? round : rest).push_back(g);
      if (free) used.insert(g.begin(), g.end());
    }
    int color = NCCL_SPLIT_NOCOLOR, key = 0;
    for (std::size_t i = 0; i < round.size(); ++i) {
      auto const pos = std::find(round[i].begin(), round[i].end(), rank);
      if (pos != round[i].end()) color = static_cast<int>(i), key = static_cast<int>(pos - round[i].begin());
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t sub = nullptr;
    GP_NCCL_ASYNC(ncclCommSplit(world, color, key, &sub, &config));
    RETURN_IF_ERROR(wait_comm(world, deadline_after(timeout_s), "ncclCommSplit"));
    if (sub) RETURN_IF_ERROR(wait_comm(sub, deadline_after(timeout_s), "ncclCommSplit"));
    if (color != NCCL_SPLIT_NOCOLOR) {
      (*split)[round[static_cast<std::size_t>(color)]] = sub;
      order->push_back(sub);
    }
    todo = std::move(rest);
  }
  return Status::ok();
}

}  // namespace nccl_bootstrap

Result<int> select_local_gpu(double timeout_s) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return internal_error("the NCCL transport needs MPI started first (MpiSession::start)");
  int device = -1;
  Status const mine = nccl_bootstrap::local_gpu(MPI_COMM_WORLD, &device);
  RETURN_IF_ERROR(nccl_bootstrap::agree(MPI_COMM_WORLD, mine, timeout_s, "selecting its GPU"));
  return device;
}

}  // namespace gp::exec
