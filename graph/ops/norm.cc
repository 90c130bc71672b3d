// Normalisations: import-time inference (graph/ops/infer.h) and cost (graph/ops/cost.h).
#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/norm.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {

Result<LayerNormSplit> layer_norm_split(Op const& op, std::vector<int64_t> const& x_shape) {
  auto const* a = std::get_if<LayerNormAttrs>(&op.typed);
  int64_t const rank = static_cast<int64_t>(x_shape.size());
  LayerNormSplit s;
  s.axis = normalised_axis(a ? a->axis : -1, rank);
  if (s.axis < 0 || s.axis >= rank)
    return op_error(op,
                    "axis " + std::to_string(a ? a->axis : -1) + " is out of range for input " + dims_string(x_shape));
  s.stat_shape = x_shape;
  for (int64_t i = 0; i < rank; ++i) {
    (i < s.axis ? s.rows : s.cols) *= x_shape[i];
    if (i >= s.axis) s.stat_shape[i] = 1;
  }
  return s;
}

namespace {

Result<Inferred> infer_batch_norm(InferContext const& c) {
  Inferred k;
  BatchNormAttrs a;
  a.epsilon = static_cast<float>(c.attr_float("epsilon", 1e-5));
  a.momentum = static_cast<float>(c.attr_float("momentum", 0.9));
  std::size_t named_outputs = 0;
  for (auto const& o : c.outputs) named_outputs += !o.empty();
  a.training = c.opset >= 14 ? c.attr_int("training_mode", 0) != 0 : named_outputs > 1;
  a.relu = c.attr_int(kBatchNormReluAttr, 0) != 0;
  a.residual = c.attr_int(kBatchNormAddAttr, 0) != 0;
  if (a.residual) {
    if (!a.relu || !c.has(kBatchNormResidualInput) || c.dims(kBatchNormResidualInput) != c.dims(0))
      return invalid_argument("BatchNormalization with a fused residual needs its Relu and an input 5 of x's shape " +
                              dims_str(c.dims(0)));
  } else if (c.has(kBatchNormResidualInput)) {
    return invalid_argument("BatchNormalization takes 5 inputs");
  }
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

Result<Inferred> infer_layer_norm(InferContext const& c) {
  Inferred k;
  int64_t const r0 = c.rank(0);
  LayerNormAttrs a;
  ASSIGN_OR_RETURN(a.axis, checked_axis(c.attr_int("axis", -1), r0));
  a.epsilon = static_cast<float>(c.attr_float("epsilon", 1e-5));
  a.has_bias = c.has(2);
  for (int64_t d = a.axis; d < r0; ++d)
    if (c.dims(0)[d] < 0) return unsupported("normalising over the batch dimension");
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), c.dims(0)});
  // Mean and InvStdDev, when the node names them (InvStdDev after a named Mean only: the importer
  // refuses it otherwise): float32 (stash_type's default), x's shape with the normalised dims 1.
  // Computed forward; no gradient flows back through them (OpDef).
  if (c.outputs.size() > 1 && !c.outputs[1].empty()) {
    if (c.attr_int("stash_type", 1) != 1)
      return unsupported("LayerNormalization with a stash_type other than float32 (1)");
    Dims stat = c.dims(0);
    for (int64_t d = a.axis; d < r0; ++d) stat[d] = 1;
    k.outs.push_back({DType::kFloat32, stat});
    if (c.outputs.size() > 2 && !c.outputs[2].empty()) k.outs.push_back({DType::kFloat32, stat});
  }
  return k;
}

// InstanceNormalization: x [N, C, spatial...] normalised per (sample, channel) over the spatial
// dims, then scale [C] and B [C] per channel.
Result<Inferred> infer_instance_norm(InferContext const& c) {
  Inferred k;
  Dims const& x = c.dims(0);
  if (x.size() < 3) return invalid_argument("InstanceNormalization needs an N,C,spatial input, got " + dims_str(x));
  if (x[1] < 0) return unsupported("InstanceNormalization with the batch size in the channel dimension");
  for (std::size_t d = 2; d < x.size(); ++d)
    if (x[d] < 0) return unsupported("normalising over the batch dimension");
  for (std::size_t k_in = 1; k_in < 3; ++k_in)
    if (!c.has(k_in) || c.rank(k_in) != 1 || c.dims(k_in)[0] != x[1])
      return invalid_argument(std::string(k_in == 1 ? "scale" : "B") + " must have shape [" + dim_str(x[1]) + "]");
  InstanceNormAttrs a;
  a.epsilon = static_cast<float>(c.attr_float("epsilon", 1e-5));
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), x});
  return k;
}

