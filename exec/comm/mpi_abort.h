// The abort notice of the transports that run over MPI ranks (MPI, NCCL): the first rank that
// fails tells every other rank why, with one message on a reserved tag of the transport's private
// communicator, and every wait loop polls for one, so a dead or failing rank never leaves the
// others waiting until their deadlines.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

#include "core/status.h"

namespace gp::exec {

class MpiAbortNotice {
 public:
  static constexpr int kTag = 0;  // reserved on the transport's communicator

  MpiAbortNotice(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  // To every other rank, non-blocking and never waited for (the sender may be on its way out).
  void send(std::string const& text);
  // kAborted "rank r failed: <text>" once another rank's notice has arrived, else nullopt.
  std::optional<Status> poll() const;

 private:
  MPI_Comm comm_;
  int rank_, size_;
  std::string text_;  // outlives the sends, which read it after send() returns
};

}  // namespace gp::exec
