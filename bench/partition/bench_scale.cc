// Planner scale: search time of GPP and the sequential planners on graphs of ~1,000 and ~10,000
// operators (deep transformers from the zoo, synthetic chains and fork/join graphs) on 8, 64 and
// 1,024 devices (the first n of examples/clusters/cluster_128x8.yaml: 128 nodes of 8 V100-class
// GPUs). One row per (graph, devices, planner): search seconds, predicted samples/s, stages,
// stage-graph depth, micro-batch, or "n/a (reason)". Results: bench/partition/README.md, "Scale".
//
//   bench_scale [--quick] [--planners gpp,pipedream,piper,balanced] [--time-limit S]
//               [--graphs transformer,chain1000,branchy10000,...] [--devices 8,64,1024]
//               [--layers 32,344] [--hidden 1024] [--cluster file.yaml] [--gpp-max-nodes N] [--vs-exact]
//
// --gpp-max-nodes: GPP plans graphs of more nodes on at most N groups of them (partition/coarsen.h;
// default PlannerOptions::gpp_max_nodes; 0: every node, the exact DP). --vs-exact: each GPP row
// that planned on groups also runs the exact DP (same time limit) and prints the ratio of the two
// plans' predicted samples/s and the exact search's seconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "graph/cost_model.h"
#include "models/zoo.h"
#include "partition/from_graph.h"
#include "partition/planner.h"
#include "partition/synthetic.h"

namespace gp::partition {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<std::string> split(std::string const& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// A graph row: a zoo transformer ("transformer" with its layers and width) or a synthetic name.
struct GraphSpec {
  std::string label;   // "transformer-L32-h1024", "branchy10000"
  int64_t layers = 0;  // transformer only
  int64_t hidden = 0;  // transformer only
  bool zoo = false;
};

// Global batch: 2 samples per device, at least 256, so b has room on 8 devices and every
// replica of a 1,024-device plan gets a sample (8: 256, 64: 256, 1,024: 2,048).
int64_t batch_for(int devices) { return std::max<int64_t>(256, 2 * int64_t{devices}); }

// Micro-batch candidates: the powers of two b with 4 <= m = B / b <= 256 (B = 256: b = 1..64;
// B = 2,048: b = 8..512), 7 sizes instead of the 9 to 12 powers of two dividing B: fewer than 4
// micro-batches leave a pipeline mostly fill and drain, more than 256 only add per-message latency.
std::vector<int64_t> micro_batches_for(int64_t batch) {
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= batch; b *= 2) {
    if (batch % b == 0 && batch / b >= 4 && batch / b <= 256) sizes.push_back(b);
  }
  return sizes;
}

Result<Problem> make_problem(GraphSpec const& g, Cluster const& cluster, std::shared_ptr<graph::OpGraph const>& cache) {
  int64_t const batch = batch_for(cluster.size());
  if (!g.zoo) {
    ASSIGN_OR_RETURN(SyntheticSpec spec, synthetic_spec(g.label));
    spec.cluster = cluster;
    spec.batch = batch;
    ASSIGN_OR_RETURN(Problem p, synthetic_problem(spec));
    p.model = g.label;
    p.micro_batch_candidates = micro_batches_for(batch);
    RETURN_IF_ERROR(p.finalize());
    return p;
  }
  if (!cache) {
    models::BuildOptions options{.layers = g.layers, .hidden = g.hidden};
    ASSIGN_OR_RETURN(graph::OpGraph built, models::build_graph("transformer", models::Size::kPaper, options, false));
    cache = std::make_shared<graph::OpGraph const>(std::move(built));
  }
  ASSIGN_OR_RETURN(Problem p, problem_from_graph(cache, std::make_shared<graph::AnalyticCostModel>(), cluster, batch));
  p.model = g.label;
  p.micro_batch_candidates = micro_batches_for(batch);
  RETURN_IF_ERROR(p.finalize());
  return p;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_scale [--quick] [--planners gpp,pipedream,piper,balanced] [--time-limit S]\n"
               "                   [--graphs transformer,chain1000,branchy1000,chain10000,branchy10000]\n"
               "                   [--devices 8,64,1024] [--layers 32,344] [--hidden 1024] [--cluster file.yaml]\n"
               "                   [--gpp-max-nodes N] [--vs-exact]\n"
               "example: bench_scale --quick --time-limit 20\n");
  return 2;
}

}  // namespace
}  // namespace gp::partition

