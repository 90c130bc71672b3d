// Training data: a synthetic learnable task (inputs from a seed, labels from a fixed random
// teacher, so the loss really falls) and .npy files. Sample i of a batch is a pure function of
// (seed, i), so a resumed run sees exactly the batches of an uninterrupted one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exec/tensor.h"
#include "exec/npy.h"
#include "exec/train_config.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::exec {

struct Batch {
  std::vector<Tensor> inputs;  // one per graph input, in graph-input order, batch dim concrete
  Tensor labels;               // int64 [N, rows...] (cross-entropy) or float32 like the output (mse)
};

// What the loss needs to know about the model output: rows of `classes` logits per sample.
struct LabelSpec {
  LossKind loss = LossKind::kCrossEntropy;
  std::vector<int64_t> label_dims;  // per sample: cross-entropy: output dims minus the last; mse: output dims
  int64_t classes = 0;              // cross-entropy: last output dim
};
Result<LabelSpec> label_spec(graph::OpGraph const& graph, LossKind loss);

class DataSource {
 public:
  virtual ~DataSource() = default;
  // Samples first .. first+count-1 of the dataset (cycled when it is finite).
  virtual Result<Batch> batch(int64_t first, int64_t count) = 0;
  virtual std::string describe() const = 0;
};

Result<std::unique_ptr<DataSource>> make_data_source(DataConfig const& config, graph::OpGraph const& graph,
                                                     LossKind loss, uint64_t seed);

}  // namespace gp::exec
