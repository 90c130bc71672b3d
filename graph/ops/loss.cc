// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: import-time inference (graph/ops/infer.h)
// and cost per score element (graph/ops/cost.h).
// Both take scores [N, C, d1, ...], integer targets [N, d1, ...] and optional class weights [C];
// the loss is [N, d1, ...] (reduction "none") or a scalar ("sum", "mean").
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

Result<LossReduction> reduction_of(InferContext const& c) {
  std::string const r = c.attr_string("reduction", "mean");
  if (r == "none") return LossReduction::kNone;
  if (r == "sum") return LossReduction::kSum;
  if (r == "mean") return LossReduction::kMean;
  return invalid_argument("reduction '" + r + "' is not one of none, sum, mean");
}

Result<Inferred> infer_loss(InferContext const& c) {
  bool const sce = c.type == "SoftmaxCrossEntropyLoss";
  if (!c.has(1)) return invalid_argument("the target input (1) is missing");
  Dims const& x = c.dims(0);
  Dims const& t = c.dims(1);
  if (!is_float_dtype(c.dtype(0)))
    return invalid_argument("input 0 has dtype " + std::string(dtype_name(c.dtype(0))) + "; scores must be float");
  if (c.dtype(1) != DType::kInt64 && c.dtype(1) != DType::kInt32)
    return invalid_argument("the target has dtype " + std::string(dtype_name(c.dtype(1))) +
                            "; it must be int64 or int32");
  if (x.size() < 2)
    return invalid_argument("input 0 has shape " + dims_str(x) + "; it must be [N, C] or [N, C, d1, ...]");
  Dims expected_t = {x[0]};
  expected_t.insert(expected_t.end(), x.begin() + 2, x.end());
  if (t != expected_t)
    return invalid_argument("the target has shape " + dims_str(t) + "; for input " + dims_str(x) + " it must be " +
                            dims_str(expected_t));
  if (x[1] < 0)
    return unsupported("the class axis of input " + dims_str(x) +
                       " holds the batch size; graphpipe needs the batch in the first axis only");
  if (c.has(2) && (c.dims(2) != Dims{x[1]} || c.dtype(2) != c.dtype(0)))
    return invalid_argument("the weight has shape " + dims_str(c.dims(2)) + " and dtype " + dtype_name(c.dtype(2)) +
                            "; it must be [" + dim_str(x[1]) + "] of the scores' dtype");
  LossAttrs a;
  ASSIGN_OR_RETURN(a.reduction, reduction_of(c));
  a.has_ignore_index = c.attrs.count("ignore_index") != 0;
  a.ignore_index = c.attr_int("ignore_index", a.ignore_index);
  Inferred k;
  k.typed = a;
  k.data_inputs = c.has(2) ? std::vector<std::size_t>{0, 1, 2} : std::vector<std::size_t>{0, 1};
  k.outs.push_back({c.dtype(0), a.reduction == LossReduction::kNone ? t : Dims{}});
  if (sce && c.outputs.size() > 1 && !c.outputs[1].empty()) k.outs.push_back({c.dtype(0), x});
  return k;
}

}  // namespace

void register_loss_ops(OpTable& t) {
  // The targets and the class weights get no gradient.
  define(
      t, "NegativeLogLikelihoodLoss",
      {.infer = infer_loss, .cost = cost_per_input_element, .per_element = {2, 1}, .grad_free = inputs_after_first()});
  define(t, "SoftmaxCrossEntropyLoss",
         {.infer = infer_loss,
          .cost = cost_per_input_element,
          .per_element = {5, 3},
          .saved = save_input0,
          .grad_free = inputs_after_first()});
}

}  // namespace gp::graph::ops
