#include "exec/runtime/threads.h"

#include <omp.h>

namespace gp::exec {

void set_thread_budget(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }
int thread_budget() { return omp_get_max_threads(); }

}  // namespace gp::exec