// LRN: x [N, C, spatial...] normalised across channels (LrnAttrs); y has x's shape. Its window
// runs over the channels, so they must be known (not the batch dim).
Result<Inferred> infer_lrn(InferContext const& c) {
  Dims const& x = c.dims(0);
  if (x.size() < 3) return invalid_argument("LRN needs an N,C,spatial... input, got " + dims_str(x));
  if (x[1] < 0) return unsupported("LRN with the batch size in the channel dimension");
  for (std::size_t d = 2; d < x.size(); ++d)
    if (x[d] < 0) return unsupported("LRN with the batch size in a spatial dimension");
  if (!is_float_dtype(c.dtype(0))) return unsupported("LRN of " + std::string(dtype_name(c.dtype(0))) + " data");
  LrnAttrs a;
  a.size = c.attr_int("size", 0);
  a.alpha = static_cast<float>(c.attr_float("alpha", 1e-4));
  a.beta = static_cast<float>(c.attr_float("beta", 0.75));
  a.bias = static_cast<float>(c.attr_float("bias", 1.0));
  if (a.size <= 0) return invalid_argument("LRN needs a positive 'size' attribute, got " + std::to_string(a.size));
  // d = bias + alpha/size·Σx² is raised to −beta: it must stay positive for every input.
  if (!(a.bias > 0.f) || !(a.alpha >= 0.f))
    return unsupported("LRN with bias " + std::to_string(a.bias) + " and alpha " + std::to_string(a.alpha) +
                       ": only bias > 0 and alpha >= 0 keep its denominator positive");
  Inferred k;
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), x});
  return k;
}

// Per element: the window's squares (2·size), the power; backward the window's products again.
OpCost lrn_cost(CostContext const& c) {
  auto const* a = std::get_if<LrnAttrs>(&c.op.typed);
  double const size = a ? static_cast<double>(a->size) : 5;
  double const out_e = c.elems(c.output0());
  OpCost r;
  r.fwd_flops_per_sample = (2 * size + 12) * out_e;
  r.bwd_flops_per_sample = (4 * size + 24) * out_e;
  return r;
}

// LRN keeps its input and the denominator d, one float per element.
void lrn_saved(CostContext const& c, SavedForBackward& s) {
  c.save(s, c.input(0));
  if (c.batched(c.input(0))) s.extra_bytes_per_sample += static_cast<int64_t>(c.elems(c.input(0))) * 4;
}

// Plus the scale and bias gradients: a multiply-add per element, reduced per channel.
OpCost norm_with_affine_cost(CostContext const& c) {
  OpCost r = cost_per_output_element(c);
  if (c.needs_weight_grad(c.input(1))) r.bwd_weight_flops_per_sample = 2 * c.elems(c.output0());
  return r;
}

// BatchNorm keeps its input; with a fused Relu (and residual) also its output, whose sign masks dy
// (the output is usually kept by its consumer anyway, a convolution, and counted once).
void batch_norm_saved(CostContext const& c, SavedForBackward& s) {
  c.save(s, c.input(0));
  auto const* a = std::get_if<BatchNormAttrs>(&c.op.typed);
  if (a && a->relu) c.save(s, c.output0());
}

// Y has x's shape; Mean and InvStdDev (when the op has them) the split's stat_shape.
Result<std::vector<Dims>> layer_norm_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(LayerNormSplit s, layer_norm_split(op, in.at(0)));
  std::vector<Dims> out{in.at(0)};
  for (std::size_t k = 1; k < op.outputs.size() && k < 3; ++k) out.push_back(s.stat_shape);
  return out;
}

// LayerNorm keeps its input and, per normalised row, the mean and 1/std (float32 each).
void layer_norm_saved(CostContext const& c, SavedForBackward& s) {
  TensorId const x = c.input(0);
  c.save(s, x);
  if (!c.batched(x)) return;
  auto const& dims = c.tensors[x].shape.dims;
  auto const* a = std::get_if<LayerNormAttrs>(&c.op.typed);
  int64_t const axis = a ? a->axis : static_cast<int64_t>(dims.size()) - 1;
  int64_t const norm = abs_product(dims, static_cast<std::size_t>(axis));
  int64_t const rows = norm ? c.tensors[x].shape.elements_per_sample() / norm : 0;
  s.extra_bytes_per_sample = rows * 2 * 4;
}

}  // namespace

void register_norm_ops(OpTable& t) {
  define(t, "BatchNormalization",
         {.infer = infer_batch_norm,
          .cost = norm_with_affine_cost,
          .per_element = {8, 12},
          .saved = batch_norm_saved,
          .weight_grads_in_b = true,
          .state_inputs = {3, 4}});
  define(t, "LayerNormalization",
         {.infer = infer_layer_norm,
          .cost = norm_with_affine_cost,
          .per_element = {8, 12},
          .saved = layer_norm_saved,
          .run_shape = layer_norm_run_shape,
          .weight_grads_in_b = true,
          .differentiable_outputs = 1});
  define(t, "InstanceNormalization", elementwise_op(infer_instance_norm, {8, 12}, save_input0));
  define(t, "LRN", {.infer = infer_lrn, .cost = lrn_cost, .saved = lrn_saved});
}

}  // namespace gp::graph::ops
