// The GraphPipe paper's protocol (../shared/research/graphpipe_digest.md §9): 16 GiB V100-class
// devices, 4 per node over NVLink, 100 Gb/s between nodes, 4-32 devices; for each device count a
// mini-batch B chosen near where the sequential baseline saturates (rule below), every micro-batch
// size dividing B swept; GPP against PipeDream-style and Piper-style planners with their own
// objective (least max stage time), next to the paper's Figure 6 ratios. Settings and measured
// table: bench/partition/README.md, "The paper's protocol (bench_paper)".
//
//   bench_paper [--quick] [--time-limit S] [--models mmt,dlrm,candle_uno] [--devices 4,8,16,32]
//               [--batch B] [--min-gain G] [--stages]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "graph/cost_model.h"
#include "models/zoo.h"
#include "partition/from_graph.h"
#include "partition/planner.h"

namespace gp::partition {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int kMinBatchLog2 = 4;  // B searched over 2^4 .. 2^16
constexpr int kMaxBatchLog2 = 16;
constexpr int kQuickMaxBatchLog2 = 12;

// Summit: 4 V100 (16 GB) per node, NVLink inside a node, EDR InfiniBand (100 Gb/s) between nodes.
Cluster paper_cluster(int devices) {
  Cluster c;
  c.devices_per_node = 4;
  c.devices.resize(static_cast<std::size_t>(devices));
  for (int i = 0; i < devices; ++i) {
    Device& d = c.devices[static_cast<std::size_t>(i)];
    d.memory_bytes = 16 * kGiB;
    d.speed = 1.0;
    d.peak_flops = 15.7e12;  // V100 fp32
    d.memory_bandwidth = 900e9;
    d.node = i / c.devices_per_node;
  }
  // NVLink 2 on a V100 gives about 150 GB/s per direction (six 25 GB/s links); Summit's nodes pair
  // each GPU with its neighbours over 2-3 of them, so this is the generous end.
  c.intra_node = Link{150e9, 5e-6};
  c.inter_node = Link{12.5e9, 10e-6};  // 100 Gb/s EDR InfiniBand
  return c;
}

// Figure 6, GraphPipe over PipeDream, read off the plot (±3-5%), at 4, 8, 16, 32 GPUs.
std::optional<double> paper_ratio(std::string const& model, int devices) {
  static std::map<std::string, std::vector<double>> const table = {
      {"mmt", {1.13, 1.26, 1.29, 1.66}},
      {"dlrm", {1.19, 1.40, 1.30, 1.47}},
      {"candle_uno", {0.92, 1.23, 1.23, 1.24}},
  };
  int const column = devices == 4 ? 0 : devices == 8 ? 1 : devices == 16 ? 2 : devices == 32 ? 3 : -1;
  auto it = table.find(model);
  if (it == table.end() || column < 0) return std::nullopt;
  return it->second[static_cast<std::size_t>(column)];
}

// The target: the paper's ratio at 8-32 devices, at least parity at 4 (where the paper lost
// CANDLE-Uno, 0.92).
std::optional<double> target_ratio(std::string const& model, int devices) {
  auto const paper = paper_ratio(model, devices);
  if (!paper) return std::nullopt;
  return devices == 4 ? 1.0 : *paper;
}

struct Outcome {
  std::optional<Plan> plan;
  std::string error;
  double seconds = 0;
};

Outcome run_planner(std::string const& planner, Problem const& p, double time_limit) {
  PlannerOptions options;
  options.time_limit_s = time_limit;
  options.chain_objective = ChainObjective::kBottleneck;  // their own objective (GPP ignores it)
  Outcome out;
  auto const start = std::chrono::steady_clock::now();
  auto plan = plan_with(planner, p, options);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (plan)
    out.plan = std::move(plan).value();
  else
    out.error = plan.status().message();
  return out;
}

double peak_gib(Plan const& pl) {
  int64_t peak = 0;
  for (auto const& st : pl.stages) peak = std::max(peak, st.peak_memory_bytes);
  return static_cast<double>(peak) / static_cast<double>(kGiB);
}

// The mini-batch rule, after the paper's "close to the memory limit": start at B = 2^4 and double
// while (1) the PipeDream-style plan (own objective) at 2B still fits in memory and (2) its samples/s
// at 2B beat those at B by more than `min_gain` (default 5%). B stops at 2^16 (2^12 with --quick).
// Under 1F1B a stage holds depth micro-batches whatever B is, so memory alone never stops B from
// growing once b = 1 fits; (2) stops it where the baseline's pipeline fill is already amortised.
struct BatchChoice {
  int64_t batch = 0;
  Outcome pipedream;    // at `batch`
  std::string trail;    // "16:1234 32:1400 ..." samples/s of the baseline at each B tried
  std::string stopped;  // why the doubling stopped
  double seconds = 0;   // all the baseline runs of the search
};

BatchChoice choose_batch(std::shared_ptr<graph::OpGraph const> const& graph, Cluster const& cluster, int max_batch_log2,
                         double min_gain, double time_limit, std::string const& label) {
  BatchChoice choice;
  auto cost = std::make_shared<graph::AnalyticCostModel>();
  for (int k = kMinBatchLog2; k <= max_batch_log2; ++k) {
    int64_t const batch = int64_t{1} << k;
    auto problem = problem_from_graph(graph, cost, cluster, batch);
    Outcome out;
    if (problem) {
      out = run_planner("pipedream", *problem, time_limit);
    } else {
      out.error = problem.status().message();
    }
    choice.seconds += out.seconds;
    char step[64];
    if (out.plan)
      std::snprintf(step, sizeof step, "%s%lld:%.0f", choice.trail.empty() ? "" : " ", (long long)batch,
                    out.plan->samples_per_s);
    else
      std::snprintf(step, sizeof step, "%s%lld:n/a", choice.trail.empty() ? "" : " ", (long long)batch);
    choice.trail += step;
    std::fprintf(stderr, "  %s B=%lld pipedream %s (%.1f s)\n", label.c_str(), (long long)batch,
                 out.plan ? std::to_string(out.plan->samples_per_s).c_str() : out.error.c_str(), out.seconds);
    if (!out.plan) {
      choice.stopped = choice.batch == 0 ? "no plan at B=" + std::to_string(batch) + ": " + out.error
                                         : "B=" + std::to_string(batch) + ": " + out.error;
      break;
    }
    if (choice.pipedream.plan && out.plan->samples_per_s <= (1 + min_gain) * choice.pipedream.plan->samples_per_s) {
      char why[96];
      std::snprintf(why, sizeof why, "B=%lld gains %.1f%% <= %g%%", (long long)batch,
                    100 * (out.plan->samples_per_s / choice.pipedream.plan->samples_per_s - 1), 100 * min_gain);
      choice.stopped = why;
      break;
    }
    choice.batch = batch;
    choice.pipedream = std::move(out);
    if (k == max_batch_log2) choice.stopped = "largest B searched";
  }
  return choice;
}

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

struct Row {
  std::string model;
  int devices = 0;
  BatchChoice choice;
  Outcome piper, gpp;
  double ideal = 0;
};

std::vector<std::string> split(std::string const& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

// Whole-string numbers; nullopt on anything else ("8x", "", "-").
std::optional<double> parse_double(std::string const& s) {
  std::size_t used = 0;
  try {
    double const v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (...) {
  }
  return std::nullopt;
}

std::optional<int64_t> parse_int(std::string const& s) {
  std::size_t used = 0;
  try {
    long long const v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (...) {
  }
  return std::nullopt;
}

int usage(char const* error) {
  if (error) std::fprintf(stderr, "bench_paper: %s\n", error);
  std::fprintf(stderr,
               "usage: bench_paper [--quick] [--time-limit S] [--models mmt,dlrm,candle_uno] [--devices 4,8,16,32]\n"
               "                   [--batch B] [--min-gain G] [--stages]\n"
               "  --time-limit S  per planner run, seconds (default 120; --quick: 30)\n"
               "  --batch B       fix the mini-batch instead of choosing it (a power of two)\n"
               "  --min-gain G    keep doubling B while the baseline gains more than G (default 0.05)\n"
               "  --quick         4 and 16 devices, B up to 2^12, time limit 30 s\n"
               "  --stages        also print every stage of the PipeDream-style and GPP plans\n"
               "example: bench_paper --models mmt --devices 8,32 --time-limit 60\n");
  return 2;
}

}  // namespace
}  // namespace gp::partition

int main(int argc, char** argv) {
  using namespace gp::partition;
  std::vector<std::string> models = {"mmt", "dlrm", "candle_uno"};
  std::vector<int> devices = {4, 8, 16, 32};
  bool quick = false, devices_given = false, show_stages = false;
  std::optional<double> time_limit;
  double min_gain = 0.05;
  int64_t fixed_batch = 0;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    bool const has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      usage(nullptr);
      return 0;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--stages") {
      show_stages = true;
    } else if (a == "--time-limit" || a == "--models" || a == "--devices" || a == "--batch" || a == "--min-gain") {
      if (!has_value) return usage((a + " needs a value").c_str());
      std::string const v = argv[++i];
      if (a == "--time-limit") {
        auto t = parse_double(v);
        if (!t || *t <= 0) return usage(("--time-limit wants seconds > 0, got '" + v + "'").c_str());
        time_limit = *t;
      } else if (a == "--min-gain") {
        auto g = parse_double(v);
        if (!g || *g < 0) return usage(("--min-gain wants a fraction >= 0, got '" + v + "'").c_str());
        min_gain = *g;
      } else if (a == "--batch") {
        auto b = parse_int(v);
        if (!b || *b <= 0 || (*b & (*b - 1)) != 0)
          return usage(("--batch wants a power of two, got '" + v + "'").c_str());
        fixed_batch = *b;
      } else if (a == "--models") {
        models = split(v);
        if (models.empty()) return usage("--models is empty");
        for (auto const& m : models)
          if (m != "mmt" && m != "dlrm" && m != "candle_uno")
            return usage(("unknown model '" + m + "' (the paper's: mmt, dlrm, candle_uno)").c_str());
      } else {
        devices.clear();
        devices_given = true;
        for (auto const& d : split(v)) {
          auto n = parse_int(d);
          if (!n || *n < 1 || *n > 1024) return usage(("--devices wants counts 1..1024, got '" + d + "'").c_str());
          devices.push_back(static_cast<int>(*n));
        }
        if (devices.empty()) return usage("--devices is empty");
      }
    } else {
      return usage(("unknown argument '" + a + "'").c_str());
    }
  }
  if (quick && !devices_given) devices = {4, 16};
  double const limit = time_limit.value_or(quick ? 30.0 : 120.0);
  int const max_batch_log2 = quick ? kQuickMaxBatchLog2 : kMaxBatchLog2;

