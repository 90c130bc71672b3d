// Planner comparison: GPP against the sequential baselines (PipeDream-style, Piper-style,
// balanced) on the zoo models (paper size, analytic cost model) and on PipeDream's real profiles.
// Prints one row per planner with search time, states explored, predicted samples/s, and a
// summary of the ratios GPP/(a), GPP/(b), GPP/(c). Settings: bench/partition/README.md.
//
//   bench_partition [--quick] [--time-limit S] [--models mmt,dlrm,...] [--devices 4,8] [--info]
//                   [--chain-objective both|step|bottleneck]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "graph/cost_model.h"
#include "models/zoo.h"
#include "partition/downsets.h"
#include "partition/from_graph.h"
#include "partition/pipedream_profile.h"
#include "partition/synthetic.h"
#include "partition/planner.h"
#include "schedule/rank.h"

namespace gp::partition {
namespace {

struct Setting {
  std::string model;
  bool profile = false;       // a PipeDream profile instead of a zoo model (or a synthetic graph)
  int64_t batch = 0;          // global batch B
  int64_t memory = 0;         // per device, bytes
  int64_t profile_batch = 1;  // profiles: samples the profile's times are for
};

// Zoo models: batch and memory chosen so the sequential plans are memory-bound (README.md).
std::vector<Setting> zoo_settings() {
  return {
      {"mmt", false, 128, int64_t{6} << 30},         {"dlrm", false, 2048, int64_t{8} << 30},
      {"candle_uno", false, 2048, int64_t{8} << 30}, {"inception", false, 256, int64_t{4} << 30},
      {"transformer", false, 128, int64_t{6} << 30},
  };
}

std::vector<Setting> profile_settings() {
  // B = 4x the batch each profile was measured at (inferred from its activation sizes).
  return {
      {"alexnet", true, 1024, int64_t{16} << 30, 256},  {"vgg16", true, 512, int64_t{16} << 30, 128},
      {"resnet18", true, 1024, int64_t{16} << 30, 256}, {"resnet50", true, 512, int64_t{16} << 30, 128},
      {"gnmt", true, 256, int64_t{16} << 30, 64},
  };
}

// Synthetic graphs of 1,000+ nodes (partition/synthetic.h), to time the planners at that size:
// "chain2000" (2,000 nodes in a chain) and "branch16" (a source, 16 branches of 96 nodes, a join and
// a head of 8: 1,546 nodes), affine seeded node costs.
std::vector<Setting> synthetic_settings() {
  return {{"chain2000", true, 256, int64_t{16} << 30, 0}, {"branch16", true, 256, int64_t{16} << 30, 0}};
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / double(int64_t{1} << 30));
  return buf;
}

// "(linearised)" for a sequential planner that cut along one topological order; for GPP, which
// kind of chain won when a chain beat every graph of SP pieces ("(chain: node order)").
std::string mark(Plan const& pl) {
  if (pl.planner != "gpp") return pl.notes.empty() ? "" : "  (linearised)";
  if (pl.notes.rfind("a chain between", 0) == 0) return "  (chain: downsets)";
  std::string const prefix = "a chain of contiguous ranges of the ";
  if (pl.notes.rfind(prefix, 0) != 0) return "";
  return "  (chain: " + pl.notes.substr(prefix.size(), pl.notes.find(';') - prefix.size()) + ")";
}

struct Outcome {
  std::optional<Plan> plan;
  std::string error;
  double seconds = 0;
};

Result<Problem> make_problem(Setting const& s, int devices,
                             std::map<std::string, std::shared_ptr<graph::OpGraph const>>& graphs) {
  Cluster cluster = Cluster::uniform(devices, s.memory);
  if (s.profile && s.profile_batch == 0) {
    ASSIGN_OR_RETURN(Problem p, synthetic_problem(s.model));
    p.cluster = cluster;
    p.batch = s.batch;
    RETURN_IF_ERROR(p.finalize());
    return p;
  }
  if (s.profile) {
    std::string const path =
        std::string(GP_SOURCE_DIR) + "/../shared/data/pipedream-profiles/" + s.model + "/graph.txt";
    ASSIGN_OR_RETURN(Problem p, read_pipedream_profile(path, {.profile_batch = s.profile_batch}));
    p.cluster = cluster;
    p.batch = s.batch;
    RETURN_IF_ERROR(p.finalize());
    return p;
  }
  auto it = graphs.find(s.model);
  if (it == graphs.end()) {
    ASSIGN_OR_RETURN(graph::OpGraph g, models::build_graph(s.model, models::Size::kPaper, 0, false));
    it = graphs.emplace(s.model, std::make_shared<graph::OpGraph const>(std::move(g))).first;
  }
  return problem_from_graph(it->second, std::make_shared<graph::AnalyticCostModel>(), cluster, s.batch);
}

}  // namespace
}  // namespace gp::partition

