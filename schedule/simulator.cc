#include "schedule/simulator.h"

#include <algorithm>

#include "schedule/dataflow.h"
#include "schedule/memory.h"
#include "schedule/plan_view.h"
#include "schedule/validate.h"

namespace gp::schedule {

Result<Simulation> simulate(partition::Plan const& plan, Schedule const& schedule) {
  RETURN_IF_ERROR(check_schedule(plan, schedule, CheckOptions{0}));
  ASSIGN_OR_RETURN(PlanView view, PlanView::make(plan));
  auto flow = run_dataflow(view, schedule);
  if (!flow.blocked.empty()) return internal_error("the dry run blocked after the validator passed the schedule");
  Simulation sim;
  sim.timeline = std::move(flow.timeline);
  sim.step_time_s = sim.timeline.end_s();
  sim.samples_per_step = static_cast<int64_t>(schedule.num_micro_batches) * std::max<int64_t>(1, plan.micro_batch);
  sim.samples_per_s = sim.step_time_s > 0 ? static_cast<double>(sim.samples_per_step) / sim.step_time_s : 0;
  int const D = schedule.num_devices();
  sim.devices.assign(D, {});
  for (auto const& iv : sim.timeline.intervals)
    if (iv.stream == Stream::kCompute) sim.devices[iv.device].compute_busy_s += iv.end_s - iv.start_s;
  auto const mem = account_memory(view, schedule);
  sim.peak_in_flight.assign(view.num_stages(), 0);
  for (int d = 0; d < D; ++d) {
    auto& dev = sim.devices[d];
    dev.bubble_fraction = sim.step_time_s > 0 ? 1.0 - dev.compute_busy_s / sim.step_time_s : 0;
    dev.static_bytes = mem[d].static_bytes;
    dev.peak_memory_bytes = mem[d].peak_bytes;
    sim.peak_memory_bytes = std::max(sim.peak_memory_bytes, dev.peak_memory_bytes);
    sim.mean_bubble_fraction += dev.bubble_fraction / D;
    for (int s = 0; s < view.num_stages(); ++s)
      sim.peak_in_flight[s] = std::max(sim.peak_in_flight[s], mem[d].peak_in_flight[s]);
  }
  return sim;
}

}  // namespace gp::schedule