  std::printf(
      "The GraphPipe paper's protocol: 16 GiB V100-class devices (15.7 TFLOP/s, 900 GB/s), 4 per node,\n"
      "150 GB/s NVLink inside a node, 12.5 GB/s (100 Gb/s) between nodes; paper-size zoo models,\n"
      "analytic cost model, Adam state; every micro-batch size dividing B swept; PipeDream-style and\n"
      "Piper-style with their own objective (least max stage time), GPP with its step time.\n");
  if (fixed_batch > 0)
    std::printf("Mini-batch: B = %lld for every row (--batch).\n", (long long)fixed_batch);
  else
    std::printf(
        "Mini-batch rule: B starts at 2^%d and doubles while the PipeDream-style plan at 2B fits in memory\n"
        "and its samples/s beat those at B by more than %g%%; at most 2^%d.\n",
        kMinBatchLog2, 100 * min_gain, max_batch_log2);
  std::printf(
      "Time limit %.0f s per planner run. Target: GPP/PD >= the paper's ratio at 8-32 devices, >= 1.00 at 4.\n"
      "ideal/PD: the perfect-scaling bound over PipeDream-style, the largest GPP/PD any plan could reach;\n"
      "met = 'bound' when the target exceeds it.\n\n",
      limit);
  std::fflush(stdout);

