#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "models/zoo.h"

namespace gp::cli {
namespace {

struct ModelsOptions {
  bool json = false;
  std::string name;
  std::string size = "tiny";
  std::string out;
  uint64_t seed = 0;
  int64_t opset = 17;
  bool shape_only = false;
  int64_t layers = 0;  // resizes transformer / mmt (0: the size's)
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
};

std::string human_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.2fB", static_cast<double>(n) / 1e9);
  } else if (n >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(n) / 1e6);
  } else if (n >= 1'000) {
    std::snprintf(buf, sizeof buf, "%.1fk", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%ld", static_cast<long>(n));
  }
  return buf;
}

Status run_list(ModelsOptions const& options) {
  nlohmann::json json = nlohmann::json::array();
  if (!options.json) {
    std::printf("%-12s %-15s %9s %9s %9s  %s\n", "name", "task", "tiny", "small", "paper", "description");
  }
  for (auto const& info : models::model_list()) {
    int64_t params[3] = {};
    for (models::Size size : models::kAllSizes) {
      ASSIGN_OR_RETURN(models::ZooModel model, models::build(info.name, size));
      params[static_cast<int>(size)] = model.builder.param_count();
    }
    char const* task = info.task == models::Task::kClassification ? "classification" : "regression";
    if (options.json) {
      json.push_back({{"name", info.name},
                      {"description", info.description},
                      {"task", task},
                      {"params", {{"tiny", params[0]}, {"small", params[1]}, {"paper", params[2]}}}});
    } else {
      std::printf("%-12s %-15s %9s %9s %9s  %s\n", info.name.c_str(), task, human_count(params[0]).c_str(),
                  human_count(params[1]).c_str(), human_count(params[2]).c_str(), info.description.c_str());
    }
  }
  if (options.json) {
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    std::printf(
        "\nparams: trainable parameters per size. Export one with\n"
        "  graphpipe models export NAME --size tiny|small|paper --out NAME.onnx\n");
  }
  return Status::ok();
}

Status run_export(ModelsOptions const& options) {
  ASSIGN_OR_RETURN(models::ModelInfo info, models::find_model(options.name));
  ASSIGN_OR_RETURN(models::Size size, models::parse_size(options.size));
  models::ExportOptions export_options;
  export_options.build = {.seed = options.seed,
                          .opset = options.opset,
                          .layers = options.layers,
                          .hidden = options.hidden,
                          .heads = options.heads,
                          .ffn = options.ffn};
  export_options.shape_only = options.shape_only;
  ASSIGN_OR_RETURN(models::ZooModel model, models::build(info.name, size, export_options.build));
  int64_t const bytes = model.builder.initializer_bytes();
  if (!options.shape_only && bytes > (int64_t{1} << 30)) {
    std::fprintf(stderr, "writing %.1f GiB of weights (use --shape-only to skip them for planning)...\n",
                 static_cast<double>(bytes) / (1 << 30));
  }
  RETURN_IF_ERROR(models::export_model(info.name, size, options.out, export_options));
  std::error_code ec;
  bool const external = std::filesystem::exists(options.out + ".data", ec);
  std::string resized;
  if (export_options.build.resizes()) {
    for (auto [flag, value] : {std::pair{"layers", options.layers}, std::pair{"hidden", options.hidden},
                               std::pair{"heads", options.heads}, std::pair{"ffn", options.ffn}}) {
      if (value != 0) resized += std::string(" ") + flag + " " + std::to_string(value);
    }
    resized = " (" + resized.substr(1) + ")";
  }
  std::printf("wrote %s: %s %s%s, %s parameters, opset %ld, seed %lu%s\n", options.out.c_str(), info.name.c_str(),
              models::size_name(size), resized.c_str(), human_count(model.builder.param_count()).c_str(),
              static_cast<long>(options.opset), static_cast<unsigned long>(options.seed),
              options.shape_only ? ", shape only (weights not written; for planning and simulation)"
              : external         ? (", weights in " + options.out + ".data").c_str()
                                 : "");
  return Status::ok();
}

}  // namespace

void add_models_command(CLI::App& root, CommandList& commands) {
  auto options = std::make_shared<ModelsOptions>();
  auto* app = root.add_subcommand("models", "List or export the bundled model generators");
  app->require_subcommand(1);
  app->footer(
      "Examples:\n"
      "  graphpipe models list\n"
      "  graphpipe models export mmt --size tiny --out mmt.onnx\n"
      "  graphpipe models export dlrm --size paper --shape-only --out dlrm_paper.onnx\n"
      "  graphpipe models export transformer --size paper --layers 96 --hidden 4096 --shape-only --out t.onnx");

  auto* list = app->add_subcommand("list", "Table of the models: task, parameters per size, description");
  list->add_flag("--json", options->json, "Print JSON instead of a table");
  commands.push_back({list, [options] { return run_list(*options); }});

  auto* exp = app->add_subcommand("export", "Write a model as an .onnx file (atomically)");
  exp->add_option("name", options->name, "Model name (see 'graphpipe models list')")->required();
  exp->add_option("--size", options->size, "tiny | small | paper")->capture_default_str();
  exp->add_option("-o,--out", options->out, "Output .onnx file (weights over 1 GiB go to <out>.data)")->required();
  exp->add_option("--seed", options->seed, "Seed of the weights")->capture_default_str();
  exp->add_option("--opset", options->opset, "ONNX opset, 13..17 (below 17 LayerNorm is decomposed)")
      ->capture_default_str();
  exp->add_option("--layers", options->layers,
                  "transformer: layers in the chain; mmt: layers per branch (0: the size's)")
      ->capture_default_str();
  exp->add_option("--hidden", options->hidden,
                  "transformer/mmt width (0: the size's); heads keep the size's head width unless --heads")
      ->capture_default_str();
  exp->add_option("--heads", options->heads, "transformer/mmt attention heads, dividing --hidden (0: derived)")
      ->capture_default_str();
  exp->add_option("--ffn", options->ffn, "transformer/mmt feed-forward width (0: the size's ratio to hidden)")
      ->capture_default_str();
  exp->add_flag("--shape-only", options->shape_only,
                "Declare the weights without writing them (planning/simulation of paper sizes)");
  commands.push_back({exp, [options] { return run_export(*options); }});
}

}  // namespace gp::cli