// The heterogeneous target: paper-size MMT, batch 256, on 4 devices twice as fast as the
// reference plus 4 reference devices (16 GiB each, 4 per node as in the paper's cluster), against 8
// reference devices. Each planner plans both; the mixed cluster is planned on uniform stand-ins
// and placed (partition/problem.h, place_on_cluster).
int heterogeneous_rows(double time_limit, bool progress) {
  using namespace gp::partition;
  auto g = gp::models::build_graph("mmt", gp::models::Size::kPaper, 0, false);
  if (!g.is_ok()) {
    std::fprintf(stderr, "bench_partition: %s\n", g.status().message().c_str());
    return 1;
  }
  auto graph = std::make_shared<gp::graph::OpGraph const>(std::move(*g));
  auto cost = std::make_shared<gp::graph::AnalyticCostModel>();
  Cluster uniform = Cluster::uniform(8, int64_t{16} << 30);
  uniform.devices_per_node = 4;
  for (int d = 0; d < 8; ++d) uniform.devices[d].node = d / 4;
  Cluster mixed = uniform;
  for (int d = 0; d < 4; ++d) mixed.devices[d].speed = 2.0;
  std::printf(
      "Heterogeneous: paper-size MMT, B = 256, 16 GiB devices, 4 per node; mixed = 4 devices of speed 2 "
      "+ 4 of speed 1 (12 speed units), against 8 of speed 1 (ideal ratio 1.5)\n");
  std::printf("%-10s %13s %13s %7s  %s\n", "planner", "8 x ref s/s", "mixed s/s", "ratio", "mixed plan");
  for (std::string planner : {"gpp", "pipedream", "balanced"}) {
    PlannerOptions options;
    options.time_limit_s = time_limit;
    if (progress) options.progress = [](std::string const& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
    double rate[2] = {0, 0};
    std::string how;
    for (int k = 0; k < 2; ++k) {
      auto p = problem_from_graph(graph, cost, k == 0 ? uniform : mixed, 256);
      if (!p.is_ok()) {
        std::printf("%-10s problem: %s\n", planner.c_str(), p.status().message().c_str());
        break;
      }
      auto const start = std::chrono::steady_clock::now();
      auto plan = plan_with(planner, *p, options);
      double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!plan.is_ok()) {
        how = "n/a (" + plan.status().message() + ")";
        break;
      }
      rate[k] = plan->samples_per_s;
      if (k == 1) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%zu stages, depth %d, b=%lld, %.1fs; ", plan->stages.size(), plan->depth,
                      static_cast<long long>(plan->micro_batch), secs);
        how = buf;
        for (PlanStage const& st : plan->stages) {
          how += "[" + std::to_string(st.nodes.size()) + " ops on";
          for (int d : st.devices) how += " " + std::to_string(d);
          how += "]";
        }
      }
    }
    std::printf("%-10s %13.1f %13.1f %7.2f  %s\n", planner.c_str(), rate[0], rate[1],
                rate[0] > 0 ? rate[1] / rate[0] : 0.0, how.c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  using namespace gp::partition;
  bool quick = false, info = false, progress = false, hetero = false;
  double time_limit = 120;
  std::string objectives = "both";  // of the sequential DPs: step (GPP's), bottleneck (their own), or both
  std::vector<std::string> only_models;
  std::vector<int> only_devices;
  auto split = [](std::string const& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(item);
    return out;
  };
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--info")
      info = true;
    else if (a == "--progress")
      progress = true;
    else if (a == "--hetero")
      hetero = true;
    else if (a == "--time-limit" && i + 1 < argc)
      time_limit = std::stod(argv[++i]);
    else if (a == "--models" && i + 1 < argc)
      only_models = split(argv[++i]);
    else if (a == "--devices" && i + 1 < argc)
      for (auto const& d : split(argv[++i])) only_devices.push_back(std::stoi(d));
    else if (a == "--chain-objective" && i + 1 < argc &&
             (std::strcmp(argv[i + 1], "both") == 0 || std::strcmp(argv[i + 1], "step") == 0 ||
              std::strcmp(argv[i + 1], "bottleneck") == 0))
      objectives = argv[++i];
    else {
      std::fprintf(
          stderr,
          "usage: bench_partition [--quick] [--info] [--progress] [--time-limit S] [--models a,b] [--devices 4,8] "
          "[--chain-objective both|step|bottleneck]\n");
      return 2;
    }
  }
  std::map<std::string, std::shared_ptr<gp::graph::OpGraph const>> graphs;
  std::vector<std::pair<Setting, std::vector<int>>> rows;
  for (auto const& s : zoo_settings())
    rows.push_back({s, quick ? std::vector<int>{4, 16} : std::vector<int>{4, 8, 16, 32}});
  for (auto const& s : profile_settings())
    rows.push_back({s, quick ? std::vector<int>{4} : std::vector<int>{2, 4, 8, 16}});
  for (auto const& s : synthetic_settings())
    rows.push_back({s, quick ? std::vector<int>{16} : std::vector<int>{8, 32}});

  if (hetero) return heterogeneous_rows(time_limit, progress);
  if (info) {
    std::printf("%-12s %6s %6s %10s %12s %12s %12s %10s\n", "model", "nodes", "edges", "downsets", "weights_GiB",
                "act/sample_MiB", "fwd_ms@b=1", "B");
    for (auto const& [s, devs] : rows) {
      if (!only_models.empty() && std::find(only_models.begin(), only_models.end(), s.model) == only_models.end())
        continue;
      auto p = make_problem(s, 1, graphs);
      if (!p) {
        std::printf("%-12s error: %s\n", s.model.c_str(), p.status().message().c_str());
        continue;
      }
      int64_t w = 0, a = 0;
      for (auto const& n : p->nodes) w += n.weight_bytes, a += n.activation_bytes_per_sample;
      double t = 0;
      for (auto const& nt : p->node_times(1)) t += nt.total_s();
      auto ds = enumerate_downsets(*p, 200000);
      std::string dcount = ds ? std::to_string(ds->count()) : ">200000";
      std::printf("%-12s %6zu %6zu %10s %12s %12.1f %12.3f %10lld\n", s.model.c_str(), p->nodes.size(), p->edges.size(),
                  dcount.c_str(), gib(double(w)).c_str(), double(a) / (1 << 20), t * 1e3, (long long)s.batch);
    }
    return 0;
  }

  // (a) and (b) minimise the step time as GPP does; (a') and (b') their own objective, the least
  // max stage time per micro-batch size (then the least step time across sizes).
  struct Entry {
    char const* planner;
    char const* label;
    char const* column;
    ChainObjective objective;
    bool recompute = false;  // Problem::allow_recompute
    bool ranked = false;     // plans judged by simulation (PlannerOptions::evaluate), as graphpipe partition does
  };
  std::vector<Entry> entries = {{"gpp", "gpp", "", ChainObjective::kStepTime}};
  // GPP again with per-stage activation recomputation allowed: its column is rc/GPP, what
  // recomputation buys on top of GPP (1.00 where memory does not bind).
  entries.push_back({"gpp", "gpp+rc", "rc/GPP", ChainObjective::kStepTime, true});
  // GPP as `graphpipe partition` runs it by default (--rank simulation): its best candidates judged
  // by simulating their best schedules; samples/s is then the simulated one. Its column is sim/GPP.
  entries.push_back({"gpp", "gpp+sim", "sim/GPP", ChainObjective::kStepTime, false, true});
  if (objectives != "bottleneck") {
    entries.push_back({"pipedream", "pipedream", "GPP/(a)", ChainObjective::kStepTime});
    entries.push_back({"piper", "piper", "GPP/(b)", ChainObjective::kStepTime});
  }
  entries.push_back({"balanced", "balanced", "GPP/(c)", ChainObjective::kStepTime});
  if (objectives != "step") {
    entries.push_back({"pipedream", "pipedream'", "GPP/(a')", ChainObjective::kBottleneck});
    entries.push_back({"piper", "piper'", "GPP/(b')", ChainObjective::kBottleneck});
  }
  int const count = static_cast<int>(entries.size());
  struct Summary {
    std::string model;
    int devices;
    std::vector<double> ratio;
    std::vector<char> have;
    double bound = 0;              // perfect-scaling samples/s (see ideal_samples_per_s)
    double gpp = 0, best_seq = 0;  // samples/s; 0 when none
  };
  std::vector<Summary> summaries;
  std::printf("%-11s %4s %5s %-10s %10s %10s %11s %5s %5s %6s %9s %8s\n", "model", "dev", "B", "planner", "search_s",
              "states", "samples/s", "depth", "b", "stages", "peak_GiB", "GPP/x");
  for (auto const& [s, devs] : rows) {
    if (!only_models.empty() && std::find(only_models.begin(), only_models.end(), s.model) == only_models.end())
      continue;
    for (int n : devs) {
      if (!only_devices.empty() && std::find(only_devices.begin(), only_devices.end(), n) == only_devices.end())
        continue;
      auto p = make_problem(s, n, graphs);
      if (!p) {
        std::printf("%-11s %4d error: %s\n", s.model.c_str(), n, p.status().message().c_str());
        continue;
      }
      std::vector<Outcome> out(count);
      for (int k = 0; k < count; ++k) {
        PlannerOptions options;
        options.time_limit_s = time_limit;
        options.chain_objective = entries[k].objective;
        if (entries[k].ranked) options.evaluate = gp::schedule::simulation_evaluator();
        if (progress) options.progress = [](std::string const& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
        auto const start = std::chrono::steady_clock::now();
        Problem q = *p;
        q.allow_recompute = entries[k].recompute;
        auto plan = plan_with(entries[k].planner, q, options);
        out[k].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (plan)
          out[k].plan = std::move(plan).value();
        else
          out[k].error = plan.status().message();
      }
      Summary sum{s.model, n, std::vector<double>(count - 1, 0.0), std::vector<char>(count - 1, 0)};
      sum.bound = ideal_samples_per_s(*p);
      if (out[0].plan) sum.gpp = out[0].plan->samples_per_s;
      for (int k = 1; k < count; ++k)
        if (out[k].plan && entries[k].planner != std::string("gpp"))
          sum.best_seq = std::max(sum.best_seq, out[k].plan->samples_per_s);
      for (int k = 0; k < count; ++k) {
        char ratio[32] = "";
        if (k > 0 && out[0].plan && out[k].plan) {
          sum.ratio[k - 1] = entries[k].recompute || entries[k].ranked
                                 ? out[k].plan->samples_per_s / out[0].plan->samples_per_s
                                 : out[0].plan->samples_per_s / out[k].plan->samples_per_s;
          sum.have[k - 1] = true;
          std::snprintf(ratio, sizeof ratio, "%.2f", sum.ratio[k - 1]);
        }
        if (out[k].plan) {
          Plan const& pl = *out[k].plan;
          double peak = 0;
          for (auto const& st : pl.stages) peak = std::max(peak, double(st.peak_memory_bytes));
          std::printf("%-11s %4d %5lld %-10s %10.4f %10lld %11.1f %5d %5lld %6zu %9s %8s%s\n", s.model.c_str(), n,
                      (long long)s.batch, entries[k].label, out[k].seconds, (long long)pl.states_explored,
                      pl.samples_per_s, pl.depth, (long long)pl.micro_batch, pl.stages.size(), gib(peak).c_str(), ratio,
                      mark(pl).c_str());
        } else {
          std::printf("%-11s %4d %5lld %-10s %10.4f %10s %11s  n/a (%s)\n", s.model.c_str(), n, (long long)s.batch,
                      entries[k].label, out[k].seconds, "-", "n/a", out[k].error.c_str());
        }
      }
      std::fflush(stdout);
      summaries.push_back(sum);
    }
  }
  std::printf(
      "\nSummary: rc/GPP, GPP with per-stage activation recomputation over GPP without; sim/GPP, the simulated\n"
      "samples/s of GPP ranked by simulation (graphpipe partition's default) over GPP's formula; GPP throughput over\n"
      "(a) PipeDream-style, (b) Piper-style, (c) balanced, (a') and (b') the same planners with their own\n"
      "objective (least max stage time); and GPP and the best sequential plan as a fraction of the\n"
      "perfect-scaling bound (no plan of any shape can exceed 1)\n");
  std::printf("%-11s %4s", "model", "dev");
  for (int k = 1; k < count; ++k) std::printf(" %8s", entries[k].column);
  std::printf(" %9s %9s\n", "GPP/bnd", "seq/bnd");
  for (auto const& s : summaries) {
    std::printf("%-11s %4d", s.model.c_str(), s.devices);
    for (int k = 0; k < count - 1; ++k) {
      if (s.have[k])
        std::printf(" %8.2f", s.ratio[k]);
      else
        std::printf(" %8s", "n/a");
    }
    auto frac = [&](double x) { return x > 0 && s.bound > 0 ? x / s.bound : -1.0; };
    if (frac(s.gpp) >= 0)
      std::printf(" %9.2f", frac(s.gpp));
    else
      std::printf(" %9s", "n/a");
    if (frac(s.best_seq) >= 0)
      std::printf(" %9.2f", frac(s.best_seq));
    else
      std::printf(" %9s", "n/a");
    std::printf("\n");
  }
  return 0;
}