  auto rate = [](Outcome const& o) { return o.plan ? fixed(o.plan->samples_per_s, 0) : std::string("n/a"); };
  std::vector<Row> rows;
  for (auto const& model : models) {
    auto g = gp::models::build_graph(model, gp::models::Size::kPaper, 0, false);
    if (!g) {
      std::fprintf(stderr, "bench_paper: %s: %s\n", model.c_str(), g.status().message().c_str());
      return 1;
    }
    auto graph = std::make_shared<gp::graph::OpGraph const>(std::move(g).value());
    for (int n : devices) {
      std::string const label = model + " " + std::to_string(n) + " dev";
      if (fixed_batch == 0) std::fprintf(stderr, "%s: choosing B\n", label.c_str());
      Row row{model, n, {}, {}, {}, 0};
      Cluster const cluster = paper_cluster(n);
      if (fixed_batch > 0) {
        row.choice.batch = fixed_batch;
        row.choice.stopped = "--batch";
      } else {
        row.choice = choose_batch(graph, cluster, max_batch_log2, min_gain, limit, label);
      }
      int64_t const batch = row.choice.batch;
      if (batch > 0) {
        auto problem = problem_from_graph(graph, std::make_shared<gp::graph::AnalyticCostModel>(), cluster, batch);
        if (!problem) {
          std::fprintf(stderr, "bench_paper: %s: %s\n", label.c_str(), problem.status().message().c_str());
          return 1;
        }
        if (fixed_batch > 0) {
          row.choice.pipedream = run_planner("pipedream", *problem, limit);
          row.choice.seconds = row.choice.pipedream.seconds;
          row.choice.trail = std::to_string(batch) + ":" + rate(row.choice.pipedream);
        }
        std::fprintf(stderr, "%s: B=%lld, piper\n", label.c_str(), (long long)batch);
        row.piper = run_planner("piper", *problem, limit);
        std::fprintf(stderr, "%s: B=%lld, gpp\n", label.c_str(), (long long)batch);
        row.gpp = run_planner("gpp", *problem, limit);
        row.ideal = ideal_samples_per_s(*problem);
      }
      rows.push_back(std::move(row));
    }
  }

