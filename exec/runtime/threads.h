// The compute threads of the calling thread: oneDNN and our OpenMP kernels size their teams by it.
// A pipeline worker sets its own budget (cores / workers), so workers on one machine do not
// oversubscribe it; `graphpipe profile --threads T` measures under the budget a worker will have.
#pragma once

namespace gp::exec {

void set_thread_budget(int threads);  // for parallel regions started by the calling thread
int thread_budget();

// Sets the calling thread's budget for the scope's lifetime (measuring under a worker's budget).
class ScopedThreadBudget {
 public:
  explicit ScopedThreadBudget(int threads) : previous_(thread_budget()) { set_thread_budget(threads); }
  ~ScopedThreadBudget() { set_thread_budget(previous_); }
  ScopedThreadBudget(ScopedThreadBudget const&) = delete;
  ScopedThreadBudget& operator=(ScopedThreadBudget const&) = delete;

 private:
  int previous_;
};
// Cores this process may run on (its affinity mask: under mpirun, a rank's binding).
int available_cores();
// One MPI rank's compute threads: its bound cores, or, when unbound, the machine's cores shared by
// the ranks on this node (OMPI_COMM_WORLD_LOCAL_SIZE).
int rank_thread_budget();

}  // namespace gp::exec
