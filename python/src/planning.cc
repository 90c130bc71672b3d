// Planning from Python: partition, compare, schedule, simulate and profile, each on a model already
// loaded (graphpipe.Model), with plans, schedules, simulations and profiles as objects.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "exec/session/planning.h"
#include "partition/planner.h"
#include "schedule/build.h"
#include "schedule/rank.h"
#include "schedule/report.h"
#include "schedule/schedule_text.h"
#include "schedule/simulator.h"
#include "schedule/trace.h"

namespace gp::python {
namespace {

using Progress = std::function<void(std::string const&)>;

// The problem's settings, as graphpipe.partition's keyword arguments give them (python/graphpipe/).
struct Request {
  session::ProblemSpec spec;
  session::SearchSpec search;
};

Request request_from(std::optional<Model> const& model, nb::dict options) {
  Request r;
  session::ProblemSpec& s = r.spec;
  if (model) {
    s.model = model->file.name;
    s.graph = model->graph;
  }
  for (auto [key, value] : options) {
    std::string const k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    if (k == "profile")
      s.profile = nb::cast<std::string>(value);
    else if (k == "profile_batch")
      s.profile_batch = nb::cast<int64_t>(value);
    else if (k == "devices")
      s.devices = nb::cast<int>(value);
    else if (k == "memory")
      s.memory = nb::cast<std::string>(value);
    else if (k == "cluster")
      s.cluster = nb::cast<std::string>(value);
    else if (k == "bandwidth")
      s.bandwidth = nb::cast<std::string>(value);
    else if (k == "batch")
      s.batch = nb::cast<int64_t>(value);
    else if (k == "micro_batch")
      s.micro_batch = nb::cast<int64_t>(value);
    else if (k == "cost")
      s.cost = nb::cast<std::string>(value);
    else if (k == "measured")
      s.measured = nb::cast<graph::MeasuredProfile>(value);
    else if (k == "replication")
      s.no_replication = !nb::cast<bool>(value);
    else if (k == "communication")
      s.no_communication = !nb::cast<bool>(value);
    else if (k == "recompute")
      s.recompute = nb::cast<std::string>(value);
    else if (k == "rank")
      r.search.rank = nb::cast<std::string>(value);
    else if (k == "max_downsets")
      r.search.max_downsets = nb::cast<int64_t>(value);
    else if (k == "time_limit")
      r.search.time_limit_s = nb::cast<double>(value);
    else if (k == "chain_objective")
      r.search.chain_objective = nb::cast<std::string>(value);
    else if (k == "gpp_max_nodes")
      r.search.gpp_max_nodes = nb::cast<int>(value);
    else
      throw nb::type_error(("unknown planning option '" + k + "'").c_str());
  }
  if (!model && s.profile.empty())
    throw Error("no model: give a graphpipe.Model (graphpipe.load) or profile=graph.txt");
  if (s.recompute != "auto" && s.recompute != "never")
    throw Error("recompute '" + s.recompute + "' is not 'auto' or 'never'");
  return r;
}

// The search's options; `progress` is called with the GIL (the search runs without it).
partition::PlannerOptions planner_options(Request const& r, Progress const& progress) {
  Progress with_gil;
  if (progress)
    with_gil = [progress](std::string const& line) {
      nb::gil_scoped_acquire gil;
      progress(line);
    };
  return value_or_raise(session::planner_options(r.search, std::move(with_gil)));
}

partition::Plan partition_model(std::optional<Model> const& model, std::string const& planner, nb::dict options,
                                Progress const& progress) {
  Request const r = request_from(model, options);
  partition::PlannerOptions const planner_opts = planner_options(r, progress);  // copies `progress` with the GIL
  nb::gil_scoped_release nogil;
  partition::Problem const problem = value_or_raise(session::build_problem(r.spec));
  partition::Plan plan = value_or_raise(partition::plan_with(planner, problem, planner_opts));
  check(partition::validate_plan(plan));
  return plan;
}

// Every planner's row: (planner, plan or None, error).
nb::list compare(std::optional<Model> const& model, nb::dict options, Progress const& progress) {
  Request const r = request_from(model, options);
  partition::PlannerOptions const planner_opts = planner_options(r, progress);
  std::vector<session::PlannerResult> results;
  {
    nb::gil_scoped_release nogil;
    partition::Problem const problem = value_or_raise(session::build_problem(r.spec));
    results = session::compare_planners(problem, planner_opts, r.search.rank == "simulation");
  }
  nb::list out;
  for (auto& res : results)
    out.append(nb::make_tuple(res.planner, res.plan ? nb::cast(std::move(*res.plan)) : nb::none(), res.error));
  return out;
}

schedule::Schedule build(partition::Plan const& plan, std::string const& policy_name, int micro_batches) {
  schedule::Policy const policy = value_or_raise(schedule::parse_policy(policy_name));
  if (micro_batches < 0) throw Error("micro_batches must be >= 1 (or None for the plan's)");
  return value_or_raise(schedule::build_schedule(plan, policy, schedule::BuildOptions{micro_batches, -1}));
}

struct Simulated {
  partition::Plan plan;
  schedule::Schedule schedule;
  schedule::Simulation sim;
};

Simulated simulate(partition::Plan const& plan, std::optional<schedule::Schedule> const& given) {
  Simulated out{plan, given ? *given : build(plan, "auto", 0), {}};
  out.sim = value_or_raise(schedule::simulate(out.plan, out.schedule));
  return out;
}

graph::MeasuredProfile profile(Model const& model, std::string const& backend, std::vector<int64_t> const& sizes,
                               int repeats, int threads, Progress const& progress) {
  session::ProfileRequest request;
  request.backend = backend;
  request.batch_sizes = sizes;
  request.repeats = repeats;
  request.threads = threads;
  if (progress)
    request.on_size = [progress](int64_t n) {
      nb::gil_scoped_acquire gil;
      progress("profiling micro-batch size " + std::to_string(n) + "...");
    };
  nb::gil_scoped_release nogil;
  return value_or_raise(session::profile_model(*model.graph, request));
}

}  // namespace

void bind_planning(nb::module_& m) {
  nb::class_<partition::Plan>(m, "Plan")
      .def("to_json", &partition::plan_to_json)
      .def_static("from_json", [](std::string const& text) { return value_or_raise(partition::plan_from_json(text)); })
      .def_prop_ro("num_stages", [](partition::Plan const& p) { return p.stages.size(); })
      .def_prop_ro("samples_per_s", [](partition::Plan const& p) { return p.samples_per_s; })
      .def_prop_ro("search_time_s", [](partition::Plan const& p) { return p.search_time_s; });

  nb::class_<schedule::Schedule>(m, "Schedule")
      .def("to_text", &schedule::print_schedule)
      .def_static("from_text", [](std::string const& text) { return value_or_raise(schedule::parse_schedule(text)); })
      .def_prop_ro("policy", [](schedule::Schedule const& s) { return s.policy; })
      .def_prop_ro("num_micro_batches", [](schedule::Schedule const& s) { return s.num_micro_batches; })
      .def_prop_ro("num_stages", [](schedule::Schedule const& s) { return s.num_stages; })
      .def_prop_ro("num_devices", [](schedule::Schedule const& s) { return s.devices.size(); });

  nb::class_<Simulated>(m, "Simulation")
      .def_prop_ro("schedule", [](Simulated const& s) { return s.schedule; })
      .def_prop_ro("step_time_s", [](Simulated const& s) { return s.sim.step_time_s; })
      .def_prop_ro("samples_per_step", [](Simulated const& s) { return s.sim.samples_per_step; })
      .def_prop_ro("samples_per_s", [](Simulated const& s) { return s.sim.samples_per_s; })
      .def_prop_ro("bubble_fraction", [](Simulated const& s) { return s.sim.mean_bubble_fraction; })
      .def_prop_ro("peak_memory_bytes", [](Simulated const& s) { return s.sim.peak_memory_bytes; })
      .def_prop_ro("peak_in_flight", [](Simulated const& s) { return s.sim.peak_in_flight; })
      .def_prop_ro("devices",
                   [](Simulated const& s) {
                     nb::list out;
                     for (auto const& d : s.sim.devices) {
                       nb::dict row;
                       row["busy_s"] = d.compute_busy_s;
                       row["bubble_fraction"] = d.bubble_fraction;
                       row["static_bytes"] = d.static_bytes;
                       row["peak_memory_bytes"] = d.peak_memory_bytes;
                       out.append(row);
                     }
                     return out;
                   })
      .def("table", [](Simulated const& s) { return schedule::simulation_table(s.plan, s.schedule, s.sim); })
      .def("to_json", [](Simulated const& s) { return schedule::simulation_json(s.plan, s.schedule, s.sim); })
      .def(
          "chrome_trace",
          [](Simulated const& s, std::string const& title) {
            return schedule::timeline_to_chrome_trace(s.sim.timeline, title);
          },
          nb::arg("title") = "")
      .def(
          "svg",
          [](Simulated const& s, std::string const& title) { return schedule::timeline_to_svg(s.sim.timeline, title); },
          nb::arg("title") = "");

  nb::class_<graph::MeasuredProfile>(m, "Profile")
      .def("to_json", &graph::profile_to_json)
      .def_static("from_json", [](std::string const& text) { return value_or_raise(graph::profile_from_json(text)); })
      .def_static("from_file", [](std::string const& path) { return value_or_raise(graph::read_profile_file(path)); })
      .def("save",
           [](graph::MeasuredProfile const& p, std::string const& path) { check(graph::write_profile_file(p, path)); })
      .def_prop_ro("model", [](graph::MeasuredProfile const& p) { return p.model; })
      .def_prop_ro("device", [](graph::MeasuredProfile const& p) { return p.device; })
      .def_prop_ro("threads", [](graph::MeasuredProfile const& p) { return p.threads; })
      .def_prop_ro("num_ops", [](graph::MeasuredProfile const& p) { return p.ops.size(); });

  m.def("partition", &partition_model, nb::arg("model").none(), nb::arg("planner"), nb::arg("options"),
        nb::arg("progress").none() = nb::none());
  m.def("compare", &compare, nb::arg("model").none(), nb::arg("options"), nb::arg("progress").none() = nb::none());
  m.def("schedule", &build, nb::arg("plan"), nb::arg("policy") = "auto", nb::arg("micro_batches") = 0);
  m.def("simulate", &simulate, nb::arg("plan"), nb::arg("schedule").none() = nb::none());
  m.def("profile", &profile, nb::arg("model"), nb::arg("backend") = "cpu",
        nb::arg("batch_sizes") = std::vector<int64_t>{1, 2, 4, 8}, nb::arg("repeats") = 3, nb::arg("threads") = 0,
        nb::arg("progress").none() = nb::none());
}

}  // namespace gp::python
