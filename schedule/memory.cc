#include "schedule/memory.h"

#include <algorithm>

#include "schedule/dataflow.h"

namespace gp::schedule {
namespace {

// Walks a device's list, calling visit(index, bytes) after every instruction.
template <typename Visit>
void walk(PlanView const& view, Schedule const& schedule, std::vector<std::vector<bool>> const& split, int d,
          std::vector<int>& live, Visit&& visit) {
  int64_t bytes = view.static_bytes(d);
  live.assign(view.num_stages(), 0);
  auto const& list = schedule.devices[d];
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    auto const& in = list[i];
    if (in.stage >= 0 && in.stage < view.num_stages()) {
      int64_t const act = view.stage(in.stage).activation_bytes_per_micro_batch;
      bool const frees = split[in.stage][d] ? in.op == Op::kWeight : in.op == Op::kBackward;
      if (in.op == Op::kForward) {
        ++live[in.stage];
        bytes += act;
      } else if (frees) {
        --live[in.stage];
        bytes -= act;
      }
    }
    visit(i, bytes, in.stage);
  }
}

}  // namespace

std::vector<DeviceMemory> account_memory(PlanView const& view, Schedule const& schedule) {
  auto const split = split_backward(view, schedule);
  std::vector<DeviceMemory> out(schedule.num_devices());
  std::vector<int> live;
  for (int d = 0; d < schedule.num_devices(); ++d) {
    auto& mem = out[d];
    mem.static_bytes = d < view.num_devices() ? view.static_bytes(d) : 0;
    mem.peak_bytes = mem.static_bytes;
    mem.peak_in_flight.assign(view.num_stages(), 0);
    if (d >= view.num_devices()) continue;
    walk(view, schedule, split, d, live, [&](int i, int64_t bytes, int stage) {
      if (bytes > mem.peak_bytes) {
        mem.peak_bytes = bytes;
        mem.peak_index = i;
      }
      if (stage >= 0 && stage < view.num_stages())
        mem.peak_in_flight[stage] = std::max(mem.peak_in_flight[stage], live[stage]);
    });
  }
  return out;
}

int first_over_limit(PlanView const& view, Schedule const& schedule, int device, int64_t limit) {
  auto const split = split_backward(view, schedule);
  std::vector<int> live;
  int first = -1;
  walk(view, schedule, split, device, live, [&](int i, int64_t bytes, int) {
    if (first < 0 && bytes > limit) first = i;
  });
  return first;
}

}  // namespace gp::schedule
