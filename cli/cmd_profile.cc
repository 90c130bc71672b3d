#include <algorithm>
#include <iostream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "exec/session/planning.h"
#include "exec/session/registry.h"
#include "cli/commands.h"
#include "exec/profiler.h"
#include "exec/runtime/threads.h"
#include "graph/cost_model.h"
#include "graph/onnx_import.h"

namespace gp::cli {

namespace {

struct ProfileArgs {
  std::string model;
  std::string backend = "cpu";
  std::string batch_sizes = "1,2,4,8";
  int repeats = 3;
  int threads = 0;
  int concurrent = 0;
  bool tf32 = false;
  std::string out;
};

Result<std::vector<int64_t>> parse_sizes(std::string const& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      int64_t v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (std::exception const&) {
      return invalid_argument("--batch-sizes: '" + item + "' is not a positive integer (e.g. --batch-sizes 1,2,4,8)");
    }
  }
  if (out.empty()) return invalid_argument("--batch-sizes is empty (e.g. --batch-sizes 1,2,4,8)");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status run_profile(ProfileArgs const& args) {
  ASSIGN_OR_RETURN(auto sizes, parse_sizes(args.batch_sizes));
  ASSIGN_OR_RETURN(graph::ImportOptions import, import_options());
  ASSIGN_OR_RETURN(graph::OpGraph graph, graph::load_onnx(args.model, import));
  if (args.threads < 0) return invalid_argument("--threads must be >= 1 (or 0 for every core)");
  if (args.threads > 0) exec::set_thread_budget(args.threads);
  session::ProfileRequest request;
  request.backend = args.backend;
  request.batch_sizes = sizes;
  request.repeats = args.repeats;
  request.concurrent = args.concurrent;
  request.tf32 = args.tf32;
  request.on_size = [](int64_t n) { std::cerr << "profiling micro-batch size " << n << "..." << std::endl; };
  ASSIGN_OR_RETURN(graph::MeasuredProfile profile, session::profile_model(graph, request));
  double fwd = 0, bwd = 0;
  for (auto const& op : profile.ops) {
    fwd += op.fwd_s.back();
    bwd += op.bwd_input_s.back() + op.bwd_weight_s.back();
  }
  spdlog::info(
      "profiled on {} with {} compute threads; executor calibration ({} at once): forward x{:.2f}, backward "
      "x{:.2f} at {} samples",
      profile.device, exec::thread_budget(), profile.calibration.concurrency,
      profile.calibration.fwd_scale.empty() ? 1.0 : profile.calibration.fwd_scale.back(),
      profile.calibration.bwd_scale.empty() ? 1.0 : profile.calibration.bwd_scale.back(), sizes.back());
  spdlog::info("{} ops profiled at sizes {}; at {} samples: forward {:.3f} ms, backward {:.3f} ms", profile.ops.size(),
               args.batch_sizes, sizes.back(), fwd * 1e3, bwd * 1e3);
  if (args.out.empty()) {
    std::cout << graph::profile_to_json(profile) << std::endl;
    return Status::ok();
  }
  RETURN_IF_ERROR(graph::write_profile_file(profile, args.out));
  spdlog::info("profile written to {}", args.out);
  return Status::ok();
}

}  // namespace

void add_profile_command(CLI::App& root, CommandList& commands) {
  auto args = std::make_shared<ProfileArgs>();
  auto* app = root.add_subcommand("profile", "Measure per-op forward/backward time -> profile JSON for the cost model");
  app->add_option("model", args->model, "ONNX model")->required()->check(CLI::ExistingFile);
  app->add_option("--backend", args->backend, std::string("Backend to measure: ") + session::kBackendHelp)
      ->default_val("cpu");
  app->add_option("--batch-sizes", args->batch_sizes, "Micro-batch sizes, comma-separated")->default_val("1,2,4,8");
  app->add_option("--repeats", args->repeats, "Timed calls per op and size (minimum kept)")->default_val(3);
  app->add_option("--threads", args->threads,
                  "Compute threads (0: every core); match a pipeline worker's budget, e.g. --threads 1 for 2 "
                  "workers on 2 cores")
      ->default_val(0);
  app->add_flag("--tf32", args->tf32,
                "cuda: TF32 tensor cores for float32 matrix products, as a training config's 'tf32: true' (match "
                "the training run)");
  app->add_option("--concurrent", args->concurrent,
                  "Executors run at once when calibrating against the whole executor (default: cores / threads, "
                  "as many workers as will share the machine; on a GPU 1, or the number of workers that will "
                  "share it, each executor on its own stream)")
      ->default_val(0);
  app->add_option("-o,--out", args->out, "Write the profile JSON here (default: stdout)");
  app->footer(R"(Example:
  graphpipe models export mmt --size tiny --out mmt.onnx
  graphpipe profile mmt.onnx --batch-sizes 1,2,4,8 -o mmt.profile.json
  graphpipe profile mmt.onnx --threads 1 -o mmt.1thread.json   # the cost of one worker of two on 2 cores
  graphpipe profile mmt.onnx --backend cuda -o mmt.gpu.json     # per-op GPU costs for the planners)");
  commands.push_back({app, [args] { return run_profile(*args); }});
}

}  // namespace gp::cli
