#include "exec/runtime/threads.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace gp::exec {

void set_thread_budget(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }
int thread_budget() { return omp_get_max_threads(); }

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int rank_thread_budget() {
  int const cores = available_cores();
  if (cores < static_cast<int>(std::thread::hardware_concurrency())) return cores;  // bound by mpirun
  int local = 1;
  if (char const* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(env));
  return std::max(1, cores / local);
}

}  // namespace gp::exec
