// graphpipe ops: the operators graphpipe imports and trains, from the op table (graph/ops/registry)
// and each backend's kernel table (the CUDA one is static: no GPU needed). `--markdown` prints the
// README's table.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "exec/session/registry.h"
#include "graph/onnx_import.h"
#include "graph/ops/registry.h"
#include "graph/precision.h"

namespace gp::cli {
namespace {

std::string joined(std::vector<std::string> const& types) {
  std::string s;
  for (auto const& t : types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

struct OpsOptions {
  bool markdown = false;
};

Status run_ops(OpsOptions const& options) {
  std::vector<std::string> const cpu = session::cpu_op_types();
  auto on_cpu = [&](std::string const& t) { return std::find(cpu.begin(), cpu.end(), t) != cpu.end(); };
  std::map<std::string, std::vector<std::string>> by_family;  // family -> op types, sorted
  std::vector<std::string> missing;
  for (auto const& [type, def] : graph::ops::op_table()) {
    by_family[def.family].push_back(type);
    if (def.infer != nullptr && !on_cpu(type)) missing.push_back(type);
  }
  if (!missing.empty()) {
    std::string list;
    for (auto const& m : missing) list += " " + m;
    return internal_error("ops imported without CPU kernels:" + list);
  }
  std::size_t const total = graph::ops::op_table().size();
  if (options.markdown) {
    std::printf("| family | operators |\n| --- | --- |\n");
    for (auto const& [family, types] : by_family)
      std::printf("| %s | %s |\n", family == "folded" ? "folded at import (static inputs only)" : family.c_str(),
                  joined(types).c_str());
    std::printf("| ONNX function bodies, expanded at import | %s |\n", joined(graph::function_op_types()).c_str());
    std::printf(
        "| control flow, resolved at import | If, when its condition is known at import (the branch it "
        "takes); Loop, when its trip count and conditions are known at import, and Scan (opset 9 and later) over "
        "a length known at import (unrolled) |\n");
    std::printf(
        "| sequences, resolved at import | SplitToSequence, SequenceAt, SequenceConstruct, SequenceEmpty, "
        "SequenceInsert, SequenceErase, SequenceLength, ConcatFromSequence, when their sizes and positions are "
        "known at import |\n");
    std::printf(
        "| signal transforms, expanded at import | DFT (a MatMul with its matrix of cosines and sines), STFT (a "
        "strided Conv with the window times that matrix) |\n");
    std::printf(
        "| geometry, expanded at import | AffineGrid (theta times the constant matrix of the grid's normalised "
        "coordinates, a MatMul) |\n");
    std::printf("\n%zu operator types, and %zu more imported as the function body ONNX defines for them.\n", total,
                graph::function_op_types().size());
    return Status::ok();
  }
  std::optional<std::vector<std::string>> const cuda = session::cuda_op_types();
  auto on_cuda = [&](std::string const& t) { return cuda && std::find(cuda->begin(), cuda->end(), t) != cuda->end(); };
  // The mixed-precision policy (graph/precision.h): "low" ops compute in bf16, "follow" ops keep a
  // bf16 input bf16, "fp32" ops get float32 inputs.
  std::printf("%-28s %-11s %-7s %s\n", "operator", "family", "bf16", "runs (forward and backward)");
  std::size_t cuda_count = 0;
  for (auto const& [type, def] : graph::ops::op_table()) {
    std::string runs = "folded at import time (static inputs only)";
    if (def.infer != nullptr) {
      runs = "CPU";
      if (on_cuda(type)) {
        runs += ", CUDA";
        ++cuda_count;
      } else if (cuda) {
        runs += " (not on CUDA yet)";
      }
    }
    char const* amp = def.infer != nullptr ? graph::amp_policy_name(graph::amp_rule(def.kind).policy) : "-";
    std::printf("%-28s %-11s %-7s %s\n", type.c_str(), def.family.c_str(), amp, runs.c_str());
  }
  std::printf("%zu operator types", total);
  if (cuda)
    std::printf("; %zu run on CUDA too (built, not verified here without a GPU: see the README's CUDA table)",
                cuda_count);
  else
    std::printf("; this build has no CUDA backend");
  std::printf("\nAlso imported, as the function body ONNX defines for them: %s",
              joined(graph::function_op_types()).c_str());
  std::printf("\nIf is imported when its condition is known at import, as the branch it takes; Loop and Scan are not");
  std::printf(
      "\nSequences (SplitToSequence, SequenceAt, SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceErase, "
      "SequenceLength, ConcatFromSequence) are imported when their sizes and positions are known at import, as "
      "Split, Concat and the values they hold");
  std::printf(
      "\nDFT is imported as a MatMul with its matrix of cosines and sines, STFT as a strided Conv with the window "
      "times that matrix");
  std::printf(
      "\nbf16 (--precision bf16, automatic mixed precision): low = computes in bf16 with float32 accumulation; "
      "follow = stays bf16 when its inputs are; fp32 = bf16 inputs are cast to float32 first (CPU; CUDA runs "
      "float32 only)\n");
  return Status::ok();
}

}  // namespace

void add_ops_command(CLI::App& root, CommandList& commands) {
  auto options = std::make_shared<OpsOptions>();
  auto* app = root.add_subcommand("ops", "List the ONNX operators graphpipe imports and trains");
  app->add_flag("--markdown", options->markdown, "Print the README's table (by family)");
  commands.push_back({app, [options] { return run_ops(*options); }});
}

}  // namespace gp::cli