  auto ratio = [](Outcome const& a, Outcome const& b) {
    return a.plan && b.plan ? fixed(a.plan->samples_per_s / b.plan->samples_per_s, 2) : std::string("n/a");
  };
  std::printf("%-10s %4s %6s %9s %9s %9s %6s %6s %6s %6s %8s %6s %6s %8s %8s %8s\n", "model", "dev", "B", "PD", "Piper",
              "GPP", "GPP/PD", "GPP/Pi", "paper", "target", "ideal/PD", "met", "GPP/id", "PD_s", "Piper_s", "GPP_s");
  // Why a planner gave no plan, once per distinct reason with the rows it applies to.
  std::vector<std::pair<std::string, std::string>> notes;  // reason, rows
  auto note = [&notes](std::string const& where, std::string const& reason) {
    for (auto& [text, rows] : notes)
      if (text == reason) {
        rows += ", " + where;
        return;
      }
    notes.emplace_back(reason, where);
  };
  for (auto const& r : rows) {
    Outcome const& pd = r.choice.pipedream;
    auto const paper = paper_ratio(r.model, r.devices);
    auto const target = target_ratio(r.model, r.devices);
    std::string met = "-", bound = "n/a", of_ideal = "n/a";
    if (pd.plan && r.ideal > 0) bound = fixed(r.ideal / pd.plan->samples_per_s, 2);
    if (r.gpp.plan && r.ideal > 0) of_ideal = fixed(r.gpp.plan->samples_per_s / r.ideal, 2);
    if (target && pd.plan && r.gpp.plan) {
      double const got = r.gpp.plan->samples_per_s / pd.plan->samples_per_s;
      if (got >= *target)
        met = "met";
      else if (r.ideal > 0 && *target > r.ideal / pd.plan->samples_per_s)
        met = "bound";
      else
        met = "no";
    }
    std::printf("%-10s %4d %6lld %9s %9s %9s %6s %6s %6s %6s %8s %6s %6s %8.1f %8.1f %8.1f\n", r.model.c_str(),
                r.devices, (long long)r.choice.batch, rate(pd).c_str(), rate(r.piper).c_str(), rate(r.gpp).c_str(),
                ratio(r.gpp, pd).c_str(), ratio(r.gpp, r.piper).c_str(), paper ? fixed(*paper, 2).c_str() : "-",
                target ? fixed(*target, 2).c_str() : "-", bound.c_str(), met.c_str(), of_ideal.c_str(),
                r.choice.seconds, r.piper.seconds, r.gpp.seconds);
    std::string const where = r.model + " " + std::to_string(r.devices);
    if (!pd.plan) note(where, "PipeDream-style n/a: " + (r.choice.batch > 0 ? pd.error : r.choice.stopped));
    if (!r.piper.plan && r.choice.batch > 0) note(where, "Piper-style n/a: " + r.piper.error);
    if (!r.gpp.plan && r.choice.batch > 0) note(where, "GPP n/a: " + r.gpp.error);
  }
  std::printf(
      "\nPD, Piper, GPP: predicted samples/s. GPP/id: GPP over the perfect-scaling bound. PD_s: all\n"
      "PipeDream-style runs of the mini-batch search; Piper_s, GPP_s: one search each (seconds, this machine).\n");
  if (!notes.empty()) {
    std::printf("\n");
    for (auto const& [reason, where] : notes) std::printf("%s (%s)\n", reason.c_str(), where.c_str());
  }

