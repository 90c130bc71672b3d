#include <cmath>

#include "models/generators.h"
#include "models/layers.h"

namespace gp::models {
namespace {

struct DlrmConfig {
  int64_t dense_branches = 0;
  int64_t dense_dim = 0;      // input width of each dense branch
  int64_t bottom_hidden = 0;  // bottom MLP: dense_dim -> hidden x3 -> emb_dim (4 FC layers)
  int64_t sparse_branches = 0;
  int64_t rows = 0;  // embedding table rows
  int64_t emb_dim = 0;
  int64_t bag = 0;           // indices per sample, summed (EmbeddingBag mode="sum")
  std::vector<int64_t> top;  // top MLP hidden widths, then 2 logits
};

DlrmConfig dlrm_config(Size size) {
  switch (size) {
    case Size::kTiny:
      return {7, 8, 32, 7, 256, 8, 4, {64, 32}};
    case Size::kSmall:
      return {7, 64, 256, 7, 4096, 32, 8, {512, 256}};
    case Size::kPaper:
      return {7, 1024, 4096, 7, 1000000, 64, 100, {4096, 4096, 4096}};
  }
  return {};
}

}  // namespace

// Dense branches (bottom MLPs) and embedding-bag branches (Gather + ReduceSum) each give one
// emb_dim vector; the pairwise dot products of all of them (a batched MatMul with the transpose,
// strictly-lower triangle picked by Gather) and the dense vectors feed the top MLP.
ZooModel build_dlrm(Size size, BuildOptions const& options) {
  DlrmConfig const c = dlrm_config(size);
  ZooModel model = new_model("dlrm", size, Task::kClassification, options);
  Layers layers(model.builder);
  auto& b = model.builder;

  std::vector<std::string> vectors;  // each [N, 1, emb_dim]
  std::vector<std::string> dense_out;
  for (int64_t i = 0; i < c.dense_branches; ++i) {
    std::string const prefix = "bottom" + std::to_string(i);
    std::string h = add_model_input(model, "dense" + std::to_string(i), {graph::kBatch, c.dense_dim});
    int64_t width = c.dense_dim;
    for (int64_t l = 0; l < 4; ++l) {
      int64_t const out = l == 3 ? c.emb_dim : c.bottom_hidden;
      h = layers.linear(h, width, out, prefix + ".fc" + std::to_string(l), Act::kRelu);
      width = out;
    }
    dense_out.push_back(h);
    vectors.push_back(layers.node("Reshape", {h, layers.ints({-1, 1, c.emb_dim})}, prefix + ".row"));
  }
  for (int64_t i = 0; i < c.sparse_branches; ++i) {
    std::string const prefix = "embedding" + std::to_string(i);
    std::string const idx =
        add_model_input(model, "sparse" + std::to_string(i), {graph::kBatch, c.bag}, graph::DType::kInt64, c.rows);
    std::string const table = b.add_initializer(prefix + ".weight", {c.rows, c.emb_dim},
                                                graph::InitRule::uniform(1.0 / std::sqrt(c.bag * 1.0)));
    std::string const gathered = layers.node("Gather", {table, idx}, prefix + ".lookup", {{"axis", int64_t{0}}});
    // [N, bag, emb] summed over the bag, keeping the axis as the row of the interaction matrix.
    vectors.push_back(
        layers.node("ReduceSum", {gathered, layers.ints({1})}, prefix + ".bag_sum", {{"keepdims", int64_t{1}}}));
  }

  int64_t const n = c.dense_branches + c.sparse_branches;
  std::string const stacked = layers.node("Concat", vectors, "interaction.stack", {{"axis", int64_t{1}}});
  std::string const transposed =
      layers.node("Transpose", {stacked}, "interaction.transpose", {{"perm", std::vector<int64_t>{0, 2, 1}}});
  std::string const dots = layers.node("MatMul", {stacked, transposed}, "interaction.dots");  // [N, n, n]
  std::string const flat = layers.node("Flatten", {dots}, "interaction.flat", {{"axis", int64_t{1}}});
  std::vector<int64_t> lower;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t col = 0; col < r; ++col) lower.push_back(r * n + col);
  }
  std::string const pairs =
      layers.node("Gather", {flat, layers.ints(lower)}, "interaction.pairs", {{"axis", int64_t{1}}});
  std::vector<std::string> top_in = dense_out;
  top_in.push_back(pairs);
  std::string h = layers.node("Concat", top_in, "top.in", {{"axis", int64_t{1}}});
  int64_t width = c.dense_branches * c.emb_dim + static_cast<int64_t>(lower.size());
  for (std::size_t i = 0; i < c.top.size(); ++i) {
    h = layers.linear(h, width, c.top[i], "top.fc" + std::to_string(i), Act::kRelu);
    width = c.top[i];
  }
  layers.linear(h, width, 2, "top.out", Act::kNone, "logits");
  set_model_output(model, "logits", 2);
  return model;
}

}  // namespace gp::models
