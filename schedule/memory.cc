#include "schedule/memory.h"

#include <algorithm>

#include "schedule/dataflow.h"

namespace gp::schedule {
namespace {

// Walks a device's list, calling visit(index, bytes, stage) after every instruction, `bytes` being
// the most the device holds while the instruction runs.
template <typename Visit>
void walk(PlanView const& view, Schedule const& schedule, std::vector<std::vector<bool>> const& split, int d,
          std::vector<int>& live, Visit&& visit) {
  int64_t bytes = view.static_bytes(d);
  live.assign(view.num_stages(), 0);
  auto const& list = schedule.devices[d];
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    auto const& in = list[i];
    int64_t during = 0;  // a peak inside the instruction, above what it leaves
    if (in.stage >= 0 && in.stage < view.num_stages()) {
      auto const& st = view.stage(in.stage);
      int64_t const act = st.activation_bytes_per_micro_batch, held = view.held_bytes(in.stage);
      bool const is_split = split[in.stage][d];
      if (in.op == Op::kForward) {
        ++live[in.stage];
        bytes += held;
      } else if (in.op == Op::kBackward && st.recompute) {
        // The rerun forward rebuilds the activations next to the stash; after B the stash goes,
        // and under a split what W needs (at most the activations) stays until W.
        during = bytes + act;
        bytes += is_split ? act - held : -held;
        if (!is_split) --live[in.stage];
      } else if (is_split ? in.op == Op::kWeight : in.op == Op::kBackward) {
        --live[in.stage];
        bytes -= act;  // with recompute, B traded the stash for the activations
      }
    }
    visit(i, std::max(during, bytes), in.stage);
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
