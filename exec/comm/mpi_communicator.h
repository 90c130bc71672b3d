// The MPI transport: one rank per device, on one machine or many (mpirun -np N ... --launcher mpi).
// Errors are returned, never fatal (MPI_ERRORS_RETURN on a private duplicate of the world
// communicator). Each message is one MPI message, header (key, dtypes, shapes) then payload, with
// a tag derived from the key on both sides (step parity, edge, direction, micro-batch; checked
// against MPI_TAG_UB); receives are posted when the step starts, sends are non-blocking and
// completed at STEP, so no send ever waits for a late receive. Every wait is a test loop with a
// deadline that also watches for an abort message from any rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/comm/communicator.h"

namespace gp::exec {

// MPI_Init_thread on construction, MPI_Finalize on destruction (once per process).
class MpiSession {
 public:
  static Result<std::unique_ptr<MpiSession>> start(int* argc, char*** argv);
  ~MpiSession();
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MpiSession() = default;
  int rank_ = 0, size_ = 1;
};

struct MpiLayout {
  int num_stages = 0;
  int num_edges = 0;
  int num_micro_batches = 0;
};

// The endpoint of this rank (device = rank). Fails if the key space does not fit MPI_TAG_UB.
Result<std::unique_ptr<Communicator>> make_mpi_communicator(MpiLayout const& layout);

// Rank 0's `text` on every rank (before any communicator exists: what the ranks must agree on to
// plan alike, such as rank 0's measured profile).
Result<std::string> broadcast_from_rank0(std::string const& text, double timeout_s);

// Every rank's `value`, in rank order, over MPI_COMM_WORLD (whatever the run's transport).
Result<std::vector<uint64_t>> allgather_from_ranks(uint64_t value, double timeout_s, char const* what);

// Every rank passes its fingerprint of plan + schedule + config; a rank whose value differs from
// rank 0's makes every rank fail with a message naming it.
Status check_same_run(Communicator& comm, uint64_t fingerprint, double timeout_s);

}  // namespace gp::exec
