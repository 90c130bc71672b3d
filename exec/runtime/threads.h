// The compute threads of the calling thread: oneDNN and our OpenMP kernels size their teams by it.
// A pipeline worker sets its own budget (cores / workers), so workers on one machine do not
// oversubscribe it; `graphpipe profile --threads T` measures under the budget a worker will have.
#pragma once

namespace gp::exec {

void set_thread_budget(int threads);  // for parallel regions started by the calling thread
int thread_budget();

}  // namespace gp::exec
