#include "exec/comm/mpi_abort.h"

namespace gp::exec {

void MpiAbortNotice::send(std::string const& text) {
  text_ = text;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request req;
    if (MPI_Isend(text_.data(), static_cast<int>(text_.size()), MPI_CHAR, r, kTag, comm_, &req) == MPI_SUCCESS)
      MPI_Request_free(&req);
  }
}

std::optional<Status> MpiAbortNotice::poll() const {
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(MPI_ANY_SOURCE, kTag, comm_, &flag, &st) != MPI_SUCCESS || !flag) return std::nullopt;
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string text(static_cast<std::size_t>(n), '\0');
  MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, kTag, comm_, MPI_STATUS_IGNORE);
  return Status(StatusCode::kAborted, "rank " + std::to_string(st.MPI_SOURCE) + " failed: " + text);
}

}  // namespace gp::exec
