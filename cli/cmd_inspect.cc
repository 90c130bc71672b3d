#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "exec/session/registry.h"
#include "graph/dot.h"
#include "graph/graph_summary.h"
#include "graph/onnx_import.h"

namespace gp::cli {
namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  std::string dot;
  bool no_weights = false;
  bool weights = false;  // list every initializer and why it trains or not
  std::size_t antichain_names = 12;
};

std::string human(double v, char const* const* units, double base) {
  int u = 0;
  while (v >= base && units[u + 1]) {
    v /= base;
    ++u;
  }
  char buf[48];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f%s%s", v, units[0][0] ? " " : "", units[0]);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string human_bytes(double b) {
  static char const* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", nullptr};
  return human(b, units, 1024);
}
std::string human_flops(double f) {
  static char const* const units[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", nullptr};
  return human(f, units, 1000);
}
std::string human_count(double n) {
  static char const* const units[] = {"", "K", "M", "B", nullptr};
  return human(n, units, 1000);
}

std::string dims_text(std::vector<int64_t> const& dims) {
  std::string out = "[";
  for (std::size_t k = 0; k < dims.size(); ++k) out += (k ? "," : "") + std::to_string(dims[k]);
  return out + "]";
}

// A reason without the node or pattern it names ("weight of MatMul 'fc'" -> "weight of MatMul"),
// for the one-line count.
std::string reason_kind(std::string const& reason) {
  return reason.substr(0, std::min(reason.find(" '"), reason.find(" (")));
}

// One line: how many initializers train, and the counts of each reason the others do not.
void print_choice_summary(std::vector<graph::WeightChoice> const& choices) {
  std::map<std::string, int> why_not;
  int trained = 0;
  for (auto const& c : choices) {
    if (c.trainable)
      ++trained;
    else
      ++why_not[reason_kind(c.reason)];
  }
  std::string line;
  for (auto const& [why, n] : why_not)
    line += (line.empty() ? "; not trained: " : ", ") + std::to_string(n) + " " + why;
  std::printf("trainable    %d of %zu initializers%s (--weights lists each)\n", trained, choices.size(), line.c_str());
}

void print_choices(std::vector<graph::WeightChoice> const& choices) {
  std::size_t name_w = 4, shape_w = 5;
  for (auto const& c : choices) {
    name_w = std::max(name_w, c.name.size());
    shape_w = std::max(shape_w, dims_text(c.dims).size());
  }
  int const nw = static_cast<int>(name_w), sw = static_cast<int>(shape_w);
  std::printf("  %-*s  %-8s  %-*s  %-5s  %s\n", nw, "name", "dtype", sw, "shape", "train", "why");
  for (auto const& c : choices)
    std::printf("  %-*s  %-8s  %-*s  %-5s  %s\n", nw, c.name.c_str(), graph::dtype_name(c.dtype), sw,
                dims_text(c.dims).c_str(), c.trainable ? "yes" : "no", c.reason.c_str());
}

// Whether each backend runs every op of the model, dtypes and attributes included (the CUDA kernel
// table is static: the answer needs no GPU), else what it refuses.
void print_backends(graph::OpGraph const& g) {
  Status const cpu = session::check_graph_supported("cpu", g);
  std::printf("runs on      cpu: %s\n", cpu ? "every op" : cpu.message().c_str());
  if (!session::cuda_op_types()) {
    std::printf("             cuda: not in this build (built without GP_WITH_CUDA)\n");
    return;
  }
  Status const cuda = session::check_graph_supported("cuda", g);
  std::printf("             cuda: %s\n",
              cuda ? "every op (by the CUDA kernel table; whether this machine has a GPU is not checked)"
                   : cuda.message().c_str());
}

void print_text(graph::GraphSummary const& s, std::vector<graph::WeightChoice> const& choices,
                InspectOptions const& o) {
  std::printf("model        %s (%s)\n", s.name.c_str(), o.model.c_str());
  for (auto const& t : s.inputs)
    std::printf("input        %s %s %s\n", t.name.c_str(), t.dtype.c_str(), t.shape.c_str());
  for (auto const& t : s.outputs)
    std::printf("output       %s %s %s\n", t.name.c_str(), t.dtype.c_str(), t.shape.c_str());
  std::printf("operators    %ld\n", static_cast<long>(s.num_ops));
  for (auto const& [type, count] : s.ops_by_type) {
    std::printf("  %-22s %6ld", type.c_str(), static_cast<long>(count));
    if (type == "BatchNormalization" && s.fused_batchnorm_relus > 0)
      std::printf("  (%ld with the Relu after it fused in)", static_cast<long>(s.fused_batchnorm_relus));
    if (type == "MatMul" && s.fused_matmuls > 0)
      std::printf("  (%ld reading a transposed operand or scaling in the GEMM)", static_cast<long>(s.fused_matmuls));
    std::printf("\n");
  }
  std::printf("parameters   %s (%ld) in %ld tensors, %s\n", human_count(static_cast<double>(s.param_count)).c_str(),
              static_cast<long>(s.param_count), static_cast<long>(s.param_tensors),
              human_bytes(static_cast<double>(s.param_bytes)).c_str());
  if (!choices.empty()) {
    print_choice_summary(choices);
    if (o.weights) print_choices(choices);
    for (auto const& c : choices)
      if (!c.warning.empty()) std::printf("warning      %s\n", c.warning.c_str());
  }
  std::printf("FLOPs/sample forward %s, backward %s (weight-grad %s)\n", human_flops(s.fwd_flops_per_sample).c_str(),
              human_flops(s.bwd_flops_per_sample).c_str(), human_flops(s.bwd_weight_flops_per_sample).c_str());
  std::printf("activations  %s per sample kept for backward\n",
              human_bytes(static_cast<double>(s.activation_bytes_per_sample)).c_str());
  std::printf("branches     %ld (fork points %ld, join points %ld)\n", static_cast<long>(s.branches),
              static_cast<long>(s.fork_points), static_cast<long>(s.join_points));
  std::printf("widest antichain %zu ops:", s.widest_antichain.size());
  for (std::size_t i = 0; i < s.widest_antichain.size() && i < o.antichain_names; ++i)
    std::printf(" %s", s.widest_antichain[i].c_str());
  if (s.widest_antichain.size() > o.antichain_names) std::printf(" ...");
  std::printf("\n");
}

Status run_inspect(InspectOptions const& o) {
  ASSIGN_OR_RETURN(graph::ImportOptions import, import_options());
  import.load_weights = !o.no_weights;
  ASSIGN_OR_RETURN(graph::OpGraph g, graph::load_onnx(o.model, import));
  graph::GraphSummary const s = graph::summarize(g);
  if (!o.dot.empty()) RETURN_IF_ERROR(graph::write_dot(g, o.dot));
  if (o.json) {
    std::printf("%s\n", graph::inspect_json(s, g.weight_choices()).c_str());
  } else {
    print_text(s, g.weight_choices(), o);
    print_backends(g);
  }
  return Status::ok();
}

}  // namespace

void add_inspect_command(CLI::App& root, CommandList& commands) {
  auto opts = std::make_shared<InspectOptions>();
  auto* app = root.add_subcommand(
      "inspect", "Summarise an ONNX model: ops, shapes, parameters, FLOPs, branches, and which backends run it");
  app->add_option("model", opts->model, "ONNX model file")->required();
  app->add_flag("--json", opts->json, "Print the summary as JSON");
  app->add_option("--dot", opts->dot, "Also write the operator graph as Graphviz DOT to this file");
  app->add_flag("--no-weights", opts->no_weights,
                "Do not read weight data (faster for large models); only the tables the trainable choice "
                "looks at are read (README, \"Training config\")");
  app->add_flag("--weights", opts->weights,
                "List every initializer: whether training updates it and why (--json always lists them)");
  app->footer(
      "Examples:\n"
      "  graphpipe inspect resnet18.onnx\n"
      "  graphpipe inspect gpt.onnx --weights   # which initializers train, and the rule that decided\n"
      "  graphpipe inspect model.onnx --json --dot model.dot && dot -Tsvg model.dot -o model.svg");
  commands.push_back({app, [opts] { return run_inspect(*opts); }});
}

}  // namespace gp::cli