int main(int argc, char** argv) {
  using namespace gp::partition;
  bool quick = false;
  double time_limit = 60;
  std::vector<std::string> planners = {"gpp", "pipedream", "piper", "balanced"};
  std::vector<std::string> graph_names;
  std::vector<int> devices;
  std::vector<int64_t> layers = {32, 344};  // paper transformer: 935 and 10,023 operators
  int64_t hidden = 1024;
  int gpp_max_nodes = PlannerOptions{}.gpp_max_nodes;
  bool vs_exact = false;
  std::string cluster_path = std::string(GP_SOURCE_DIR) + "/examples/clusters/cluster_128x8.yaml";
  try {
    for (int i = 1; i < argc; ++i) {
      std::string const a = argv[i];
      bool const has_value = i + 1 < argc;
      if (a == "--quick") {
        quick = true;
      } else if (a == "--time-limit" && has_value) {
        time_limit = std::stod(argv[++i]);
      } else if (a == "--planners" && has_value) {
        planners = split(argv[++i]);
      } else if (a == "--graphs" && has_value) {
        graph_names = split(argv[++i]);
      } else if (a == "--devices" && has_value) {
        for (auto const& d : split(argv[++i])) devices.push_back(std::stoi(d));
      } else if (a == "--layers" && has_value) {
        layers.clear();
        for (auto const& l : split(argv[++i])) layers.push_back(std::stoll(l));
      } else if (a == "--hidden" && has_value) {
        hidden = std::stoll(argv[++i]);
      } else if (a == "--vs-exact") {
        vs_exact = true;
      } else if (a == "--gpp-max-nodes" && has_value) {
        gpp_max_nodes = std::stoi(argv[++i]);
      } else if (a == "--cluster" && has_value) {
        cluster_path = argv[++i];
      } else {
        return usage();
      }
    }
  } catch (std::exception const&) {
    return usage();
  }
  if (graph_names.empty()) {
    graph_names =
        quick ? std::vector<std::string>{"transformer", "chain1000", "branchy1000"}
              : std::vector<std::string>{"transformer", "chain1000", "branchy1000", "chain10000", "branchy10000"};
  }
  if (devices.empty()) devices = quick ? std::vector<int>{8, 1024} : std::vector<int>{8, 64, 1024};
  if (quick && layers.size() > 1) layers.resize(1);

  auto full = Cluster::from_yaml_file(cluster_path);
  if (!full) {
    std::fprintf(stderr, "bench_scale: %s\n", full.status().message().c_str());
    return 1;
  }
  std::vector<GraphSpec> graphs;
  for (auto const& name : graph_names) {
    if (name != "transformer") {
      graphs.push_back({name});
      continue;
    }
    for (int64_t l : layers)
      graphs.push_back({"transformer-L" + std::to_string(l) + "-h" + std::to_string(hidden), l, hidden, true});
  }

  std::printf("%-22s %6s %5s %5s %-10s %9s %10s %11s %6s %5s %5s\n", "graph", "ops", "dev", "B", "planner", "search_s",
              "states", "samples/s", "stages", "depth", "b");
  int const total = static_cast<int>(graphs.size() * devices.size() * planners.size());
  int done = 0;
  auto const bench_start = Clock::now();
  for (auto const& g : graphs) {
    std::shared_ptr<gp::graph::OpGraph const> cache;
    for (int n : devices) {
      if (n < 1 || n > full->size()) {
        std::fprintf(stderr, "bench_scale: %d devices: the cluster has 1..%d\n", n, full->size());
        return 1;
      }
      Cluster cluster = *full;
      cluster.devices.resize(static_cast<std::size_t>(n));
      auto const build_start = Clock::now();
      auto p = make_problem(g, cluster, cache);
      if (!p) {
        std::printf("%-22s %6s %5d %5s error: %s\n", g.label.c_str(), "-", n, "-",
                    one_line(p.status().message()).c_str());
        done += static_cast<int>(planners.size());
        continue;
      }
      std::fprintf(stderr, "[%7.1fs] %s: %zu ops, %zu edges, %d devices, B=%lld (built in %.2fs)\n", since(bench_start),
                   g.label.c_str(), p->nodes.size(), p->edges.size(), n, static_cast<long long>(p->batch),
                   since(build_start));
      for (auto const& planner : planners) {
        ++done;
        std::fprintf(stderr, "[%7.1fs] (%d/%d) %s %d devices: %s...\n", since(bench_start), done, total,
                     g.label.c_str(), n, planner.c_str());
        PlannerOptions options;
        options.time_limit_s = time_limit;
        options.gpp_max_nodes = gpp_max_nodes;
        auto last = Clock::now();
        options.progress = [&](std::string const& line) {  // at most one line every 5 s
          if (since(last) < 5 && line.find("searched") == std::string::npos &&
              line.find("evaluations") == std::string::npos)
            return;
          last = Clock::now();
          std::fprintf(stderr, "[%7.1fs]   %s\n", since(bench_start), line.c_str());
        };
        auto const start = Clock::now();
        auto plan = plan_with(planner, *p, options);
        double const seconds = since(start);
        if (plan) {
          std::string exact;
          if (vs_exact && planner == "gpp" && gpp_max_nodes > 0 && static_cast<int>(p->nodes.size()) > gpp_max_nodes) {
            PlannerOptions all = options;
            all.gpp_max_nodes = 0;
            auto const exact_start = Clock::now();
            auto best = plan_with(planner, *p, all);
            char buf[96];
            if (best)
              std::snprintf(buf, sizeof buf, "  %.4f of exact (%.3f s)", plan->samples_per_s / best->samples_per_s,
                            since(exact_start));
            else
              std::snprintf(buf, sizeof buf, "  exact: n/a (%.3f s)", since(exact_start));
            exact = buf;
          }
          std::printf("%-22s %6zu %5d %5lld %-10s %9.3f %10lld %11.1f %6zu %5d %5lld%s\n", g.label.c_str(),
                      p->nodes.size(), n, static_cast<long long>(p->batch), planner.c_str(), seconds,
                      static_cast<long long>(plan->states_explored), plan->samples_per_s, plan->stages.size(),
                      plan->depth, static_cast<long long>(plan->micro_batch), exact.c_str());
        } else {
          std::printf("%-22s %6zu %5d %5lld %-10s %9.3f %10s %11s  n/a (%s)\n", g.label.c_str(), p->nodes.size(), n,
                      static_cast<long long>(p->batch), planner.c_str(), seconds, "-", "-",
                      one_line(plan.status().message()).c_str());
        }
        std::fflush(stdout);
      }
    }
  }
  std::fprintf(stderr, "[%7.1fs] done\n", since(bench_start));
  return 0;
}
