#include "exec/runtime/link_probe.h"

#include <chrono>
#include <thread>
#include <vector>

#include "exec/comm/in_process.h"

namespace gp::exec {

double measure_in_process_bandwidth(int64_t bytes, int repeats) {
  InProcessHub hub(2);
  auto a = hub.endpoint(0), b = hub.endpoint(1);
  std::vector<Tensor> ta{Tensor::zeros({bytes / 4})}, tb{Tensor::zeros({bytes / 4})};
  double total = 0;
  for (int r = 0; r <= repeats; ++r) {  // r == 0 warms up (page faults, caches)
    auto const t0 = std::chrono::steady_clock::now();
    std::thread other([&] { (void)b->all_reduce_sum({r, 0}, {0, 1}, tb, deadline_after(60)); });
    (void)a->all_reduce_sum({r, 0}, {0, 1}, ta, deadline_after(60));
    other.join();
    double const s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) total += s;
  }
  double const mean = total / repeats;
  return mean > 0 ? static_cast<double>(bytes) / mean : 1e12;  // 2 (r - 1) / r = 1 for r = 2
}

}  // namespace gp::exec