  std::printf("\nPlans: micro-batch b, depth D, stages and the peak memory of a device (GiB); the B search\n");
  std::printf("%-10s %4s %6s  %-22s %-22s  %s\n", "model", "dev", "B", "PD b/D/stages/peak", "GPP b/D/stages/peak",
              "B search (B:PD samples/s), stop");
  auto shape = [](Outcome const& o) {
    if (!o.plan) return std::string("n/a");
    return std::to_string(o.plan->micro_batch) + "/" + std::to_string(o.plan->depth) + "/" +
           std::to_string(o.plan->stages.size()) + "/" + fixed(peak_gib(*o.plan), 1);
  };
  for (auto const& r : rows) {
    std::printf("%-10s %4d %6lld  %-22s %-22s  %s; %s\n", r.model.c_str(), r.devices, (long long)r.choice.batch,
                shape(r.choice.pipedream).c_str(), shape(r.gpp).c_str(), r.choice.trail.c_str(),
                r.choice.stopped.c_str());
  }
  if (show_stages) {
    std::printf(
        "\nStages (per micro-batch on one replica, ms: compute = fwd + bwd, comm = boundary transfers; all-reduce\n"
        "per step; T = the stage time; peak GiB per device)\n");
    for (auto const& r : rows) {
      for (Outcome const* o : {&r.choice.pipedream, &r.gpp}) {
        if (!o->plan) continue;
        Plan const& pl = *o->plan;
        std::printf("%s %d B=%lld %s: b=%lld m=%lld D=%d max T=%.3f ms\n", r.model.c_str(), r.devices,
                    (long long)pl.batch, pl.planner.c_str(), (long long)pl.micro_batch, (long long)pl.num_micro_batches,
                    pl.depth, 1e3 * pl.time_per_sample_s * static_cast<double>(pl.micro_batch));
        for (auto const& st : pl.stages)
          std::printf(
              "  stage %2d: %4zu nodes x%-2d depth %2d compute %8.3f comm %7.3f allreduce %8.3f T %8.3f peak %5.2f\n",
              st.id, st.nodes.size(), st.replicas, st.depth, 1e3 * (st.fwd_s + st.bwd_input_s + st.bwd_weight_s),
              1e3 * st.comm_s, 1e3 * st.allreduce_s, 1e3 * st.time_s,
              static_cast<double>(st.peak_memory_bytes) / static_cast<double>(kGiB));
      }
    }
  }
  return 0;
}
