// The NCCL transport's start-up over MPI, internal to gp_comm_nccl (exec/comm/nccl_communicator.h
// gives the whole design; nccl_communicator.cc is the communicator itself): rank 0's ncclUniqueId
// is broadcast, then an MPI barrier (NVIDIA/cuDecomp#24: HCOLL may defer the broadcast's progress,
// and NCCL's init makes no MPI call); the local rank from an MPI_COMM_TYPE_SHARED split picks the
// GPU (select_local_gpu); the world communicator and the replica groups' (ncclCommSplit) are
// non-blocking (config.blocking = 0), polled under a deadline. Every rank agrees over MPI on the
// outcome of each start-up phase, so a failure on one rank fails every rank, fast.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/comm/communicator.h"

namespace gp::exec::nccl_bootstrap {

// MPI's text for an error code.
std::string mpi_error(int code);

// `s` with NCCL's last error (of `comm`, or the last one of any when null) appended, if there is one.
Status with_last_error(Status s, ncclComm_t comm);

// Polls a non-blocking communicator until its pending call (init, split, group) is done.
Status wait_comm(ncclComm_t comm, Deadline deadline, std::string const& what);

// Every rank passes its outcome; every rank returns the first failure (by rank) or ok. A rank
// that failed keeps its own status; the others report the failing rank's.
Status agree(MPI_Comm comm, Status const& mine, double timeout_s, std::string const& phase);

// Rank 0 makes the unique id; the other ranks get it from share_id.
Status create_id(int rank, ncclUniqueId* id);

// Broadcasts rank 0's id over `mpi`, then the barrier, both under one deadline.
Status share_id(MPI_Comm mpi, ncclUniqueId* id, double timeout_s);

// The non-blocking world communicator, polled until made. *world is set even on failure (so that
// it can be aborted).
Status init_world(ncclComm_t* world, int size, ncclUniqueId const& id, int rank, double timeout_s);

// Whether `g` is every rank in order (the world communicator serves it).
bool is_world(std::vector<int> const& g, int size);

// One split of `world` per round of disjoint groups, the same rounds on every rank. Each group of
// more than one rank that is not the world, and that has this rank, gets its communicator in
// `split` and `order` (oldest first) as soon as it is made.
Status split_groups(ncclComm_t world, int rank, int size, std::vector<std::vector<int>> const& groups, double timeout_s,
                    std::map<std::vector<int>, ncclComm_t>* split, std::vector<ncclComm_t>* order);

}  // namespace gp::exec::nccl_bootstrap

#define GP_MPI(call)                                                                                    \
  do {                                                                                                  \
    int gp_rc_ = (call);                                                                                \
    if (gp_rc_ != MPI_SUCCESS)                                                                          \
      return ::gp::io_error(std::string(#call) + ": " + ::gp::exec::nccl_bootstrap::mpi_error(gp_rc_)); \
  } while (0)
