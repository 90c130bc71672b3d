#include "tests/fuzz/targets.h"

#include <cstdlib>
#include <string>

#include "core/file_io.h"
#include "core/hash.h"
#include "exec/checkpoint.h"
#include "exec/data.h"
#include "exec/train_config.h"
#include "graph/graph_summary.h"
#include "graph/onnx_import.h"
#include "partition/cluster.h"
#include "partition/pipedream_profile.h"
#include "partition/plan.h"
#include "schedule/schedule_text.h"
#include "schedule/validate.h"

namespace gp::fuzz {
namespace {

std::string as_text(uint8_t const* data, std::size_t size) {
  return std::string(reinterpret_cast<char const*>(data), size);
}

// A broken invariant is a finding: abort so libFuzzer (and the regression test) report it.
void require(bool ok, char const* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

partition::Plan const& fixed_plan() {
  static partition::Plan const plan = [] {
    auto text = read_whole_file(GP_FUZZ_FIXED_PLAN, "fixed plan");
    require(text.is_ok(), "tests/fuzz/fixed_plan.json is readable");
    auto p = partition::plan_from_json(*text);
    require(p.is_ok(), "tests/fuzz/fixed_plan.json parses");
    return *p;
  }();
  return plan;
}

}  // namespace

void onnx_import(uint8_t const* data, std::size_t size) {
  graph::ImportOptions options;
  options.max_memory_bytes = int64_t{64} << 20;  // what a fuzz input may make us allocate
  auto g = graph::load_onnx_bytes(as_text(data, size), "<fuzz>", options);
  if (!g.is_ok()) return;
  require(g->finalized() && g->topo_order().size() == g->num_ops(), "an imported graph is finalized and ordered");
  auto const summary = graph::summarize(*g);  // the accounting every command prints
  require(summary.num_ops == static_cast<int64_t>(g->num_ops()), "the summary counts every op");
}

void plan_json(uint8_t const* data, std::size_t size) {
  auto plan = partition::plan_from_json(as_text(data, size));
  if (!plan.is_ok()) return;
  require(partition::validate_plan(*plan).is_ok(), "plan_from_json returns only valid plans");
  auto again = partition::plan_from_json(partition::plan_to_json(*plan));
  require(again.is_ok(), "a parsed plan prints to JSON that parses");
  require(partition::plan_to_json(*again) == partition::plan_to_json(*plan), "plan JSON round-trips");
}

void schedule_text(uint8_t const* data, std::size_t size) {
  auto schedule = schedule::parse_schedule(as_text(data, size));
  if (!schedule.is_ok()) return;
  auto again = schedule::parse_schedule(schedule::print_schedule(*schedule));
  require(again.is_ok(), "a parsed schedule prints to text that parses");
  require(schedule::print_schedule(*again) == schedule::print_schedule(*schedule), "schedule text round-trips");
  (void)schedule::validate_schedule(fixed_plan(), *schedule);
}

void cluster_yaml(uint8_t const* data, std::size_t size) {
  auto cluster = partition::Cluster::from_yaml_string(as_text(data, size));
  if (cluster.is_ok()) require(cluster->size() >= 1, "a parsed cluster has a device");
}

void train_config(uint8_t const* data, std::size_t size) {
  (void)exec::parse_train_config(as_text(data, size), "<fuzz>", "/nonexistent-graphpipe-fuzz");
}

void pipedream_graph(uint8_t const* data, std::size_t size) {
  auto problem = partition::parse_pipedream_profile(as_text(data, size), "fuzz");
  if (!problem.is_ok()) return;
  problem->cluster = partition::Cluster::uniform(4, int64_t{16} << 30);
  problem->batch = 8;
  (void)problem->finalize();
}

void checkpoint(uint8_t const* data, std::size_t size) {
  // The input is a checkpoint without its trailing checksum: append the right one so the parser
  // gets past the checksum to the header and the tensor table.
  std::string bytes = as_text(data, size);
  uint64_t const h = fnv1a(bytes);
  bytes.append(reinterpret_cast<char const*>(&h), 8);
  auto state = exec::parse_checkpoint(bytes, "<fuzz>");
  if (!state.is_ok()) return;
  for (auto const* section : {&state->weights, &state->optimizer_state})
    for (auto const& [name, t] : *section)
      for (int64_t d : t.shape()) require(d >= 0, "a loaded tensor has no negative dimension");
}

void npy(uint8_t const* data, std::size_t size) {
  auto array = exec::parse_npy(std::string_view(reinterpret_cast<char const*>(data), size), "<fuzz>");
  if (!array.is_ok()) return;
  int64_t n = 1;
  for (int64_t d : array->shape) n *= d;
  require(array->bytes.size() == static_cast<std::size_t>(n) * graph::dtype_size(array->dtype),
          "a parsed .npy array holds shape x dtype bytes");
}

Target find_target(std::string_view name) {
  struct Entry {
    std::string_view name;
    Target fn;
  };
  static Entry const table[] = {{"onnx_import", onnx_import},     {"plan_json", plan_json},
                                {"schedule_text", schedule_text}, {"cluster_yaml", cluster_yaml},
                                {"train_config", train_config},   {"pipedream_graph", pipedream_graph},
                                {"checkpoint", checkpoint},       {"npy", npy}};
  for (auto const& e : table)
    if (e.name == name) return e.fn;
  return nullptr;
}

}  // namespace gp::fuzz
