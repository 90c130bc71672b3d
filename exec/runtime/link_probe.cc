#include "exec/runtime/link_probe.h"

#include <algorithm>
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

Result<MeasuredLink> measure_device_link(Backend& from, Backend& to, int64_t bytes, int repeats) {
  int64_t const small = 4096;
  bytes = std::max(bytes, 2 * small);
  InProcessHub hub(2);
  hub.set_device_allocator(1, &to.allocator());  // as the runtime sets it for a device worker
  auto const sender = hub.endpoint(0), receiver = hub.endpoint(1);
  int64_t step = 0;
  // One transfer's seconds: the tensor written by a kernel of `from` and done before the clock
  // starts (its fence is then already passed, as a pipeline's usually is by the time it is read).
  auto const once = [&](int64_t n) -> Result<double> {
    Tensor t = from.empty({n / 4});
    RETURN_IF_ERROR(from.fill(t, 1.f));
    RETURN_IF_ERROR(from.synchronize());
    MessageKey const key{step++, 0, false, 0, 0, 1};
    auto const t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(sender->send(key, {t}, from.fence(Backend::StreamKind::kCompute)));
    ASSIGN_OR_RETURN(std::vector<Tensor> got, receiver->recv(key, {meta_of(t)}, deadline_after(60)));
    RETURN_IF_ERROR(to.synchronize());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto const median = [&](int64_t n) -> Result<double> {
    RETURN_IF_ERROR(once(n).status());  // warm-up: the allocators' first blocks, peer access
    std::vector<double> times;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      ASSIGN_OR_RETURN(double s, once(n));
      times.push_back(s);
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    return times[times.size() / 2];
  };
  ASSIGN_OR_RETURN(double const t_small, median(small));
  ASSIGN_OR_RETURN(double const t_big, median(bytes));
  MeasuredLink link;
  link.latency_s = t_small;
  // Noise can make the large transfer no slower than the small one: then its bytes over its whole
  // time (a lower bound of the bandwidth).
  double const extra = t_big - t_small;
  link.bandwidth_bytes_per_s =
      extra > 0 ? static_cast<double>(bytes - small) / extra : static_cast<double>(bytes) / std::max(t_big, 1e-9);
  return link;
}

}  // namespace gp::exec
