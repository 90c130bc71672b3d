#include "exec/data.h"

#include "exec/data_sources.h"

namespace gp::exec {

using graph::ops::OpKind;

namespace {

// Per-sample dims of a graph input or output (the batch dimension removed).
Result<std::vector<int64_t>> sample_dims(graph::TensorInfo const& t) {
  if (t.shape.batch_axis() != 0)
    return invalid_argument("tensor '" + t.name + "' has shape " + t.shape.to_string() +
                            ": training needs the batch as its first dimension");
  std::vector<int64_t> dims(t.shape.dims.begin() + 1, t.shape.dims.end());
  for (int64_t d : dims)
    if (d < 0) return unsupported("tensor '" + t.name + "' has a dynamic dimension: " + t.shape.to_string());
  return dims;
}

Result<std::vector<InputSpec>> input_specs(graph::OpGraph const& graph) {
  std::vector<InputSpec> specs;
  for (graph::TensorId id : graph.inputs()) {
    auto const& t = graph.tensor(id);
    InputSpec s;
    s.name = t.name;
    s.dtype = t.dtype;
    ASSIGN_OR_RETURN(s.dims, sample_dims(t));
    if (s.dtype == DType::kInt64 || s.dtype == DType::kInt32) {
      s.dtype = DType::kInt64;
      s.vocab = 16;
      for (graph::OpId c : t.consumers) {
        auto const& op = graph.op(c);
        if (op.kind() == OpKind::kGather && op.inputs.size() == 2 && op.inputs[1] == id) {
          auto const& table = graph.tensor(op.inputs[0]);
          if (!table.shape.dims.empty() && table.shape.dims[0] > 0) s.vocab = table.shape.dims[0];
        }
      }
    } else if (s.dtype != DType::kFloat32) {
      return unsupported(std::string("model input '") + t.name + "' has dtype " + graph::dtype_name(t.dtype) +
                         ": training data supports float32 and int64 inputs");
    }
    specs.push_back(std::move(s));
  }
  if (specs.empty()) return invalid_argument("the model has no data inputs to feed");
  return specs;
}

}  // namespace

Result<LabelSpec> label_spec(graph::OpGraph const& graph, LossKind loss) {
  if (graph.outputs().empty()) return invalid_argument("the model has no output to attach the loss to");
  auto const& out = graph.tensor(graph.outputs()[0]);
  if (out.dtype != DType::kFloat32)
    return unsupported("model output '" + out.name + "' is " + graph::dtype_name(out.dtype) +
                       ", the loss needs float32");
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, sample_dims(out));
  LabelSpec s;
  s.loss = loss;
  if (loss == LossKind::kCrossEntropy) {
    if (dims.empty())
      return invalid_argument("model output '" + out.name + "' " + out.shape.to_string() +
                              " has no class dimension for cross-entropy (use loss: mse)");
    s.classes = dims.back();
    dims.pop_back();
  }
  s.label_dims = dims;
  return s;
}

Result<std::unique_ptr<DataSource>> make_data_source(DataConfig const& config, graph::OpGraph const& graph,
                                                     LossKind loss, uint64_t seed) {
  ASSIGN_OR_RETURN(auto specs, input_specs(graph));
  ASSIGN_OR_RETURN(auto labels, label_spec(graph, loss));
  if (config.kind == DataConfig::Kind::kNpy) return make_npy_source(config, specs, labels);
  if (config.kind == DataConfig::Kind::kArrays) return make_memory_source(config, specs, labels);
  return make_synthetic_source(std::move(specs), labels, seed, config.samples);
}

}  // namespace gp::exec
